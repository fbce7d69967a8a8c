//! The dataplane: the TAP and the members' sockets, the buffers frames are read into, and
//! the counters. It hands every frame to the bond and applies the verdict, whatever the mode.

use std::io::{self, IoSliceMut};
use std::time::Duration;

use lagd_proto::bond::{
    Bond, DRIVER_HEADROOM, Dataplane as BondDataplane, DropReason, HostFrame, PortId, PortSnapshot,
    RxVerdict, TX_HEADROOM, Transmit, TxDrop, TxVerdict,
};
use lagd_proto::lacp::LacpPortSnapshot;
use lagd_proto::stripe::segment::GsoInfo;
use lagd_proto::time::Instant;
use lagd_proto::wire::slow::{SlowSubtype, slow_protocols_payload};
use lagd_sys::isolate::IngressDrop;
use lagd_sys::packet::{PacketOptions, PacketSocket, RecvMeta};
use lagd_sys::tap::Tap;
use lagd_sys::vnet::VirtioNetHdr;
use tracing::{debug, warn};

use crate::status::{FailureCount, MemberStatus};

/// The `virtio_net_hdr` in front of every frame on the TAP and the members' data sockets.
pub(crate) const VNET_HDR: usize = 10;
/// A 64 KB GSO frame plus its header and the bond's headroom, with room to spare.
const BUF_LEN: usize = TX_HEADROOM + 65536 + 64;
/// Frames handled per readiness event before looking at the other descriptors.
pub(crate) const BATCH: usize = 64;
const SOCKET_BUFFER: usize = 4 << 20;
/// Slow-protocols frames read per wake (one `recvmmsg`).
const SLOW_BATCH: usize = lagd_sys::packet::BATCH_MAX;
/// Room for one slow-protocols frame: twice the largest legal one (128 octets).
const SLOW_SLOT: usize = 256;
/// At most one warning per member per interval about LACPDUs its socket refused.
const LACPDU_WARN_INTERVAL: Duration = Duration::from_secs(10);
/// Where a host frame's `virtio_net_hdr` is read to: right before the frame, at the bond's
/// headroom.
const TAP_AT: usize = TX_HEADROOM - VNET_HDR;

// The bond leaves room for our header in front of the frames it builds.
const _: () = assert!(DRIVER_HEADROOM >= VNET_HDR);

#[derive(Default)]
pub(crate) struct Counters {
    rx_packets: u64,
    rx_bytes: u64,
    tx_packets: u64,
    tx_bytes: u64,
    rx_dropped: [u64; DropReason::ALL.len()],
    tx_dropped: u64,
    pub(crate) rx_socket_drops: u64,
    /// Slow-protocols frames the kernel dropped on the control socket (buffer full).
    pub(crate) slow_socket_drops: u64,
    /// LACPDUs the member's control socket refused (the engine counts them as sent).
    lacpdu_tx_errors: FailureCount,
}

/// A member's sockets.
pub(crate) struct Member {
    pub(crate) name: String,
    pub(crate) ifindex: u32,
    pub(crate) socket: Option<PacketSocket>,
    /// Where the member's frames are read when the data socket only sends (stripe on the
    /// kernel path: sockets bound to the protocols lagd orders, which only see the frames the
    /// members' program passed on); empty when the data socket reads.
    pub(crate) rx: Vec<PacketSocket>,
    /// Slow-protocols frames in (on their own socket, so a busy data socket cannot starve
    /// LACP), and every frame the bond sends itself out (no virtio_net_hdr).
    pub(crate) control: Option<PacketSocket>,
    /// The confirmed LACP partner's slow-protocols frames, on a socket of their own (the
    /// control socket then takes every other source): a flood from elsewhere fills the control
    /// socket's queue, not this one.
    pub(crate) partner: Option<PacketSocket>,
    /// The source address the partner socket takes (and the control socket leaves to it).
    pub(crate) partner_src: Option<[u8; 6]>,
    pub(crate) isolation: Option<IngressDrop>,
    /// How the member is kept off its own stack without the kernel path, and why (empty on
    /// the kernel path, whose members' program does it).
    pub(crate) isolation_why: String,
    pub(crate) counters: Counters,
}

/// The descriptors the bond's [`BondDataplane`] calls reach.
pub(crate) struct Io {
    pub(crate) tap: Tap,
    pub(crate) members: Vec<Member>,
    /// Stripe on the kernel path: the TCP flows the members' program delivers in order.
    pub(crate) stripe_rx: Option<super::kernel::StripeRx>,
    deliver_buf: Vec<u8>,
    /// Whether every member socket was read dry in this wake.
    pub(crate) drained: bool,
}

