//! Packets and bytes ([`Load`]), and the counters about the input ([`InputStats`]).

use super::control::ControlCounts;
use super::sflow::SflowStats;

/// Packets and bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Load {
    /// Packets.
    pub packets: u64,
    /// Bytes.
    pub bytes: u64,
}

impl Load {
    /// Adds, saturating (a flow list may claim any counts).
    #[inline(always)]
    pub(super) fn add(&mut self, packets: u64, bytes: u64) {
        self.packets = self.packets.saturating_add(packets);
        self.bytes = self.bytes.saturating_add(bytes);
    }
}

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
    /// Earliest and latest capture timestamp (ns since the epoch), if any.
    pub time_span: Option<(u64, u64)>,
}
