//! balance-tlb and balance-alb: balanced frames by hash over the usable members, the rest
//! through the active member; a frame leaving on another member carries that member's MAC.
//! balance-alb adds receive balancing by ARP ([`alb::Rlb`]). Both send learning packets every
//! `lp_interval` so the switch knows where each member's MAC lives.

use core::time::Duration;

use super::alb::{self, Rlb};
use crate::balance::Buckets;
use crate::bond::select::{Macs, Selection};
use crate::hash::{HashPolicy, hasher};
use crate::port::{PortId, Transmit};
use crate::time::{Instant, earliest};
use crate::wire::arp::{ArpOperation, ArpPacket, ArpRepr};
use crate::wire::ethernet::{EtherType, EthernetFrame};
use crate::wire::ip::Ipv4Address;

/// balance-tlb/alb state.
#[derive(Debug, Clone)]
pub(crate) struct Tlb {
    /// The transmit hash policy (balance-tlb's; balance-alb hashes its own way).
    pub(crate) policy: HashPolicy,
    hash: fn(&[u8]) -> u32,
    pub(crate) buckets: Option<Buckets>,
    /// balance-alb: receive load balancing.
    pub(crate) rlb: Option<Rlb>,
    /// When the members next send learning packets, and those queued.
    lp_next: Instant,
    lp_interval: Duration,
    lp_queue: Vec<PortId>,
}

/// The ARP frame in `frame`, if it is one.
fn arp_of(frame: &[u8]) -> Option<ArpRepr> {
    let eth = EthernetFrame::new_checked(frame).ok()?;
    if eth.ethertype() != EtherType::Arp {
        return None;
    }
    ArpPacket::new_checked(eth.payload())
        .ok()
        .and_then(|p| ArpRepr::parse(&p).ok())
}

impl Tlb {
    /// balance-tlb (`alb` false) or balance-alb hashing with `policy`.
    pub(crate) fn new(
        policy: HashPolicy,
        buckets: Option<Buckets>,
        alb: bool,
        lp_interval_s: u32,
    ) -> Self {
        Self {
            policy,
            hash: hasher(policy),
            buckets,
            rlb: alb.then(Rlb::default),
            lp_next: Instant::ZERO,
            lp_interval: Duration::from_secs(lp_interval_s.into()),
            lp_queue: Vec::new(),
        }
    }

    /// The member for `frame`; `None` when there is no active member.
    pub(crate) fn choose(&mut self, now: Instant, frame: &[u8], sel: &Selection) -> Option<PortId> {
        let active = sel.active?;
        let hash = match &mut self.rlb {
            None => {
                if !alb::tlb_balanced(frame) {
                    return Some(active);
                }
                (self.hash)(frame)
            }
            Some(rlb) => {
                if let Some(arp) = arp_of(frame) {
                    let port = rlb.host_arp(now, &arp, &sel.usable, sel.active);
                    return Some(port.unwrap_or(active));
                }
                // What alb does not balance goes on the active member, as the driver sends it.
                match alb::alb_hash(frame) {
                    Some(hash) => hash,
                    None => return Some(active),
                }
            }
        };
        let port = match &mut self.buckets {
            Some(b) => b.member_for(now, hash, frame.len() as u32),
            None => sel.by_hash(hash),
        };
        Some(port.unwrap_or(active))
    }

    /// A frame leaving on `port`, another member than the active one, carries that member's
    /// MAC as source (and, for an ARP reply of the host in balance-alb, as sender hardware
    /// address).
    pub(crate) fn fixup(&self, port: PortId, frame: &mut [u8], macs: &Macs<'_>) {
        if Some(port) == macs.active {
            return;
        }
        let Ok(mut eth) = EthernetFrame::new_checked(&mut *frame) else {
            return;
        };
        let mac = macs.wire_mac(port);
        if eth.src_addr() == macs.bond {
            eth.set_src_addr(mac);
        }
        if self.rlb.is_none() || eth.ethertype() != EtherType::Arp {
            return;
        }
        if let Ok(mut arp) = ArpPacket::new_checked(eth.payload_mut()) {
            if arp.operation() == ArpOperation::Reply && arp.source_hardware_addr() == macs.bond {
                arp.set_source_hardware_addr(mac);
            }
        }
    }