impl BondDataplane for Io {
    fn send(&mut self, port: PortId, buf: &mut [u8], start: usize, len: usize) -> bool {
        buf[start - VNET_HDR..start].fill(0);
        send(
            &mut self.members[port.index()],
            &buf[start - VNET_HDR..start + len],
            len as u64,
        )
    }

    fn deliver(&mut self, frame: &[u8]) {
        let out = &mut self.deliver_buf;
        let Some(dst) = out.get_mut(VNET_HDR..VNET_HDR + frame.len()) else {
            return;
        };
        dst.copy_from_slice(frame);
        out[..VNET_HDR].fill(0);
        // EIO while the bond is administratively down: the host does not want it.
        let _ = self.tap.write(&out[..VNET_HDR + frame.len()]);
    }

    fn deliver_with_header(&mut self, buf: &[u8], header_len: usize) {
        if header_len == VNET_HDR {
            // The member socket's own virtio_net_hdr: the host gets the super-frame as GRO
            // made it, with its checksum state.
            let _ = self.tap.write(buf);
        } else if let Some(frame) = buf.get(header_len..) {
            self.deliver(frame);
        }
    }

    fn drained(&self) -> bool {
        self.drained
    }

    fn ordered_rx(&mut self) -> Option<&mut dyn lagd_proto::stripe::OrderedRx> {
        self.stripe_rx
            .as_mut()
            .map(|rx| rx as &mut dyn lagd_proto::stripe::OrderedRx)
    }
}

impl Member {
    /// The sockets the member's frames are read from.
    pub(crate) fn readers(&self) -> impl Iterator<Item = &PacketSocket> {
        let own = if self.rx.is_empty() {
            self.socket.as_ref()
        } else {
            None
        };
        own.into_iter()
            .chain(self.socket.as_ref().map_or(&[][..], |_| &self.rx[..]))
    }
}

/// The dataplane: descriptors, the read buffer, and the bond-level counters.
pub(crate) struct Dataplane {
    pub(crate) io: Io,
    buf: Vec<u8>,
    /// [`SLOW_BATCH`] slots of [`SLOW_SLOT`] bytes for slow-protocols frames.
    slow_buf: Vec<u8>,
    pub(crate) tx_dropped_no_member: u64,
}

impl Dataplane {
    pub(crate) fn new(tap: Tap, members: Vec<Member>) -> Self {
        Self {
            io: Io {
                tap,
                members,
                stripe_rx: None,
                deliver_buf: vec![0; BUF_LEN],
                drained: true,
            },
            buf: vec![0; BUF_LEN],
            slow_buf: vec![0; SLOW_BATCH * SLOW_SLOT],
            tx_dropped_no_member: 0,
        }
    }

    /// Reads up to a batch of host frames from the TAP and sends each where the bond says.
    pub(crate) fn service_tap(&mut self, bond: &mut Bond, now: Instant) {
        for _ in 0..BATCH {
            let Some(n) = read_tap(&self.io.tap, &mut self.buf[TAP_AT..]) else {
                return;
            };
            if n <= VNET_HDR {
                continue;
            }
            let len = n - VNET_HDR;
            let offload = VirtioNetHdr::from_bytes(&self.buf[TAP_AT..TX_HEADROOM])
                .map(|h| {
                    GsoInfo::from_virtio(
                        h.flags,
                        h.gso_type,
                        h.hdr_len,
                        h.gso_size,
                        h.csum_start,
                        h.csum_offset,
                    )
                })
                .unwrap_or_default();
            let Some(mut frame) = HostFrame::new(&mut self.buf, len, offload) else {
                continue;
            };
            let verdict = bond.transmit(now, &mut frame, &mut self.io);
            // The frame as the TAP gave it (its virtio_net_hdr included), fixed up in place.
            let out = &self.buf[TAP_AT..TX_HEADROOM + len];
            match verdict {
                TxVerdict::Port(p) => {
                    send(&mut self.io.members[p.index()], out, len as u64);
                }
                TxVerdict::All => {
                    for &p in bond.usable() {
                        send(&mut self.io.members[p.index()], out, len as u64);
                    }
                }
                TxVerdict::Striped { .. } => {}
                TxVerdict::Drop(TxDrop::NoMember) => self.tx_dropped_no_member += 1,
                // Counted by the bond (stripe's tx errors).
                TxVerdict::Drop(TxDrop::Malformed) => {}
            }
        }
    }

    /// Reads up to a batch from member `i`; true if frames may be left (the batch ran out).
    pub(crate) fn service_member(&mut self, bond: &mut Bond, i: usize, now: Instant) -> bool {
        let sources = self.io.members[i].readers().count();
        let mut more = false;
        for source in 0..sources {
            more |= self.service_member_socket(bond, i, source, now);
        }
        more
    }

