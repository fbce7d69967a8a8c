//! Stripe mode: one TCP stream faster than one member, without reordering.
//!
//! Round-robin bonding (`balance-rr`) sends a single stream over every member, but the members'
//! different delays reorder its frames, the receiver's TCP takes the reordering for loss, and
//! the stream ends up *slower* than one member. Stripe mode fixes that when **both ends run
//! lagd**: the sender spreads frames over the members by speed, and the receiver puts them back
//! in order before the host sees them. TCP frames go out as the host gave them (a 64 KB
//! super-frame stays one unit, which the member segments) and are put back in order by their
//! own sequence numbers ([`tcp`]); other frames are numbered with a header.
//!
//! The pieces, all sans-IO like the rest of the crate:
//! - [`header`]: the wire format. A striped frame keeps its Ethernet addresses, gets EtherType
//!   0x88b5 and an 8-byte header (version, kind, epoch tag, the frame's own EtherType, a 32-bit
//!   sequence number); hellos are 60-byte frames of the same EtherType. Encapsulation and
//!   decapsulation work in place.
//! - [`StripeTx`]: which member each frame goes out on (bytes per member follow the members'
//!   speeds) and its sequence number.
//! - [`Reorder`]: the receiver's bounded, pre-allocated reorder buffer, with a timeout for lost
//!   frames and resynchronisation when the sender restarts.
//! - [`Peers`]: hellos on every member; only members where both ends hear each other are
//!   striped over, and a missing peer is a clear error.
//! - [`TcpOrder`] ([`tcp`]): the receiver's resequencer for TCP, by TCP's sequence numbers,
//!   bounded in flows and bytes, with the same loss rules as [`Reorder`].
//! - [`segment`]: software TCP segmentation and checksum completion, for frames that must be
//!   numbered (no NIC can offload them for a 0x88b5 frame).
//! - [`Stripe`] ties them together for the daemon.
//!
//! # Deployment notes for the daemon
//! - The host's MTU must leave room for the 8-byte header: the TAP's MTU is the members' MTU
//!   minus [`header::HEADER_LEN`].
//! - Send TCP frames with their `virtio_net_hdr` as the host gave it, on the member
//!   [`Stripe::choose_tcp`] names; give received ones, header included, to
//!   [`Stripe::handle_tcp`]. Segment other super-frames ([`segment::segment`]) and complete
//!   `NEEDS_CSUM` checksums ([`segment::complete_checksum`]) before encapsulating; send
//!   numbered frames with an empty `virtio_net_hdr`. Offer the host no UDP segmentation.
//! - Members must reach the peer over separate paths (back-to-back cables, or one switch per
//!   member): a single switch would see the same source MAC on every member port.
//!
//! # Example
//! ```
//! use lagd_proto::port::PortId;
//! use lagd_proto::stripe::{Stripe, StripeConfig};
//! use lagd_proto::time::Instant;
//! use lagd_proto::wire::EthernetAddress;
//!
//! let now = Instant::ZERO;
//! let members = [(PortId(0), 10_000), (PortId(1), 10_000)];
//! let mut a = Stripe::new(StripeConfig::default(), EthernetAddress([2, 0, 0, 0, 0, 1]), 11, now);
//! let mut b = Stripe::new(StripeConfig::default(), EthernetAddress([2, 0, 0, 0, 0, 2]), 22, now);
//! a.set_members(now, &members);
//! b.set_members(now, &members);
//!
//! // Hellos both ways (member i reaches member i) until both ends are two-way.
//! fn hellos(from: &mut Stripe, to: &mut Stripe, now: Instant) {
//!     let mut frame = [0u8; 64];
//!     while let Some((port, hello)) = from.poll_transmit(now) {
//!         let len = hello.emit_frame(EthernetAddress([2, 0, 0, 0, 0, 9]), &mut frame).unwrap();
//!         to.handle_frame(now, port, &mut frame[..len], &mut |_| ()).unwrap();
//!     }
//! }
//! for _ in 0..2 {
//!     hellos(&mut a, &mut b, now);
//!     hellos(&mut b, &mut a, now);
//! }
//! assert!(a.status(now).is_striping());
//!
//! // A host frame read at offset 8 of the buffer, striped, received.
//! let mut buf = [0u8; 8 + 60];
//! buf[8 + 12] = 0x08; // IPv4
//! let (port, start) = a.transmit(&mut buf, 8, 60).unwrap();
//! let mut got = Vec::new();
//! b.handle_frame(now, port, &mut buf[start..], &mut |f| got.push(f.to_vec())).unwrap();
//! assert_eq!(got[0].len(), 60);
//! assert_eq!(got[0][12], 0x08);
//! ```

pub mod header;
pub mod peers;
pub mod reorder;
pub mod segment;
pub mod tcp;
pub mod tx;

use core::fmt;

use crate::port::PortId;
use crate::time::{Instant, earliest};
use crate::wire::{self, EthernetAddress};