    /// A frame the bond delivers: one sent to a member's MAC is given to the host with the
    /// bond's MAC as destination; in balance-alb the ARP of clients feeds receive balancing.
    pub(crate) fn receive_fixup(
        &mut self,
        now: Instant,
        frame: &mut [u8],
        sel: &Selection,
        macs: &Macs<'_>,
        host_ipv4: Option<Ipv4Address>,
    ) {
        let Ok(mut eth) = EthernetFrame::new_checked(&mut *frame) else {
            return;
        };
        let dst = eth.dst_addr();
        if !dst.is_multicast()
            && dst != macs.bond
            && (0..macs.ports.len()).any(|i| dst == macs.wire_mac(PortId(i as u16)))
        {
            eth.set_dst_addr(macs.bond);
        }
        if let (Some(r), Some(arp)) = (self.rlb.as_mut(), arp_of(frame)) {
            r.member_arp(now, &arp, host_ipv4, &sel.usable, sel.active);
        }
    }

    /// The usable members and their weights, for the bucket table.
    pub(crate) fn set_members(&mut self, now: Instant, weighted: &[(PortId, u32)]) {
        if let Some(b) = &mut self.buckets {
            b.set_members(now, weighted);
        }
    }

    /// After a change of the usable set or the active member: learning packets at once where
    /// the active member changed (the switch learns where the MACs now live); clients taught
    /// again and rebalanced.
    pub(crate) fn selection_changed(
        &mut self,
        now: Instant,
        sel: &Selection,
        usable_changed: bool,
        active_changed: bool,
    ) {
        if active_changed {
            self.lp_next = now;
        }
        if let Some(r) = &mut self.rlb {
            if active_changed {
                r.teach_all(now);
            }
            if usable_changed || active_changed {
                r.rebalance(now, &sel.usable);
            }
        }
    }

    /// The earliest deadline: learning packets, client updates, the bucket table.
    pub(crate) fn poll_timeout(&self) -> Option<Instant> {
        earliest([
            Some(self.lp_next),
            self.rlb.as_ref().and_then(Rlb::poll_timeout),
            self.buckets.as_ref().and_then(Buckets::poll_timeout),
        ])
    }

    /// Runs what is due: the bucket table; a round of learning packets.
    pub(crate) fn handle_timeout(&mut self, now: Instant, sel: &Selection) {
        if let Some(b) = &mut self.buckets {
            b.handle_timeout(now);
        }
        if now >= self.lp_next {
            self.lp_queue.clone_from(&sel.usable);
            self.lp_next = now + self.lp_interval;
        }
    }

    /// The next client update (a request for the client's own address, sent to it alone) or
    /// learning packet.
    pub(crate) fn poll_transmit(
        &mut self,
        now: Instant,
        macs: &Macs<'_>,
        buf: &mut [u8],
    ) -> Option<Transmit> {
        if let Some((port, c)) = self.rlb.as_mut().and_then(|r| r.poll_update(now)) {
            let update = ArpRepr::EthernetIpv4 {
                operation: ArpOperation::Request,
                source_hardware_addr: macs.wire_mac(port),
                source_protocol_addr: c.server,
                target_hardware_addr: crate::wire::EthernetAddress::ZERO,
                target_protocol_addr: c.ip,
            };
            let len = update.frame_len();
            update.emit_frame(&mut buf[..len]);
            buf[..6].copy_from_slice(&c.mac.0);
            return Some(Transmit { port, len });
        }
        let port = self.lp_queue.pop()?;
        let len = alb::emit_learning_packet(macs.wire_mac(port), buf);
        Some(Transmit { port, len })
    }
}
