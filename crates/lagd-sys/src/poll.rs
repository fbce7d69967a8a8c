//! The event loop's wait: an epoll wrapper, an eventfd to wake it from another thread, and a
//! signalfd that turns SIGTERM/SIGINT into readable events for a clean shutdown.
//!
//! Registrations are level-triggered: a descriptor keeps being reported while it is readable
//! (writable), so a loop may drain a bounded batch per wakeup and come back for the rest.

use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::ptr;
use std::time::Duration;

use crate::error;

/// Which readiness to be woken for. Errors and hang-ups are always reported.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Interest {
    /// Wake when the descriptor is readable (`EPOLLIN`).
    pub readable: bool,
    /// Wake when the descriptor is writable (`EPOLLOUT`).
    pub writable: bool,
}

impl Interest {
    /// Readable only.
    pub const READABLE: Self = Self {
        readable: true,
        writable: false,
    };
    /// Writable only.
    pub const WRITABLE: Self = Self {
        readable: false,
        writable: true,
    };
    /// Readable or writable.
    pub const BOTH: Self = Self {
        readable: true,
        writable: true,
    };

    fn bits(self) -> u32 {
        let mut bits = 0;
        if self.readable {
            bits |= libc::EPOLLIN as u32;
        }
        if self.writable {
            bits |= libc::EPOLLOUT as u32;
        }
        bits
    }
}

/// One readiness report.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Event {
    token: u64,
    bits: u32,
}

impl Event {
    /// The token the descriptor was registered with.
    pub fn token(&self) -> u64 {
        self.token
    }

    /// Readable (`EPOLLIN`).
    pub fn is_readable(&self) -> bool {
        self.bits & libc::EPOLLIN as u32 != 0
    }

    /// Writable (`EPOLLOUT`).
    pub fn is_writable(&self) -> bool {
        self.bits & libc::EPOLLOUT as u32 != 0
    }

    /// A pending error (`EPOLLERR`), for example `ENETDOWN` on a packet socket whose interface
    /// went down: the next receive returns it.
    pub fn is_error(&self) -> bool {
        self.bits & libc::EPOLLERR as u32 != 0
    }

    /// Hang-up (`EPOLLHUP`).
    pub fn is_hangup(&self) -> bool {
        self.bits & libc::EPOLLHUP as u32 != 0
    }
}

/// Storage for the events one [`Poller::wait`] returns.
#[derive(Clone, Debug)]
pub struct Events {
    buf: Vec<libc::epoll_event>,
    len: usize,
}

impl Events {
    /// Room for up to `capacity` events per wait (at least one).
    pub fn with_capacity(capacity: usize) -> Self {
        let capacity = capacity.clamp(1, i32::MAX as usize);
        Self {
            buf: vec![libc::epoll_event { events: 0, u64: 0 }; capacity],
            len: 0,
        }
    }

    /// Events returned by the last wait.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the last wait returned no events.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The events returned by the last wait.
    pub fn iter(&self) -> impl Iterator<Item = Event> + '_ {
        self.buf[..self.len].iter().map(|ev| {
            // epoll_event is packed on x86_64: copy the fields out, never borrow them.
            let token = ev.u64;
            let bits = ev.events;
            Event { token, bits }
        })
    }
}

/// An epoll instance.
#[derive(Debug)]
pub struct Poller {
    epfd: OwnedFd,
}

