//! Starting a program as an orphan: a child not of the caller but of whatever adopts orphans
//! (the service manager under systemd, which is PID 1 or a child subreaper; init otherwise).
//!
//! `lagctl upgrade` starts the new lagd so. Under systemd the new lagd becomes the service's
//! main process when the old one says `MAINPID=` (lagd's `notify`), and systemd decides then,
//! once, whether that process is its own child. One that is not ("Supervising process N which
//! is not our child", systemd's log) it does not wait for when the service stops: it sends
//! `KillSignal=` and, unless that reached some other process of the service's control group
//! too, `SIGKILL` at once, in the middle of lagd's teardown. A new lagd that lagctl started as
//! its own child was not systemd's when it took over (lagctl, its parent, was still waiting
//! for it), and stayed so for systemd after lagctl had exited. An orphan is the manager's
//! child from the start: an intermediate process forks it and exits at once.
//!
//! The caller cannot wait for an orphan (its exit status goes to its new parent); it watches it
//! through a pidfd (`pidfd_open`, Linux 5.3), or by its process id where there is none.

use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::{ChildStderr, Command};

/// A process started by [`spawn`], which the caller watches but cannot wait for.
#[derive(Debug)]
pub struct Orphan {
    pid: i32,
    pidfd: Option<OwnedFd>,
    /// Its standard error, when the command asked for a pipe (`Stdio::piped()`).
    pub stderr: Option<ChildStderr>,
}

/// Starts `command` as an orphan in a session of its own (`setsid`: no controlling terminal,
/// and it outlives the session of whoever started it). What the command's standard streams
/// are, its directory and environment, are `command`'s; an `exec` that fails is returned as
/// `Command::spawn` returns it.
///
/// # Errors
/// `pipe2`, `fork` or `exec` fails, or the intermediate process does not report the orphan's
/// process id.
pub fn spawn(command: &mut Command) -> io::Result<Orphan> {
    let (pid_rx, pid_tx) = crate::fdpass::pipe()?;
    let tx = pid_tx.as_raw_fd();
    // SAFETY: the closure runs in the child between fork and exec and calls only fork, write,
    // _exit and setsid, which are async-signal-safe (and glibc's fork resets its own locks in
    // the child it makes, so this child may fork again whatever threads the caller has); it
    // allocates nothing (the error of a failed call is the raw OS error). The intermediate
    // (fork's parent side) writes the orphan's id on the pipe and exits without returning into
    // Rust; the orphan returns and goes on to exec.
    unsafe {
        command.pre_exec(move || {
            let pid = libc::fork();
            if pid < 0 {
                return Err(io::Error::last_os_error());
            }
            if pid > 0 {
                let bytes = pid.to_ne_bytes();
                let n = libc::write(tx, bytes.as_ptr().cast(), bytes.len());
                libc::_exit(if n == bytes.len() as isize { 0 } else { 1 });
            }
            if libc::setsid() < 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    // `spawn` returns once the orphan has exec'd (or failed to: it reports that itself, on
    // std's own pipe, which it inherited from the intermediate).
    let spawned = command.spawn();
    drop(pid_tx);
    let mut intermediate = spawned?;
    let status = intermediate.wait()?;
    let mut bytes = [0u8; 4];
    let read = File::from(pid_rx).read_exact(&mut bytes);
    if !status.success() || read.is_err() {
        return Err(io::Error::other(format!(
            "the intermediate process that starts it ended without its process id ({status})"
        )));
    }
    let pid = i32::from_ne_bytes(bytes);
    // SAFETY: pidfd_open takes a process id and flags, no memory.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    let pidfd = if fd >= 0 {
        // SAFETY: pidfd_open succeeded: the descriptor is new and owned by nothing else.
        Some(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
    } else {
        // ESRCH: it has exited already (and its new parent collected it); ENOSYS: a kernel
        // before 5.3, where it is watched by its id.
        None
    };
    Ok(Orphan {
        pid,
        pidfd,
        stderr: intermediate.stderr.take(),
    })
}

impl Orphan {
    /// Its process id.
    pub fn id(&self) -> u32 {
        self.pid as u32
    }

    /// Whether it has exited (its new parent may not have collected it yet).
    ///
    /// # Errors
    /// `poll` on the pidfd fails.
    pub fn exited(&self) -> io::Result<bool> {
        match &self.pidfd {
            Some(fd) => {
                let mut p = libc::pollfd {
                    fd: fd.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                };
                // SAFETY: `p` is one valid pollfd for the duration of the call; no wait.
                let r = unsafe { libc::poll(&mut p, 1, 0) };
                if r < 0 {
                    return Err(crate::error::last("poll(pidfd)", None));
                }
                Ok(r > 0)
            }
            None => Ok(!alive(self.pid)),
        }
    }

    /// Sends it `SIGKILL` (through the pidfd, which never names another process).
    ///
    /// # Errors
    /// The signal could not be sent (it has gone already: `ESRCH`).
    pub fn kill(&self) -> io::Result<()> {
        let r = match &self.pidfd {
            // SAFETY: pidfd_send_signal takes a pidfd, a signal number and no siginfo (null).
            Some(fd) => unsafe {
                libc::syscall(
                    libc::SYS_pidfd_send_signal,
                    fd.as_raw_fd(),
                    libc::SIGKILL,
                    std::ptr::null::<libc::siginfo_t>(),
                    0,
                )
            },
            None if alive(self.pid) => {
                // SAFETY: kill takes a process id and a signal number, no memory.
                i64::from(unsafe { libc::kill(self.pid, libc::SIGKILL) })
            }
            None => return Err(io::Error::from_raw_os_error(libc::ESRCH)),
        };
        if r < 0 {
            return Err(crate::error::last("pidfd_send_signal", None));
        }
        Ok(())
    }
}

/// Whether process `pid` exists and is not a zombie (from `/proc`, without a pidfd: for a
/// process that is not one's own child).
pub fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // "PID (COMM) STATE ...": the state follows the last ')'.
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with(['Z', 'X'])),
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Stdio;
    use std::time::{Duration, Instant};

    fn wait_exited(o: &Orphan) -> bool {
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(10) {
            if o.exited().unwrap() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        false
    }

    #[test]
    fn an_orphan_is_not_our_child_and_is_watched_until_it_exits() {
        let mut cmd = Command::new("/bin/sh");
        cmd.args(["-c", "echo started >&2; sleep 0.3"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut o = spawn(&mut cmd).unwrap();
        let pid = o.id();
        assert_ne!(pid, std::process::id());
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let ppid: u32 = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse().ok())
            .unwrap_or(0);
        assert_ne!(ppid, 0, "the orphan runs: {stat}");
        assert_ne!(
            ppid,
            std::process::id(),
            "the orphan's parent is not this process"
        );
        let mut said = String::new();
        o.stderr.take().unwrap().read_to_string(&mut said).unwrap();
        assert!(said.contains("started"), "{said}");
        assert!(wait_exited(&o), "the orphan exited");
    }

    #[test]
    fn a_failed_exec_is_an_error_and_a_running_orphan_can_be_killed() {
        let e = spawn(&mut Command::new("/nonexistent/program")).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound, "{e}");
        let mut cmd = Command::new("/bin/sleep");
        cmd.arg("30")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let o = spawn(&mut cmd).unwrap();
        assert!(!o.exited().unwrap());
        o.kill().unwrap();
        assert!(wait_exited(&o), "killed");
    }
}
