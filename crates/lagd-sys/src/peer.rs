//! Who is at the other end of a connected Unix socket: `SO_PEERCRED` and `SO_PEERGROUPS`, as the
//! kernel recorded them when the peer connected (not what the peer claims).

use std::io;
use std::os::fd::{AsFd, AsRawFd};

use crate::error;
use crate::socket::{PlainData, getsockopt};

// SAFETY: `ucred` is `#[repr(C)]` {pid_t, uid_t, gid_t}: integers only.
unsafe impl PlainData for libc::ucred {}

/// The credentials of a Unix socket's peer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeerCredentials {
    /// The peer's process id (in the reader's PID namespace; 0 when it is not visible there).
    pub pid: u32,
    /// The peer's effective user id.
    pub uid: u32,
    /// The peer's effective group id.
    pub gid: u32,
    /// The peer's supplementary groups (empty where the kernel does not report them).
    pub groups: Vec<u32>,
}

/// Most supplementary groups read (the kernel's limit, `NGROUPS_MAX`, is 65536; a peer with more
/// than this many has the rest left out).
const MAX_GROUPS: usize = 1024;

/// Reads the credentials of `socket`'s peer (`socket` is a connected `AF_UNIX` socket).
pub fn peer_credentials(socket: &impl AsFd) -> io::Result<PeerCredentials> {
    let fd = socket.as_fd();
    let cred: libc::ucred = getsockopt(
        fd,
        libc::SOL_SOCKET,
        libc::SO_PEERCRED,
        "getsockopt(SO_PEERCRED)",
    )?;
    let mut groups = vec![0 as libc::gid_t; MAX_GROUPS];
    let mut len = size_of_val(groups.as_slice()) as libc::socklen_t;
    // SAFETY: `groups` is `len` writable bytes and `len` is a valid in/out length; the kernel
    // writes at most `len` bytes (or fails with ERANGE).
    let ret = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERGROUPS,
            groups.as_mut_ptr().cast(),
            &mut len,
        )
    };
    match error::check(ret, "getsockopt(SO_PEERGROUPS)", None) {
        Ok(_) => groups.truncate(len as usize / size_of::<libc::gid_t>()),
        // An old kernel (before 4.13) or more groups than read: the primary group only.
        Err(_) => groups.clear(),
    }
    Ok(PeerCredentials {
        pid: u32::try_from(cred.pid).unwrap_or(0),
        uid: cred.uid,
        gid: cred.gid,
        groups,
    })
}

#[cfg(test)]
mod test {
    use super::*;
    use std::os::unix::net::UnixStream;

    #[test]
    fn reads_own_credentials() {
        let (a, _b) = UnixStream::pair().unwrap();
        let c = peer_credentials(&a).unwrap();
        assert_eq!(c.pid, std::process::id());
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let field = |k: &str| -> u32 {
            let line = status.lines().find(|l| l.starts_with(k)).unwrap();
            // Real, effective, saved, filesystem: the effective one.
            line.split_whitespace().nth(2).unwrap().parse().unwrap()
        };
        assert_eq!(c.uid, field("Uid:"));
        assert_eq!(c.gid, field("Gid:"));
        let groups: Vec<u32> = status
            .lines()
            .find(|l| l.starts_with("Groups:"))
            .unwrap()
            .split_whitespace()
            .skip(1)
            .map(|g| g.parse().unwrap())
            .collect();
        let mut got = c.groups.clone();
        got.sort_unstable();
        let mut want = groups;
        want.sort_unstable();
        assert_eq!(got, want);
    }
}
