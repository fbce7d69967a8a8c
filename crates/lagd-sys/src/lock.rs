//! Advisory locks on files (`flock`) and the calling process's effective user id: what the
//! daemon needs to claim a bond or a member in a directory only root can write, where no other
//! user can take a name first.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;

use crate::error;

/// Takes an exclusive `flock` on `file` without waiting. `Ok(true)`: this descriptor holds the
/// lock now (until it is closed, however the process ends); `Ok(false)`: another open file
/// description holds it.
pub fn try_lock_exclusive(file: &File) -> io::Result<bool> {
    // SAFETY: flock takes a descriptor `file` keeps open for the call and an operation flag; it
    // touches no memory of ours.
    let ret = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    match error::check(ret, "flock(LOCK_EX|LOCK_NB)", None) {
        Ok(_) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(false),
        Err(e) => Err(e),
    }
}

/// The calling process's effective user id.
pub fn effective_uid() -> u32 {
    // SAFETY: geteuid has no arguments, cannot fail and touches no memory of ours.
    unsafe { libc::geteuid() }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn a_lock_is_refused_to_a_second_open_file_and_free_once_closed() {
        let path = std::env::temp_dir().join(format!("lagd-sys-lock-{}", std::process::id()));
        let first = File::create(&path).unwrap();
        assert!(try_lock_exclusive(&first).unwrap());
        // The same descriptor may take it again; another open of the file may not.
        assert!(try_lock_exclusive(&first).unwrap());
        let second = File::open(&path).unwrap();
        assert!(!try_lock_exclusive(&second).unwrap());
        drop(first);
        assert!(try_lock_exclusive(&second).unwrap());
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn effective_uid_is_the_one_proc_reports() {
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let line = status.lines().find(|l| l.starts_with("Uid:")).unwrap();
        let euid: u32 = line.split_whitespace().nth(2).unwrap().parse().unwrap();
        assert_eq!(effective_uid(), euid);
    }
}
