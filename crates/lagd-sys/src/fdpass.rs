//! Passing descriptors between processes, so that what forwards outlives one lagd and is
//! adopted by the next: `SCM_RIGHTS` on Unix sockets (the service manager's file descriptor
//! store, `sd_notify` with `FDSTORE=1`), the descriptors a service manager hands a started
//! process (`LISTEN_PID`, `LISTEN_FDS`, `LISTEN_FDNAMES`, from descriptor 3 on), and starting a
//! program with descriptors at given numbers (what a service manager does; the tests' supervisor
//! uses it).

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::error;

/// The most descriptors one message carries (the kernel's `SCM_MAX_FD` is 253).
pub const MAX_FDS: usize = 253;

/// The first descriptor a service manager passes (`SD_LISTEN_FDS_START`).
pub const LISTEN_FDS_START: RawFd = 3;

/// Bytes of control buffer for `n` descriptors (`CMSG_SPACE`), as a whole number of `u64`s so
/// the buffer is aligned for `cmsghdr`.
fn cmsg_words(n: usize) -> usize {
    // SAFETY: CMSG_SPACE is a pure computation on its argument.
    let bytes = unsafe { libc::CMSG_SPACE((n * size_of::<RawFd>()) as u32) } as usize;
    bytes.div_ceil(size_of::<u64>())
}

/// Sends `data` with `fds` attached (`SCM_RIGHTS`) on the connected socket `socket`.
pub fn send_with_fds(socket: &impl AsFd, data: &[u8], fds: &[BorrowedFd<'_>]) -> io::Result<usize> {
    if fds.len() > MAX_FDS {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} descriptors, at most {MAX_FDS} per message", fds.len()),
        ));
    }
    let mut iov = libc::iovec {
        iov_base: data.as_ptr().cast_mut().cast(),
        iov_len: data.len(),
    };
    let mut control = vec![0u64; cmsg_words(fds.len().max(1))];
    // SAFETY: msghdr is plain data; all-zero is a valid empty message.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    if !fds.is_empty() {
        msg.msg_control = control.as_mut_ptr().cast();
        // SAFETY: CMSG_SPACE is a pure computation on its argument.
        msg.msg_controllen =
            unsafe { libc::CMSG_SPACE((fds.len() * size_of::<RawFd>()) as u32) } as usize;
        // SAFETY: `msg_control` points at `control`, at least `msg_controllen` bytes, aligned
        // for cmsghdr (u64 words), so CMSG_FIRSTHDR returns a pointer into it with room for one
        // header and `fds.len()` descriptors (CMSG_SPACE of that many); the writes stay inside.
        unsafe {
            let cmsg = libc::CMSG_FIRSTHDR(&msg);
            (*cmsg).cmsg_level = libc::SOL_SOCKET;
            (*cmsg).cmsg_type = libc::SCM_RIGHTS;
            (*cmsg).cmsg_len = libc::CMSG_LEN((fds.len() * size_of::<RawFd>()) as u32) as usize;
            let data = libc::CMSG_DATA(cmsg).cast::<RawFd>();
            for (k, fd) in fds.iter().enumerate() {
                data.add(k).write_unaligned(fd.as_raw_fd());
            }
        }
    }
    // SAFETY: `msg` describes `iov` (valid for `data.len()` bytes of reads) and `control`, both
    // alive for the call; sendmsg only reads them.
    let n = unsafe { libc::sendmsg(socket.as_fd().as_raw_fd(), &msg, libc::MSG_NOSIGNAL) };
    usize::try_from(n).map_err(|_| error::last("sendmsg(SCM_RIGHTS)", None))
}

/// Receives one message into `buf` on `socket`, with up to `max_fds` descriptors (marked
/// close-on-exec). More than `max_fds` is an error (those the buffer had no room for are
/// closed by the kernel, `MSG_CTRUNC`; the others when the error drops them).
pub fn recv_with_fds(
    socket: &impl AsFd,
    buf: &mut [u8],
    max_fds: usize,
) -> io::Result<(usize, Vec<OwnedFd>)> {
    let max_fds = max_fds.min(MAX_FDS);
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let mut control = vec![0u64; cmsg_words(max_fds.max(1))];
    // SAFETY: msghdr is plain data; all-zero is a valid empty message.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = control.len() * size_of::<u64>();
    // SAFETY: `msg` describes `iov` (valid for `buf.len()` bytes of writes) and `control`
    // (`msg_controllen` bytes), both alive and exclusively ours for the call.
    let n = unsafe { libc::recvmsg(socket.as_fd().as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC) };
    let n = usize::try_from(n).map_err(|_| error::last("recvmsg(SCM_RIGHTS)", None))?;
    let mut fds = Vec::new();
    // SAFETY: the kernel filled `control` and set `msg_controllen`; CMSG_FIRSTHDR/NXTHDR walk
    // only headers inside that length, and each SCM_RIGHTS header's data holds
    // (cmsg_len - CMSG_LEN(0)) / sizeof(int) descriptors the kernel installed in this process
    // for us: each is owned by nobody else, so taking it as an OwnedFd is sound.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                let bytes = (*cmsg).cmsg_len - libc::CMSG_LEN(0) as usize;
                let data = libc::CMSG_DATA(cmsg).cast::<RawFd>();
                for k in 0..bytes / size_of::<RawFd>() {
                    fds.push(OwnedFd::from_raw_fd(data.add(k).read_unaligned()));
                }
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
    }
    // The buffer's rounding may leave room for more than asked: still more than asked.
    if msg.msg_flags & libc::MSG_CTRUNC != 0 || fds.len() > max_fds {
        return Err(io::Error::other(format!(
            "more descriptors than the {max_fds} asked for came with a message"
        )));
    }
    Ok((n, fds))
}

