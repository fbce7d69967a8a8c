//! Interface facts and control: index, name, MAC, MTU, up/down, promiscuity, carrier, speed.
//!
//! Everything here works on the network namespace the calling thread was in when the control
//! sockets were made: the free functions make them per call (so they follow the calling
//! thread), a [`LinkControl`] keeps them (so it can poll carrier hundreds of times a second from
//! any thread, about the namespace it was created in).
//!
//! # Carrier
//!
//! [`LinkControl::carrier`] reads the kernel's carrier bit directly (`ETHTOOL_GLINK`, falling back
//! to an `RTM_GETLINK` query for drivers without it), so it sees a change at once. Link events
//! from rtnetlink ([`LinkEvents`]) are cheaper to wait for but measured to arrive up to about one
//! second late for carrier loss on TAP, physical NICs and veth pairs whose ends share an ifindex
//! (the kernel's linkwatch rate limit). Poll carrier as the primary detector and use
//! [`LinkEvents`] as the fast path and for everything else (renames, deletions).
//!
//! # Namespaces and sysfs
//!
//! Nothing here reads `/sys/class/net`: sysfs shows the namespace it was mounted in, not the
//! calling thread's, which would be wrong inside [`crate::netns`] threads.

use std::io;
use std::mem;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::ptr;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::error;
use crate::ifreq::{IfIoctl, IfReq, ioctl};
use crate::socket;

/// Link speed and duplex as the driver reports them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SpeedDuplex {
    /// Megabits per second; `None` when the driver does not know (link down, virtual device).
    pub speed_mbps: Option<u32>,
    /// Duplex mode.
    pub duplex: Duplex,
}

/// Duplex mode of a link.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Duplex {
    /// Half duplex.
    Half,
    /// Full duplex.
    Full,
    /// The driver does not know or reports something else.
    Unknown,
}

impl Duplex {
    fn from_raw(raw: u8) -> Self {
        match raw {
            0 => Self::Half,
            1 => Self::Full,
            _ => Self::Unknown,
        }
    }
}

const ETHTOOL_GSET: u32 = 0x0000_0001;
const ETHTOOL_GLINK: u32 = 0x0000_000a;
const ETHTOOL_GPERMADDR: u32 = 0x0000_0020;
const ETHTOOL_GLINKSETTINGS: u32 = 0x0000_004c;
/// `MAX_ADDR_LEN`: the longest hardware address the kernel stores.
const MAX_ADDR_LEN: u32 = 32;
/// `struct ethtool_link_settings` without its trailing link mode masks, in `u32` words.
const LINK_SETTINGS_HEADER_WORDS: usize = 12;
/// `link_mode_masks_nwords` is an `s8`, so the kernel never asks for more than 127 words per
/// mask, and there are three masks.
const ETHTOOL_BUF_WORDS: usize = LINK_SETTINGS_HEADER_WORDS + 3 * 127;

/// A buffer large enough for the reply to every [`EthtoolCmd`].
type EthtoolBuf = [u32; ETHTOOL_BUF_WORDS];

/// The ethtool commands lagd issues. Each one's reply fits in an [`EthtoolBuf`], which is what
/// makes [`LinkControl::ethtool`] sound.
#[derive(Clone, Copy, Debug)]
enum EthtoolCmd {
    /// `struct ethtool_value`, 8 bytes.
    Link,
    /// `struct ethtool_perm_addr` with `size` = 32: at most 8 + 32 bytes.
    PermAddr,
    /// `struct ethtool_cmd`, 44 bytes.
    Settings,
    /// `struct ethtool_link_settings` plus 3 × `nwords` mask words: at most 48 + 1524 bytes.
    LinkSettings { nwords: i8 },
}

/// A control socket for interface ioctls, made in the calling thread's network namespace and
/// acting on that namespace from whichever thread uses it afterwards.
#[derive(Debug)]
pub struct LinkControl {
    fd: OwnedFd,
    /// An rtnetlink socket from the same namespace, for [`LinkControl::state`]; one query at a
    /// time so that answers cannot go to the wrong caller.
    route: Mutex<RouteQuery>,
}

impl LinkControl {
    /// Opens the control sockets (an `AF_INET` socket for ioctls and an rtnetlink socket) in the
    /// calling thread's network namespace.
    pub fn new() -> io::Result<Self> {
        let fd = socket::socket(libc::AF_INET, libc::SOCK_DGRAM, 0)?;
        let route = Mutex::new(RouteQuery::new()?);
        Ok(Self { fd, route })
    }

    /// The state of interface `name` as rtnetlink reports it now (`RTM_GETLINK`): index, up,
    /// carrier. Like [`LinkControl::carrier`] it reads the current state, not a queued event.
    pub fn state(&self, name: &str) -> io::Result<LinkState> {
        let index = self.ifindex(name)?;
        let mut route = self.route.lock().unwrap_or_else(PoisonError::into_inner);
        route.get(index)
    }

    fn ifreq(&self, op: IfIoctl, name: &str) -> io::Result<IfReq> {
        let mut req = IfReq::with_name(name, false)?;
        ioctl(self.fd.as_fd(), op, &mut req, name)?;
        Ok(req)
    }

    /// The index of interface `name` (`SIOCGIFINDEX`).
    pub fn ifindex(&self, name: &str) -> io::Result<u32> {
        let index = self.ifreq(IfIoctl::GetIndex, name)?.index();
        u32::try_from(index).map_err(|_| io::Error::other("kernel returned a negative ifindex"))
    }

    /// The name of interface `index` (`SIOCGIFNAME`).
    pub fn name_of(&self, index: u32) -> io::Result<String> {
        let mut req = IfReq::with_index(index)?;
        ioctl(
            self.fd.as_fd(),
            IfIoctl::GetName,
            &mut req,
            &format!("ifindex {index}"),
        )?;
        Ok(req.name())
    }

