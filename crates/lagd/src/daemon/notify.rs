//! The service manager's notification protocol (`sd_notify(3)`): lagd tells systemd, when it runs
//! as a `Type=notify` service, that the bond is up (`READY=1`), what it is doing (`STATUS=`),
//! that it is stopping (`STOPPING=1`), and that its event loop still turns (`WATCHDOG=1`).
//!
//! The protocol is one datagram per message to the Unix socket named in `NOTIFY_SOCKET`: a path,
//! or an abstract name written with a leading `@`. `WATCHDOG_USEC` asks for a keep-alive at
//! least that often (lagd sends one every half of it), for the process `WATCHDOG_PID` names when
//! set. Without `NOTIFY_SOCKET` nothing is sent; send failures are logged, never fatal.
//!
//! **The descriptor store.** `FDSTORE=1` with `FDNAME=NAME` and the descriptors attached
//! (`SCM_RIGHTS`) asks the service manager to keep them for the service; it hands them to the
//! next process it starts for it (`LISTEN_FDS`, `LISTEN_FDNAMES`), after a crash or a restart
//! (`FileDescriptorStoreMax=` in the unit). lagd keeps there what must outlive it for the
//! bond to go on forwarding: the TAP's descriptor (while one is open the TAP keeps its carrier,
//! so the host flushes no neighbour); `FDSTOREREMOVE=1` takes a name out again.
//!
//! **A planned upgrade under the service manager** (`lagctl upgrade`, SIGUSR2, or the unit's
//! `ExecReload=`): the new lagd is not the process the manager started, and a manager that
//! takes notifications from the main process only (`NotifyAccess=main`) would refuse its
//! messages, and end the service when the old lagd exits. So the old lagd hands the new one
//! its socket and its keep-alive interval with the descriptors (the new one may have been
//! started without `NOTIFY_SOCKET`, by `ExecReload=`), and, once the new one has adopted the
//! bond, tells the manager `MAINPID=` the new one's process id (systemd accepts it from the
//! main process, for a process in the unit's control group) before it exits. Should the
//! hand-over fail after that, it says `MAINPID=` its own id again. `lagctl upgrade` starts the
//! new lagd as the manager's child, not its own (`lagd_sys::orphan`): systemd does not wait, when
//! the service stops, for a main process that was not its child when it was named, and would
//! send `SIGKILL` right after `SIGTERM`, in the middle of lagd's teardown.

use std::ffi::OsStr;
use std::io;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::time::Duration;

use tracing::{debug, warn};

/// A connection to the service manager.
#[derive(Debug)]
pub struct Notifier {
    socket: UnixDatagram,
    addr: SocketAddr,
    /// The socket as `NOTIFY_SOCKET` named it (handed to a lagd that takes over).
    target: std::ffi::OsString,
    watchdog: Option<Duration>,
}

impl Notifier {
    /// The notifier the environment asks for: `None` without `NOTIFY_SOCKET` (not run by a
    /// service manager, or not as `Type=notify`).
    pub fn from_env() -> Option<Self> {
        let target = std::env::var_os("NOTIFY_SOCKET")?;
        let watchdog = watchdog_interval(
            std::env::var("WATCHDOG_USEC").ok().as_deref(),
            std::env::var("WATCHDOG_PID").ok().as_deref(),
            std::process::id(),
        );
        match Self::new(&target, watchdog) {
            Ok(n) => Some(n),
            Err(e) => {
                warn!("NOTIFY_SOCKET {}: {e}", target.to_string_lossy());
                None
            }
        }
    }

    /// A notifier sending to `target` (a path, or `@name` for an abstract socket), with a
    /// keep-alive every `watchdog` if given.
    pub fn new(target: &OsStr, watchdog: Option<Duration>) -> io::Result<Self> {
        let bytes = target.as_bytes();
        let addr = match bytes.strip_prefix(b"@") {
            Some(name) => SocketAddr::from_abstract_name(name)?,
            None if bytes.starts_with(b"/") => SocketAddr::from_pathname(target)?,
            None => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "neither an absolute path nor an @abstract name",
                ));
            }
        };
        let socket = UnixDatagram::unbound()?;
        socket.set_nonblocking(true)?;
        Ok(Self {
            socket,
            addr,
            target: target.to_owned(),
            watchdog,
        })
    }

    /// How often the event loop sends `WATCHDOG=1` (half of `WATCHDOG_USEC`), if asked to.
    pub fn watchdog(&self) -> Option<Duration> {
        self.watchdog
    }

    /// The socket's name as given (a path, or `@name`).
    pub fn target(&self) -> &OsStr {
        &self.target
    }

    /// Sends one message (`KEY=value` lines). A failure is logged, not returned: the bond does
    /// not stop because its supervisor cannot be told about it.
    pub fn send(&self, message: &str) {
        match self.socket.send_to_addr(message.as_bytes(), &self.addr) {
            Ok(_) => debug!(message, "service manager notified"),
            Err(e) => warn!("notifying the service manager: {e}"),
        }
    }
}