    /// Reads up to a batch from member `i`'s reader `source` ([`Member::readers`]).
    fn service_member_socket(
        &mut self,
        bond: &mut Bond,
        i: usize,
        source: usize,
        now: Instant,
    ) -> bool {
        let port = PortId(i as u16);
        for _ in 0..BATCH {
            let m = &mut self.io.members[i];
            let Some(socket) = m.readers().nth(source) else {
                return false;
            };
            let meta = match socket.recv_from(&mut self.buf) {
                Ok(meta) => meta,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return false,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                // ENETDOWN once after the member went down; carrier polling handles the rest.
                Err(_) => return false,
            };
            if meta.len <= VNET_HDR {
                continue;
            }
            m.counters.rx_packets += 1;
            m.counters.rx_bytes += (meta.len - VNET_HDR) as u64;
            let buf = &mut self.buf[..meta.len];
            match bond.receive_with_header(now, port, buf, VNET_HDR, &mut self.io) {
                RxVerdict::Deliver => {
                    // EIO while the bond is administratively down: the host does not want it.
                    let _ = self.io.tap.write(&self.buf[..meta.len]);
                }
                RxVerdict::Consumed => {}
                RxVerdict::Drop(reason) => {
                    self.io.members[i].counters.rx_dropped[reason.index()] += 1;
                }
            }
        }
        true
    }

    /// Reads up to a batch of slow-protocols frames from member `i`'s control socket into the
    /// bond, with one `recvmmsg`: a flood costs one system call per [`SLOW_BATCH`] frames.
    pub(crate) fn service_slow(&mut self, bond: &mut Bond, i: usize, now: Instant) {
        // The confirmed partner's frames first.
        self.service_slow_socket(bond, i, true, now);
        self.service_slow_socket(bond, i, false, now);
    }

    fn service_slow_socket(&mut self, bond: &mut Bond, i: usize, partner: bool, now: Instant) {
        let m = &self.io.members[i];
        let Some(c) = (if partner { &m.partner } else { &m.control }) else {
            return;
        };
        let slots = &mut self.slow_buf;
        let mut meta = [RecvMeta::default(); SLOW_BATCH];
        let received = loop {
            let mut bufs: Vec<IoSliceMut<'_>> =
                slots.chunks_mut(SLOW_SLOT).map(IoSliceMut::new).collect();
            match c.recv_batch(&mut bufs, &mut meta) {
                Ok(n) => break n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => return,
            }
        };
        for (k, m) in meta.iter().enumerate().take(received) {
            let slot = &self.slow_buf[k * SLOW_SLOT..(k + 1) * SLOW_SLOT];
            // A slow-protocols PDU is at most 128 octets (IEEE 802.3 Annex 43B): a frame cut
            // at the slot size is illegal whatever it holds. Its addresses alone are passed,
            // which the engine counts as illegal (and charges to the sender's budget).
            let frame = if m.truncated {
                &slot[..12]
            } else {
                &slot[..m.len.min(SLOW_SLOT)]
            };
            bond.handle_frame(now, PortId(i as u16), frame);
        }
    }

    /// Keeps member `i`'s confirmed LACP partner's frames on the partner socket: when the
    /// bond's confirmed source for the member changed, the partner socket takes that address
    /// and the control socket every other.
    pub(crate) fn follow_partner(&mut self, i: usize, src: Option<[u8; 6]>) -> io::Result<()> {
        let m = &mut self.io.members[i];
        if m.partner_src == src {
            return Ok(());
        }
        // Tried once per change (a failure is reported once, not on every wake).
        m.partner_src = src;
        if let (Some(p), Some(c)) = (&m.partner, &m.control) {
            // The partner's frames reach both sockets for a moment rather than neither.
            p.filter_source(src, true)?;
            c.filter_source(src, false)?;
        }
        Ok(())
    }

    /// Sets the members' socket filters again as this lagd keeps them: after a planned upgrade
    /// that failed, the new lagd may have set its own on the same sockets (it takes them over,
    /// see `handover::PACKET`).
    pub(crate) fn refilter(&self) {
        for m in &self.io.members {
            let set = || -> io::Result<()> {
                if let Some(s) = &m.socket {
                    s.exclude_ethertype(lagd_sys::packet::ETH_P_SLOW)?;
                }
                if let (Some(p), Some(c)) = (&m.partner, &m.control) {
                    p.filter_source(m.partner_src, true)?;
                    c.filter_source(m.partner_src, false)?;
                }
                Ok(())
            };
            if let Err(e) = set() {
                warn!(member = %m.name, "socket filters: {e}");
            }
        }
    }

