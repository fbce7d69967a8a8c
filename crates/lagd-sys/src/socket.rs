//! Socket creation and typed socket options, shared by the packet, link and netlink code.

use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use crate::error;

/// Types that are plain bytes: no pointers, no references, no invariants, valid for every bit
/// pattern (including all zeroes).
///
/// # Safety
///
/// Implement only for `#[repr(C)]` structs made of integers and arrays of integers. The socket
/// option helpers rely on this to hand the kernel a `T` by address (the kernel then has no
/// pointer to follow) and to accept whatever bytes it writes back into one.
pub(crate) unsafe trait PlainData: Copy {}

// SAFETY: a C int is valid for any bit pattern and holds no pointer.
unsafe impl PlainData for libc::c_int {}
// SAFETY: `packet_mreq` is `#[repr(C)]` {c_int, c_ushort, c_ushort, [c_uchar; 8]}: integers only.
unsafe impl PlainData for libc::packet_mreq {}
// SAFETY: `tpacket_stats` is `#[repr(C)]` {c_uint, c_uint}: integers only.
unsafe impl PlainData for libc::tpacket_stats {}
// SAFETY: `timeval` is `#[repr(C)]` {time_t, suseconds_t}: integers only.
unsafe impl PlainData for libc::timeval {}

/// `socket(2)` with `SOCK_CLOEXEC` always added.
pub(crate) fn socket(
    domain: libc::c_int,
    ty: libc::c_int,
    protocol: libc::c_int,
) -> io::Result<OwnedFd> {
    // SAFETY: socket(2) takes no pointers; any arguments are memory-safe.
    let fd = unsafe { libc::socket(domain, ty | libc::SOCK_CLOEXEC, protocol) };
    let fd = error::check(fd, "socket", None)?;
    // SAFETY: `fd` was just returned by socket(2), is open, and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `setsockopt(2)` with a plain value.
pub(crate) fn setsockopt<T: PlainData>(
    fd: BorrowedFd<'_>,
    level: libc::c_int,
    name: libc::c_int,
    value: &T,
    call: &'static str,
) -> io::Result<()> {
    let len = size_of::<T>() as libc::socklen_t;
    // SAFETY: `value` points to `len` readable bytes for the duration of the call; the kernel only
    // reads them, and `T: PlainData` contains no pointer it could follow.
    let ret =
        unsafe { libc::setsockopt(fd.as_raw_fd(), level, name, (value as *const T).cast(), len) };
    error::check(ret, call, None).map(drop)
}

/// `getsockopt(2)` into a plain value. Bytes the kernel does not write stay zero.
pub(crate) fn getsockopt<T: PlainData>(
    fd: BorrowedFd<'_>,
    level: libc::c_int,
    name: libc::c_int,
    call: &'static str,
) -> io::Result<T> {
    let mut value = MaybeUninit::<T>::zeroed();
    let mut len = size_of::<T>() as libc::socklen_t;
    // SAFETY: `value` is `len` writable bytes and `len` is a valid in/out length; the kernel
    // writes at most `len` bytes.
    let ret = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            level,
            name,
            value.as_mut_ptr().cast(),
            &mut len,
        )
    };
    error::check(ret, call, None)?;
    // SAFETY: the memory was zeroed and then partly overwritten by the kernel; `T: PlainData` is
    // valid for every bit pattern.
    Ok(unsafe { value.assume_init() })
}

/// Sets a socket buffer size, using the `*FORCE` option first (root may exceed
/// `net.core.[rw]mem_max`) and the plain option if that is not permitted.
pub(crate) fn set_buffer(fd: BorrowedFd<'_>, receive: bool, bytes: usize) -> io::Result<()> {
    let value = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
    let (force, plain, call) = if receive {
        (
            libc::SO_RCVBUFFORCE,
            libc::SO_RCVBUF,
            "setsockopt(SO_RCVBUF)",
        )
    } else {
        (
            libc::SO_SNDBUFFORCE,
            libc::SO_SNDBUF,
            "setsockopt(SO_SNDBUF)",
        )
    };
    match setsockopt(fd, libc::SOL_SOCKET, force, &value, call) {
        Err(e) if error::errno(&e) == Some(libc::EPERM) => {
            setsockopt(fd, libc::SOL_SOCKET, plain, &value, call)
        }
        other => other,
    }
}

/// Sets `O_NONBLOCK` on the open file description `fd` refers to.
pub(crate) fn set_nonblocking(fd: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: F_GETFL on a valid descriptor.
    let flags = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) };
    if flags < 0 {
        return Err(error::last("fcntl", None));
    }
    // SAFETY: F_SETFL on a valid descriptor with flags it returned plus O_NONBLOCK.
    if unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, flags | libc::O_NONBLOCK) } < 0 {
        return Err(error::last("fcntl", None));
    }
    Ok(())
}