    /// The current MAC address (`SIOCGIFHWADDR`). Fails with `InvalidData` for interfaces that
    /// are not Ethernet-like.
    pub fn mac(&self, name: &str) -> io::Result<[u8; 6]> {
        let (family, mac) = self.ifreq(IfIoctl::GetHwAddr, name)?.hwaddr();
        if family != libc::ARPHRD_ETHER {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{name} has hardware type {family}, not Ethernet"),
            ));
        }
        Ok(mac)
    }

    /// The burned-in MAC address (`ETHTOOL_GPERMADDR`), or the current one for devices that
    /// have none (veth, TAP and other virtual devices report all zeroes, or nothing).
    pub fn permanent_mac(&self, name: &str) -> io::Result<[u8; 6]> {
        let mut buf: EthtoolBuf = [0; ETHTOOL_BUF_WORDS];
        match self.ethtool(name, EthtoolCmd::PermAddr, &mut buf) {
            Ok(()) => {}
            Err(e) if error::errno(&e) == Some(libc::EOPNOTSUPP) => return self.mac(name),
            Err(e) => return Err(e),
        }
        let size = buf[1];
        let bytes: Vec<u8> = buf[2..].iter().flat_map(|w| w.to_ne_bytes()).collect();
        let mut mac = [0u8; 6];
        mac.copy_from_slice(&bytes[..6]);
        if size != 6 || mac == [0; 6] {
            return self.mac(name);
        }
        Ok(mac)
    }

    /// Sets the MAC address (`SIOCSIFHWADDR`). Many drivers refuse (`EBUSY`) while the interface
    /// is up; set it down first.
    pub fn set_mac(&self, name: &str, mac: [u8; 6]) -> io::Result<()> {
        let mut req = IfReq::with_name(name, false)?;
        req.set_hwaddr(mac);
        ioctl(self.fd.as_fd(), IfIoctl::SetHwAddr, &mut req, name)
    }

    /// The MTU (`SIOCGIFMTU`).
    pub fn mtu(&self, name: &str) -> io::Result<u32> {
        let mtu = self.ifreq(IfIoctl::GetMtu, name)?.mtu();
        u32::try_from(mtu).map_err(|_| io::Error::other("kernel returned a negative MTU"))
    }

    /// Sets the MTU (`SIOCSIFMTU`).
    pub fn set_mtu(&self, name: &str, mtu: u32) -> io::Result<()> {
        let mtu = libc::c_int::try_from(mtu)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "MTU out of range"))?;
        let mut req = IfReq::with_name(name, false)?;
        req.set_mtu(mtu);
        ioctl(self.fd.as_fd(), IfIoctl::SetMtu, &mut req, name)
    }

    fn flags(&self, name: &str) -> io::Result<u32> {
        Ok(self.ifreq(IfIoctl::GetFlags, name)?.flags())
    }

    fn update_flags(&self, name: &str, flag: u32, on: bool) -> io::Result<()> {
        let mut req = self.ifreq(IfIoctl::GetFlags, name)?;
        let old = req.flags();
        let new = if on { old | flag } else { old & !flag };
        if new == old {
            return Ok(());
        }
        req.set_flags(new);
        ioctl(self.fd.as_fd(), IfIoctl::SetFlags, &mut req, name)
    }

    /// Whether the interface is administratively up (`IFF_UP`).
    pub fn is_up(&self, name: &str) -> io::Result<bool> {
        Ok(self.flags(name)? & libc::IFF_UP as u32 != 0)
    }

    /// Sets the interface administratively up or down (`IFF_UP` through `SIOCSIFFLAGS`).
    pub fn set_up(&self, name: &str, up: bool) -> io::Result<()> {
        self.update_flags(name, libc::IFF_UP as u32, up)
    }

    /// Sets or clears the user-visible `IFF_PROMISC` flag. This flag is not released if lagd
    /// dies; prefer [`Membership::Promisc`](crate::packet::Membership::Promisc) on the member's
    /// packet socket, which is.
    pub fn set_promisc(&self, name: &str, on: bool) -> io::Result<()> {
        self.update_flags(name, libc::IFF_PROMISC as u32, on)
    }

    /// Whether the interface can pass frames now: administratively up and carrier on. Reads the
    /// kernel's state directly (`ETHTOOL_GLINK`, or `RTM_GETLINK` for drivers without it), so a
    /// change is visible immediately, unlike [`LinkEvents`].
    pub fn carrier(&self, name: &str) -> io::Result<bool> {
        let mut buf: EthtoolBuf = [0; ETHTOOL_BUF_WORDS];
        match self.ethtool(name, EthtoolCmd::Link, &mut buf) {
            Ok(()) => Ok(buf[1] != 0),
            Err(e) if error::errno(&e) == Some(libc::EOPNOTSUPP) => {
                let state = self.state(name)?;
                Ok(state.up && state.carrier)
            }
            Err(e) => Err(e),
        }
    }

    /// Speed and duplex (`ETHTOOL_GLINKSETTINGS`, or `ETHTOOL_GSET` on kernels without it).
    /// veth and TAP report 10 000 Mb/s full duplex (measured on Linux 6.18).
    pub fn speed_duplex(&self, name: &str) -> io::Result<SpeedDuplex> {
        let mut buf: EthtoolBuf = [0; ETHTOOL_BUF_WORDS];
        // Handshake: ask with zero mask words; the kernel answers with the count it wants,
        // negated.
        match self.ethtool(name, EthtoolCmd::LinkSettings { nwords: 0 }, &mut buf) {
            Ok(()) => {}
            Err(e) if error::errno(&e) == Some(libc::EOPNOTSUPP) => {
                return self.speed_duplex_legacy(name);
            }
            Err(e) => return Err(e),
        }
        let wanted = link_settings_nwords(&buf);
        let nwords = match wanted.checked_neg() {
            Some(n) if n > 0 => n,
            _ => {
                return Err(io::Error::other(
                    "ETHTOOL_GLINKSETTINGS handshake: unexpected reply",
                ));
            }
        };
        buf = [0; ETHTOOL_BUF_WORDS];
        self.ethtool(name, EthtoolCmd::LinkSettings { nwords }, &mut buf)?;
        if link_settings_nwords(&buf) != nwords {
            return Err(io::Error::other(
                "ETHTOOL_GLINKSETTINGS handshake: kernel changed its mind",
            ));
        }
        let duplex = buf[2].to_ne_bytes()[0];
        Ok(SpeedDuplex {
            speed_mbps: known_speed(buf[1]),
            duplex: Duplex::from_raw(duplex),
        })
    }

    fn speed_duplex_legacy(&self, name: &str) -> io::Result<SpeedDuplex> {
        let mut buf: EthtoolBuf = [0; ETHTOOL_BUF_WORDS];
        self.ethtool(name, EthtoolCmd::Settings, &mut buf)?;
        // struct ethtool_cmd: speed (u16) at byte 12, duplex (u8) at 14, speed_hi (u16) at 28.
        let w3 = buf[3].to_ne_bytes();
        let w7 = buf[7].to_ne_bytes();
        let speed = u32::from(u16::from_ne_bytes([w3[0], w3[1]]))
            | u32::from(u16::from_ne_bytes([w7[0], w7[1]])) << 16;
        Ok(SpeedDuplex {
            speed_mbps: known_speed(speed),
            duplex: Duplex::from_raw(w3[2]),
        })
    }

    /// Issues an `SIOCETHTOOL` request. The command word (and, for the commands that have one,
    /// the size word) is filled in from `cmd`; the reply is left in `buf`.
    fn ethtool(&self, name: &str, cmd: EthtoolCmd, buf: &mut EthtoolBuf) -> io::Result<()> {
        let call = match cmd {
            EthtoolCmd::Link => {
                buf[0] = ETHTOOL_GLINK;
                "ioctl(SIOCETHTOOL, ETHTOOL_GLINK)"
            }
            EthtoolCmd::PermAddr => {
                buf[0] = ETHTOOL_GPERMADDR;
                buf[1] = MAX_ADDR_LEN;
                "ioctl(SIOCETHTOOL, ETHTOOL_GPERMADDR)"
            }
            EthtoolCmd::Settings => {
                buf[0] = ETHTOOL_GSET;
                "ioctl(SIOCETHTOOL, ETHTOOL_GSET)"
            }
            EthtoolCmd::LinkSettings { nwords } => {
                buf[0] = ETHTOOL_GLINKSETTINGS;
                // link_mode_masks_nwords is the s8 at byte 15 of the header.
                let mut w3 = buf[3].to_ne_bytes();
                w3[3] = nwords as u8;
                buf[3] = u32::from_ne_bytes(w3);
                "ioctl(SIOCETHTOOL, ETHTOOL_GLINKSETTINGS)"
            }
        };
        let mut req = IfReq::with_name(name, false)?;
        req.set_data(buf.as_mut_ptr().cast());
        // SAFETY: `req` is a valid `ifreq` whose `ifr_data` points at `buf`, which is exclusively
        // borrowed for the duration of the call. For every `EthtoolCmd` the kernel reads and writes
        // at most `size_of::<EthtoolBuf>()` bytes there (see the sizes on `EthtoolCmd`: the perm
        // address is bounded by the size word we set, the link settings by the s8 word count), and
        // follows no other pointer.
        let ret = unsafe {
            libc::ioctl(
                self.fd.as_raw_fd(),
                libc::SIOCETHTOOL as libc::Ioctl,
                req.as_mut_ptr(),
            )
        };
        error::check(ret, call, Some(name)).map(drop)
    }
}

