//! The bond's face to the host: a TAP device.
//!
//! [`Tap::create`] opens `/dev/net/tun` non-blocking and attaches it to a TAP device with
//! `IFF_TAP | IFF_NO_PI`. With [`TapOptions::vnet_hdr`] every frame read or written is preceded
//! by a 10-byte [`VirtioNetHdr`] (`TUNSETVNETHDRSZ` 10, the same size
//! `PACKET_VNET_HDR` uses, so frames pass between the TAP and member sockets untouched), and the
//! device announces checksum, TSO and (where the kernel has it) USO offload: the host stack then
//! hands lagd GSO super-frames of up to 64 KB instead of MTU-sized frames.
//!
//! The device disappears when its last descriptor closes, unless it was made persistent
//! ([`TapOptions::persist`], [`Tap::set_persist`]); creating a `Tap` with the name of an existing
//! persistent device attaches to that device, which is how a restarted lagd keeps the bond.

use std::fs::OpenOptions;
use std::io::{self, IoSlice, IoSliceMut};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;

use crate::error;
use crate::ifreq::{IfIoctl, IfReq, ioctl};
use crate::vnet::VirtioNetHdr;

const TUN_PATH: &str = "/dev/net/tun";

/// How to create a [`Tap`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TapOptions {
    /// Prefix every frame with a 10-byte `virtio_net_hdr` and turn on checksum/TSO/USO offloads.
    pub vnet_hdr: bool,
    /// `IFF_MULTI_QUEUE`: more queues can be attached with [`Tap::attach_queue`], one per worker.
    pub multi_queue: bool,
    /// `TUNSETPERSIST`: the device outlives this descriptor (and lagd).
    pub persist: bool,
    /// With `vnet_hdr`: do not offer UDP segmentation (USO), for a bond that must segment
    /// every super-frame itself and can only segment TCP.
    pub no_uso: bool,
}

/// Offloads the kernel accepted for a TAP (`TUNSETOFFLOAD`), that is, what the host stack may
/// hand lagd: partial checksums, TCP super-frames, UDP super-frames.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Offloads {
    /// `TUN_F_CSUM`: frames may carry `F_NEEDS_CSUM`.
    pub csum: bool,
    /// `TUN_F_TSO4`.
    pub tso4: bool,
    /// `TUN_F_TSO6`.
    pub tso6: bool,
    /// `TUN_F_TSO_ECN`.
    pub tso_ecn: bool,
    /// `TUN_F_USO4` (Linux 6.2 and later).
    pub uso4: bool,
    /// `TUN_F_USO6` (Linux 6.2 and later).
    pub uso6: bool,
}

impl Offloads {
    fn bits(&self) -> libc::c_uint {
        let mut bits = 0;
        for (on, bit) in [
            (self.csum, libc::TUN_F_CSUM),
            (self.tso4, libc::TUN_F_TSO4),
            (self.tso6, libc::TUN_F_TSO6),
            (self.tso_ecn, libc::TUN_F_TSO_ECN),
            (self.uso4, libc::TUN_F_USO4),
            (self.uso6, libc::TUN_F_USO6),
        ] {
            if on {
                bits |= bit;
            }
        }
        bits
    }
}

/// An open queue of a TAP device. Non-blocking: reads and writes return
/// [`io::ErrorKind::WouldBlock`] instead of waiting; register [`AsFd::as_fd`] with a
/// [`Poller`](crate::poll::Poller).
#[derive(Debug)]
pub struct Tap {
    fd: OwnedFd,
    name: String,
    options: TapOptions,
    offloads: Offloads,
}

impl Tap {
    /// Creates the TAP device `name`, or attaches to it if it exists and is persistent. An empty
    /// `name` lets the kernel pick one (`tapN`); [`Tap::name`] tells which.
    ///
    /// With `vnet_hdr`, offloads are set to CSUM | TSO4 | TSO6 | TSO_ECN | USO4 | USO6; a kernel
    /// that rejects USO gets the set without it ([`Tap::offloads`] says what was accepted).
    pub fn create(name: &str, options: TapOptions) -> io::Result<Self> {
        let (fd, name) = attach(name, options)?;
        let mut tap = Self {
            fd,
            name,
            options,
            offloads: Offloads::default(),
        };
        tap.configure()?;
        Ok(tap)
    }