impl Notifier {
    /// Hands `fds` to the service manager's descriptor store under `name` (the manager keeps
    /// one copy of a descriptor it already holds). Failures are logged: without the store the
    /// bond still runs, it only does not outlive this process.
    pub fn store_fds(&self, name: &str, fds: &[std::os::fd::BorrowedFd<'_>]) {
        let sent = UnixDatagram::unbound()
            .and_then(|s| s.connect_addr(&self.addr).map(|()| s))
            .and_then(|s| {
                lagd_sys::fdpass::send_with_fds(
                    &s,
                    format!("FDSTORE=1\nFDNAME={name}").as_bytes(),
                    fds,
                )
            });
        match sent {
            Ok(_) => debug!(
                name,
                count = fds.len(),
                "descriptors kept by the service manager"
            ),
            Err(e) => warn!("storing {name} with the service manager: {e}"),
        }
    }

    /// Takes `name` out of the service manager's descriptor store (it closes its copies).
    pub fn remove_fds(&self, name: &str) {
        self.send(&format!("FDSTOREREMOVE=1\nFDNAME={name}"));
    }
}

/// Half of `WATCHDOG_USEC` when the watchdog is meant for process `pid` (`WATCHDOG_PID` unset
/// or equal to it); `None` when it is unset, zero, not a number, or for another process.
pub fn watchdog_interval(usec: Option<&str>, for_pid: Option<&str>, pid: u32) -> Option<Duration> {
    let usec: u64 = usec?.trim().parse().ok().filter(|&u| u > 0)?;
    if let Some(p) = for_pid {
        if p.trim().parse::<u32>().ok()? != pid {
            return None;
        }
    }
    Some(Duration::from_micros(usec / 2))
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn watchdog_interval_is_half_and_for_this_process_only() {
        assert_eq!(
            watchdog_interval(Some("2000000"), None, 7),
            Some(Duration::from_secs(1))
        );
        assert_eq!(
            watchdog_interval(Some("2000000"), Some("7"), 7),
            Some(Duration::from_secs(1))
        );
        assert_eq!(watchdog_interval(Some("2000000"), Some("8"), 7), None);
        assert_eq!(watchdog_interval(Some("0"), None, 7), None);
        assert_eq!(watchdog_interval(Some("soon"), None, 7), None);
        assert_eq!(watchdog_interval(None, None, 7), None);
    }

    #[test]
    fn sends_to_paths_and_abstract_names() {
        let dir = std::env::temp_dir().join(format!("lagd-notify-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("notify.sock");
        let _ = std::fs::remove_file(&path);
        let listener = UnixDatagram::bind(&path).unwrap();
        let n = Notifier::new(path.as_os_str(), None).unwrap();
        n.send("READY=1\nSTATUS=up");
        let mut buf = [0u8; 64];
        let len = listener.recv(&mut buf).unwrap();
        assert_eq!(&buf[..len], b"READY=1\nSTATUS=up");
        std::fs::remove_dir_all(&dir).unwrap();

        let name = format!("lagd-notify-test-{}", std::process::id());
        let listener =
            UnixDatagram::bind_addr(&SocketAddr::from_abstract_name(name.as_bytes()).unwrap())
                .unwrap();
        let n = Notifier::new(OsStr::new(&format!("@{name}")), None).unwrap();
        n.send("WATCHDOG=1");
        let len = listener.recv(&mut buf).unwrap();
        assert_eq!(&buf[..len], b"WATCHDOG=1");

        assert!(Notifier::new(OsStr::new("relative.sock"), None).is_err());
    }
}
