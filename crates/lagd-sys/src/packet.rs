//! Member links: `AF_PACKET` raw sockets bound to one interface.
//!
//! A [`PacketSocket`] sends and receives whole Ethernet frames on one member, non-blocking, one
//! frame per call ([`PacketSocket::recv`], [`PacketSocket::send`]) or up to [`BATCH_MAX`] frames
//! per syscall ([`PacketSocket::recv_batch`] with `recvmmsg`, [`PacketSocket::send_batch`] with
//! `sendmmsg`). With [`PacketOptions::vnet_hdr`] (`PACKET_VNET_HDR`) each frame is preceded by the
//! same 10-byte [`VirtioNetHdr`] as on a [`Tap`](crate::tap::Tap), so
//! a GSO super-frame read from the TAP can be sent as is and the member's driver (or veth's peer)
//! segments it, or not, as it can.
//!
//! # Back-pressure
//!
//! Sending returns [`io::ErrorKind::WouldBlock`] when the frame was not sent and the caller should
//! hold off: either the socket send buffer is full (`EAGAIN`: wait for writability) or the device
//! queue dropped the frame (`ENOBUFS`, mapped to `WouldBlock` here: writability will not tell when
//! to retry, so retry on the next loop turn or drop and count). Receiving returns `WouldBlock`
//! when nothing is queued.
//!
//! # Interface down
//!
//! When the bound interface goes administratively down, the next receive returns `ENETDOWN` once
//! (and the descriptor polls as having an error); the socket stays bound and works again once the
//! interface is up. When the interface is deleted, the socket is dead; make a new one.

use std::io::{self, IoSlice, IoSliceMut};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::ptr;

use crate::error;
use crate::link;
use crate::socket::{self, PlainData};
use crate::vnet::VirtioNetHdr;

/// `ETH_P_ALL`: every protocol, and frames are seen before tc and netfilter ingress.
pub const ETH_P_ALL: u16 = 0x0003;
/// `ETH_P_SLOW`: IEEE 802.3 slow protocols (LACP, Marker).
pub const ETH_P_SLOW: u16 = 0x8809;
/// ARP.
pub const ETH_P_ARP: u16 = 0x0806;
/// `ETH_P_IP`: IPv4.
pub const ETH_P_IP: u16 = 0x0800;
/// `ETH_P_IPV6`: IPv6.
pub const ETH_P_IPV6: u16 = 0x86dd;
/// The slow-protocols multicast address LACPDUs are sent to, `01:80:c2:00:00:02`.
pub const SLOW_PROTOCOLS_MULTICAST: [u8; 6] = [0x01, 0x80, 0xc2, 0x00, 0x00, 0x02];
/// `TC_PRIO_CONTROL`: the [`PacketOptions::priority`] of protocol frames (LACPDUs), which the
/// default qdisc (`pfifo_fast`) sends from its first band, ahead of bulk traffic.
pub const TC_PRIO_CONTROL: u32 = 7;
/// Most frames moved by one [`PacketSocket::recv_batch`] or [`PacketSocket::send_batch`]
/// (one syscall each). 64 is where `sendmmsg`/`recvmmsg` stopped gaining on veth.
pub const BATCH_MAX: usize = 64;

const PACKET_MR_UNICAST: libc::c_int = 3;

/// How to open a [`PacketSocket`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PacketOptions {
    /// Ethertype to receive (host byte order): [`ETH_P_ALL`] (the default) or one protocol such
    /// as [`ETH_P_SLOW`]. Sending is not restricted by it.
    pub protocol: u16,
    /// `PACKET_VNET_HDR`: a 10-byte `virtio_net_hdr` precedes every frame sent and received.
    pub vnet_hdr: bool,
    /// `PACKET_IGNORE_OUTGOING`: do not receive frames sent on the interface (by anyone).
    pub ignore_outgoing: bool,
    /// `PACKET_QDISC_BYPASS`: send straight to the driver, skipping the qdisc (tc shaping and
    /// taps on the egress path no longer see the frames).
    pub qdisc_bypass: bool,
    /// `SO_RCVBUF` in bytes (forced past `rmem_max` when running as root); kernel default if `None`.
    pub rcvbuf: Option<usize>,
    /// `SO_SNDBUF` in bytes (forced past `wmem_max` when running as root); kernel default if `None`.
    pub sndbuf: Option<usize>,
    /// `SO_PRIORITY` of the frames sent (their `skb->priority`, which picks the qdisc band or
    /// traffic class), such as [`TC_PRIO_CONTROL`]; 0 if `None`. Values above 6 need
    /// `CAP_NET_RAW` or `CAP_NET_ADMIN`, which an `AF_PACKET` socket needs anyway.
    pub priority: Option<u32>,
}