fn link_settings_nwords(buf: &EthtoolBuf) -> i8 {
    buf[3].to_ne_bytes()[3] as i8
}

fn known_speed(raw: u32) -> Option<u32> {
    // SPEED_UNKNOWN is (u32)-1; 0 is what some drivers report when they do not know either.
    (raw != 0 && raw != u32::MAX).then_some(raw)
}

/// The index of interface `name` in the calling thread's network namespace.
pub fn ifindex(name: &str) -> io::Result<u32> {
    LinkControl::new()?.ifindex(name)
}

/// The name of interface `index` in the calling thread's network namespace.
pub fn name_of(index: u32) -> io::Result<String> {
    LinkControl::new()?.name_of(index)
}

/// The current MAC address of `name`. See [`LinkControl::mac`].
pub fn mac(name: &str) -> io::Result<[u8; 6]> {
    LinkControl::new()?.mac(name)
}

/// The burned-in MAC address of `name`, or the current one. See [`LinkControl::permanent_mac`].
pub fn permanent_mac(name: &str) -> io::Result<[u8; 6]> {
    LinkControl::new()?.permanent_mac(name)
}

/// Sets the MAC address of `name`. See [`LinkControl::set_mac`].
pub fn set_mac(name: &str, mac: [u8; 6]) -> io::Result<()> {
    LinkControl::new()?.set_mac(name, mac)
}

/// The MTU of `name`.
pub fn mtu(name: &str) -> io::Result<u32> {
    LinkControl::new()?.mtu(name)
}

/// Sets the MTU of `name`.
pub fn set_mtu(name: &str, mtu: u32) -> io::Result<()> {
    LinkControl::new()?.set_mtu(name, mtu)
}