pub use header::{DataHeader, EncapError, HelloRepr, StripeFrame};
pub use peers::{HelloEvent, PeerState, Peers, PeersConfig, PeersStatus};
pub use reorder::{Arrival, Reorder, ReorderConfig, ReorderCounters};
pub use segment::{GsoInfo, GsoKind, SegmentError};
pub use tcp::{FlowKey, OrderedRx, TcpOrder, TcpOrderConfig, TcpOrderCounters, TcpSink};
pub use tx::StripeTx;

/// Configuration of a [`Stripe`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StripeConfig {
    /// The receiver's window and timeout.
    pub reorder: ReorderConfig,
    /// Hello timing.
    pub peers: PeersConfig,
    /// The TCP resequencer's limits.
    pub tcp: TcpOrderConfig,
}

/// Why [`Stripe::transmit`] sent nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TransmitError {
    /// No member to send on.
    NoMember,
    /// The frame could not be encapsulated in place.
    Encap(EncapError),
}

impl fmt::Display for TransmitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoMember => f.write_str("no member to send on"),
            Self::Encap(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for TransmitError {}

/// What [`Stripe::handle_frame`] did with a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Received {
    /// A data frame, handled by the reorder buffer.
    Data(Arrival),
    /// A hello.
    Hello(HelloEvent),
}

/// One end of a striped bond: sender, receiver and peer liveness together.
///
/// Frames are striped over the members the bond reports usable ([`set_members`]) on which the
/// peer is two-way; when no member is two-way (start-up, or the peer's hellos are lost while
/// its data still flows) over all usable members, since the frames are useless to anything but
/// a stripe peer anyway.
///
/// [`set_members`]: Self::set_members
#[derive(Debug, Clone)]
pub struct Stripe {
    epoch: u32,
    tx: StripeTx,
    rx: Reorder,
    tcp: TcpOrder,
    peers: Peers,
    members: Vec<(PortId, u32)>,
    scratch: Vec<(PortId, u32)>,
    /// Counts changes of the members data goes out on.
    version: u64,
}

impl Stripe {
    /// One end for the bond whose MAC is `bond`, started at `now` with `epoch` (random per
    /// start: a restart must change it). Sequence numbers start at 0.
    pub fn new(config: StripeConfig, bond: EthernetAddress, epoch: u32, now: Instant) -> Self {
        Self {
            epoch,
            tx: StripeTx::new(0),
            rx: Reorder::new(config.reorder),
            tcp: TcpOrder::new(config.tcp, u64::from(epoch) ^ 0x9e37_79b9_7f4a_7c15),
            peers: Peers::new(config.peers, bond, epoch, now),
            members: Vec::new(),
            scratch: Vec::new(),
            version: 0,
        }
    }

    /// Our epoch's low byte, carried in every data header.
    pub fn epoch_tag(&self) -> u8 {
        self.epoch as u8
    }

    /// Sets the members the bond can use (carrier up), with their speeds in Mb/s. They send
    /// hellos; those where the peer is two-way carry data.
    pub fn set_members(&mut self, now: Instant, members: &[(PortId, u32)]) {
        if self.members.as_slice() != members {
            self.members.clear();
            self.members.extend_from_slice(members);
            self.peers.set_members(now, members);
        }
        self.refresh(now);
    }

    /// Stripes the host frame at `buf[start..start + len]` (at least 8 bytes of headroom
    /// before it): chooses its member, gives it the next sequence number and encapsulates it in
    /// place. Returns the member and the striped frame's start (`start - 8`; it is `len + 8`
    /// bytes long). No sequence number is used on error.
    pub fn transmit(
        &mut self,
        buf: &mut [u8],
        start: usize,
        len: usize,
    ) -> Result<(PortId, usize), TransmitError> {
        if start < header::HEADER_LEN {
            return Err(TransmitError::Encap(EncapError::NoHeadroom));
        }
        if len < wire::ethernet::HEADER_LEN || start.saturating_add(len) > buf.len() {
            return Err(TransmitError::Encap(EncapError::BadFrame));
        }
        let (port, seq) = self
            .tx
            .next(len + header::HEADER_LEN)
            .ok_or(TransmitError::NoMember)?;
        let new = header::encapsulate(buf, start, len, seq, self.epoch_tag())
            .map_err(TransmitError::Encap)?;
        Ok((port, new))
    }

    /// Takes a stripe frame received on `port` at `now`: a hello updates the peer state, a data
    /// frame goes through the reorder buffer, which passes the host frames that are ready to
    /// `deliver`, in order. The frame is decapsulated in place.
    ///
    /// An error (not a well-formed stripe frame) changes nothing; the caller counts it.
    pub fn handle_frame<F: FnMut(&[u8])>(
        &mut self,
        now: Instant,
        port: PortId,
        frame: &mut [u8],
        deliver: &mut F,
    ) -> wire::Result<Received> {
        match StripeFrame::parse(frame)? {
            StripeFrame::Hello(hello) => {
                let event = self.peers.handle_hello(now, port, &hello);
                if let Some((old, new)) = event.peer_restarted
                    && old as u8 == new as u8
                {
                    // Same epoch tag after a restart: the data headers cannot tell, so start
                    // the sequence afresh now.
                    self.rx.restart(deliver);
                }
                // Any hello can change other members too (a restart voids them): cheap, and
                // free when nothing changed.
                self.refresh(now);
                Ok(Received::Hello(event))
            }
            StripeFrame::Data(_) => self
                .rx
                .push_frame_on(now, port.0, frame, deliver)
                .map(Received::Data),
        }
    }