impl Default for PacketOptions {
    fn default() -> Self {
        Self {
            protocol: ETH_P_ALL,
            vnet_hdr: false,
            ignore_outgoing: false,
            qdisc_bypass: false,
            rcvbuf: None,
            sndbuf: None,
            priority: None,
        }
    }
}

/// Where a received frame came from, relative to the interface (`sll_pkttype`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum PacketType {
    /// Addressed to the interface's own MAC.
    #[default]
    Host,
    /// Sent to the broadcast address.
    Broadcast,
    /// Sent to a multicast address.
    Multicast,
    /// Addressed to another host's MAC (seen because of promiscuity or a veth/bridge path).
    OtherHost,
    /// Sent by this host on the interface (looped back to packet sockets).
    Outgoing,
    /// Any other value.
    Unknown(u8),
}

impl From<u8> for PacketType {
    fn from(raw: u8) -> Self {
        match raw {
            libc::PACKET_HOST => Self::Host,
            libc::PACKET_BROADCAST => Self::Broadcast,
            libc::PACKET_MULTICAST => Self::Multicast,
            libc::PACKET_OTHERHOST => Self::OtherHost,
            libc::PACKET_OUTGOING => Self::Outgoing,
            other => Self::Unknown(other),
        }
    }
}

/// What the kernel said about one received frame.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RecvMeta {
    /// Bytes written to the buffer, `virtio_net_hdr` included.
    pub len: usize,
    /// The frame was longer than the buffer and was cut to `len` bytes.
    pub truncated: bool,
    /// Where the frame came from.
    pub pkttype: PacketType,
    /// The frame's ethertype (host byte order), as the kernel classified it.
    pub protocol: u16,
}

/// `PACKET_STATISTICS` counters. Reading them resets them to zero (kernel semantics).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PacketStats {
    /// Frames that reached the socket since the last read, dropped ones included.
    pub packets: u32,
    /// Frames dropped because the receive buffer was full.
    pub drops: u32,
}

/// A link-layer address filter a socket can add to its interface (`PACKET_ADD_MEMBERSHIP`).
///
/// Memberships are reference-counted by the kernel and released when the socket closes, so a
/// crashed lagd leaves no promiscuous member behind (unlike setting `IFF_PROMISC` directly).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Membership {
    /// Receive every frame (`PACKET_MR_PROMISC`).
    Promisc,
    /// Receive every multicast frame (`PACKET_MR_ALLMULTI`).
    AllMulti,
    /// Receive frames for this multicast address (`PACKET_MR_MULTICAST`), for example
    /// [`SLOW_PROTOCOLS_MULTICAST`].
    Multicast([u8; 6]),
    /// Receive frames for this extra unicast address (`PACKET_MR_UNICAST`), for example the
    /// bond's MAC on a member whose own MAC differs.
    Unicast([u8; 6]),
}

/// An `AF_PACKET` `SOCK_RAW` socket bound to one interface. Non-blocking.
#[derive(Debug)]
pub struct PacketSocket {
    fd: OwnedFd,
    ifindex: u32,
    options: PacketOptions,
}