impl Poller {
    /// Creates the epoll instance.
    pub fn new() -> io::Result<Self> {
        // SAFETY: epoll_create1(2) takes no pointers.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        let fd = error::check(fd, "epoll_create1", None)?;
        // SAFETY: `fd` was just returned by epoll_create1, is open, and nothing else owns it.
        let epfd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Self { epfd })
    }

    fn ctl(
        &self,
        op: libc::c_int,
        fd: BorrowedFd<'_>,
        token: u64,
        interest: Interest,
        call: &'static str,
    ) -> io::Result<()> {
        let mut event = libc::epoll_event {
            events: interest.bits(),
            u64: token,
        };
        // SAFETY: `event` is a valid `epoll_event` for the duration of the call (the kernel reads
        // it, and ignores it for EPOLL_CTL_DEL); both descriptors are open.
        let ret = unsafe { libc::epoll_ctl(self.epfd.as_raw_fd(), op, fd.as_raw_fd(), &mut event) };
        error::check(ret, call, None).map(drop)
    }

    /// Registers `fd`; its events will carry `token`. A descriptor that is closed while
    /// registered (and has no duplicates) is removed automatically.
    pub fn add(&self, fd: &impl AsFd, token: u64, interest: Interest) -> io::Result<()> {
        self.ctl(
            libc::EPOLL_CTL_ADD,
            fd.as_fd(),
            token,
            interest,
            "epoll_ctl(ADD)",
        )
    }

    /// Changes the token or interest of a registered `fd` (for example to ask for writability
    /// only while a send is blocked).
    pub fn modify(&self, fd: &impl AsFd, token: u64, interest: Interest) -> io::Result<()> {
        self.ctl(
            libc::EPOLL_CTL_MOD,
            fd.as_fd(),
            token,
            interest,
            "epoll_ctl(MOD)",
        )
    }

    /// Unregisters `fd`.
    pub fn delete(&self, fd: &impl AsFd) -> io::Result<()> {
        self.ctl(
            libc::EPOLL_CTL_DEL,
            fd.as_fd(),
            0,
            Interest::default(),
            "epoll_ctl(DEL)",
        )
    }

    /// Waits until a registered descriptor is ready or `timeout` passes (`None`: no limit;
    /// the timeout is rounded up to whole milliseconds). Fills `events` and returns how many
    /// there are; 0 on timeout or when a signal interrupted the wait.
    pub fn wait(&self, events: &mut Events, timeout: Option<Duration>) -> io::Result<usize> {
        let timeout_ms = match timeout {
            None => -1,
            Some(d) => {
                let ms = d.as_nanos().div_ceil(1_000_000);
                libc::c_int::try_from(ms).unwrap_or(libc::c_int::MAX)
            }
        };
        events.len = 0;
        let capacity = events.buf.len() as libc::c_int;
        // SAFETY: `events.buf` holds `capacity` initialised `epoll_event`s that the kernel may
        // overwrite; it is exclusively borrowed for the duration of the call.
        let n = unsafe {
            libc::epoll_wait(
                self.epfd.as_raw_fd(),
                events.buf.as_mut_ptr(),
                capacity,
                timeout_ms,
            )
        };
        if n < 0 {
            let err = io::Error::last_os_error();
            if err.kind() == io::ErrorKind::Interrupted {
                return Ok(0);
            }
            return Err(error::annotate(err, "epoll_wait", None));
        }
        events.len = n as usize;
        Ok(events.len)
    }
}

impl AsFd for Poller {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.epfd.as_fd()
    }
}

/// A counter descriptor that wakes a [`Poller`] from another thread (`eventfd`, non-blocking).
/// Share it with an `Arc`.
#[derive(Debug)]
pub struct EventFd {
    fd: OwnedFd,
}

impl EventFd {
    /// Creates the eventfd, not signalled.
    pub fn new() -> io::Result<Self> {
        // SAFETY: eventfd(2) takes no pointers.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        let fd = error::check(fd, "eventfd", None)?;
        // SAFETY: `fd` was just returned by eventfd, is open, and nothing else owns it.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Self { fd })
    }

    /// Makes the descriptor readable until [`EventFd::drain`] is called.
    pub fn notify(&self) -> io::Result<()> {
        let one = 1u64.to_ne_bytes();
        // SAFETY: `one` is 8 readable bytes for the duration of the call.
        let n = unsafe { libc::write(self.fd.as_raw_fd(), one.as_ptr().cast(), one.len()) };
        if n < 0 {
            let err = io::Error::last_os_error();
            // The counter is saturated: it is readable already, which is all a notify wants.
            if err.kind() == io::ErrorKind::WouldBlock {
                return Ok(());
            }
            return Err(err);
        }
        Ok(())
    }

    /// Resets the counter and returns how many notifications it had collected (0 if none).
    pub fn drain(&self) -> io::Result<u64> {
        let mut value = [0u8; 8];
        // SAFETY: `value` is 8 writable bytes for the duration of the call.
        let n = unsafe { libc::read(self.fd.as_raw_fd(), value.as_mut_ptr().cast(), value.len()) };
        if n < 0 {
            let err = io::Error::last_os_error();
            if err.kind() == io::ErrorKind::WouldBlock {
                return Ok(0);
            }
            return Err(err);
        }
        Ok(u64::from_ne_bytes(value))
    }
}

impl AsFd for EventFd {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// A signal number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Signal(i32);

impl Signal {
    /// `SIGTERM`.
    pub const TERM: Self = Self(libc::SIGTERM);
    /// `SIGINT`.
    pub const INT: Self = Self(libc::SIGINT);
    /// `SIGHUP`.
    pub const HUP: Self = Self(libc::SIGHUP);
    /// `SIGQUIT`.
    pub const QUIT: Self = Self(libc::SIGQUIT);
    /// `SIGUSR1`.
    pub const USR1: Self = Self(libc::SIGUSR1);
    /// `SIGUSR2`.
    pub const USR2: Self = Self(libc::SIGUSR2);

