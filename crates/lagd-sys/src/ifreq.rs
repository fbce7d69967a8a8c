//! `struct ifreq` and the interface ioctls that take one.

use std::io;
use std::mem;
use std::os::fd::{AsRawFd, BorrowedFd};

use crate::error;

/// Longest interface name, without the terminating NUL.
pub(crate) const MAX_NAME_LEN: usize = libc::IFNAMSIZ - 1;

/// Checks that `name` fits in `ifr_name` and has no NUL. An empty name is accepted only when
/// `allow_empty` (TUNSETIFF picks a name itself).
pub(crate) fn check_name(name: &str, allow_empty: bool) -> io::Result<()> {
    if name.len() > MAX_NAME_LEN
        || name.as_bytes().contains(&0)
        || (name.is_empty() && !allow_empty)
    {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("invalid interface name {name:?}: 1 to {MAX_NAME_LEN} bytes, no NUL"),
        ));
    }
    Ok(())
}

/// A zero-initialised `struct ifreq` with accessors for the union members lagd uses.
pub(crate) struct IfReq {
    raw: libc::ifreq,
}

impl IfReq {
    fn zeroed() -> Self {
        // SAFETY: `ifreq` is made of integers, integer arrays, plain-integer structs and one raw
        // pointer; all-zero bytes are a valid value for each of them.
        let raw = unsafe { mem::zeroed::<libc::ifreq>() };
        Self { raw }
    }

    /// An `ifreq` naming `name` (which may be empty only if `allow_empty`).
    pub(crate) fn with_name(name: &str, allow_empty: bool) -> io::Result<Self> {
        check_name(name, allow_empty)?;
        let mut req = Self::zeroed();
        for (dst, &src) in req.raw.ifr_name.iter_mut().zip(name.as_bytes()) {
            *dst = src as libc::c_char;
        }
        Ok(req)
    }

    /// An `ifreq` carrying an interface index (for `SIOCGIFNAME`).
    pub(crate) fn with_index(index: u32) -> io::Result<Self> {
        let index = libc::c_int::try_from(index).map_err(|_| {
            io::Error::new(io::ErrorKind::InvalidInput, "interface index out of range")
        })?;
        let mut req = Self::zeroed();
        req.raw.ifr_ifru.ifru_ifindex = index;
        Ok(req)
    }

    /// `ifr_name` up to its NUL.
    pub(crate) fn name(&self) -> String {
        let bytes: Vec<u8> = self
            .raw
            .ifr_name
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8)
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// `ifr_flags`, widened without sign extension.
    pub(crate) fn flags(&self) -> u32 {
        // SAFETY: the union was zero-initialised and every member is plain data, so reading the
        // `c_short` member reads initialised bytes of a type valid for any bit pattern.
        let flags = unsafe { self.raw.ifr_ifru.ifru_flags };
        u32::from(flags as u16)
    }

    /// Sets `ifr_flags` (only the low 16 bits exist in `ifreq`).
    pub(crate) fn set_flags(&mut self, flags: u32) {
        self.raw.ifr_ifru.ifru_flags = flags as u16 as libc::c_short;
    }

    /// `ifr_ifindex`.
    pub(crate) fn index(&self) -> libc::c_int {
        // SAFETY: as in `flags`: zero-initialised plain-data union, `c_int` member.
        unsafe { self.raw.ifr_ifru.ifru_ifindex }
    }

    /// `ifr_mtu`.
    pub(crate) fn mtu(&self) -> libc::c_int {
        // SAFETY: as in `flags`: zero-initialised plain-data union, `c_int` member.
        unsafe { self.raw.ifr_ifru.ifru_mtu }
    }

    /// Sets `ifr_mtu`.
    pub(crate) fn set_mtu(&mut self, mtu: libc::c_int) {
        self.raw.ifr_ifru.ifru_mtu = mtu;
    }