impl PacketSocket {
    /// Opens a socket bound to interface `ifindex` in the caller's network namespace.
    pub fn bind(ifindex: u32, options: PacketOptions) -> io::Result<Self> {
        let ifindex_c = libc::c_int::try_from(ifindex).map_err(|_| {
            io::Error::new(io::ErrorKind::InvalidInput, "interface index out of range")
        })?;
        // Protocol 0 receives nothing until bind() names the real one, so no frame from another
        // interface can slip in between socket() and bind().
        let fd = socket::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_NONBLOCK, 0)?;
        let sock = Self {
            fd,
            ifindex,
            options,
        };
        let on: libc::c_int = 1;
        if options.vnet_hdr {
            sock.set_option(libc::PACKET_VNET_HDR, &on, "setsockopt(PACKET_VNET_HDR)")?;
        }
        if options.ignore_outgoing {
            sock.set_option(
                libc::PACKET_IGNORE_OUTGOING,
                &on,
                "setsockopt(PACKET_IGNORE_OUTGOING)",
            )?;
        }
        if options.qdisc_bypass {
            sock.set_option(
                libc::PACKET_QDISC_BYPASS,
                &on,
                "setsockopt(PACKET_QDISC_BYPASS)",
            )?;
        }
        if let Some(bytes) = options.rcvbuf {
            socket::set_buffer(sock.fd.as_fd(), true, bytes)?;
        }
        if let Some(bytes) = options.sndbuf {
            socket::set_buffer(sock.fd.as_fd(), false, bytes)?;
        }
        if let Some(priority) = options.priority {
            let value = libc::c_int::try_from(priority).map_err(|_| {
                io::Error::new(io::ErrorKind::InvalidInput, "socket priority out of range")
            })?;
            socket::setsockopt(
                sock.fd.as_fd(),
                libc::SOL_SOCKET,
                libc::SO_PRIORITY,
                &value,
                "setsockopt(SO_PRIORITY)",
            )?;
        }
        let mut addr = zeroed_sockaddr_ll();
        addr.sll_family = libc::AF_PACKET as libc::c_ushort;
        addr.sll_protocol = options.protocol.to_be();
        addr.sll_ifindex = ifindex_c;
        // SAFETY: `addr` is a valid `sockaddr_ll` and the length passed is its size; bind(2)
        // only reads it.
        let ret = unsafe {
            libc::bind(
                sock.fd.as_raw_fd(),
                ptr::from_ref(&addr).cast(),
                size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        if ret < 0 {
            return Err(error::last(
                "bind(AF_PACKET)",
                Some(&format!("ifindex {ifindex}")),
            ));
        }
        Ok(sock)
    }

    /// The interface index and protocol (host byte order) the packet socket `fd` is bound to;
    /// `None` when `fd` is not an `AF_PACKET` `SOCK_RAW` socket.
    ///
    /// # Errors
    ///
    /// The failing `getsockopt`/`getsockname` (for example `ENOTSOCK`).
    pub fn bound(fd: BorrowedFd<'_>) -> io::Result<Option<(u32, u16)>> {
        let int = |name, call| -> io::Result<libc::c_int> {
            socket::getsockopt(fd, libc::SOL_SOCKET, name, call)
        };
        let domain = int(libc::SO_DOMAIN, "getsockopt(SO_DOMAIN)")?;
        let kind = int(libc::SO_TYPE, "getsockopt(SO_TYPE)")?;
        if domain != libc::AF_PACKET || kind != libc::SOCK_RAW {
            return Ok(None);
        }
        let mut addr = zeroed_sockaddr_ll();
        let mut len = size_of::<libc::sockaddr_ll>() as libc::socklen_t;
        // SAFETY: `addr` is a `sockaddr_ll`, writable for `len` bytes (its size, passed in
        // `len`); the kernel writes at most that many and updates `len`.
        let ret =
            unsafe { libc::getsockname(fd.as_raw_fd(), ptr::from_mut(&mut addr).cast(), &mut len) };
        error::check(ret, "getsockname(AF_PACKET)", None)?;
        let ifindex = u32::try_from(addr.sll_ifindex).unwrap_or(0);
        Ok(Some((ifindex, u16::from_be(addr.sll_protocol))))
    }

    /// Takes over `fd`, a packet socket an earlier lagd opened with [`PacketSocket::bind`] and
    /// handed over (a service manager's descriptor store, a planned upgrade), if it is what
    /// `bind(ifindex, options)` would open: an `AF_PACKET` `SOCK_RAW` socket bound to interface
    /// `ifindex` and `options.protocol`, with the same `PACKET_VNET_HDR`,
    /// `PACKET_IGNORE_OUTGOING` and `PACKET_QDISC_BYPASS` settings and in no fanout group. The
    /// frames queued on it meanwhile are read as any other. Its buffer sizes, priority and
    /// non-blocking mode are set as `bind` sets them; a socket filter it carries stays until
    /// the caller attaches its own (which replaces it in one step). Memberships it holds stay
    /// (adding one again only counts it once more; all go when the socket closes).
    ///
    /// # Errors
    ///
    /// [`io::ErrorKind::InvalidData`] naming the first difference (the descriptor is closed),
    /// or the failing `getsockopt`/`getsockname`/`setsockopt`.
    pub fn adopt(fd: OwnedFd, ifindex: u32, options: PacketOptions) -> io::Result<Self> {
        let differs = |what: String| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("the passed packet socket {what}"),
            )
        };
        let int = |level, name, call| -> io::Result<libc::c_int> {
            socket::getsockopt(fd.as_fd(), level, name, call)
        };
        let (bound, protocol) = Self::bound(fd.as_fd())?
            .ok_or_else(|| differs("is not an AF_PACKET raw socket".into()))?;
        if bound != ifindex || protocol != options.protocol {
            return Err(differs(format!(
                "is bound to ifindex {bound}, protocol 0x{protocol:04x} (wanted {ifindex}, \
                 0x{:04x})",
                options.protocol
            )));
        }
        let flags = [
            (libc::PACKET_VNET_HDR, options.vnet_hdr, "PACKET_VNET_HDR"),
            (
                libc::PACKET_IGNORE_OUTGOING,
                options.ignore_outgoing,
                "PACKET_IGNORE_OUTGOING",
            ),
            (
                libc::PACKET_QDISC_BYPASS,
                options.qdisc_bypass,
                "PACKET_QDISC_BYPASS",
            ),
        ];
        for (name, want, what) in flags {
            let has = int(libc::SOL_PACKET, name, "getsockopt(SOL_PACKET)")? != 0;
            if has != want {
                return Err(differs(format!("has {what} {has} (wanted {want})")));
            }
        }
        let fanout = int(
            libc::SOL_PACKET,
            libc::PACKET_FANOUT,
            "getsockopt(PACKET_FANOUT)",
        )?;
        if fanout != 0 {
            return Err(differs(format!("is in fanout group 0x{fanout:x}")));
        }
        socket::set_nonblocking(fd.as_fd())?;
        if let Some(bytes) = options.rcvbuf {
            socket::set_buffer(fd.as_fd(), true, bytes)?;
        }
        if let Some(bytes) = options.sndbuf {
            socket::set_buffer(fd.as_fd(), false, bytes)?;
        }
        let priority = libc::c_int::try_from(options.priority.unwrap_or(0)).map_err(|_| {
            io::Error::new(io::ErrorKind::InvalidInput, "socket priority out of range")
        })?;
        socket::setsockopt(
            fd.as_fd(),
            libc::SOL_SOCKET,
            libc::SO_PRIORITY,
            &priority,
            "setsockopt(SO_PRIORITY)",
        )?;
        Ok(Self {
            fd,
            ifindex,
            options,
        })
    }

    /// Opens a socket bound to the interface called `name` (looked up with [`link::ifindex`]).
    pub fn bind_name(name: &str, options: PacketOptions) -> io::Result<Self> {
        Self::bind(link::ifindex(name)?, options)
    }

    /// Receives one frame into `buf` and returns its length (header included with `vnet_hdr`).
    /// A frame longer than `buf` is truncated silently; use [`PacketSocket::recv_from`] to learn
    /// about truncation.
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        // SAFETY: `buf` is valid for writes of `buf.len()` bytes for the duration of the call.
        let n = unsafe { libc::recv(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
        usize::try_from(n).map_err(|_| io::Error::last_os_error())
    }

    /// Receives one frame into `buf` and returns its length, direction and protocol.
    pub fn recv_from(&self, buf: &mut [u8]) -> io::Result<RecvMeta> {
        let mut meta = [RecvMeta::default()];
        let mut bufs = [IoSliceMut::new(buf)];
        self.recv_batch(&mut bufs, &mut meta)?;
        Ok(meta[0])
    }

    /// Receives up to `min(bufs.len(), meta.len(), BATCH_MAX)` frames with one `recvmmsg`,
    /// frame `i` into `bufs[i]` and its description into `meta[i]`. Returns how many arrived
    /// (at least one), or [`io::ErrorKind::WouldBlock`] if none was queued.
    pub fn recv_batch(
        &self,
        bufs: &mut [IoSliceMut<'_>],
        meta: &mut [RecvMeta],
    ) -> io::Result<usize> {
        let count = bufs.len().min(meta.len()).min(BATCH_MAX);
        if count == 0 {
            return Ok(0);
        }
        let mut addrs = [const { MaybeUninit::<libc::sockaddr_ll>::uninit() }; BATCH_MAX];
        let mut msgs = [const { MaybeUninit::<libc::mmsghdr>::uninit() }; BATCH_MAX];
        let iovs = bufs.as_mut_ptr();
        for i in 0..count {
            let addr = addrs[i].write(zeroed_sockaddr_ll());
            msgs[i].write(libc::mmsghdr {
                msg_hdr: libc::msghdr {
                    msg_name: ptr::from_mut(addr).cast(),
                    msg_namelen: size_of::<libc::sockaddr_ll>() as libc::socklen_t,
                    // `IoSliceMut` is ABI-compatible with `struct iovec` (documented by std).
                    msg_iov: iovs.wrapping_add(i).cast(),
                    msg_iovlen: 1,
                    msg_control: ptr::null_mut(),
                    msg_controllen: 0,
                    msg_flags: 0,
                },
                msg_len: 0,
            });
        }
        // SAFETY: the first `count` entries of `msgs` are initialised; each points at one live,
        // exclusively borrowed iovec (an `IoSliceMut`, ABI-compatible with iovec) and at one
        // initialised `sockaddr_ll` in `addrs` with its true size. Both arrays outlive the call
        // and nothing else accesses them during it. A null timeout is allowed.
        let ret = unsafe {
            libc::recvmmsg(
                self.fd.as_raw_fd(),
                msgs.as_mut_ptr().cast(),
                count as libc::c_uint,
                0,
                ptr::null_mut(),
            )
        };
        let received = usize::try_from(ret).map_err(|_| io::Error::last_os_error())?;
        for i in 0..received.min(count) {
            // SAFETY: entries below `count` were initialised above; the kernel only updated
            // integer fields of them.
            let msg = unsafe { msgs[i].assume_init_ref() };
            // SAFETY: as above, `addrs[i]` was initialised and the kernel wrote plain bytes.
            let addr = unsafe { addrs[i].assume_init_ref() };
            meta[i] = RecvMeta {
                len: msg.msg_len as usize,
                truncated: msg.msg_hdr.msg_flags & libc::MSG_TRUNC != 0,
                pkttype: PacketType::from(addr.sll_pkttype),
                protocol: u16::from_be(addr.sll_protocol),
            };
        }
        Ok(received)
    }

    /// Sends one frame (starting with its `virtio_net_hdr` with `vnet_hdr`). Returns the bytes
    /// sent, which is all of them. See the module docs for [`io::ErrorKind::WouldBlock`].
    pub fn send(&self, frame: &[u8]) -> io::Result<usize> {
        // SAFETY: `frame` is valid for reads of `frame.len()` bytes for the duration of the call.
        let n = unsafe { libc::send(self.fd.as_raw_fd(), frame.as_ptr().cast(), frame.len(), 0) };
        usize::try_from(n).map_err(|_| send_error())
    }

    /// Sends up to `min(frames.len(), BATCH_MAX)` frames with one `sendmmsg`, in order, and
    /// returns how many were sent (at least one). If fewer than asked were sent, the first unsent
    /// frame hit an error that the kernel does not report; call again from that frame on to see
    /// it. [`io::ErrorKind::WouldBlock`] if not even the first one could go.
    pub fn send_batch(&self, frames: &[IoSlice<'_>]) -> io::Result<usize> {
        let count = frames.len().min(BATCH_MAX);
        if count == 0 {
            return Ok(0);
        }
        let mut msgs = [const { MaybeUninit::<libc::mmsghdr>::uninit() }; BATCH_MAX];
        for (msg, frame) in msgs.iter_mut().zip(frames) {
            msg.write(libc::mmsghdr {
                msg_hdr: libc::msghdr {
                    msg_name: ptr::null_mut(),
                    msg_namelen: 0,
                    // The kernel never writes through msg_iov for sendmmsg; the cast to *mut only
                    // satisfies the C type. `IoSlice` is ABI-compatible with `struct iovec`.
                    msg_iov: ptr::from_ref(frame).cast_mut().cast(),
                    msg_iovlen: 1,
                    msg_control: ptr::null_mut(),
                    msg_controllen: 0,
                    msg_flags: 0,
                },
                msg_len: 0,
            });
        }
        // SAFETY: the first `count` entries of `msgs` are initialised, each with one iovec that
        // describes a live buffer borrowed from `frames` for the duration of the call; sendmmsg
        // reads the buffers and writes only `msg_len` in `msgs`, which is ours.
        let ret = unsafe {
            libc::sendmmsg(
                self.fd.as_raw_fd(),
                msgs.as_mut_ptr().cast(),
                count as libc::c_uint,
                0,
            )
        };
        usize::try_from(ret).map_err(|_| send_error())
    }

    /// Attaches a classic BPF socket filter that drops, in the kernel, every frame whose
    /// EtherType (the two bytes at offset 12; a VLAN tag the NIC stripped is not seen) is
    /// `ethertype`, and passes the rest whole. lagd's data sockets use it so that the
    /// slow-protocols frames read on their own socket are not copied to the data socket too.
    pub fn exclude_ethertype(&self, ethertype: u16) -> io::Result<()> {
        let mut program = [
            // ldh [12]
            bpf(libc::BPF_LD | libc::BPF_H | libc::BPF_ABS, 0, 0, 12),
            // jeq #ethertype, next, skip one
            bpf(
                libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K,
                0,
                1,
                u32::from(ethertype),
            ),
            // ret #0: drop
            bpf(libc::BPF_RET | libc::BPF_K, 0, 0, 0),
            // ret #-1: the whole frame
            bpf(libc::BPF_RET | libc::BPF_K, 0, 0, u32::MAX),
        ];
        self.attach_filter(&mut program)
    }

    /// Attaches (or replaces) a classic BPF socket filter that passes only the frames whose
    /// source MAC is `src` (`only`), or every frame but those (`!only`), whole. lagd reads a
    /// LACP partner's slow-protocol frames on a socket of their own this way, so a flood from
    /// other addresses cannot fill the queue they wait in. `None` with `only` passes nothing,
    /// with `!only` everything.
    pub fn filter_source(&self, src: Option<[u8; 6]>, only: bool) -> io::Result<()> {
        let (hit, miss) = if only { (u32::MAX, 0) } else { (0, u32::MAX) };
        let Some(mac) = src else {
            let mut program = [bpf(libc::BPF_RET | libc::BPF_K, 0, 0, miss)];
            return self.attach_filter(&mut program);
        };
        let high = u32::from_be_bytes([mac[0], mac[1], mac[2], mac[3]]);
        let low = u32::from(u16::from_be_bytes([mac[4], mac[5]]));
        let mut program = [
            // ld [6]: the source MAC's first four bytes
            bpf(libc::BPF_LD | libc::BPF_W | libc::BPF_ABS, 0, 0, 6),
            // jeq #high, next, to the miss
            bpf(libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K, 0, 2, high),
            // ldh [10]: its last two
            bpf(libc::BPF_LD | libc::BPF_H | libc::BPF_ABS, 0, 0, 10),
            // jeq #low, to the hit, to the miss
            bpf(libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K, 1, 0, low),
            bpf(libc::BPF_RET | libc::BPF_K, 0, 0, miss),
            bpf(libc::BPF_RET | libc::BPF_K, 0, 0, hit),
        ];
        self.attach_filter(&mut program)
    }

    /// Removes the socket filter, if any (`SO_DETACH_FILTER`): every frame of the bound
    /// protocol is received again, as on a socket just opened.
    pub fn detach_filter(&self) -> io::Result<()> {
        let zero: libc::c_int = 0;
        match socket::setsockopt(
            self.fd.as_fd(),
            libc::SOL_SOCKET,
            libc::SO_DETACH_FILTER,
            &zero,
            "setsockopt(SO_DETACH_FILTER)",
        ) {
            // ENOENT: there was none.
            Err(e) if error::errno(&e) == Some(libc::ENOENT) => Ok(()),
            other => other,
        }
    }

    fn attach_filter(&self, program: &mut [libc::sock_filter]) -> io::Result<()> {
        let fprog = libc::sock_fprog {
            len: program.len() as libc::c_ushort,
            filter: program.as_mut_ptr(),
        };
        // SAFETY: `fprog` is a valid `sock_fprog` whose `filter` points at `len` initialised
        // `sock_filter` instructions that live until the call returns; the kernel copies the
        // program and keeps no pointer to it. The length passed is the size of `fprog`.
        let ret = unsafe {
            libc::setsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_ATTACH_FILTER,
                ptr::from_ref(&fprog).cast(),
                size_of::<libc::sock_fprog>() as libc::socklen_t,
            )
        };
        error::check(ret, "setsockopt(SO_ATTACH_FILTER)", None).map(drop)
    }

    /// Reads and resets the `PACKET_STATISTICS` counters.
    pub fn statistics(&self) -> io::Result<PacketStats> {
        let stats: libc::tpacket_stats = socket::getsockopt(
            self.fd.as_fd(),
            libc::SOL_PACKET,
            libc::PACKET_STATISTICS,
            "getsockopt(PACKET_STATISTICS)",
        )?;
        Ok(PacketStats {
            packets: stats.tp_packets,
            drops: stats.tp_drops,
        })
    }

    /// Adds a link-layer filter to the bound interface for as long as this socket lives.
    pub fn add_membership(&self, membership: Membership) -> io::Result<()> {
        let mreq = self.mreq(membership)?;
        self.set_option(
            libc::PACKET_ADD_MEMBERSHIP,
            &mreq,
            "setsockopt(PACKET_ADD_MEMBERSHIP)",
        )
    }

    /// Removes a filter added with [`PacketSocket::add_membership`].
    pub fn drop_membership(&self, membership: Membership) -> io::Result<()> {
        let mreq = self.mreq(membership)?;
        self.set_option(
            libc::PACKET_DROP_MEMBERSHIP,
            &mreq,
            "setsockopt(PACKET_DROP_MEMBERSHIP)",
        )
    }

    fn mreq(&self, membership: Membership) -> io::Result<libc::packet_mreq> {
        let (kind, addr) = match membership {
            Membership::Promisc => (libc::PACKET_MR_PROMISC, None),
            Membership::AllMulti => (libc::PACKET_MR_ALLMULTI, None),
            Membership::Multicast(mac) => (libc::PACKET_MR_MULTICAST, Some(mac)),
            Membership::Unicast(mac) => (PACKET_MR_UNICAST, Some(mac)),
        };
        let mut mreq = libc::packet_mreq {
            mr_ifindex: libc::c_int::try_from(self.ifindex).map_err(|_| {
                io::Error::new(io::ErrorKind::InvalidInput, "interface index out of range")
            })?,
            mr_type: kind as libc::c_ushort,
            mr_alen: 0,
            mr_address: [0; 8],
        };
        if let Some(mac) = addr {
            mreq.mr_alen = 6;
            mreq.mr_address[..6].copy_from_slice(&mac);
        }
        Ok(mreq)
    }

    fn set_option<T: PlainData>(
        &self,
        name: libc::c_int,
        value: &T,
        call: &'static str,
    ) -> io::Result<()> {
        socket::setsockopt(self.fd.as_fd(), libc::SOL_PACKET, name, value, call)
    }

    /// The socket's `SO_PRIORITY`, as the kernel holds it.
    pub fn priority(&self) -> io::Result<u32> {
        let value: libc::c_int = socket::getsockopt(
            self.fd.as_fd(),
            libc::SOL_SOCKET,
            libc::SO_PRIORITY,
            "getsockopt(SO_PRIORITY)",
        )?;
        u32::try_from(value).map_err(|_| io::Error::other("negative socket priority"))
    }

    /// The interface this socket is bound to.
    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }

    /// The options this socket was opened with.
    pub fn options(&self) -> PacketOptions {
        self.options
    }

    /// Bytes of `virtio_net_hdr` before each frame: 10 or 0.
    pub fn vnet_hdr_len(&self) -> usize {
        if self.options.vnet_hdr {
            VirtioNetHdr::LEN
        } else {
            0
        }
    }
}

