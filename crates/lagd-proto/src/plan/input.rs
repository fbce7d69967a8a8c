//! What the planner counted about its input ([`InputStats`], [`SflowStats`], [`IpfixStats`]).

use super::control::ControlCounts;
use super::load::Load;

/// Counters about the input itself.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct InputStats {
    /// Data frames (or flow-list packets) seen: the traffic the policies spread (link control
    /// frames are in `control`, not here).
    pub packets: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Link control frames (LACP, pause, LLDP, STP, other link-local frames), counted apart:
    /// no policy hashes them (see [`super::control`]).
    pub control: ControlCounts,
    /// Frames and bytes of flows beyond the flow cap ("other flows").
    pub untracked: Load,
    /// Frames given an Ethernet header by the planner (raw IP, Linux cooked captures).
    pub rebuilt_ethernet: u64,
    /// Of `rebuilt_ethernet`, frames with no source MAC either (raw IP).
    pub rebuilt_without_src_mac: u64,
    /// Frames dropped as the second copy of a frame the capture holds twice: a Linux cooked
    /// capture (`tcpdump -i any`) or a capture of several interfaces sees a frame on the bond
    /// and on its member.
    pub duplicates: u64,
    /// Per capture interface, the frames kept and the copies dropped, for a capture that
    /// records the interface of each frame (Linux cooked v2, pcapng of several interfaces).
    pub interfaces: InterfaceCopies,
    /// Frames of link types the planner cannot use, skipped.
    pub skipped: u64,
    /// The first link type whose frames were skipped (see
    /// [`crate::capture::linktype_name`]), if any.
    pub skipped_linktype: Option<u32>,
    /// Flow-list rows with no MACs.
    pub rows_without_macs: u64,
    /// Flow-list rows (0 for a capture).
    pub rows: u64,
    /// sFlow input: what the datagrams held (`packets` and `bytes` are then the samples
    /// scaled by their sampling rates).
    pub sflow: Option<SflowStats>,
    /// IPFIX input: what the messages held (`packets` and `bytes` are then the records'
    /// counts, scaled by their sampling rates).
    pub ipfix: Option<IpfixStats>,
    /// Earliest and latest capture timestamp (ns since the epoch), if any.
    pub time_span: Option<(u64, u64)>,
}

/// What the sFlow input held.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SflowStats {
    /// Datagrams read.
    pub datagrams: u64,
    /// Flow samples with an Ethernet raw packet header, planned.
    pub samples: u64,
    /// Flow samples without one (or of another header protocol), and counter samples.
    pub skipped_samples: u64,
    /// The lowest and highest sampling rate seen.
    pub rate_range: Option<(u32, u32)>,
    /// Captured packets that were not sFlow datagrams (UDP to port 6343), skipped.
    pub other_packets: u64,
    /// Datagrams received on a socket that could not be read, skipped.
    pub unreadable: u64,
}

impl SflowStats {
    /// The 95% relative error (a fraction) of a share estimated from `n` samples:
    /// `1.96 * sqrt(1 / n)`; 1 (100%) with no sample.
    pub fn share_error(n: u64) -> f64 {
        if n == 0 {
            1.0
        } else {
            (1.96 * (1.0 / n as f64).sqrt()).min(1.0)
        }
    }
}

/// How a capture names the interface a frame was seen on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InterfaceNaming {
    /// Linux cooked v2 (`tcpdump -i any -y LINUX_SLL2`): the interface index on the capturing
    /// host (`ip -o link` there names it).
    Ifindex,
    /// pcapng: the capture's interface number (its description may give the name).
    CaptureInterface,
}

/// The frames one capture interface gave.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct InterfaceFrames {
    /// The interface (as [`InterfaceCopies::naming`] says).
    pub interface: u32,
    /// Frames taken from it (the first copy of each, data and control frames alike).
    pub kept: u64,
    /// Frames dropped from it as the second copy of a frame kept from another interface.
    pub dropped: u64,
}

/// The most interfaces [`InterfaceCopies`] tells apart; frames of any further interface are
/// summed in [`InterfaceCopies::other`].
pub const MAX_COPY_INTERFACES: usize = 16;

/// Which interface's copy of each frame was kept: per interface, frames kept and copies
/// dropped (fixed size, so input of any length takes no more memory).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct InterfaceCopies {
    /// How the capture names its interfaces; `None` when it does not (then nothing below
    /// is counted).
    pub naming: Option<InterfaceNaming>,
    seen: [InterfaceFrames; MAX_COPY_INTERFACES],
    len: usize,
    /// Frames of interfaces beyond the first [`MAX_COPY_INTERFACES`] (`interface` is 0).
    pub other: InterfaceFrames,
}

impl InterfaceCopies {
    /// The interfaces, in the order their first frame came.
    pub fn seen(&self) -> &[InterfaceFrames] {
        &self.seen[..self.len]
    }

    /// Counts a frame of `interface`, kept or dropped as a second copy.
    pub(super) fn count(&mut self, naming: InterfaceNaming, interface: u32, dropped: bool) {
        self.naming.get_or_insert(naming);
        let e = match self.seen[..self.len]
            .iter()
            .position(|e| e.interface == interface)
        {
            Some(i) => &mut self.seen[i],
            None if self.len < MAX_COPY_INTERFACES => {
                self.seen[self.len].interface = interface;
                self.len += 1;
                &mut self.seen[self.len - 1]
            }
            None => &mut self.other,
        };
        if dropped {
            e.dropped += 1;
        } else {
            e.kept += 1;
        }
    }
}

/// What the IPFIX input held.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IpfixStats {
    /// Messages read.
    pub messages: u64,
    /// Messages that could not be read, dropped whole.
    pub malformed: u64,
    /// Templates and options templates learned (withdrawals not counted).
    pub templates: u64,
    /// Templates dropped because as many as are kept (`ipfix::MAX_TEMPLATES`, or their
    /// fields `ipfix::MAX_TEMPLATE_FIELDS`) were already kept.
    pub templates_dropped: u64,
    /// Data records read (options data records included).
    pub records: u64,
    /// Of them, records planned (each as a flow; records of one flow add up).
    pub planned: u64,
    /// Data records of the other `flowDirection` than the one planned (the same packets
    /// observed where they leave, or enter), not planned.
    pub other_direction: u64,
    /// Data records with no IP addresses (ARP and other non-IP flows), not planned.
    pub without_ip: u64,
    /// Data records with addresses but no packet count, not planned.
    pub without_counts: u64,
    /// Options data records (exporter statistics, sampling parameters), not flows.
    pub options_records: u64,
    /// Data records whose template had not been seen, dropped.
    pub no_template: u64,
    /// Planned records whose bytes are estimated from IP octets (no layer-2 octet count).
    pub l3_octets: u64,
    /// Planned records with no sampling rate known (counts taken as every packet).
    pub unsampled: u64,
    /// Packets the planned records counted, before scaling by their sampling rates (the
    /// sample size behind the figures).
    pub sampled_packets: u64,
    /// The lowest and highest sampling rate applied (1 in N), if any record had one.
    pub rate_range: Option<(u64, u64)>,
    /// Captured packets that were not IPFIX messages (UDP to the port), skipped.
    pub other_packets: u64,
}

impl IpfixStats {
    /// The 95% relative error of a share estimated from the records: 0 when no record was
    /// sampled (the counts are then exact, as exported), else [`SflowStats::share_error`] of
    /// the sampled packets.
    pub fn share_error(&self) -> f64 {
        match self.rate_range {
            Some((_, hi)) if hi > 1 => SflowStats::share_error(self.sampled_packets),
            _ => 0.0,
        }
    }
}