/// Whether `name` is administratively up.
pub fn is_up(name: &str) -> io::Result<bool> {
    LinkControl::new()?.is_up(name)
}

/// Sets `name` administratively up or down.
pub fn set_up(name: &str, up: bool) -> io::Result<()> {
    LinkControl::new()?.set_up(name, up)
}

/// Sets or clears `IFF_PROMISC` on `name`. See [`LinkControl::set_promisc`].
pub fn set_promisc(name: &str, on: bool) -> io::Result<()> {
    LinkControl::new()?.set_promisc(name, on)
}

/// Whether `name` is up with carrier, read immediately. See [`LinkControl::carrier`].
pub fn carrier(name: &str) -> io::Result<bool> {
    LinkControl::new()?.carrier(name)
}

/// The rtnetlink view of `name` now. See [`LinkControl::state`].
pub fn state(name: &str) -> io::Result<LinkState> {
    LinkControl::new()?.state(name)
}

/// Speed and duplex of `name`. See [`LinkControl::speed_duplex`].
pub fn speed_duplex(name: &str) -> io::Result<SpeedDuplex> {
    LinkControl::new()?.speed_duplex(name)
}

// ---------------------------------------------------------------------------------------------
// rtnetlink

/// The state of one interface as rtnetlink describes it (`RTM_NEWLINK`/`RTM_DELLINK`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LinkState {
    /// Interface index.
    pub ifindex: u32,
    /// Interface name (empty if the message carried none).
    pub name: String,
    /// Administratively up (`IFF_UP`).
    pub up: bool,
    /// Carrier as the kernel reports it (`IFLA_CARRIER`, else `IFF_LOWER_UP`). A link passes
    /// frames when `up && carrier`.
    pub carrier: bool,
}

/// What a [`LinkEvents`] socket reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LinkEvent {
    /// An interface appeared or changed (`RTM_NEWLINK`), or a dump reply.
    Changed(LinkState),
    /// An interface was removed (`RTM_DELLINK`); the state is its last one.
    Removed(LinkState),
    /// The kernel dropped events because the socket's buffer was full (`ENOBUFS`). Re-read the
    /// state of every link of interest, for example with [`LinkEvents::request_dump`].
    Overrun,
}

const RECV_BUF_LEN: usize = 64 * 1024;
pub(crate) const NLMSG_HDR_LEN: usize = 16;
const IFINFOMSG_LEN: usize = 16;
const IFLA_IFNAME: u16 = 3;
const IFLA_EXT_MASK: u16 = 29;
const IFLA_CARRIER: u16 = 33;
pub(crate) const NLA_TYPE_MASK: u16 = 0x3fff;
const RTEXT_FILTER_SKIP_STATS: u32 = 1 << 3;

/// An rtnetlink subscriber for link changes in the namespace it was created in
/// (`NETLINK_ROUTE`, group `RTMGRP_LINK`). Non-blocking: register [`AsFd::as_fd`] with a
/// [`Poller`](crate::poll::Poller) and drain with [`LinkEvents::next_event`].
///
/// Carrier loss can arrive about a second late (see the module docs); poll carrier as well.
#[derive(Debug)]
pub struct LinkEvents {
    fd: OwnedFd,
    buf: Vec<u8>,
    /// Bytes of `buf` filled by the last datagram.
    len: usize,
    /// Where the next unparsed message of that datagram starts.
    pos: usize,
    seq: u32,
}

impl LinkEvents {
    /// Subscribes to link events in the calling thread's network namespace.
    pub fn new() -> io::Result<Self> {
        let fd = open_route_socket(libc::RTMGRP_LINK as u32, true)?;
        // Room for bursts (a dump, or many links flapping) so that Overrun stays rare.
        socket::set_buffer(fd.as_fd(), true, 1 << 20)?;
        Ok(Self {
            fd,
            buf: vec![0; RECV_BUF_LEN],
            len: 0,
            pos: 0,
            seq: 0,
        })
    }

    /// Asks the kernel for the state of every link; the answers arrive as
    /// [`LinkEvent::Changed`] through [`LinkEvents::next_event`]. Fails with `EBUSY` while the
    /// previous dump is still being read.
    pub fn request_dump(&mut self) -> io::Result<()> {
        self.seq = self.seq.wrapping_add(1);
        let req = getlink_request(self.seq, 0, true);
        send_all(self.fd.as_fd(), &req)
    }

