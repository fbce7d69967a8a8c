//! Link monitoring: carrier with the driver's `miimon` delays, and the ARP monitor.
//!
//! A member whose carrier drops goes `going down` for `downdelay` and then `down` (one link
//! failure counted); a member whose carrier returns goes `going back` for `updelay` and then
//! `up`. The ARP monitor probes each target every `arp_interval` (IPv4 targets with ARP
//! requests, IPv6 targets, `ns_ip6_target`, with neighbour solicitations) and takes out a member
//! that heard nothing for `arp_missed_max` intervals (one more for a backup).

use core::time::Duration;
use std::collections::VecDeque;

use super::event::BondEvent;
use super::member::{MAX_ARP_TARGETS, MiiStatus, Port};
use super::options::{ArpAllTargets, ArpValidate, BondOptions};
use crate::port::{PortId, Transmit};
use crate::time::Instant;
use crate::wire::EthernetAddress;
use crate::wire::arp::{ArpOperation, ArpPacket, ArpRepr};
use crate::wire::ethernet::{EtherType, EthernetFrame};
use crate::wire::ip::{IpProtocol, Ipv4Address, Ipv6Address};
use crate::wire::ipv6::Ipv6Packet;
use crate::wire::ndisc::{self, NdiscMessage, NdiscPacket, NdiscRepr};

/// Events the monitors raise.
pub(crate) type Events = VecDeque<BondEvent>;

/// Sets member `port`'s MII status at `now`, counting a link failure when it stops being
/// usable.
pub(crate) fn set_status(
    ports: &mut [Port],
    now: Instant,
    port: PortId,
    status: MiiStatus,
    events: &mut Events,
) {
    let p = &mut ports[port.index()];
    if p.usable() && !status.usable() {
        p.link_failures += 1;
    }
    p.mii = status;
    p.since = now;
    events.push_back(BondEvent::Link { port, status });
}

/// The miimon state machine on a carrier reading of `port`.
pub(crate) fn carrier_changed(
    ports: &mut [Port],
    opts: &BondOptions,
    now: Instant,
    port: PortId,
    carrier: bool,
    events: &mut Events,
) {
    let p = &mut ports[port.index()];
    if p.carrier == carrier {
        return;
    }
    p.carrier = carrier;
    let next = match (p.mii, carrier) {
        (MiiStatus::Up, false) => Some(if opts.downdelay == 0 {
            MiiStatus::Down
        } else {
            MiiStatus::GoingDown
        }),
        (MiiStatus::GoingDown, true) => Some(MiiStatus::Up),
        (MiiStatus::Down, true) => Some(if opts.updelay == 0 {
            MiiStatus::Up
        } else {
            MiiStatus::GoingBack
        }),
        (MiiStatus::GoingBack, false) => Some(MiiStatus::Down),
        _ => None,
    };
    if let Some(s) = next {
        set_status(ports, now, port, s, events);
    }
}

/// Ends the `updelay` and `downdelay` waits that are over.
pub(crate) fn run_delays(
    ports: &mut [Port],
    opts: &BondOptions,
    now: Instant,
    events: &mut Events,
) {
    let down = Duration::from_millis(opts.downdelay.into());
    let up = Duration::from_millis(opts.updelay.into());
    for i in 0..ports.len() {
        let p = &ports[i];
        let due = match p.mii {
            MiiStatus::GoingDown if now >= p.since + down => Some(MiiStatus::Down),
            MiiStatus::GoingBack if now >= p.since + up => Some(MiiStatus::Up),
            _ => None,
        };
        if let Some(s) = due {
            set_status(ports, now, PortId(i as u16), s, events);
        }
    }
}

/// When the next `updelay`/`downdelay` wait ends.
pub(crate) fn delays_timeout(ports: &[Port], opts: &BondOptions) -> Option<Instant> {
    let down = Duration::from_millis(opts.downdelay.into());
    let up = Duration::from_millis(opts.updelay.into());
    ports
        .iter()
        .filter_map(|p| match p.mii {
            MiiStatus::GoingDown => Some(p.since + down),
            MiiStatus::GoingBack => Some(p.since + up),
            _ => None,
        })
        .min()
}