    /// `ifr_hwaddr`: address family (ARPHRD_*) and the first six address bytes.
    pub(crate) fn hwaddr(&self) -> (u16, [u8; 6]) {
        // SAFETY: as in `flags`: zero-initialised plain-data union, `sockaddr` member (integers).
        let sa = unsafe { self.raw.ifr_ifru.ifru_hwaddr };
        let mut mac = [0u8; 6];
        for (dst, &src) in mac.iter_mut().zip(sa.sa_data.iter()) {
            *dst = src as u8;
        }
        (sa.sa_family, mac)
    }

    /// Sets `ifr_hwaddr` to an Ethernet address.
    pub(crate) fn set_hwaddr(&mut self, mac: [u8; 6]) {
        // SAFETY: zeroed bytes are a valid `sockaddr` (integers only).
        let mut sa = unsafe { mem::zeroed::<libc::sockaddr>() };
        sa.sa_family = libc::ARPHRD_ETHER;
        for (dst, &src) in sa.sa_data.iter_mut().zip(mac.iter()) {
            *dst = src as libc::c_char;
        }
        self.raw.ifr_ifru.ifru_hwaddr = sa;
    }

    /// Sets `ifr_data` (for `SIOCETHTOOL`).
    pub(crate) fn set_data(&mut self, data: *mut libc::c_char) {
        self.raw.ifr_ifru.ifru_data = data;
    }

    /// Pointer for an ioctl.
    pub(crate) fn as_mut_ptr(&mut self) -> *mut libc::ifreq {
        &mut self.raw
    }
}

/// The ioctls that read or write a `struct ifreq` by value and follow no pointer inside it.
/// Keeping the set closed is what makes [`ioctl`] safe to call.
#[derive(Clone, Copy, Debug)]
pub(crate) enum IfIoctl {
    GetIndex,
    GetName,
    GetFlags,
    SetFlags,
    GetHwAddr,
    SetHwAddr,
    GetMtu,
    SetMtu,
    /// On a `/dev/net/tun` descriptor.
    TunSetIff,
    /// On a `/dev/net/tun` descriptor: the device it is attached to and its flags.
    TunGetIff,
}

impl IfIoctl {
    fn request(self) -> (libc::Ioctl, &'static str) {
        match self {
            Self::GetIndex => (libc::SIOCGIFINDEX as libc::Ioctl, "ioctl(SIOCGIFINDEX)"),
            Self::GetName => (libc::SIOCGIFNAME as libc::Ioctl, "ioctl(SIOCGIFNAME)"),
            Self::GetFlags => (libc::SIOCGIFFLAGS as libc::Ioctl, "ioctl(SIOCGIFFLAGS)"),
            Self::SetFlags => (libc::SIOCSIFFLAGS as libc::Ioctl, "ioctl(SIOCSIFFLAGS)"),
            Self::GetHwAddr => (libc::SIOCGIFHWADDR as libc::Ioctl, "ioctl(SIOCGIFHWADDR)"),
            Self::SetHwAddr => (libc::SIOCSIFHWADDR as libc::Ioctl, "ioctl(SIOCSIFHWADDR)"),
            Self::GetMtu => (libc::SIOCGIFMTU as libc::Ioctl, "ioctl(SIOCGIFMTU)"),
            Self::SetMtu => (libc::SIOCSIFMTU as libc::Ioctl, "ioctl(SIOCSIFMTU)"),
            Self::TunSetIff => (libc::TUNSETIFF as libc::Ioctl, "ioctl(TUNSETIFF)"),
            Self::TunGetIff => (libc::TUNGETIFF as libc::Ioctl, "ioctl(TUNGETIFF)"),
        }
    }
}

/// Runs one of the [`IfIoctl`] requests. `subject` names the interface in errors.
pub(crate) fn ioctl(
    fd: BorrowedFd<'_>,
    op: IfIoctl,
    req: &mut IfReq,
    subject: &str,
) -> io::Result<()> {
    let (request, call) = op.request();
    // SAFETY: `req` is a valid, exclusively borrowed `ifreq` for the duration of the call, and
    // every request in `IfIoctl` reads and writes only the `ifreq` itself (no embedded pointer
    // is followed), so the kernel touches nothing but those bytes.
    let ret = unsafe { libc::ioctl(fd.as_raw_fd(), request, req.as_mut_ptr()) };
    error::check(ret, call, Some(subject)).map(drop)
}
