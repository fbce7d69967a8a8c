//! Stripe mode as the bond runs it: host frames (super-frames segmented first, partial
//! checksums completed) numbered, encapsulated and spread over the members with a stripe peer;
//! stripe frames from members through the reorder buffer.

use crate::bond::member::Port;
use crate::bond::select::Selection;
use crate::bond::snapshot::StripeSnapshot;
use crate::bond::verdict::{Dataplane, HostFrame, TX_HEADROOM, TxDrop, TxVerdict};
use crate::port::{PortId, Transmit};
use crate::stripe::header::{HEADER_LEN, is_stripe_frame};
use crate::stripe::segment::{complete_checksum, segment};
use crate::stripe::tcp::parse_segment;
use crate::stripe::{Stripe, StripeConfig};
use crate::time::{Instant, earliest};
use crate::wire::EthernetAddress;

/// A 64 KB super-frame's segments are built here, one at a time, behind the same headroom as a
/// host frame.
const SEGMENT_BUF: usize = TX_HEADROOM + 65536;

/// Stripe mode's engine and what it needs around it.
#[derive(Debug, Clone)]
pub(crate) struct StripeMode {
    pub(crate) engine: Stripe,
    mac: EthernetAddress,
    seg_buf: Vec<u8>,
    /// Host frames that could not be striped (malformed super-frames).
    pub(crate) tx_errors: u64,
    /// Stripe frames from members that did not parse.
    pub(crate) rx_errors: u64,
    /// The driver header in front of received frames (TCP segments are held with it).
    rx_header_len: usize,
}

/// Stripe mode as the bond runs it: gaps are given up on by timeout only when the driver has
/// read every member (see `ReorderConfig::expire_on_push` and [`Dataplane::drained`]).
fn stripe_config() -> StripeConfig {
    let mut c = StripeConfig::default();
    c.reorder.expire_on_push = false;
    c
}

impl StripeMode {
    /// For the bond whose MAC is `mac`, with epoch 0 until [`StripeMode::restart`].
    pub(crate) fn new(mac: EthernetAddress) -> Self {
        Self {
            engine: Stripe::new(stripe_config(), mac, 0, Instant::ZERO),
            mac,
            seg_buf: vec![0; SEGMENT_BUF],
            tx_errors: 0,
            rx_errors: 0,
            rx_header_len: 0,
        }
    }

    /// Starts the engine afresh with `epoch` over `members`.
    pub(crate) fn restart(&mut self, now: Instant, epoch: u32, members: &[(PortId, u32)]) {
        self.engine = Stripe::new(stripe_config(), self.mac, epoch, now);
        self.engine.set_members(now, members);
    }

    /// Stripes a host frame. Without a stripe peer (yet) the frame goes as it is on the active
    /// member, so the bond still carries traffic while the status names the problem.
    pub(crate) fn transmit(
        &mut self,
        frame: &mut HostFrame<'_>,
        sel: &Selection,
        dp: &mut dyn Dataplane,
    ) -> TxVerdict {
        if !self.engine.is_striping() {
            return sel
                .active
                .map_or(TxVerdict::Drop(TxDrop::NoMember), TxVerdict::Port);
        }
        if parse_segment(frame.frame()).is_some() {
            // TCP goes as the host gave it (super-frames whole, offloads kept); the peer
            // orders it by its own sequence numbers.
            return self
                .engine
                .choose_tcp(frame.frame().len())
                .map_or(TxVerdict::Drop(TxDrop::NoMember), TxVerdict::Port);
        }
        let gso = frame.offload;
        let engine = &mut self.engine;
        let mut frames = 0u32;
        let mut failed = 0u64;
        let mut send = |buf: &mut [u8], len: usize| match engine.transmit(buf, TX_HEADROOM, len) {
            Ok((port, start)) => {
                dp.send(port, buf, start, len + HEADER_LEN);
                frames += 1;
            }
            Err(_) => failed += 1,
        };
        let (buf, start, len) = frame.parts();
        if gso.is_gso() {
            let host = &buf[start..start + len];
            let r = segment(host, &gso, &mut self.seg_buf, TX_HEADROOM, |seg| {
                let len = seg.len() - TX_HEADROOM;
                send(seg, len);
            });
            failed += u64::from(r.is_err());
        } else if gso.needs_csum
            && complete_checksum(
                &mut buf[start..start + len],
                gso.csum_start.into(),
                gso.csum_offset.into(),
            )
            .is_err()
        {
            failed += 1;
        } else {
            send(buf, len);
        }
        self.tx_errors += failed;
        if frames == 0 && failed > 0 {
            TxVerdict::Drop(TxDrop::Malformed)
        } else {
            TxVerdict::Striped { frames }
        }
    }