/// The sender and target protocol addresses of an ARP frame.
fn arp_addresses(frame: &[u8]) -> Option<(Ipv4Address, Ipv4Address)> {
    let eth = EthernetFrame::new_checked(frame).ok()?;
    if eth.ethertype() != EtherType::Arp {
        return None;
    }
    let arp = ArpPacket::new_checked(eth.payload()).ok()?;
    Some((arp.source_protocol_addr(), arp.target_protocol_addr()))
}

/// Whether `port` is a backup member for the ARP monitor: active-backup, and not the active
/// member.
fn is_backup(opts: &BondOptions, active: Option<PortId>, port: PortId) -> bool {
    opts.mode.uses_primary() && active != Some(port)
}

/// Whether `arp_validate` validates `port` in its present state (the kernel's bit per slave
/// state: `active`, `backup`, `all` and their `filter_` forms).
fn validated(opts: &BondOptions, active: Option<PortId>, port: PortId) -> bool {
    let backup = is_backup(opts, active, port);
    match opts.arp_validate {
        ArpValidate::None | ArpValidate::Filter => false,
        ArpValidate::Active | ArpValidate::FilterActive => !backup,
        ArpValidate::Backup | ArpValidate::FilterBackup => backup,
        ArpValidate::All => true,
    }
}

/// Whether only ARP frames (and neighbour solicitations and advertisements) count where a
/// member is not validated (`filter` and its forms).
fn filter_only(opts: &BondOptions) -> bool {
    matches!(
        opts.arp_validate,
        ArpValidate::Filter | ArpValidate::FilterActive | ArpValidate::FilterBackup
    )
}

/// The addresses a neighbour-discovery frame speaks for: its IPv6 source, and for an
/// advertisement its target address (the address it answers for). Only solicitations and
/// advertisements with hop limit 255 (never forwarded, RFC 4861 §7.1) directly in IPv6.
fn nd_speakers(frame: &[u8]) -> Option<(Ipv6Address, Option<Ipv6Address>)> {
    let eth = EthernetFrame::new_checked(frame).ok()?;
    if eth.ethertype() != EtherType::Ipv6 {
        return None;
    }
    let ip = Ipv6Packet::new_checked(eth.payload()).ok()?;
    if ip.next_header() != IpProtocol::Icmpv6 || ip.hop_limit() != 255 {
        return None;
    }
    let nd = NdiscPacket::new_checked(ip.payload()).ok()?;
    match nd.msg_type() {
        NdiscMessage::NeighborSolicit => Some((ip.src_addr(), None)),
        NdiscMessage::NeighborAdvert => Some((ip.src_addr(), Some(nd.target_addr()))),
        NdiscMessage::Unknown(_) => None,
    }
}

/// A target the ARP monitor probes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    /// An `arp_ip_target`, probed with an ARP request.
    V4(Ipv4Address),
    /// An `ns_ip6_target`, probed with a neighbour solicitation.
    V6(Ipv6Address),
}

/// The ARP monitor's schedule and the probes it queued.
#[derive(Debug, Clone)]
pub(crate) struct ArpMonitor {
    pub(crate) next: Instant,
    queue: Vec<(PortId, Target)>,
}

impl ArpMonitor {
    /// The monitor the options ask for: `arp_interval` and at least one target (IPv4 or IPv6).
    pub(crate) fn new(opts: &BondOptions) -> Option<Self> {
        let targets = !opts.arp_ip_target.is_empty() || !opts.ns_ip6_target.is_empty();
        (opts.arp_interval > 0 && targets).then(|| Self {
            next: Instant::ZERO,
            queue: Vec::new(),
        })
    }