    /// The next event, or `None` when none is queued. Messages not from the kernel, and
    /// malformed ones, are skipped.
    pub fn next_event(&mut self) -> io::Result<Option<LinkEvent>> {
        loop {
            while let Some((ty, payload)) = next_message(&self.buf[..self.len], &mut self.pos) {
                if let Some(event) = link_event(ty, payload) {
                    return Ok(Some(event));
                }
            }
            self.len = 0;
            self.pos = 0;
            match recv_from_kernel(self.fd.as_fd(), &mut self.buf) {
                Ok(Some(n)) => self.len = n,
                Ok(None) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(None),
                Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => {
                    return Ok(Some(LinkEvent::Overrun));
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
}

impl AsFd for LinkEvents {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// A blocking rtnetlink socket for one-off `RTM_GETLINK` questions.
#[derive(Debug)]
pub(crate) struct RouteQuery {
    fd: OwnedFd,
    seq: u32,
    buf: Vec<u8>,
}

impl RouteQuery {
    const TIMEOUT: Duration = Duration::from_secs(1);

    pub(crate) fn new() -> io::Result<Self> {
        let fd = open_route_socket(0, false)?;
        let timeout = libc::timeval {
            tv_sec: Self::TIMEOUT.as_secs() as libc::time_t,
            tv_usec: 0,
        };
        socket::setsockopt(
            fd.as_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            &timeout,
            "setsockopt(SO_RCVTIMEO)",
        )?;
        Ok(Self {
            fd,
            seq: 0,
            buf: vec![0; RECV_BUF_LEN],
        })
    }

    /// One datagram from the kernel into `buf`: `Ok(None)` when there was none this time (the
    /// receive timeout, an interruption, or a sender other than the kernel).
    fn recv_once(&mut self) -> io::Result<Option<usize>> {
        error::nothing_now(recv_from_kernel(self.fd.as_fd(), &mut self.buf))
            .map(Option::flatten)
            .map_err(|e| error::annotate(e, "recv(NETLINK_ROUTE)", None))
    }

    /// Sends `req`, which carries the sequence number `self.seq`, and reads the kernel's
    /// messages answering it (answers to earlier, abandoned requests are skipped by sequence
    /// number) until `on` returns a result, for at most [`Self::TIMEOUT`]. An `NLMSG_ERROR`
    /// ends the exchange with its error, unless its errno is in `harmless`; that, or an
    /// acknowledgement, reaches `on` as [`Reply::Ack`]. `what` names the request in errors.
    pub(crate) fn exchange<T>(
        &mut self,
        req: &[u8],
        what: &'static str,
        harmless: &[i32],
        mut on: impl FnMut(Reply<'_>) -> Option<T>,
    ) -> io::Result<T> {
        send_all(self.fd.as_fd(), req)?;
        let deadline = Instant::now() + Self::TIMEOUT;
        while Instant::now() < deadline {
            let Some(n) = self.recv_once()? else {
                continue;
            };
            let mut pos = 0;
            while let Some((ty, seq, payload)) = next_message_seq(&self.buf[..n], &mut pos) {
                if seq != self.seq {
                    continue;
                }
                let reply = if ty == libc::NLMSG_ERROR as u16 {
                    let errno = netlink_code(payload).saturating_neg();
                    if errno > 0 && !harmless.contains(&errno) {
                        let os = io::Error::from_raw_os_error(errno);
                        return Err(error::annotate(os, what, None));
                    }
                    Reply::Ack
                } else {
                    Reply::Message(ty, payload)
                };
                if let Some(done) = on(reply) {
                    return Ok(done);
                }
            }
        }
        Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!("{what}: no answer from the kernel"),
        ))
    }

    /// The next request's sequence number.
    pub(crate) fn next_seq(&mut self) -> u32 {
        self.seq = self.seq.wrapping_add(1);
        self.seq
    }

    /// Asks for link `ifindex` and waits for the answer.
    fn get(&mut self, ifindex: u32) -> io::Result<LinkState> {
        let req = getlink_request(self.next_seq(), ifindex, false);
        self.exchange(&req, "RTM_GETLINK", &[], |reply| match reply {
            Reply::Message(ty, payload) => match link_event(ty, payload) {
                Some(LinkEvent::Changed(state)) if state.ifindex == ifindex => Some(state),
                _ => None,
            },
            Reply::Ack => None,
        })
    }
}

/// A message answering a [`RouteQuery`] request.
pub(crate) enum Reply<'a> {
    /// An acknowledgement (an `NLMSG_ERROR` of code 0, or of an errno the caller accepts).
    Ack,
    /// Any other message: its type and payload.
    Message(u16, &'a [u8]),
}

/// `NUD_INCOMPLETE` (include/uapi/linux/neighbour.h): the entry's address is being resolved.
const NUD_INCOMPLETE: u16 = 0x01;
/// `NDA_DST`: the neighbour's network address.
const NDA_DST: u16 = 1;
/// `struct ndmsg`: family, padding, ifindex, state, flags, type.
const NDMSG_LEN: usize = 12;

/// Deletes the neighbour entries (ARP and IPv6 neighbour discovery) of interface `ifindex` that
/// are still being resolved (`NUD_INCOMPLETE`); returns how many it deleted.
///
/// An interface that loses its carrier loses its neighbour entries; a packet sent while it is
/// down creates a new entry whose solicitation is lost, and the next solicitation waits for
/// the retransmit timer (a second by default). Deleted once the carrier is back, the entry is
/// created again by the next packet, which solicits at once.
pub fn flush_incomplete_neighbours(ifindex: u32) -> io::Result<usize> {
    let mut q = RouteQuery::new()?;
    let waiting = q.incomplete_neighbours(ifindex)?;
    for (family, dst) in &waiting {
        q.delete_neighbour(ifindex, *family, dst)?;
    }
    Ok(waiting.len())
}

/// An `RTM_*NEIGH` request: `struct ndmsg` for `family` and `ifindex`, with `NDA_DST` when
/// `dst` is not empty.
fn neigh_request(ty: u16, flags: u16, seq: u32, family: u8, ifindex: u32, dst: &[u8]) -> Vec<u8> {
    let attr = if dst.is_empty() {
        0
    } else {
        align4(4 + dst.len())
    };
    let len = NLMSG_HDR_LEN + NDMSG_LEN + attr;
    let mut msg = vec![0u8; len];
    msg[0..4].copy_from_slice(&(len as u32).to_ne_bytes());
    msg[4..6].copy_from_slice(&ty.to_ne_bytes());
    msg[6..8].copy_from_slice(&flags.to_ne_bytes());
    msg[8..12].copy_from_slice(&seq.to_ne_bytes());
    msg[16] = family;
    msg[20..24].copy_from_slice(&ifindex.to_ne_bytes());
    if attr > 0 {
        let at = NLMSG_HDR_LEN + NDMSG_LEN;
        msg[at..at + 2].copy_from_slice(&((4 + dst.len()) as u16).to_ne_bytes());
        msg[at + 2..at + 4].copy_from_slice(&NDA_DST.to_ne_bytes());
        msg[at + 4..at + 4 + dst.len()].copy_from_slice(dst);
    }
    msg
}

/// An `RTM_NEWNEIGH` payload: (family, ifindex, state, destination address).
fn parse_neigh(payload: &[u8]) -> Option<(u8, u32, u16, &[u8])> {
    let family = *payload.first()?;
    let ifindex = u32_at(payload, 4)?;
    let state = u16_at(payload, 8)?;
    let mut at = NDMSG_LEN;
    while let (Some(len), Some(ty)) = (u16_at(payload, at), u16_at(payload, at + 2)) {
        let len = usize::from(len);
        if len < 4 {
            return None;
        }
        let value = payload.get(at + 4..at + len)?;
        if ty & 0x3fff == NDA_DST {
            return Some((family, ifindex, state, value));
        }
        at += align4(len);
    }
    None
}

impl RouteQuery {
    /// The neighbour entries of `ifindex` being resolved: (family, address).
    fn incomplete_neighbours(&mut self, ifindex: u32) -> io::Result<Vec<(u8, Vec<u8>)>> {
        let flags = (libc::NLM_F_REQUEST | libc::NLM_F_DUMP) as u16;
        let req = neigh_request(libc::RTM_GETNEIGH, flags, self.next_seq(), 0, ifindex, &[]);
        let mut found = Vec::new();
        self.exchange(&req, "RTM_GETNEIGH", &[], |reply| {
            match reply {
                Reply::Message(ty, _) if ty == libc::NLMSG_DONE as u16 => {
                    return Some(mem::take(&mut found));
                }
                Reply::Message(libc::RTM_NEWNEIGH, payload) => {
                    if let Some((family, index, state, dst)) = parse_neigh(payload)
                        && index == ifindex
                        && state & NUD_INCOMPLETE != 0
                    {
                        found.push((family, dst.to_vec()));
                    }
                }
                _ => {}
            }
            None
        })
    }

    /// Deletes one neighbour entry; one already gone is no error.
    fn delete_neighbour(&mut self, ifindex: u32, family: u8, dst: &[u8]) -> io::Result<()> {
        let flags = (libc::NLM_F_REQUEST | libc::NLM_F_ACK) as u16;
        let req = neigh_request(
            libc::RTM_DELNEIGH,
            flags,
            self.next_seq(),
            family,
            ifindex,
            dst,
        );
        self.exchange(&req, "RTM_DELNEIGH", &[libc::ENOENT], |reply| {
            matches!(reply, Reply::Ack).then_some(())
        })
    }
}

/// The code of an `NLMSG_ERROR` payload: 0 for an acknowledgement, else a negated errno.
fn netlink_code(payload: &[u8]) -> i32 {
    payload
        .get(..4)
        .map_or(0, |b| i32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
}

fn open_route_socket(groups: u32, nonblocking: bool) -> io::Result<OwnedFd> {
    let flags = if nonblocking { libc::SOCK_NONBLOCK } else { 0 };
    let fd = socket::socket(
        libc::AF_NETLINK,
        libc::SOCK_RAW | flags,
        libc::NETLINK_ROUTE,
    )?;
    // SAFETY: zeroed bytes are a valid `sockaddr_nl` (integers only).
    let mut addr = unsafe { mem::zeroed::<libc::sockaddr_nl>() };
    addr.nl_family = libc::AF_NETLINK as libc::sa_family_t;
    addr.nl_groups = groups;
    // SAFETY: `addr` is a valid `sockaddr_nl` and the length passed is its size; bind(2) only
    // reads it.
    let ret = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            ptr::from_ref(&addr).cast(),
            size_of::<libc::sockaddr_nl>() as libc::socklen_t,
        )
    };
    error::check(ret, "bind(NETLINK_ROUTE)", None)?;
    Ok(fd)
}

fn send_all(fd: BorrowedFd<'_>, msg: &[u8]) -> io::Result<()> {
    // SAFETY: `msg` is valid for reads of `msg.len()` bytes for the duration of the call. With no
    // destination address a netlink socket sends to the kernel.
    let n = unsafe { libc::send(fd.as_raw_fd(), msg.as_ptr().cast(), msg.len(), 0) };
    if n < 0 {
        return Err(error::last("send(NETLINK_ROUTE)", None));
    }
    if n as usize != msg.len() {
        return Err(io::Error::new(
            io::ErrorKind::WriteZero,
            "short netlink send",
        ));
    }
    Ok(())
}

/// Receives one datagram; `Ok(None)` if it came from anyone but the kernel (port id 0), which
/// any local process could otherwise use to feed us forged link events.
fn recv_from_kernel(fd: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<Option<usize>> {
    // SAFETY: zeroed bytes are a valid `sockaddr_nl` (integers only).
    let mut addr = unsafe { mem::zeroed::<libc::sockaddr_nl>() };
    let mut addr_len = size_of::<libc::sockaddr_nl>() as libc::socklen_t;
    // SAFETY: `buf` is valid for writes of `buf.len()` bytes, `addr` for `addr_len` bytes, and
    // `addr_len` is a valid in/out length, all for the duration of the call.
    let n = unsafe {
        libc::recvfrom(
            fd.as_raw_fd(),
            buf.as_mut_ptr().cast(),
            buf.len(),
            0,
            ptr::from_mut(&mut addr).cast(),
            &mut addr_len,
        )
    };
    let n = usize::try_from(n).map_err(|_| io::Error::last_os_error())?;
    Ok((addr.nl_pid == 0).then_some(n))
}

/// An `RTM_GETLINK` request: for one link (`dump == false`) or all (`dump == true`), with
/// statistics left out so that the replies stay small.
fn getlink_request(seq: u32, ifindex: u32, dump: bool) -> [u8; 40] {
    let mut msg = [0u8; 40];
    let flags = libc::NLM_F_REQUEST as u16 | if dump { libc::NLM_F_DUMP as u16 } else { 0 };
    msg[0..4].copy_from_slice(&40u32.to_ne_bytes());
    msg[4..6].copy_from_slice(&libc::RTM_GETLINK.to_ne_bytes());
    msg[6..8].copy_from_slice(&flags.to_ne_bytes());
    msg[8..12].copy_from_slice(&seq.to_ne_bytes());
    // nlmsg_pid 0: the kernel fills in ours. ifinfomsg: family AF_UNSPEC, index.
    msg[20..24].copy_from_slice(&ifindex.to_ne_bytes());
    // IFLA_EXT_MASK attribute.
    msg[32..34].copy_from_slice(&8u16.to_ne_bytes());
    msg[34..36].copy_from_slice(&IFLA_EXT_MASK.to_ne_bytes());
    msg[36..40].copy_from_slice(&RTEXT_FILTER_SKIP_STATS.to_ne_bytes());
    msg
}

pub(crate) fn align4(n: usize) -> usize {
    n.saturating_add(3) & !3
}

pub(crate) fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(
        b.get(at..at.checked_add(2)?)?.try_into().ok()?,
    ))
}

pub(crate) fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(
        b.get(at..at.checked_add(4)?)?.try_into().ok()?,
    ))
}