    /// Takes the frame at `buf[header_len..]` if it is a stripe frame (hello or data) or, while
    /// striping, a TCP segment; what the reorder buffers release goes to the dataplane (TCP
    /// with its driver header). False if the bond should handle it as any other frame.
    pub(crate) fn receive(
        &mut self,
        now: Instant,
        port: PortId,
        buf: &mut [u8],
        header_len: usize,
        dp: &mut dyn Dataplane,
    ) -> bool {
        let Some(frame) = buf.get_mut(header_len..) else {
            return false;
        };
        if !is_stripe_frame(frame) {
            // The driver's header length is the same for every frame it reads.
            self.rx_header_len = header_len;
            return self.engine.is_striping()
                && self.engine.handle_tcp(
                    now,
                    port,
                    buf,
                    header_len,
                    &mut ToHost { dp, header_len },
                );
        }
        if self
            .engine
            .handle_frame(now, port, frame, &mut |f| dp.deliver(f))
            .is_err()
        {
            self.rx_errors += 1;
        }
        true
    }

    /// The engine's state for status output, as of `now`.
    pub(crate) fn snapshot(&self, now: Instant) -> StripeSnapshot {
        StripeSnapshot {
            peers: self.engine.status(now),
            reorder: *self.engine.rx().counters(),
            held_now: self.engine.rx().occupancy(),
            next_tx_seq: self.engine.tx().next_seq(),
            tx_errors: self.tx_errors,
            rx_errors: self.rx_errors,
            tcp: *self.engine.tcp().counters(),
            tcp_held_bytes: self.engine.tcp().held_bytes(),
            tcp_flows: self.engine.tcp().flows(),
        }
    }

    /// The usable members and their speeds.
    pub(crate) fn set_members(&mut self, now: Instant, weighted: &[(PortId, u32)]) {
        self.engine.set_members(now, weighted);
    }

    /// Hellos, reorder gaps and peer liveness.
    pub(crate) fn poll_timeout(&self) -> Option<Instant> {
        earliest([self.engine.poll_timeout(), self.engine.transmit_timeout()])
    }

    /// Gaps whose timeout passed (once every member was read dry), silent peers.
    pub(crate) fn handle_timeout(&mut self, now: Instant, dp: &mut dyn Dataplane) {
        if dp.drained() {
            self.engine.poll(now, &mut |f| dp.deliver(f));
            let header_len = self.rx_header_len;
            self.engine.poll_tcp(now, &mut ToHost { dp, header_len });
        }
    }

    /// The next hello.
    pub(crate) fn poll_transmit(
        &mut self,
        now: Instant,
        ports: &[Port],
        buf: &mut [u8],
    ) -> Option<Transmit> {
        let (port, hello) = self.engine.poll_transmit(now)?;
        let src = ports[port.index()].info.perm_mac;
        let len = hello.emit_frame(src, buf).ok()?;
        Some(Transmit { port, len })
    }
}

/// What the TCP resequencer releases goes to the host with its driver header; flows go to and
/// come from the dataplane's kernel fast path, if it has one.
struct ToHost<'a> {
    dp: &'a mut dyn Dataplane,
    header_len: usize,
}

impl crate::stripe::TcpSink for ToHost<'_> {
    fn deliver(&mut self, buf: &[u8]) {
        self.dp.deliver_with_header(buf, self.header_len);
    }

    fn take_over(&mut self, key: &crate::stripe::FlowKey) -> Option<u32> {
        self.dp.ordered_rx()?.take_over(key)
    }

    fn hand_back(&mut self, key: &crate::stripe::FlowKey, next: u32) -> bool {
        self.dp
            .ordered_rx()
            .is_some_and(|rx| rx.hand_back(key, next))
    }
}