/// Descriptors handed to this process by a service manager, with their names.
static LISTEN_TAKEN: AtomicBool = AtomicBool::new(false);

/// Takes the descriptors a service manager passed to this process: `LISTEN_FDS` of them from
/// descriptor 3 on, named by `LISTEN_FDNAMES` (colon-separated; `unknown` where missing), if
/// `LISTEN_PID` is this process. Each is made close-on-exec. Only the first call takes them
/// (later ones get nothing), so no descriptor is owned twice.
pub fn take_listen_fds() -> io::Result<Vec<(String, OwnedFd)>> {
    let pid = std::env::var("LISTEN_PID").ok();
    let count = std::env::var("LISTEN_FDS").ok();
    let names = std::env::var("LISTEN_FDNAMES").ok();
    let Some(count) = listen_count(pid.as_deref(), count.as_deref(), std::process::id())? else {
        return Ok(Vec::new());
    };
    if LISTEN_TAKEN.swap(true, Ordering::AcqRel) {
        return Ok(Vec::new());
    }
    let names: Vec<&str> = names
        .as_deref()
        .map_or(Vec::new(), |n| n.split(':').collect());
    let mut taken = Vec::new();
    for k in 0..count {
        let fd = LISTEN_FDS_START + k as RawFd;
        // SAFETY: F_GETFD only reads the descriptor's flags; an unopened number gives EBADF.
        let flags = unsafe { libc::fcntl(fd, libc::F_GETFD) };
        error::check(flags, "fcntl(F_GETFD) on a passed descriptor", None)?;
        // SAFETY: as above, F_SETFD only sets this descriptor's flags.
        let ret = unsafe { libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC) };
        error::check(ret, "fcntl(F_SETFD)", None)?;
        // SAFETY: the service manager opened `fd` for this process (LISTEN_PID is ours and
        // F_GETFD found it open); LISTEN_TAKEN makes this the only place that takes it.
        let owned = unsafe { OwnedFd::from_raw_fd(fd) };
        let name = names.get(k).copied().unwrap_or("unknown").to_owned();
        taken.push((name, owned));
    }
    Ok(taken)
}

/// How many descriptors `LISTEN_FDS` hands process `me`: `None` when the variables are unset
/// or meant for another process.
fn listen_count(pid: Option<&str>, count: Option<&str>, me: u32) -> io::Result<Option<usize>> {
    let (Some(pid), Some(count)) = (pid, count) else {
        return Ok(None);
    };
    let bad = |what: &str| io::Error::new(io::ErrorKind::InvalidInput, what.to_owned());
    let pid: u32 = pid
        .trim()
        .parse()
        .map_err(|_| bad("LISTEN_PID is not a number"))?;
    if pid != me {
        return Ok(None);
    }
    let count: usize = count
        .trim()
        .parse()
        .map_err(|_| bad("LISTEN_FDS is not a number"))?;
    if count > MAX_FDS {
        return Err(bad("LISTEN_FDS is more than 253"));
    }
    Ok(Some(count))
}

/// Arranges for `command`'s child to get `fds` as descriptors 3, 4, ... (in order), as a
/// service manager passes them, and every other inherited descriptor closed-on-exec as usual.
/// The caller sets `LISTEN_FDS` and `LISTEN_FDNAMES`; `LISTEN_PID` must be the child's pid,
/// which only the child knows: run it through `sh -c 'LISTEN_PID=$$ exec PROGRAM "$@"'`.
pub fn pass_fds(command: &mut Command, fds: Vec<OwnedFd>) -> &mut Command {
    let raw: Vec<RawFd> = fds.iter().map(AsRawFd::as_raw_fd).collect();
    // SAFETY: the closure runs in the child between fork and exec and calls only fcntl and
    // dup2, which are async-signal-safe; it touches no allocator and no lock. `fds` are moved
    // into the closure, so the numbers in `raw` stay open in the parent until the command is
    // dropped, and so in the child at fork.
    unsafe {
        command.pre_exec(move || {
            let _keep = &fds;
            // First out of the way of 3..3+n, then into place (dup2 clears close-on-exec).
            let mut high = Vec::with_capacity(raw.len());
            for &fd in &raw {
                let moved = libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 64 + raw.len() as RawFd + 3);
                if moved < 0 {
                    return Err(io::Error::last_os_error());
                }
                high.push(moved);
            }
            for (k, &fd) in high.iter().enumerate() {
                if libc::dup2(fd, LISTEN_FDS_START + k as RawFd) < 0 {
                    return Err(io::Error::last_os_error());
                }
            }
            Ok(())
        })
    }
}