    /// Sends every frame the bond queued itself (LACPDUs, Marker responses, ARP probes,
    /// announcements, hellos) on the members' control sockets.
    pub(crate) fn send_own(&mut self, bond: &mut Bond, now: Instant) {
        let mut frame = [0u8; 1600];
        while let Some(Transmit { port, len }) = bond.poll_transmit(now, &mut frame) {
            let m = &mut self.io.members[port.index()];
            let sent = match &m.control {
                Some(c) => c.send(&frame[..len]).map(drop),
                None => Err(io::ErrorKind::NotConnected.into()),
            };
            let Err(e) = sent else { continue };
            if !is_lacpdu(&frame[..len]) {
                debug!(member = %m.name, "control frame not sent: {e}");
                continue;
            }
            // The engine counted it as sent: count the failure for `lagctl show`, and log it at
            // most every LACPDU_WARN_INTERVAL per member, with how many failed since.
            if let Some(failed) = m
                .counters
                .lacpdu_tx_errors
                .record(now, LACPDU_WARN_INTERVAL)
            {
                let total = m.counters.lacpdu_tx_errors.total();
                warn!(member = %m.name, failed, total, "LACPDU not sent: {e}");
            }
        }
    }

    /// Member `i`'s status: the engines' view of it with this dataplane's counters.
    pub(crate) fn member_status(
        &mut self,
        i: usize,
        p: &PortSnapshot,
        lacp: Option<&LacpPortSnapshot>,
    ) -> MemberStatus {
        let Some(m) = self.io.members.get_mut(i) else {
            return MemberStatus::from_snapshot(p, lacp, 0);
        };
        // PACKET_STATISTICS resets on read: accumulate.
        let drops: u64 = m
            .socket
            .iter()
            .chain(&m.rx)
            .map(|s| s.statistics().map_or(0, |s| u64::from(s.drops)))
            .sum();
        m.counters.rx_socket_drops += drops;
        for s in m.control.iter().chain(&m.partner) {
            m.counters.slow_socket_drops += s.statistics().map_or(0, |s| u64::from(s.drops));
        }
        let c = &m.counters;
        let mut status = MemberStatus {
            rx_packets: c.rx_packets,
            rx_bytes: c.rx_bytes,
            tx_packets: c.tx_packets,
            tx_bytes: c.tx_bytes,
            rx_dropped: DropReason::ALL
                .iter()
                .zip(c.rx_dropped)
                .map(|(r, n)| (r.as_str().to_owned(), n))
                .collect(),
            tx_dropped: c.tx_dropped,
            rx_socket_drops: c.rx_socket_drops,
            ..MemberStatus::from_snapshot(p, lacp, c.lacpdu_tx_errors.total())
        };
        if let Some(l) = &mut status.lacp {
            l.socket_drops = c.slow_socket_drops;
        }
        status
    }
}

/// Whether a frame the bond sends is a LACPDU (slow protocols, subtype LACP).
fn is_lacpdu(frame: &[u8]) -> bool {
    slow_protocols_payload(frame)
        .is_ok_and(|p| p.first().copied().map(SlowSubtype::from) == Some(SlowSubtype::Lacp))
}

/// How a member's data socket is opened: 64 KiB GSO frames behind a `virtio_net_hdr` pass
/// through untouched, lagd's own transmissions are not received back, and 4 MiB buffers absorb
/// bursts while the loop serves the other sockets. The dataplane benchmark's bare relay
/// (`examples/bare_relay.rs`) opens its members with these options too.
pub fn member_data_socket() -> PacketOptions {
    PacketOptions {
        vnet_hdr: true,
        ignore_outgoing: true,
        rcvbuf: Some(SOCKET_BUFFER),
        sndbuf: Some(SOCKET_BUFFER),
        ..PacketOptions::default()
    }
}

/// One frame from the TAP into `buf`; `None` when there is nothing more to read now.
fn read_tap(tap: &Tap, buf: &mut [u8]) -> Option<usize> {
    loop {
        match tap.read(buf) {
            Ok(n) => return Some(n),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return None,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                warn!("reading the TAP: {e}");
                return None;
            }
        }
    }
}

/// Sends `buf` (a `virtio_net_hdr` and a frame of `frame_len` bytes) on member `m`, counting.
fn send(m: &mut Member, buf: &[u8], frame_len: u64) -> bool {
    let Some(s) = &m.socket else {
        m.counters.tx_dropped += 1;
        return false;
    };
    match s.send(buf) {
        Ok(_) => {
            m.counters.tx_packets += 1;
            m.counters.tx_bytes += frame_len;
            true
        }
        // A full queue (or a member going down) drops the frame, as a full qdisc would.
        Err(_) => {
            m.counters.tx_dropped += 1;
            false
        }
    }
}