    /// The header size and offloads (with `vnet_hdr`), and persistence, as `options` ask.
    fn configure(&mut self) -> io::Result<()> {
        let options = self.options;
        let tap = self;
        if options.vnet_hdr {
            let size = VirtioNetHdr::LEN as libc::c_int;
            // SAFETY: TUNSETVNETHDRSZ reads one `c_int` through the pointer, which is valid for
            // the duration of the call.
            let ret = unsafe {
                libc::ioctl(
                    tap.fd.as_raw_fd(),
                    libc::TUNSETVNETHDRSZ as libc::Ioctl,
                    &size,
                )
            };
            error::check(ret, "ioctl(TUNSETVNETHDRSZ)", Some(&tap.name))?;
            tap.offloads = tap.negotiate_offloads()?;
        }
        if options.persist {
            tap.set_persist(true)?;
        }
        Ok(())
    }

    /// Takes over `fd`, a descriptor of the TAP `name` that another process opened (a lagd
    /// before this one, through the service manager's descriptor store): while any descriptor
    /// of it stays open the TAP keeps its carrier, so the host's neighbours and routes never
    /// notice the change of process. Refused (`InvalidData`) unless `fd` is a TAP attached to
    /// `name` with `options`' header and queue flags; its header size and offloads are set again
    /// as [`Tap::create`] sets them.
    pub fn adopt(fd: OwnedFd, name: &str, options: TapOptions) -> io::Result<Self> {
        let mut req = IfReq::with_name("", true)?;
        ioctl(fd.as_fd(), IfIoctl::TunGetIff, &mut req, name)?;
        let flags = req.flags() as libc::c_int;
        let want_vnet = options.vnet_hdr;
        let want_mq = options.multi_queue;
        let is = |f: libc::c_int| flags & f != 0;
        if req.name() != name
            || !is(libc::IFF_TAP)
            || is(libc::IFF_VNET_HDR) != want_vnet
            || is(libc::IFF_MULTI_QUEUE) != want_mq
        {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "the passed descriptor is {} with flags {flags:#x}, not the TAP {name} lagd \
                     would open",
                    req.name()
                ),
            ));
        }
        let mut tap = Self {
            fd,
            name: name.to_owned(),
            options,
            offloads: Offloads::default(),
        };
        tap.configure()?;
        Ok(tap)
    }

    /// Attaches another queue to this multi-queue TAP (for another worker thread). Offloads and
    /// the header size are per device and per queue; the new queue gets the same ones.
    pub fn attach_queue(&self) -> io::Result<Self> {
        if !self.options.multi_queue {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{} was not created with multi_queue", self.name),
            ));
        }
        Self::create(
            &self.name,
            TapOptions {
                persist: false,
                ..self.options
            },
        )
    }

    fn negotiate_offloads(&self) -> io::Result<Offloads> {
        let full = Offloads {
            csum: true,
            tso4: true,
            tso6: true,
            tso_ecn: true,
            uso4: !self.options.no_uso,
            uso6: !self.options.no_uso,
        };
        match self.set_offload(full) {
            Ok(()) => Ok(full),
            Err(e) if error::errno(&e) == Some(libc::EINVAL) => {
                let without_uso = Offloads {
                    uso4: false,
                    uso6: false,
                    ..full
                };
                self.set_offload(without_uso).map(|()| without_uso)
            }
            Err(e) => Err(e),
        }
    }

    fn set_offload(&self, offloads: Offloads) -> io::Result<()> {
        let bits = libc::c_ulong::from(offloads.bits());
        // SAFETY: TUNSETOFFLOAD takes its argument by value; no memory is passed.
        let ret = unsafe {
            libc::ioctl(
                self.fd.as_raw_fd(),
                libc::TUNSETOFFLOAD as libc::Ioctl,
                bits,
            )
        };
        error::check(ret, "ioctl(TUNSETOFFLOAD)", Some(&self.name)).map(drop)
    }

    /// Makes the device persistent (it survives this descriptor) or not (it goes away when the
    /// last descriptor closes).
    pub fn set_persist(&self, persist: bool) -> io::Result<()> {
        let arg = libc::c_ulong::from(persist);
        // SAFETY: TUNSETPERSIST takes its argument by value; no memory is passed.
        let ret =
            unsafe { libc::ioctl(self.fd.as_raw_fd(), libc::TUNSETPERSIST as libc::Ioctl, arg) };
        error::check(ret, "ioctl(TUNSETPERSIST)", Some(&self.name)).map(drop)
    }

    /// Sets the carrier the host sees on the bond (`TUNSETCARRIER`): lagd turns it off when no
    /// member can carry traffic, as the bonding driver does.
    pub fn set_carrier(&self, up: bool) -> io::Result<()> {
        let arg = libc::c_int::from(up);
        // SAFETY: TUNSETCARRIER reads one `c_int` through the pointer, valid for the call.
        let ret = unsafe {
            libc::ioctl(
                self.fd.as_raw_fd(),
                libc::TUNSETCARRIER as libc::Ioctl,
                &arg,
            )
        };
        error::check(ret, "ioctl(TUNSETCARRIER)", Some(&self.name)).map(drop)
    }

    /// Reads one frame the host sent through the bond, with its `virtio_net_hdr` first if
    /// [`TapOptions::vnet_hdr`]. A buffer shorter than the frame gets a truncated frame; use
    /// 65 550 bytes or more with offloads on. [`io::ErrorKind::WouldBlock`] when none is queued.
    pub fn read(&self, buf: &mut [u8]) -> io::Result<usize> {
        // SAFETY: `buf` is valid for writes of `buf.len()` bytes for the duration of the call.
        let n = unsafe { libc::read(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        ssize(n)
    }

    /// Like [`Tap::read`], scattering the frame over `bufs` (for example the header into one
    /// buffer and the frame into another).
    pub fn read_vectored(&self, bufs: &mut [IoSliceMut<'_>]) -> io::Result<usize> {
        let count = iov_count(bufs.len())?;
        // SAFETY: `IoSliceMut` is ABI-compatible with `struct iovec` (documented by std), and each
        // one describes a live, exclusively borrowed buffer for the duration of the call.
        let n = unsafe { libc::readv(self.fd.as_raw_fd(), bufs.as_mut_ptr().cast(), count) };
        ssize(n)
    }

    /// Writes one frame towards the host, as if it had arrived on the bond. With
    /// [`TapOptions::vnet_hdr`] the buffer starts with a `virtio_net_hdr` (a GSO super-frame is
    /// accepted whatever the offload settings). Returns the bytes written, which is all of them.
    pub fn write(&self, buf: &[u8]) -> io::Result<usize> {
        // SAFETY: `buf` is valid for reads of `buf.len()` bytes for the duration of the call.
        let n = unsafe { libc::write(self.fd.as_raw_fd(), buf.as_ptr().cast(), buf.len()) };
        ssize(n)
    }

    /// Like [`Tap::write`], gathering the frame from `bufs` (for example a header kept apart).
    pub fn write_vectored(&self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        let count = iov_count(bufs.len())?;
        // SAFETY: `IoSlice` is ABI-compatible with `struct iovec` (documented by std), and each one
        // describes a live buffer for the duration of the call; writev only reads them.
        let n = unsafe { libc::writev(self.fd.as_raw_fd(), bufs.as_ptr().cast(), count) };
        ssize(n)
    }

    /// The device name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The options this queue was created with.
    pub fn options(&self) -> TapOptions {
        self.options
    }

    /// The offloads the kernel accepted (all off without `vnet_hdr`).
    pub fn offloads(&self) -> Offloads {
        self.offloads
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

impl AsFd for Tap {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// Opens `/dev/net/tun` and binds it to the device; returns the descriptor and the final name.
fn attach(name: &str, options: TapOptions) -> io::Result<(OwnedFd, String)> {
    let mut req = IfReq::with_name(name, true)?;
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(TUN_PATH)
        .map_err(|e| error::annotate(e, "open", Some(TUN_PATH)))?;
    let fd = OwnedFd::from(file);
    let mut flags = libc::IFF_TAP | libc::IFF_NO_PI;
    if options.vnet_hdr {
        flags |= libc::IFF_VNET_HDR;
    }
    if options.multi_queue {
        flags |= libc::IFF_MULTI_QUEUE;
    }
    req.set_flags(flags as u32);
    ioctl(fd.as_fd(), IfIoctl::TunSetIff, &mut req, name)?;
    Ok((fd, req.name()))
}

fn ssize(n: isize) -> io::Result<usize> {
    usize::try_from(n).map_err(|_| io::Error::last_os_error())
}

fn iov_count(len: usize) -> io::Result<libc::c_int> {
    libc::c_int::try_from(len)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "too many buffers"))
}