impl AsFd for PacketSocket {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// One classic BPF instruction.
fn bpf(code: u32, jt: u8, jf: u8, k: u32) -> libc::sock_filter {
    libc::sock_filter {
        code: code as u16,
        jt,
        jf,
        k,
    }
}

fn zeroed_sockaddr_ll() -> libc::sockaddr_ll {
    libc::sockaddr_ll {
        sll_family: 0,
        sll_protocol: 0,
        sll_ifindex: 0,
        sll_hatype: 0,
        sll_pkttype: 0,
        sll_halen: 0,
        sll_addr: [0; 8],
    }
}

/// The error of a failed send: `ENOBUFS` (the device queue dropped the frame) becomes
/// `WouldBlock` so that callers treat it as back-pressure; the rest stay as they are.
fn send_error() -> io::Error {
    let err = io::Error::last_os_error();
    if err.raw_os_error() == Some(libc::ENOBUFS) {
        io::ErrorKind::WouldBlock.into()
    } else {
        err
    }
}

#[cfg(test)]
mod test {
    use super::*;

    /// Needs `CAP_NET_RAW` (root), as every `AF_PACKET` socket; uses the loopback interface of
    /// the namespace it runs in and sends nothing.
    #[test]
    fn priority_reaches_the_socket() {
        let lo = link::ifindex("lo").expect("loopback interface");
        let control = PacketSocket::bind(
            lo,
            PacketOptions {
                protocol: ETH_P_SLOW,
                priority: Some(TC_PRIO_CONTROL),
                ..PacketOptions::default()
            },
        )
        .expect("AF_PACKET socket (needs root)");
        assert_eq!(control.priority().unwrap(), TC_PRIO_CONTROL);
        assert_eq!(control.options().priority, Some(TC_PRIO_CONTROL));
        let plain = PacketSocket::bind(lo, PacketOptions::default()).unwrap();
        assert_eq!(plain.priority().unwrap(), 0);
        let e = PacketSocket::bind(
            lo,
            PacketOptions {
                priority: Some(u32::MAX),
                ..PacketOptions::default()
            },
        )
        .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    }