/// The netlink message starting at `*pos` in `buf`: its type and payload. Advances `*pos` past
/// it. `None` (and `*pos` at the end) when no complete, well-formed message is left.
fn next_message<'a>(buf: &'a [u8], pos: &mut usize) -> Option<(u16, &'a [u8])> {
    next_message_seq(buf, pos).map(|(ty, _, payload)| (ty, payload))
}

/// [`next_message`], also returning the message's sequence number.
fn next_message_seq<'a>(buf: &'a [u8], pos: &mut usize) -> Option<(u16, u32, &'a [u8])> {
    let rest = buf.get(*pos..)?;
    let parsed = (|| {
        let len = usize::try_from(u32_at(rest, 0)?).ok()?;
        let ty = u16_at(rest, 4)?;
        let seq = u32_at(rest, 8)?;
        if len < NLMSG_HDR_LEN {
            return None;
        }
        let payload = rest.get(NLMSG_HDR_LEN..len)?;
        Some((len, ty, seq, payload))
    })();
    match parsed {
        Some((len, ty, seq, payload)) => {
            *pos = pos.saturating_add(align4(len)).min(buf.len());
            Some((ty, seq, payload))
        }
        None => {
            *pos = buf.len();
            None
        }
    }
}

/// A [`LinkEvent`] from one netlink message, if it is a well-formed link message.
fn link_event(ty: u16, payload: &[u8]) -> Option<LinkEvent> {
    let removed = match ty {
        libc::RTM_NEWLINK => false,
        libc::RTM_DELLINK => true,
        _ => return None,
    };
    let state = parse_ifinfo(payload)?;
    Some(if removed {
        LinkEvent::Removed(state)
    } else {
        LinkEvent::Changed(state)
    })
}

