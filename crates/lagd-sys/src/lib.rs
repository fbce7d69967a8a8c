//! lagd's system interface: every syscall lagd makes, behind a safe API.
//!
//! This is the only crate in the workspace that contains `unsafe`. Every `unsafe` block carries a
//! `// SAFETY:` comment; no public function is `unsafe`. File descriptors are [`OwnedFd`]s, so
//! dropping a value closes its descriptor, and errors are [`std::io::Error`]s. Setup calls
//! (ioctls, `bind`, `setsockopt`) name the failing call in the error; the raw `errno` stays
//! reachable through [`errno`]. Hot-path calls (`read`, `recv`, `send`, their batch forms)
//! return the bare OS error so that they never allocate.
//!
//! # Layers
//!
//! * [`tap`]: the bond as the host sees it, a TAP device with an optional `virtio_net_hdr`
//!   ([`vnet`]) in front of every frame so that 64 KB GSO segments cross it in one syscall.
//! * [`packet`]: member links, driven by `AF_PACKET` raw sockets with `recvmmsg`/`sendmmsg`
//!   batches, the same `virtio_net_hdr`, statistics and multicast memberships.
//! * [`link`]: interface facts and control (index, name, MAC, MTU, up/down, carrier, speed)
//!   by ioctl, and [`link::LinkEvents`], an rtnetlink subscriber for link changes.
//! * [`poll`]: an epoll wrapper, an eventfd to wake it, and a signalfd for clean shutdown.
//! * [`peer`]: the credentials of a Unix socket's peer (the control socket's access check).
//! * [`fdpass`]: descriptors passed between processes (`SCM_RIGHTS`, a service manager's
//!   `LISTEN_FDS`), so that what forwards outlives one lagd.
//! * [`lock`]: `flock` claims on files and the process's effective user id.
//! * [`netns`]: run a closure inside a named network namespace on a fresh thread (tests, lab).
//! * [`launcher`]: a process forked at lagd's start that runs `lagctl upgrade` when asked.
//! * [`orphan`]: starting a program as a child of whatever adopts orphans (the service
//!   manager), not of the caller: `lagctl upgrade`'s new lagd.
//! * [`caps`]: keeping only the capabilities the running daemon needs.
//! * [`seccomp`]: a filter that refuses the system calls the running daemon never makes.
//! * [`fastpath`]: the kernel fast path's tcx programs and their maps (`bpf/fastpath.c`).
//! * [`clsact`]: the same programs (and the [`isolate`] drop) as direct-action `cls_bpf`
//!   filters on the clsact qdisc, over rtnetlink, for kernels without tcx.
//!
//! # What this crate never does
//!
//! It makes no decisions: no hashing, no LACP, no retries, no logging, no clock reads except
//! where a syscall takes a timeout. It never changes the calling thread's network namespace and
//! never installs signal handlers.
//!
//! [`OwnedFd`]: std::os::fd::OwnedFd
#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]

mod error;
mod ifreq;
mod socket;

pub mod caps;
pub mod clsact;
pub mod fastpath;
pub mod fdpass;
pub mod isolate;
pub mod launcher;
pub mod link;
pub mod lock;
pub mod netns;
pub mod orphan;
pub mod packet;
pub mod peer;
pub mod poll;
pub mod seccomp;
pub mod tap;
pub mod vnet;

pub use error::{SyscallError, errno, nothing_now};

/// Sets a socket's receive buffer to `bytes`, past `net.core.rmem_max` when the caller may
/// (`SO_RCVBUFFORCE`), else as far as the limit allows. For sockets made elsewhere (a
/// `std::net::UdpSocket` that must not drop a burst while its reader is not scheduled).
pub fn set_receive_buffer(fd: std::os::fd::BorrowedFd<'_>, bytes: usize) -> std::io::Result<()> {
    socket::set_buffer(fd, true, bytes)
}
