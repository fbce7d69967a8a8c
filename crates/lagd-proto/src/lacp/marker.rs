//! The Marker Responder (IEEE Std 802.1AX-2014 §6.5.4).
//!
//! A partner's Frame Distributor may send a Marker Information PDU down a link to learn when
//! every frame it sent before the marker has been collected. The responder answers each one on
//! the same port with a Marker Response PDU: the same Requester_Port, Requester_System and
//! Requester_Transaction_ID, the TLV type changed to Marker Response. lagd's collector hands
//! frames to the host in arrival order per port, so the answer can go at once.
//!
//! lagd never originates Marker PDUs (nor does Linux); received Marker Responses are only
//! counted. Responses wait in a short queue per port ([`Responder::CAPACITY`]); a Marker
//! Information PDU arriving while the queue is full is dropped and counted
//! ([`PortCounters::marker_dropped`](super::PortCounters::marker_dropped)), so a flood cannot
//! grow memory.

use std::collections::VecDeque;

use crate::wire::slow::MarkerRepr;

/// The Marker Responder of one port: the responses waiting to be sent.
#[derive(Debug, Clone)]
pub(crate) struct Responder {
    pending: VecDeque<MarkerRepr>,
}

impl Responder {
    /// The most responses waiting per port.
    pub(crate) const CAPACITY: usize = 8;

    pub(crate) fn new() -> Self {
        Self {
            pending: VecDeque::new(),
        }
    }

    /// Queues the response to a Marker Information PDU; false if the queue is full.
    pub(crate) fn push(&mut self, information: MarkerRepr) -> bool {
        if self.pending.len() >= Self::CAPACITY {
            return false;
        }
        self.pending.push_back(information.to_response());
        true
    }

    /// The next response to send.
    pub(crate) fn pop(&mut self) -> Option<MarkerRepr> {
        self.pending.pop_front()
    }

    /// Whether no response waits.
    pub(crate) fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }
}

#[cfg(test)]
mod test {
    use super::*;
    use crate::lacp::limit::{MARKER_RESPONSE_RATE, OTHER_RATE};
    use crate::lacp::tests::script::{self, B_SYS, at, port_mac};
    use crate::lacp::{LacpConfig, MAX_FRAME_LEN, PortId};
    use crate::time::Instant;
    use crate::wire::slow::{MarkerKind, SlowPdu};
    use crate::wire::{EthernetAddress, EthernetFrame};

    fn information(id: u32) -> MarkerRepr {
        MarkerRepr {
            kind: MarkerKind::Information,
            requester_port: 3,
            requester_system: B_SYS,
            transaction_id: id,
        }
    }

    fn marker_frame(m: &MarkerRepr) -> Vec<u8> {
        let mut f = vec![0; m.frame_len()];
        m.emit_frame(EthernetAddress([2, 0xbb, 0, 0, 1, 3]), &mut f);
        f
    }

    #[test]
    fn marker_information_is_answered_on_the_same_port() {
        let mut l = script::bond(LacpConfig::default(), 2);
        // Answered even with the link down and LACP silent: the responder is independent.
        l.handle_frame(at(5), PortId(1), &marker_frame(&information(0xdead_beef)));
        assert_eq!(l.poll_timeout(), Some(at(5)));
        let mut buf = [0u8; MAX_FRAME_LEN];
        let tx = l.poll_transmit(at(5), &mut buf).expect("a Marker Response");
        assert_eq!(tx.port, PortId(1));
        let frame = EthernetFrame::new_checked(&buf[..tx.len]).unwrap();
        assert_eq!(frame.src_addr(), port_mac(1));
        assert_eq!(frame.dst_addr(), EthernetAddress::SLOW_PROTOCOLS);
        assert_eq!(
            SlowPdu::parse_frame(&buf[..tx.len]),
            Ok(SlowPdu::Marker(MarkerRepr {
                kind: MarkerKind::Response,
                ..information(0xdead_beef)
            }))
        );
        assert_eq!(l.poll_transmit(at(5), &mut buf), None);
        let c = l.snapshot().ports[1].counters;
        assert_eq!((c.marker_rx, c.marker_response_tx, c.marker_tx), (1, 1, 0));
    }

    #[test]
    fn responses_are_counted_and_floods_bounded() {
        let mut l = script::bond(LacpConfig::default(), 1);
        let response = MarkerRepr {
            kind: MarkerKind::Response,
            ..information(1)
        };
        l.handle_frame(at(0), PortId(0), &marker_frame(&response));
        // A second later (the receive budget refilled), 20 at once.
        for id in 0..20 {
            l.handle_frame(at(1000), PortId(0), &marker_frame(&information(id)));
        }
        let c = l.snapshot().ports[0].counters;
        assert_eq!(c.marker_response_rx, 1);
        assert_eq!(c.marker_rx, 20);
        // At most MARKER_RESPONSE_RATE answered in a burst.
        let rate = u64::from(MARKER_RESPONSE_RATE);
        assert_eq!(c.marker_dropped, 20 - rate);
        let sent = script::drain_all(&mut l, at(1000));
        let ids: Vec<u32> = sent
            .iter()
            .map(|(_, pdu)| match pdu {
                SlowPdu::Marker(m) => m.transaction_id,
                other => panic!("unexpected {other:?}"),
            })
            .collect();
        assert_eq!(ids, (0..rate as u32).collect::<Vec<u32>>());
    }

    #[test]
    fn a_marker_flood_is_answered_at_the_response_rate() {
        let mut l = script::bond(LacpConfig::default(), 1);
        let mut buf = [0u8; MAX_FRAME_LEN];
        let mut answered = 0u64;
        // 1000 Marker PDUs per second for 10 s, responses drained as they come.
        for i in 0..10_000u32 {
            let now = Instant::from_millis(1000 + u64::from(i));
            l.handle_frame(now, PortId(0), &marker_frame(&information(i)));
            while let Some(tx) = l.poll_transmit(now, &mut buf) {
                if matches!(SlowPdu::parse_frame(&buf[..tx.len]), Ok(SlowPdu::Marker(_))) {
                    answered += 1;
                }
            }
        }
        let c = l.snapshot().ports[0].counters;
        // The receive budget admits OTHER_RATE per second (plus a first burst), the responder
        // answers at most MARKER_RESPONSE_RATE of those per second (plus a first burst).
        let rate = u64::from(MARKER_RESPONSE_RATE);
        assert!(answered <= 11 * rate, "{answered} answered");
        assert!(answered >= 9 * rate, "{answered} answered");
        assert_eq!(c.marker_response_tx, answered);
        // Every frame is accounted for: parsed or refused before parsing.
        assert_eq!(c.marker_rx + c.rate_limited_rx, 10_000);
        assert_eq!(c.marker_rx, answered + c.marker_dropped);
        assert!(c.rate_limited_rx >= 10_000 - 11 * u64::from(OTHER_RATE));
    }
}