    /// Chooses the member for a TCP frame of `len` bytes sent as it is (no header: see
    /// [`tcp`]); `None` if no member has a two-way peer.
    pub fn choose_tcp(&mut self, len: usize) -> Option<PortId> {
        self.tx.choose(len)
    }

    /// Takes the frame at `buf[l2_at..]` received on `port` if it is a TCP segment, and
    /// delivers `buf` (whole) through `deliver` in TCP sequence order (see [`TcpOrder::push`]);
    /// false if it is not TCP.
    pub fn handle_tcp<S: TcpSink + ?Sized>(
        &mut self,
        now: Instant,
        port: PortId,
        buf: &[u8],
        l2_at: usize,
        deliver: &mut S,
    ) -> bool {
        self.tcp.push(now, port.0, buf, l2_at, deliver)
    }

    /// Gives up the TCP holes whose timeout passed at `now`; `deliver` gets the held buffers
    /// as [`handle_tcp`](Self::handle_tcp) took them.
    pub fn poll_tcp<S: TcpSink + ?Sized>(&mut self, now: Instant, deliver: &mut S) {
        self.tcp.poll(now, deliver);
    }

    /// Does what is due at `now`: skips timed-out gaps (delivering what they held back) and
    /// takes out members whose peer went silent. Hellos come from
    /// [`poll_transmit`](Self::poll_transmit); TCP holes from [`poll_tcp`](Self::poll_tcp).
    pub fn poll<F: FnMut(&[u8])>(&mut self, now: Instant, deliver: &mut F) {
        self.rx.poll(now, deliver);
        if self.peers.handle_timeout(now) {
            self.refresh(now);
        }
    }

    /// The next hello due at `now` and the member to send it on; emit it with
    /// [`HelloRepr::emit_frame`] and ask again until `None`.
    pub fn poll_transmit(&mut self, now: Instant) -> Option<(PortId, HelloRepr)> {
        self.peers.poll_transmit(now)
    }

    /// When the next hello is due ([`Stripe::poll_transmit`]); the reorder and liveness
    /// deadlines are not included (see [`Stripe::poll_timeout`]).
    pub fn transmit_timeout(&self) -> Option<Instant> {
        self.peers.transmit_timeout()
    }

    /// When [`poll`](Self::poll) or [`poll_transmit`](Self::poll_transmit) next has work.
    pub fn poll_timeout(&self) -> Option<Instant> {
        earliest([
            self.rx.poll_timeout(),
            self.tcp.poll_timeout(),
            self.peers.poll_timeout(),
        ])
    }

    /// The peer's state for logs and `lagctl` (see [`PeersStatus`]).
    pub fn status(&self, now: Instant) -> PeersStatus {
        self.peers.status(now)
    }

    /// The sender.
    pub fn tx(&self) -> &StripeTx {
        &self.tx
    }

    /// The receiver (its counters in particular).
    pub fn rx(&self) -> &Reorder {
        &self.rx
    }

    /// The TCP resequencer (its counters in particular).
    pub fn tcp(&self) -> &TcpOrder {
        &self.tcp
    }

    /// Grows whenever the members data goes out on change (a peer heard or lost, a member
    /// up or down, a speed change): what a kernel fast path's copy of them follows.
    pub fn version(&self) -> u64 {
        self.version
    }

    /// The peer state.
    pub fn peers(&self) -> &Peers {
        &self.peers
    }

    /// Recomputes the members data goes out on.
    fn refresh(&mut self, now: Instant) {
        self.scratch.clear();
        for &(port, speed) in &self.members {
            if self.peers.state(now, port) == PeerState::TwoWay {
                self.scratch.push((port, speed));
            }
        }
        if !self.tx.members().eq(self.scratch.iter().copied()) {
            self.version += 1;
        }
        self.tx.set_members(&self.scratch);
        let lanes: Vec<u16> = self.scratch.iter().map(|(p, _)| p.0).collect();
        self.rx.set_lanes(&lanes);
        self.tcp.set_lanes(&lanes);
    }

    /// Whether some member has a two-way stripe peer, so [`transmit`](Self::transmit) has a
    /// member to stripe on. Without one (the peer is not lagd in stripe mode, or not yet
    /// heard) the driver sends host frames as they are, on one member, so the bond still
    /// carries traffic while [`status`](Self::status) reports the error.
    pub fn is_striping(&self) -> bool {
        !self.tx.is_empty()
    }
}

#[cfg(test)]
mod test;