/// Parses `struct ifinfomsg` and the attributes after it.
fn parse_ifinfo(payload: &[u8]) -> Option<LinkState> {
    let index = u32_at(payload, 4)?;
    let flags = u32_at(payload, 8)?;
    if index == 0 || index > i32::MAX as u32 {
        return None;
    }
    let mut name = String::new();
    let mut carrier = None;
    let mut attrs = payload.get(IFINFOMSG_LEN..)?;
    while attrs.len() >= 4 {
        let len = usize::from(u16_at(attrs, 0)?);
        let ty = u16_at(attrs, 2)? & NLA_TYPE_MASK;
        if len < 4 || len > attrs.len() {
            break;
        }
        let data = &attrs[4..len];
        match ty {
            IFLA_IFNAME => {
                let end = data.iter().position(|&b| b == 0).unwrap_or(data.len());
                name = String::from_utf8_lossy(&data[..end]).into_owned();
            }
            IFLA_CARRIER => carrier = data.first().map(|&c| c != 0),
            _ => {}
        }
        attrs = attrs.get(align4(len)..).unwrap_or(&[]);
    }
    Some(LinkState {
        ifindex: index,
        name,
        up: flags & libc::IFF_UP as u32 != 0,
        carrier: carrier.unwrap_or(flags & libc::IFF_LOWER_UP as u32 != 0),
    })
}

#[cfg(test)]
mod test {
    use super::*;

    /// A hand-built RTM_NEWLINK for ifindex 7 "ve0", up, IFLA_CARRIER = `carrier`.
    fn newlink(carrier: u8) -> Vec<u8> {
        let mut attrs = Vec::new();
        // IFLA_IFNAME "ve0\0" (len 8)
        attrs.extend_from_slice(&8u16.to_ne_bytes());
        attrs.extend_from_slice(&IFLA_IFNAME.to_ne_bytes());
        attrs.extend_from_slice(b"ve0\0");
        // IFLA_MTU (4) 1500, ignored
        attrs.extend_from_slice(&8u16.to_ne_bytes());
        attrs.extend_from_slice(&4u16.to_ne_bytes());
        attrs.extend_from_slice(&1500u32.to_ne_bytes());
        // IFLA_CARRIER (len 5, padded to 8)
        attrs.extend_from_slice(&5u16.to_ne_bytes());
        attrs.extend_from_slice(&IFLA_CARRIER.to_ne_bytes());
        attrs.extend_from_slice(&[carrier, 0, 0, 0]);
        let mut ifi = vec![0u8; IFINFOMSG_LEN];
        ifi[4..8].copy_from_slice(&7u32.to_ne_bytes());
        ifi[8..12].copy_from_slice(&((libc::IFF_UP | libc::IFF_LOWER_UP) as u32).to_ne_bytes());
        let len = NLMSG_HDR_LEN + ifi.len() + attrs.len();
        let mut msg = Vec::new();
        msg.extend_from_slice(&(len as u32).to_ne_bytes());
        msg.extend_from_slice(&libc::RTM_NEWLINK.to_ne_bytes());
        msg.extend_from_slice(&[0; 10]);
        msg.extend_from_slice(&ifi);
        msg.extend_from_slice(&attrs);
        msg
    }

