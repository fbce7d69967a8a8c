//! Running code inside another network namespace, for tests and the lab.
//!
//! A namespace is entered on a fresh thread (`setns(CLONE_NEWNET)` changes only the calling
//! thread), so the caller's thread never moves. Sockets, TAPs and [`LinkControl`]s created on
//! that thread belong to the namespace for their whole life and can be returned from the closure
//! and used from any thread afterwards.
//!
//! [`LinkControl`]: crate::link::LinkControl

use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::thread;

use crate::error;

/// Where `ip netns add NAME` puts the namespace handle.
const NETNS_DIR: &str = "/run/netns";

/// An open handle to a network namespace.
#[derive(Debug)]
pub struct NetNs {
    fd: OwnedFd,
    path: PathBuf,
}

impl NetNs {
    /// Opens the named namespace `/run/netns/NAME` (as made by `ip netns add NAME`).
    pub fn open(name: &str) -> io::Result<Self> {
        if name.is_empty()
            || name == "."
            || name == ".."
            || name.contains('/')
            || name.contains('\0')
        {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("invalid network namespace name {name:?}"),
            ));
        }
        Self::open_path(Path::new(NETNS_DIR).join(name))
    }

    /// Opens a namespace by path, for example `/proc/PID/ns/net`.
    pub fn open_path(path: impl AsRef<Path>) -> io::Result<Self> {
        let path = path.as_ref().to_path_buf();
        let file = File::open(&path).map_err(|e| error::annotate(e, "open", path.to_str()))?;
        Ok(Self {
            fd: OwnedFd::from(file),
            path,
        })
    }

    /// The path this handle was opened from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Runs `f` on a new thread that has entered this namespace, waits for it and returns its
    /// result. A panic in `f` is resumed on the calling thread.
    pub fn run<T, F>(&self, f: F) -> io::Result<T>
    where
        F: FnOnce() -> T + Send,
        T: Send,
    {
        let fd = self.fd.as_fd();
        let path = &self.path;
        let joined = thread::scope(|scope| {
            scope
                .spawn(move || {
                    enter(fd, path)?;
                    Ok(f())
                })
                .join()
        });
        match joined {
            Ok(result) => result,
            Err(panic) => std::panic::resume_unwind(panic),
        }
    }

    /// Opens the named namespace and runs `f` inside it on a fresh thread (see [`NetNs::run`]).
    pub fn enter_thread<T, F>(name: &str, f: F) -> io::Result<T>
    where
        F: FnOnce() -> T + Send,
        T: Send,
    {
        Self::open(name)?.run(f)
    }
}

impl AsFd for NetNs {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// Moves the calling thread into the network namespace `fd`.
fn enter(fd: BorrowedFd<'_>, path: &Path) -> io::Result<()> {
    // SAFETY: setns(2) takes no pointers; it changes only the calling thread, which is the fresh
    // thread `NetNs::run` spawned for this purpose and nothing else runs on.
    let ret = unsafe { libc::setns(fd.as_raw_fd(), libc::CLONE_NEWNET) };
    error::check(ret, "setns(CLONE_NEWNET)", path.to_str()).map(drop)
}
