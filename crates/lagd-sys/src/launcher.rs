//! A launcher: a process forked at the very start of lagd, before lagd opens anything, that
//! runs one fixed command when lagd asks (lagd's seccomp filter refuses `execve`, and a
//! running lagd keeps only the capabilities it needs; the launcher keeps the ones it started
//! with).
//!
//! The launcher holds no descriptor but its two pipes: everything else it inherited is closed at
//! once (a service manager's `LISTEN_FDS` included), so it never keeps the bond's TAP, a tcx link
//! or a socket of lagd's alive, and its standard input, output and error are `/dev/null`. Not
//! even lagd's standard error: a lagd that `lagctl upgrade` started writes it into a pipe to
//! lagctl until it has taken over, and lagctl waits for that pipe to close (a launcher keeping
//! it open would have lagctl wait in vain). It dies with the thread that forked
//! it (`PR_SET_PDEATHSIG`, `SIGKILL`), so it never outlives lagd; the command it runs may (it is
//! not killed with it).
//!
//! The protocol: lagd writes one byte to ask; the launcher runs the command (standard input on
//! `/dev/null`, standard output and error captured) and answers with one line, `ok`, `exit N`,
//! `signal N` or `error TEXT` (the command could not be started), after which whatever the
//! command printed (its standard output, then its standard error) follows on the same line after
//! a tab, newlines and tabs turned into spaces.

use std::ffi::OsString;
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::path::PathBuf;
use std::process::{Command, Stdio};

/// lagd's end of a launcher: ask it to run its command, read its answers.
#[derive(Debug)]
pub struct Launcher {
    ask: File,
    answers: File,
    buffer: Vec<u8>,
    pid: i32,
    command: Vec<OsString>,
}

/// The number of threads of this process (`/proc/self/task`).
fn threads() -> io::Result<usize> {
    Ok(std::fs::read_dir("/proc/self/task")?.count())
}

impl Launcher {
    /// Forks the launcher, which will run `program` with `args`. Call it while the process has
    /// a single thread (lagd does, first thing): the child goes on running Rust code, which a
    /// fork of a process with other threads (holding locks the child never sees released)
    /// would not allow.
    ///
    /// # Errors
    /// The process has more than one thread, or `pipe2` or `fork` fails.
    pub fn fork(program: PathBuf, args: Vec<OsString>) -> io::Result<Self> {
        let n = threads()?;
        if n != 1 {
            return Err(io::Error::other(format!(
                "the launcher must be forked while the process has one thread ({n} now)"
            )));
        }
        let (ask_rx, ask_tx) = crate::fdpass::pipe()?;
        let (answer_rx, answer_tx) = crate::fdpass::pipe()?;
        // SAFETY: getpid has no preconditions.
        let parent = unsafe { libc::getpid() };
        // SAFETY: the process has a single thread (checked above), so the child is a full copy
        // in which every lock is as free as it was here; it runs only the code below and exits
        // through `_exit`, never returning into the caller.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(crate::error::last("fork", None));
        }
        if pid == 0 {
            drop(ask_tx);
            drop(answer_rx);
            let code = serve(parent, ask_rx, answer_tx, program, args);
            // SAFETY: _exit ends the child without running the parent's atexit handlers or
            // flushing its copies of the parent's buffers.
            unsafe { libc::_exit(code) };
        }
        drop(ask_rx);
        drop(answer_tx);
        let answers = File::from(answer_rx);
        crate::socket::set_nonblocking(answers.as_fd())?;
        let mut command = vec![program.into_os_string()];
        command.extend(args);
        Ok(Self {
            ask: File::from(ask_tx),
            answers,
            buffer: Vec::new(),
            pid,
            command,
        })
    }

    /// The launcher's process id.
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// The command the launcher runs, program first.
    pub fn command(&self) -> &[OsString] {
        &self.command
    }

    /// Asks the launcher to run its command once more (it runs one at a time, in order).
    ///
    /// # Errors
    /// The launcher is gone (`EPIPE`).
    pub fn ask(&mut self) -> io::Result<()> {
        self.ask.write_all(b"r")
    }

    /// The descriptor that becomes readable when an answer arrives (for epoll).
    pub fn answers_fd(&self) -> BorrowedFd<'_> {
        self.answers.as_fd()
    }

    /// The answers that arrived, one per line (without the newline); reads what is there
    /// without waiting.
    ///
    /// # Errors
    /// The launcher is gone (end of file: [`io::ErrorKind::UnexpectedEof`]), or `read` fails.
    pub fn answers(&mut self) -> io::Result<Vec<String>> {
        let mut buf = [0u8; 4096];
        loop {
            match self.answers.read(&mut buf) {
                Ok(0) => {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the launcher is gone",
                    ));
                }
                Ok(n) => self.buffer.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        let mut out = Vec::new();
        while let Some(k) = self.buffer.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.buffer.drain(..=k).collect();
            out.push(String::from_utf8_lossy(&line[..k]).into_owned());
        }
        Ok(out)
    }
}