    /// The raw signal number.
    pub fn raw(self) -> i32 {
        self.0
    }
}

/// Signals delivered as readable events (`signalfd`, non-blocking).
///
/// [`SignalFd::new`] blocks the signals in the calling thread, so they stay pending until read
/// here instead of running their default action. Threads inherit the mask of the thread that
/// spawns them: create the `SignalFd` on the main thread before spawning any other, or a
/// process-directed SIGTERM may be delivered to a thread that does not block it and kill the
/// process. Dropping it closes the descriptor and leaves the signals blocked.
#[derive(Debug)]
pub struct SignalFd {
    fd: OwnedFd,
}

impl SignalFd {
    /// Blocks `signals` in the calling thread and opens a signalfd for them.
    pub fn new(signals: &[Signal]) -> io::Result<Self> {
        let mut set = MaybeUninit::<libc::sigset_t>::uninit();
        // SAFETY: sigemptyset initialises the `sigset_t` it is pointed at.
        let ret = unsafe { libc::sigemptyset(set.as_mut_ptr()) };
        error::check(ret, "sigemptyset", None)?;
        // SAFETY: sigemptyset succeeded, so `set` is initialised.
        let mut set = unsafe { set.assume_init() };
        for signal in signals {
            // SAFETY: `set` is an initialised `sigset_t`, exclusively borrowed for the call.
            let ret = unsafe { libc::sigaddset(&mut set, signal.0) };
            error::check(ret, "sigaddset", None)?;
        }
        // SAFETY: `set` is initialised; a null old-set pointer is allowed.
        let ret = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, ptr::null_mut()) };
        if ret != 0 {
            return Err(error::annotate(
                io::Error::from_raw_os_error(ret),
                "pthread_sigmask",
                None,
            ));
        }
        // SAFETY: `set` is initialised and only read; -1 asks for a new descriptor.
        let fd = unsafe { libc::signalfd(-1, &set, libc::SFD_NONBLOCK | libc::SFD_CLOEXEC) };
        let fd = error::check(fd, "signalfd", None)?;
        // SAFETY: `fd` was just returned by signalfd, is open, and nothing else owns it.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Self { fd })
    }

    /// The next pending signal, or `None` if none is pending.
    pub fn read(&self) -> io::Result<Option<Signal>> {
        // struct signalfd_siginfo is 128 bytes; ssi_signo is its first u32.
        let mut info = [0u8; 128];
        // SAFETY: `info` is 128 writable bytes for the duration of the call.
        let n = unsafe { libc::read(self.fd.as_raw_fd(), info.as_mut_ptr().cast(), info.len()) };
        if n < 0 {
            let err = io::Error::last_os_error();
            if err.kind() == io::ErrorKind::WouldBlock {
                return Ok(None);
            }
            return Err(err);
        }
        if n as usize != info.len() {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "short signalfd read",
            ));
        }
        let signo = u32::from_ne_bytes([info[0], info[1], info[2], info[3]]);
        Ok(Some(Signal(signo as i32)))
    }
}

impl AsFd for SignalFd {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

#[cfg(test)]
mod test {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn eventfd_wakes_poller_from_another_thread() {
        let poller = Poller::new().unwrap();
        let wake = Arc::new(EventFd::new().unwrap());
        poller.add(&*wake, 42, Interest::READABLE).unwrap();
        let mut events = Events::with_capacity(4);
        assert_eq!(poller.wait(&mut events, Some(Duration::ZERO)).unwrap(), 0);

        let remote = Arc::clone(&wake);
        let t = std::thread::spawn(move || {
            remote.notify().unwrap();
            remote.notify().unwrap();
        });
        assert_eq!(
            poller
                .wait(&mut events, Some(Duration::from_secs(5)))
                .unwrap(),
            1
        );
        let ev = events.iter().next().unwrap();
        assert_eq!(ev.token(), 42);
        assert!(ev.is_readable());
        t.join().unwrap();
        assert_eq!(wake.drain().unwrap(), 2);
        assert_eq!(wake.drain().unwrap(), 0);
        assert_eq!(poller.wait(&mut events, Some(Duration::ZERO)).unwrap(), 0);

        poller.modify(&*wake, 43, Interest::WRITABLE).unwrap();
        assert_eq!(poller.wait(&mut events, Some(Duration::ZERO)).unwrap(), 1);
        assert_eq!(
            events.iter().next().map(|e| (e.token(), e.is_writable())),
            Some((43, true))
        );
        poller.delete(&*wake).unwrap();
        assert_eq!(poller.wait(&mut events, Some(Duration::ZERO)).unwrap(), 0);
    }

    #[test]
    fn signalfd_turns_sigterm_into_an_event() {
        // The signal is blocked in this thread before it is raised at this thread only, so it
        // can neither kill the test process nor reach another thread.
        let signals = SignalFd::new(&[Signal::TERM, Signal::INT]).unwrap();
        let poller = Poller::new().unwrap();
        poller.add(&signals, 1, Interest::READABLE).unwrap();
        assert_eq!(signals.read().unwrap(), None);
        // SAFETY: pthread_kill on the calling thread with a signal that this thread blocks; it
        // only marks the signal pending.
        let ret = unsafe { libc::pthread_kill(libc::pthread_self(), libc::SIGTERM) };
        assert_eq!(ret, 0);
        let mut events = Events::with_capacity(2);
        assert_eq!(
            poller
                .wait(&mut events, Some(Duration::from_secs(5)))
                .unwrap(),
            1
        );
        assert_eq!(signals.read().unwrap(), Some(Signal::TERM));
        assert_eq!(signals.read().unwrap(), None);
    }
}
