//! Link monitoring: carrier with the driver's `miimon` delays, and the ARP monitor.
//!
//! A member whose carrier drops goes `going down` for `downdelay` and then `down` (one link
//! failure counted); a member whose carrier returns goes `going back` for `updelay` and then
//! `up`. The ARP monitor probes each target every `arp_interval` and takes out a member that
//! heard nothing for `arp_missed_max` intervals (one more for a backup).

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
use crate::wire::ip::Ipv4Address;

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

/// The sender protocol address of an ARP frame.
fn arp_sender(frame: &[u8]) -> Option<Ipv4Address> {
    let eth = EthernetFrame::new_checked(frame).ok()?;
    if eth.ethertype() != EtherType::Arp {
        return None;
    }
    let arp = ArpPacket::new_checked(eth.payload()).ok()?;
    Some(arp.source_protocol_addr())
}

/// The ARP monitor's schedule and the probes it queued.
#[derive(Debug, Clone)]
pub(crate) struct ArpMonitor {
    pub(crate) next: Instant,
    queue: Vec<(PortId, Ipv4Address)>,
}

impl ArpMonitor {
    /// The monitor the options ask for: `arp_interval` and at least one target.
    pub(crate) fn new(opts: &BondOptions) -> Option<Self> {
        (opts.arp_interval > 0 && !opts.arp_ip_target.is_empty()).then(|| Self {
            next: Instant::ZERO,
            queue: Vec::new(),
        })
    }

    /// A frame received on `port`: without validation any frame is a sign of life for every
    /// target; with it, only an ARP frame from a target, for that target.
    #[inline]
    /// Frames arrived on `port` that lagd did not see itself (a kernel fast path counted them):
    /// with `arp_validate=none` any frame is a sign of life, as for [`ArpMonitor::note_rx`].
    pub(crate) fn note_rx_elsewhere(
        ports: &mut [Port],
        opts: &BondOptions,
        now: Instant,
        port: PortId,
    ) {
        if opts.arp_validate == ArpValidate::None {
            if let Some(p) = ports.get_mut(port.index()) {
                p.arp_heard = [now; MAX_ARP_TARGETS];
            }
        }
    }

    pub(crate) fn note_rx(
        ports: &mut [Port],
        opts: &BondOptions,
        now: Instant,
        port: PortId,
        frame: &[u8],
    ) {
        let p = &mut ports[port.index()];
        if opts.arp_validate == ArpValidate::None {
            p.arp_heard = [now; MAX_ARP_TARGETS];
            return;
        }
        let Some(spa) = arp_sender(frame) else {
            return;
        };
        if let Some(k) = opts.arp_ip_target.iter().position(|t| t.octets() == spa.0) {
            p.arp_heard[k] = now;
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
        let targets = opts.arp_ip_target.len().min(MAX_ARP_TARGETS);
        let all = opts.arp_all_targets == ArpAllTargets::All;
        let ab = opts.mode.uses_primary();
        for (i, p) in ports.iter_mut().enumerate() {
            let port = PortId(i as u16);
            let backup = ab && active != Some(port);
            let missed = u32::from(opts.arp_missed_max) + u32::from(backup);
            let window = interval * missed;
            let fresh = |t: &Instant| now.saturating_since(*t) <= window;
            let alive = if all {
                p.arp_heard[..targets].iter().all(fresh)
            } else {
                p.arp_heard[..targets].iter().any(fresh)
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
                self.queue.push((port, Ipv4Address(t.octets())));
            }
        }
        self.next = now + interval;
    }

    /// The next probe, from the bond's MAC and address, written into `buf`.
    pub(crate) fn poll_transmit(
        &mut self,
        mac: EthernetAddress,
        ip: Option<Ipv4Address>,
        buf: &mut [u8],
    ) -> Option<Transmit> {
        let (port, target) = self.queue.pop()?;
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