    /// Frames arrived on `port` that lagd did not see itself (a kernel fast path counted them):
    /// a sign of life where any frame is one, as for [`ArpMonitor::note_rx`] (a member
    /// `arp_validate` does not validate, without `filter`).
    pub(crate) fn note_rx_elsewhere(
        ports: &mut [Port],
        opts: &BondOptions,
        active: Option<PortId>,
        now: Instant,
        port: PortId,
    ) {
        if !validated(opts, active, port) && !filter_only(opts) {
            if let Some(p) = ports.get_mut(port.index()) {
                p.arp_heard = [now; 2 * MAX_ARP_TARGETS];
            }
        }
    }

    /// A frame received on `port`, as the kernel judges it (`bond_arp_rcv`): on a member
    /// `arp_validate` does not validate (its bit for the member's state, active or backup, is
    /// clear; outside active-backup every member is active) any frame is a sign of life for
    /// every target, or with `filter` any ARP frame or neighbour solicitation or
    /// advertisement; on a validated member only an ARP frame
    /// from an `arp_ip_target` counts, for that target, and on a validated backup also an ARP
    /// frame for a target (the active member's probe, heard through the switch: the kernel
    /// also checks that it comes from the bond's address and that the active member heard
    /// anything since it came up; lagd does not), or a neighbour solicitation or advertisement
    /// from an `ns_ip6_target` (its source, or the address an advertisement answers for), for
    /// that target.
    #[inline]
    pub(crate) fn note_rx(
        ports: &mut [Port],
        opts: &BondOptions,
        active: Option<PortId>,
        now: Instant,
        port: PortId,
        frame: &[u8],
    ) {
        let backup = is_backup(opts, active, port);
        let validate = validated(opts, active, port);
        let p = &mut ports[port.index()];
        let arp = arp_addresses(frame);
        if !validate {
            if !filter_only(opts) || arp.is_some() || nd_speakers(frame).is_some() {
                p.arp_heard = [now; 2 * MAX_ARP_TARGETS];
            }
            return;
        }
        if let Some((spa, tpa)) = arp {
            let target = |a: Ipv4Address| opts.arp_ip_target.iter().position(|t| t.octets() == a.0);
            let k = target(spa).or_else(|| if backup { target(tpa) } else { None });
            if let Some(k) = k {
                p.arp_heard[k] = now;
            }
            return;
        }
        if opts.ns_ip6_target.is_empty() {
            return;
        }
        let Some((src, answered)) = nd_speakers(frame) else {
            return;
        };
        let is = |a: Ipv6Address| move |t: &std::net::Ipv6Addr| t.octets() == a.0;
        let k = opts
            .ns_ip6_target
            .iter()
            .position(is(src))
            .or_else(|| answered.and_then(|a| opts.ns_ip6_target.iter().position(is(a))));
        if let Some(k) = k.filter(|&k| k < MAX_ARP_TARGETS) {
            p.arp_heard[MAX_ARP_TARGETS + k] = now;
        }
    }