    #[test]
    fn parses_newlink_and_prefers_ifla_carrier() {
        let mut dgram = newlink(0);
        dgram.extend_from_slice(&newlink(1));
        let mut pos = 0;
        let (ty, payload) = next_message(&dgram, &mut pos).unwrap();
        let expected = LinkState {
            ifindex: 7,
            name: "ve0".into(),
            up: true,
            carrier: false,
        };
        assert_eq!(
            link_event(ty, payload),
            Some(LinkEvent::Changed(expected.clone()))
        );
        let (ty, payload) = next_message(&dgram, &mut pos).unwrap();
        assert_eq!(
            link_event(ty, payload),
            Some(LinkEvent::Changed(LinkState {
                carrier: true,
                ..expected
            }))
        );
        assert_eq!(pos, dgram.len());
        assert_eq!(next_message(&dgram, &mut pos), None);
    }

    #[test]
    fn truncations_and_garbage_never_panic() {
        let msg = newlink(1);
        for cut in 0..msg.len() {
            let mut pos = 0;
            while let Some((ty, payload)) = next_message(&msg[..cut], &mut pos) {
                let _ = link_event(ty, payload);
            }
            // A truncated message is never returned as a whole one.
            let mut pos = 0;
            assert!(
                next_message(&msg[..cut], &mut pos).is_none(),
                "cut at {cut}"
            );
        }
        // A short attribute table inside an intact message: whatever parsed is kept.
        let payload = &msg[NLMSG_HDR_LEN..msg.len() - 3];
        assert_eq!(
            parse_ifinfo(payload).map(|s| s.name),
            Some("ve0".to_string())
        );

        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut buf = [0u8; 96];
        for round in 0..20_000 {
            for b in buf.iter_mut() {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                *b = state as u8;
            }
            // Make the headers plausible half of the time so that the parsers go deep.
            if round % 2 == 0 {
                let len = (state as usize % 97) as u32;
                buf[0..4].copy_from_slice(&len.to_ne_bytes());
                buf[4..6].copy_from_slice(&libc::RTM_NEWLINK.to_ne_bytes());
            }
            let mut pos = 0;
            while let Some((ty, payload)) = next_message(&buf, &mut pos) {
                let _ = link_event(ty, payload);
            }
            let _ = parse_ifinfo(&buf);
        }
    }

    #[test]
    fn neighbour_requests_and_answers() {
        let dst = [10, 0, 0, 2];
        let msg = neigh_request(libc::RTM_DELNEIGH, 5, 7, libc::AF_INET as u8, 3, &dst);
        assert_eq!(msg.len(), 16 + 12 + 8);
        let mut pos = 0;
        let (ty, seq, payload) = next_message_seq(&msg, &mut pos).unwrap();
        assert_eq!((ty, seq), (libc::RTM_DELNEIGH, 7));
        assert_eq!(
            parse_neigh(payload),
            Some((libc::AF_INET as u8, 3, 0, &dst[..]))
        );
        // An answer: state INCOMPLETE, NDA_CACHEINFO (type 3) before NDA_DST (an IPv6 address).
        let mut answer = vec![libc::AF_INET6 as u8, 0, 0, 0];
        answer.extend_from_slice(&9u32.to_ne_bytes());
        answer.extend_from_slice(&NUD_INCOMPLETE.to_ne_bytes());
        answer.extend_from_slice(&[0, 1]);
        answer.extend_from_slice(&8u16.to_ne_bytes());
        answer.extend_from_slice(&3u16.to_ne_bytes());
        answer.extend_from_slice(&[0; 4]);
        answer.extend_from_slice(&20u16.to_ne_bytes());
        answer.extend_from_slice(&NDA_DST.to_ne_bytes());
        answer.extend_from_slice(&[0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        let (family, index, state, addr) = parse_neigh(&answer).unwrap();
        assert_eq!(
            (family, index, state),
            (libc::AF_INET6 as u8, 9, NUD_INCOMPLETE)
        );
        assert_eq!(addr.len(), 16);
        // Cut short, or an attribute claiming less than its header: nothing.
        assert_eq!(parse_neigh(&answer[..30]), None);
        assert_eq!(parse_neigh(&answer[..6]), None);
        let mut bad = answer.clone();
        bad[12..14].copy_from_slice(&2u16.to_ne_bytes());
        assert_eq!(parse_neigh(&bad), None);
    }

    #[test]
    fn getlink_request_layout() {
        let msg = getlink_request(9, 5, false);
        let mut pos = 0;
        let (ty, payload) = next_message(&msg, &mut pos).unwrap();
        assert_eq!(ty, libc::RTM_GETLINK);
        assert_eq!(u32_at(payload, 4), Some(5));
        assert_eq!(u32_at(&msg, 8), Some(9));
        assert_eq!(u16_at(&msg, 6), Some(libc::NLM_F_REQUEST as u16));
        let dump = getlink_request(1, 0, true);
        assert_eq!(
            u16_at(&dump, 6),
            Some((libc::NLM_F_REQUEST | libc::NLM_F_DUMP) as u16)
        );
    }
}
