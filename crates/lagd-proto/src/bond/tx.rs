//! What leaves the bond: a host frame's way out ([`Bond::transmit`](super::Bond::transmit)),
//! with what the bond learns from the host's frames on the way, and the drain of the frames
//! the bond makes itself ([`Bond::poll_transmit`](super::Bond::poll_transmit)).

use super::select::Macs;
use super::state::Bond;
use super::verdict::{Dataplane, HostFrame, TxDrop, TxVerdict};
use crate::port::Transmit;
use crate::time::Instant;
use crate::wire::ethernet::EthernetFrame;

impl Bond {
    /// Where a host frame goes (see `Bond::transmit`).
    #[inline]
    pub(super) fn transmit_frame(
        &mut self,
        now: Instant,
        frame: &mut HostFrame<'_>,
        dp: &mut dyn Dataplane,
    ) -> TxVerdict {
        self.learn_from_host(frame.frame());
        if !self.carrier {
            // As the kernel's bond: without carrier (no member, or fewer than min_links)
            // nothing leaves, at once (the host's own queue stops only when the kernel gets
            // round to the TAP's carrier change, up to a second later).
            return TxVerdict::Drop(TxDrop::NoMember);
        }
        let macs = Macs {
            bond: self.mac,
            ports: &self.ports,
            active: self.sel.active,
        };
        self.mode.transmit(now, frame, &self.sel, &macs, dp)
    }

    /// Learns from a frame the host sends from the bond's MAC: the bond's addresses (ARP and
    /// neighbour discovery) and the host's multicast memberships.
    #[inline]
    pub(super) fn learn_from_host(&mut self, frame: &[u8]) {
        let Ok(eth) = EthernetFrame::new_checked(frame) else {
            return;
        };
        if eth.src_addr() != self.mac {
            return;
        }
        self.igmp.learn(frame);
        self.addrs.learn(&eth);
    }

    /// The next frame the bond itself wants sent, in order: LACPDUs, ARP monitor probes, the
    /// mode's own frames, replayed IGMP/MLD reports, failover announcements.
    pub(super) fn next_own_frame(&mut self, now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        // The daemon drains after every wake, most of them for data frames: ask the LACP engine
        // (which runs its machines on every call) only when it has something to send by now.
        if let Some(l) = self
            .lacp
            .as_mut()
            .filter(|l| l.poll_timeout().is_some_and(|t| t <= now))
        {
            let tx = l.poll_transmit(now, buf);
            self.sync_lacp(now);
            if tx.is_some() {
                return tx;
            }
        }
        if let Some(tx) = self
            .arp
            .as_mut()
            .and_then(|a| a.poll_transmit(self.mac, self.addrs.ipv4, &self.addrs.ipv6, buf))
        {
            return Some(tx);
        }
        let macs = Macs {
            bond: self.mac,
            ports: &self.ports,
            active: self.sel.active,
        };
        if let Some(tx) = self.mode.poll_transmit(now, &macs, buf) {
            return Some(tx);
        }
        if let Some(port) = self.igmp_port {
            if let Some(len) = self.igmp.poll(now, buf) {
                return Some(Transmit { port, len });
            }
        }
        self.notify.poll_transmit(self.sel.active, self.mac, buf)
    }
}
