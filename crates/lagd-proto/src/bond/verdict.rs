//! The per-frame contract between the bond and whatever moves its frames (the daemon's
//! sockets, a simulation, a test): one call and one verdict per frame.
//!
//! A frame from the host goes to [`Bond::transmit`](super::Bond::transmit), which learns from
//! it, chooses its member, fixes it up in place and answers with a [`TxVerdict`]; a frame from
//! a member goes to [`Bond::receive`](super::Bond::receive), which answers with an
//! [`RxVerdict`]. The caller applies the verdict to the frame it holds and never needs to know
//! the bond's mode. Where one frame becomes several (stripe mode segments a super-frame; a
//! reorder buffer releases frames it held), the bond hands them to the caller's [`Dataplane`].

use crate::port::PortId;
use crate::stripe::header::HEADER_LEN as STRIPE_HEADER_LEN;
use crate::stripe::segment::GsoInfo;

/// Bytes a caller leaves free in front of a host frame it passes to `transmit`: room for a
/// stripe header (8 bytes) and for the caller's own driver header (a `virtio_net_hdr` is 10)
/// in front of the frames the bond builds there.
pub const TX_HEADROOM: usize = STRIPE_HEADER_LEN + DRIVER_HEADROOM;

/// Bytes in front of every frame the bond hands to [`Dataplane::send`] that the dataplane may
/// overwrite (with a `virtio_net_hdr`, say).
pub const DRIVER_HEADROOM: usize = 16;

/// A frame from the host, in a buffer with [`TX_HEADROOM`] free bytes in front of it, and the
/// offload request that came with it (the decoded `virtio_net_hdr`; the default when none).
#[derive(Debug)]
pub struct HostFrame<'a> {
    buf: &'a mut [u8],
    len: usize,
    /// Segmentation and checksum offload the host asked for.
    pub offload: GsoInfo,
}

impl<'a> HostFrame<'a> {
    /// The frame at `buf[TX_HEADROOM..TX_HEADROOM + len]`; `None` if the buffer is shorter.
    pub fn new(buf: &'a mut [u8], len: usize, offload: GsoInfo) -> Option<Self> {
        (TX_HEADROOM.checked_add(len)? <= buf.len()).then_some(Self { buf, len, offload })
    }

    /// The frame.
    pub fn frame(&self) -> &[u8] {
        &self.buf[TX_HEADROOM..TX_HEADROOM + self.len]
    }

    /// The frame, writable (fix-ups rewrite MACs in place).
    pub fn frame_mut(&mut self) -> &mut [u8] {
        &mut self.buf[TX_HEADROOM..TX_HEADROOM + self.len]
    }

    /// The frame's length.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the frame is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The whole buffer, headroom included, and the frame's offset in it.
    pub(crate) fn parts(&mut self) -> (&mut [u8], usize, usize) {
        (self.buf, TX_HEADROOM, self.len)
    }
}

/// Where the bond puts the frames it makes from one it was given: the segments of a striped
/// super-frame, the host frames a reorder buffer releases.
pub trait Dataplane {
    /// Sends the frame `buf[start..start + len]` on `port`; `buf[start - DRIVER_HEADROOM..start]`
    /// is free for a driver header. False if it was not sent (the caller counts its own drops).
    fn send(&mut self, port: PortId, buf: &mut [u8], start: usize, len: usize) -> bool;

    /// Gives a frame to the host.
    fn deliver(&mut self, frame: &[u8]);

    /// Gives the host a frame received with a driver header: `buf[..header_len]` is the header
    /// as the member's socket gave it (offload information the host may use), the frame
    /// follows. By default the header is dropped.
    fn deliver_with_header(&mut self, buf: &[u8], header_len: usize) {
        if let Some(frame) = buf.get(header_len..) {
            self.deliver(frame);
        }
    }

    /// Whether every member has been read dry in this wake: a reorder gap is given up on by
    /// timeout only then, since a frame still waiting in a socket is not lost.
    fn drained(&self) -> bool {
        true
    }

    /// The receive path that orders TCP flows itself, if the dataplane has one (a kernel fast
    /// path's receive table, which stripe's TCP resequencer takes flows from and hands them
    /// back to: see [`OrderedRx`](crate::stripe::OrderedRx)). By default none.
    fn ordered_rx(&mut self) -> Option<&mut dyn crate::stripe::OrderedRx> {
        None
    }
}

/// What to do with a frame from the host after [`Bond::transmit`](super::Bond::transmit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxVerdict {
    /// Send it, as fixed up in place, on this member.
    Port(PortId),
    /// Send it on every member in [`Bond::usable`](super::Bond::usable) (broadcast).
    All,
    /// The bond striped it: its frames went to [`Dataplane::send`].
    Striped {
        /// Frames handed to the dataplane.
        frames: u32,
    },
    /// Do not send it.
    Drop(TxDrop),
}

/// Why a frame from the host is not sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TxDrop {
    /// No member can carry it.
    NoMember,
    /// Stripe mode could not segment or encapsulate it (a malformed super-frame).
    Malformed,
}

/// What to do with a frame received on a member after
/// [`Bond::receive`](super::Bond::receive).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RxVerdict {
    /// Give it, as fixed up in place, to the host.
    Deliver,
    /// The bond took it (a stripe frame): what it released went to [`Dataplane::deliver`].
    Consumed,
    /// Count and drop it.
    Drop(DropReason),
}

/// Why a received frame is not delivered to the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DropReason {
    /// Arrived on a backup member (active-backup without `all_slaves_active`).
    InactiveMember,
    /// A slow-protocols frame (LACP, Marker): never given to the host.
    SlowProtocols,
    /// Shorter than an Ethernet header.
    Runt,
    /// Arrived on an 802.3ad member that LACP does not let collect.
    NotCollecting,
    /// A copy of a frame another member delivered (broadcast with `broadcast_dedup`).
    Duplicate,
}

impl DropReason {
    /// Every reason, for counters.
    pub const ALL: [Self; 5] = [
        Self::InactiveMember,
        Self::SlowProtocols,
        Self::Runt,
        Self::NotCollecting,
        Self::Duplicate,
    ];

    /// A short name for counters and status.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::InactiveMember => "inactive_member",
            Self::SlowProtocols => "slow_protocols",
            Self::Runt => "runt",
            Self::NotCollecting => "not_collecting",
            Self::Duplicate => "duplicate",
        }
    }

    /// The reason's position in [`DropReason::ALL`], for counter arrays.
    pub const fn index(self) -> usize {
        match self {
            Self::InactiveMember => 0,
            Self::SlowProtocols => 1,
            Self::Runt => 2,
            Self::NotCollecting => 3,
            Self::Duplicate => 4,
        }
    }
}

/// Whether a member's frames reach the host: unicast and multicast apart (`None`: they do).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct RxRule {
    pub(crate) unicast: Option<DropReason>,
    pub(crate) multicast: Option<DropReason>,
}

impl RxRule {
    pub(crate) const ACCEPT: Self = Self {
        unicast: None,
        multicast: None,
    };

    pub(crate) const fn drop_all(reason: DropReason) -> Self {
        Self {
            unicast: Some(reason),
            multicast: Some(reason),
        }
    }
}