    /// One round, when due: judges every member, queues the next probes.
    pub(crate) fn round(
        &mut self,
        ports: &mut [Port],
        opts: &BondOptions,
        active: Option<PortId>,
        now: Instant,
        events: &mut Events,
    ) {
        if now < self.next {
            return;
        }
        let interval = Duration::from_millis(opts.arp_interval.into());
        let v4 = opts.arp_ip_target.len().min(MAX_ARP_TARGETS);
        let v6 = MAX_ARP_TARGETS..MAX_ARP_TARGETS + opts.ns_ip6_target.len().min(MAX_ARP_TARGETS);
        let all = opts.arp_all_targets == ArpAllTargets::All;
        let ab = opts.mode.uses_primary();
        for (i, p) in ports.iter_mut().enumerate() {
            let port = PortId(i as u16);
            let backup = ab && active != Some(port);
            let missed = u32::from(opts.arp_missed_max) + u32::from(backup);
            let window = interval * missed;
            let fresh = |t: &Instant| now.saturating_since(*t) <= window;
            let mut heard = p.arp_heard[..v4].iter().chain(&p.arp_heard[v6.clone()]);
            let alive = if all {
                heard.all(fresh)
            } else {
                heard.any(fresh)
            };
            if !alive && !p.arp_down && p.mii.usable() {
                p.arp_down = true;
                p.link_failures += 1;
                events.push_back(BondEvent::Link {
                    port,
                    status: MiiStatus::Down,
                });
            } else if alive && p.arp_down {
                p.arp_down = false;
                events.push_back(BondEvent::Link {
                    port,
                    status: p.mii,
                });
            }
        }
        // The active member probes in active-backup; with none, or in the other modes, every
        // member with carrier.
        self.queue.clear();
        let probe_on = ports
            .iter()
            .enumerate()
            .map(|(i, p)| (PortId(i as u16), p))
            .filter(|(id, p)| match (ab, active) {
                (true, Some(a)) => *id == a,
                _ => p.mii.usable(),
            });
        for (port, _) in probe_on {
            for t in &opts.arp_ip_target {
                self.queue.push((port, Target::V4(Ipv4Address(t.octets()))));
            }
            for t in &opts.ns_ip6_target {
                self.queue.push((port, Target::V6(Ipv6Address(t.octets()))));
            }
        }
        self.next = now + interval;
    }

    /// The next probe, from the bond's MAC and addresses, written into `buf` (at least 86
    /// bytes).
    pub(crate) fn poll_transmit(
        &mut self,
        mac: EthernetAddress,
        ip: Option<Ipv4Address>,
        ipv6: &[Ipv6Address],
        buf: &mut [u8],
    ) -> Option<Transmit> {
        let (port, target) = self.queue.pop()?;
        let target = match target {
            Target::V4(t) => t,
            Target::V6(t) => {
                let len = emit_solicitation(mac, ns_source(ipv6, t), t, buf);
                return Some(Transmit { port, len });
            }
        };
        let probe = ArpRepr::EthernetIpv4 {
            operation: ArpOperation::Request,
            source_hardware_addr: mac,
            source_protocol_addr: ip.unwrap_or(Ipv4Address([0; 4])),
            target_hardware_addr: EthernetAddress::ZERO,
            target_protocol_addr: target,
        };
        let len = probe.frame_len();
        probe.emit_frame(&mut buf[..len]);
        Some(Transmit { port, len })
    }
}

/// The source of a solicitation for `target`: a learned address of the bond in the target's
/// scope (link-local for a link-local target, another otherwise), any learned one failing that,
/// or `::` when none is known (the target then answers to all nodes, RFC 4861 §7.2.4).
fn ns_source(learned: &[Ipv6Address], target: Ipv6Address) -> Ipv6Address {
    learned
        .iter()
        .find(|a| a.is_link_local() == target.is_link_local())
        .or_else(|| learned.first())
        .copied()
        .unwrap_or(Ipv6Address::UNSPECIFIED)
}

/// Writes a neighbour solicitation for `target` from `src` at `mac` (RFC 4861 §4.3): to the
/// target's solicited-node multicast address (ff02::1:ffXX:XXXX, 33:33:ff:XX:XX:XX), hop limit
/// 255, with the source link-layer address option unless `src` is `::`. Returns the frame
/// length (86, or 78 from `::`).
pub(crate) fn emit_solicitation(
    mac: EthernetAddress,
    src: Ipv6Address,
    target: Ipv6Address,
    buf: &mut [u8],
) -> usize {
    let ns = NdiscRepr::NeighborSolicit {
        target_addr: target,
        lladdr: (!src.is_unspecified()).then_some(mac),
    };
    let dst = ndisc::solicited_node(target);
    ns.emit_frame(mac, ndisc::multicast_mac(dst), src, dst, buf);
    ns.frame_len()
}