/// Creates a pipe, both ends close-on-exec (the launcher's requests and answers, an
/// orphan's process id).
pub(crate) fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: `fds` is a valid array of two ints for pipe2 to fill.
    let r = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) };
    if r != 0 {
        return Err(error::last("pipe2", None));
    }
    // SAFETY: pipe2 succeeded: both descriptors are new and owned by nothing else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Points this process's standard output and standard error at `fd` (`dup2` onto 1 and 2):
/// what it logs from now on goes there, and whatever they were open on before is let go.
pub fn redirect_stdout_stderr(fd: BorrowedFd<'_>) -> io::Result<()> {
    for target in [libc::STDOUT_FILENO, libc::STDERR_FILENO] {
        // SAFETY: dup2 onto 1 and 2 replaces those descriptors atomically; `fd` is open (it
        // is borrowed), and no Rust object owns 1 or 2 (std's handles only write to them).
        let ret = unsafe { libc::dup2(fd.as_raw_fd(), target) };
        error::check(ret, "dup2 onto the standard output", None)?;
    }
    Ok(())
}

#[cfg(test)]
mod test {
    use super::*;
    use std::io::{Read, Seek, Write};
    use std::os::unix::net::UnixDatagram;

    #[test]
    fn descriptors_cross_a_socket_and_stay_the_same_file() {
        let (a, b) = UnixDatagram::pair().unwrap();
        let mut file = tempfile_in_tmp("fdpass");
        file.write_all(b"lagd").unwrap();
        let sent = send_with_fds(&a, b"FDSTORE=1\nFDNAME=tap", &[file.as_fd()]).unwrap();
        assert_eq!(sent, 20);
        let mut buf = [0u8; 64];
        let (n, mut fds) = recv_with_fds(&b, &mut buf, 4).unwrap();
        assert_eq!(&buf[..n], b"FDSTORE=1\nFDNAME=tap");
        assert_eq!(fds.len(), 1);
        let mut got = std::fs::File::from(fds.remove(0));
        got.rewind().unwrap();
        let mut text = String::new();
        got.read_to_string(&mut text).unwrap();
        assert_eq!(text, "lagd");
        // No descriptors: a plain message.
        send_with_fds(&a, b"READY=1", &[]).unwrap();
        let (n, fds) = recv_with_fds(&b, &mut buf, 4).unwrap();
        assert_eq!((&buf[..n], fds.len()), (&b"READY=1"[..], 0));
        // More than asked for is an error, not a silent loss.
        send_with_fds(&a, b"x", &[file.as_fd(), file.as_fd()]).unwrap();
        assert!(recv_with_fds(&b, &mut buf, 1).is_err());
    }

    #[test]
    fn listen_fds_are_for_the_process_named() {
        assert_eq!(listen_count(None, Some("2"), 7).unwrap(), None);
        assert_eq!(listen_count(Some("8"), Some("2"), 7).unwrap(), None);
        assert_eq!(listen_count(Some("7"), Some("2"), 7).unwrap(), Some(2));
        assert!(listen_count(Some("7"), Some("x"), 7).is_err());
        assert!(listen_count(Some("7"), Some("300"), 7).is_err());
    }

    #[test]
    fn a_child_gets_the_descriptors_at_three_on() {
        let mut file = tempfile_in_tmp("passfds");
        file.write_all(b"three").unwrap();
        file.rewind().unwrap();
        let mut other = tempfile_in_tmp("passfds4");
        other.write_all(b"four").unwrap();
        other.rewind().unwrap();
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "cat <&3; cat <&4"]);
        pass_fds(&mut cmd, vec![OwnedFd::from(file), OwnedFd::from(other)]);
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{out:?}");
        assert_eq!(out.stdout, b"threefour");
    }

    fn tempfile_in_tmp(tag: &str) -> std::fs::File {
        let path = std::env::temp_dir().join(format!("lagd-sys-{tag}-{}", std::process::id()));
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .unwrap();
        std::fs::remove_file(&path).unwrap();
        f
    }
}
