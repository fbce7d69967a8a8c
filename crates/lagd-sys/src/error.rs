//! OS errors annotated with the syscall that failed.

use std::error::Error;
use std::fmt;
use std::io;

/// An OS error together with the system call (and, where known, the interface or path) that
/// returned it.
///
/// Setup functions of this crate wrap one of these in the [`io::Error`] they return; the
/// [`io::Error::kind`] is the one the bare OS error would have had. Use [`errno`] to get the
/// raw error number back from such an [`io::Error`].
#[derive(Debug)]
pub struct SyscallError {
    call: &'static str,
    subject: Option<String>,
    os: io::Error,
}

impl SyscallError {
    /// The failing call, for example `"ioctl(TUNSETIFF)"`.
    pub fn call(&self) -> &'static str {
        self.call
    }

    /// The interface name or path the call was about, if any.
    pub fn subject(&self) -> Option<&str> {
        self.subject.as_deref()
    }

    /// The raw `errno` value.
    pub fn errno(&self) -> i32 {
        self.os.raw_os_error().unwrap_or(0)
    }
}

impl fmt::Display for SyscallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.subject {
            Some(subject) => write!(f, "{} on {subject}: {}", self.call, self.os),
            None => write!(f, "{}: {}", self.call, self.os),
        }
    }
}

impl Error for SyscallError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        Some(&self.os)
    }
}

/// The raw `errno` behind an error returned by this crate, whether it is a bare OS error or one
/// annotated with a [`SyscallError`]. `None` for errors that did not come from the OS.
pub fn errno(err: &io::Error) -> Option<i32> {
    if let Some(raw) = err.raw_os_error() {
        return Some(raw);
    }
    err.get_ref()
        .and_then(|inner| inner.downcast_ref::<SyscallError>())
        .map(SyscallError::errno)
}

/// `Some(value)`; `None` when the call only had nothing to do now (a non-blocking descriptor
/// with nothing ready, a receive timeout, a signal): try again later. Other errors as they are.
pub fn nothing_now<T>(r: io::Result<T>) -> io::Result<Option<T>> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
            ) =>
        {
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// Wraps an OS error with the call (and subject) that produced it, keeping its kind.
pub(crate) fn annotate(os: io::Error, call: &'static str, subject: Option<&str>) -> io::Error {
    let kind = os.kind();
    io::Error::new(
        kind,
        SyscallError {
            call,
            subject: subject.map(str::to_owned),
            os,
        },
    )
}

/// `errno` of the last failed call, annotated.
pub(crate) fn last(call: &'static str, subject: Option<&str>) -> io::Error {
    annotate(io::Error::last_os_error(), call, subject)
}

/// Turns a C-style return value (`-1` on failure) into a `Result`, annotating the error.
pub(crate) fn check(
    ret: libc::c_int,
    call: &'static str,
    subject: Option<&str>,
) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(last(call, subject))
    } else {
        Ok(ret)
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn errno_survives_annotation() {
        let bare = io::Error::from_raw_os_error(libc::ENODEV);
        let wrapped = annotate(bare, "ioctl(SIOCGIFINDEX)", Some("nope0"));
        assert_eq!(errno(&wrapped), Some(libc::ENODEV));
        assert_eq!(
            wrapped.kind(),
            io::Error::from_raw_os_error(libc::ENODEV).kind()
        );
        let text = wrapped.to_string();
        assert!(text.starts_with("ioctl(SIOCGIFINDEX) on nope0: "), "{text}");
        assert_eq!(
            errno(&io::Error::from_raw_os_error(libc::EAGAIN)),
            Some(libc::EAGAIN)
        );
        assert_eq!(errno(&io::Error::other("not from the OS")), None);
    }

    #[test]
    fn nothing_now_only_for_would_block_and_interrupted() {
        assert_eq!(nothing_now(Ok(3)).unwrap(), Some(3));
        for raw in [libc::EAGAIN, libc::EINTR] {
            let e = io::Error::from_raw_os_error(raw);
            assert_eq!(nothing_now::<u8>(Err(e)).unwrap(), None);
        }
        let e = annotate(io::Error::from_raw_os_error(libc::EAGAIN), "recv", None);
        assert_eq!(nothing_now::<u8>(Err(e)).unwrap(), None);
        let e = nothing_now::<u8>(Err(io::Error::from_raw_os_error(libc::ENOBUFS))).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ENOBUFS));
    }
}
