//! What a member brings in ([`Bond::receive_with_header`](super::Bond::receive_with_header)):
//! the ARP monitor's sign of life, what the mode takes itself, and the member's receive rule
//! for the rest, which reaches the host fixed up for the mode.

use super::select::Macs;
use super::state::Bond;
use super::verdict::{Dataplane, DropReason, RxVerdict};
use crate::port::PortId;
use crate::time::Instant;
use crate::wire::ethernet::{EtherType, EthernetFrame};

impl Bond {
    /// Whether the members drop copies of frames another member delivered: broadcast with
    /// `broadcast_dedup` ([`super::dedup`]).
    pub(super) fn dedups(&self) -> bool {
        self.opts.mode == super::options::Mode::Broadcast && self.opts.broadcast_dedup
    }

    /// Whether a frame received on `port` behind a `header_len`-byte driver header reaches
    /// the host (see `Bond::receive_with_header`).
    #[inline]
    pub(super) fn receive_frame(
        &mut self,
        now: Instant,
        port: PortId,
        buf: &mut [u8],
        header_len: usize,
        dp: &mut dyn Dataplane,
    ) -> RxVerdict {
        if let Some(arp) = &mut self.arp
            && let Some(frame) = buf.get(header_len..)
        {
            let (active, own) = (self.sel.active, self.addrs.ipv4);
            arp.note_rx(&mut self.ports, &self.opts, active, own, now, port, frame);
        }
        if self.mode.take_received(now, port, buf, header_len, dp) {
            return RxVerdict::Consumed;
        }
        let Some(frame) = buf.get_mut(header_len..) else {
            return RxVerdict::Drop(DropReason::Runt);
        };
        let Ok(eth) = EthernetFrame::new_checked(&*frame) else {
            return RxVerdict::Drop(DropReason::Runt);
        };
        if eth.ethertype() == EtherType::Slow {
            return RxVerdict::Drop(DropReason::SlowProtocols);
        }
        let rule = self.rx_rules[port.index()];
        let refused = if eth.dst_addr().is_multicast() {
            rule.multicast
        } else {
            rule.unicast
        };
        if let Some(reason) = refused {
            return RxVerdict::Drop(reason);
        }
        if self.dedups() && self.dedup.is_copy(now, frame, self.sel.usable.len()) {
            return RxVerdict::Drop(DropReason::Duplicate);
        }
        let macs = Macs {
            bond: self.mac,
            ports: &self.ports,
            active: self.sel.active,
        };
        self.mode
            .receive_fixup(now, frame, &self.sel, &macs, self.addrs.ipv4);
        RxVerdict::Deliver
    }
}