/// The launcher's life: dies with `parent`, closes what it inherited, and runs the command on
/// each request until lagd closes its end. Returns the exit code.
fn serve(parent: i32, ask: OwnedFd, answer: OwnedFd, program: PathBuf, args: Vec<OsString>) -> i32 {
    // SAFETY: prctl(PR_SET_PDEATHSIG) takes a signal number; no memory is passed.
    if unsafe {
        libc::prctl(
            libc::PR_SET_PDEATHSIG,
            libc::SIGKILL as libc::c_ulong,
            0,
            0,
            0,
        )
    } != 0
    {
        return 1;
    }
    // SAFETY: getppid has no preconditions.
    if unsafe { libc::getppid() } != parent {
        // lagd died before the death signal was set up.
        return 0;
    }
    let keep = [ask.as_raw_fd(), answer.as_raw_fd()];
    let inherited: Vec<i32> = match std::fs::read_dir("/proc/self/fd") {
        Ok(dir) => dir
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
            .collect(),
        Err(_) => return 1,
    };
    for fd in inherited {
        if !keep.contains(&fd) {
            // SAFETY: closes a descriptor this process inherited and no Rust value owns (the
            // directory's own descriptor is closed already, and closing it twice is harmless:
            // nothing opens a descriptor in between).
            unsafe { libc::close(fd) };
        }
    }
    // Standard input, output and error on /dev/null (the descriptors closed above).
    let Ok(null) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")
    else {
        return 1;
    };
    for target in [libc::STDIN_FILENO, libc::STDOUT_FILENO, libc::STDERR_FILENO] {
        if null.as_raw_fd() != target {
            // SAFETY: dup2 onto a standard descriptor this process closed above and no Rust
            // value owns; `null` stays open for the call.
            unsafe { libc::dup2(null.as_raw_fd(), target) };
        }
    }
    if null.as_raw_fd() <= libc::STDERR_FILENO {
        // It is one of the three now: keep it.
        std::mem::forget(null);
    }
    let mut ask = File::from(ask);
    let mut answer = File::from(answer);
    let mut byte = [0u8; 1];
    loop {
        match ask.read(&mut byte) {
            Ok(0) => return 0,
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => return 1,
        }
        let line = match Command::new(&program)
            .args(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .output()
        {
            Ok(out) => {
                let mut said = String::from_utf8_lossy(&out.stdout).into_owned();
                said.push(' ');
                said.push_str(&String::from_utf8_lossy(&out.stderr));
                let said = said.replace(['\n', '\t'], " ");
                let status = match (out.status.code(), out.status.success()) {
                    (_, true) => "ok".to_owned(),
                    (Some(c), _) => format!("exit {c}"),
                    (None, _) => format!(
                        "signal {}",
                        std::os::unix::process::ExitStatusExt::signal(&out.status).unwrap_or(0)
                    ),
                };
                format!("{status}\t{}\n", said.trim())
            }
            Err(e) => format!(
                "error starting {}: {}\t\n",
                program.display(),
                e.to_string().replace('\n', " ")
            ),
        };
        if answer.write_all(line.as_bytes()).is_err() {
            return 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_to_fork_a_process_with_other_threads() {
        // A second thread, alive during the call, whatever thread the harness runs this in.
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let other = std::thread::spawn(move || rx.recv());
        let e = Launcher::fork(PathBuf::from("/bin/true"), Vec::new()).unwrap_err();
        drop(tx);
        let _ = other.join();
        assert!(e.to_string().contains("one thread"), "{e}");
    }
}