    /// Needs root, as above. Sends two frames on the loopback interface (seen by every packet
    /// socket on it; nothing else listens for these EtherTypes) and reads them back.
    #[test]
    fn excluded_ethertype_never_reaches_the_socket() {
        let lo = link::ifindex("lo").expect("loopback interface");
        let rx = PacketSocket::bind(lo, PacketOptions::default())
            .expect("AF_PACKET socket (needs root)");
        rx.exclude_ethertype(ETH_P_SLOW).unwrap();
        let tx = PacketSocket::bind(lo, PacketOptions::default()).unwrap();
        // A tag in the payload tells our frames from anything else on lo.
        let tag = std::process::id().to_be_bytes();
        let frame = |ethertype: u16| {
            let mut f = vec![0u8; 60];
            f[0..6].copy_from_slice(&[0x01, 0x80, 0xc2, 0, 0, 2]);
            f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 1]);
            f[12..14].copy_from_slice(&ethertype.to_be_bytes());
            f[20..24].copy_from_slice(&tag);
            f
        };
        tx.send(&frame(ETH_P_SLOW)).unwrap();
        tx.send(&frame(0x88b5)).unwrap();
        let mut seen = Vec::new();
        let mut buf = [0u8; 2048];
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while !seen.contains(&0x88b5) && std::time::Instant::now() < deadline {
            match rx.recv(&mut buf) {
                Ok(n) if n >= 24 && buf[20..24] == tag => {
                    seen.push(u16::from_be_bytes([buf[12], buf[13]]));
                }
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
                Err(e) => panic!("recv: {e}"),
            }
        }
        assert!(seen.contains(&0x88b5), "the other frame passes: {seen:x?}");
        assert!(
            !seen.contains(&ETH_P_SLOW),
            "slow protocols dropped: {seen:x?}"
        );
    }

    /// Needs root, as above. Three sockets on the loopback interface: one passing only source
    /// A, one passing everything but A, one passing nothing yet; frames from A and from B.
    #[test]
    fn source_filters_split_a_partner_from_everyone_else() {
        let lo = link::ifindex("lo").expect("loopback interface");
        let a = [0x02, 0x5a, 0, 0, 0, 0x0a];
        let b = [0x02, 0x5a, 0, 0, 0, 0x0b];
        let open = || {
            PacketSocket::bind(
                lo,
                PacketOptions {
                    protocol: 0x88b6,
                    ..PacketOptions::default()
                },
            )
            .expect("AF_PACKET socket (needs root)")
        };
        let (only, except, none) = (open(), open(), open());
        only.filter_source(Some(a), true).unwrap();
        except.filter_source(Some(a), false).unwrap();
        none.filter_source(None, true).unwrap();
        let tx = PacketSocket::bind(lo, PacketOptions::default()).unwrap();
        let tag = std::process::id().to_be_bytes();
        for src in [a, b, a, b] {
            let mut f = vec![0u8; 60];
            f[0..6].copy_from_slice(&[0x01, 0x80, 0xc2, 0, 0, 2]);
            f[6..12].copy_from_slice(&src);
            f[12..14].copy_from_slice(&0x88b6u16.to_be_bytes());
            f[20..24].copy_from_slice(&tag);
            tx.send(&f).unwrap();
        }
        let read = |s: &PacketSocket, want: usize| {
            let mut seen = Vec::new();
            let mut buf = [0u8; 2048];
            let deadline = std::time::Instant::now() + std::time::Duration::from_millis(500);
            while std::time::Instant::now() < deadline && seen.len() <= want {
                match s.recv(&mut buf) {
                    Ok(n) if n >= 24 && buf[20..24] == tag => seen.push(buf[11]),
                    Ok(_) => {}
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        std::thread::sleep(std::time::Duration::from_millis(5));
                    }
                    Err(e) => panic!("recv: {e}"),
                }
            }
            seen
        };
        assert_eq!(read(&only, 2), [0x0a, 0x0a], "only A");
        assert_eq!(read(&except, 2), [0x0b, 0x0b], "everyone but A");
        assert_eq!(read(&none, 0), Vec::<u8>::new(), "nothing");
        // Replaced: the partner changed to B.
        except.filter_source(Some(b), false).unwrap();
        let mut f = vec![0u8; 60];
        f[6..12].copy_from_slice(&a);
        f[12..14].copy_from_slice(&0x88b6u16.to_be_bytes());
        f[20..24].copy_from_slice(&tag);
        tx.send(&f).unwrap();
        assert_eq!(read(&except, 1), [0x0a], "A passes once B is the partner");
    }
}
