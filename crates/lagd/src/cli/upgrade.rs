//! `lagctl upgrade`: a planned upgrade of a running lagd without a service manager. lagctl
//! starts the new lagd binary with the running one's arguments and `--take-over`, in a session
//! of its own and as an orphan (the child of the service manager or init, not of lagctl:
//! [`lagd_sys::orphan`]); the new lagd asks the running one for the bond over the control
//! socket ([`handover`](crate::daemon::handover)), and the running one exits without undoing
//! anything once the new one has adopted it: the kernel path never stops forwarding.
//!
//! The new lagd's standard error comes to lagctl until it has taken over (then it logs where
//! the old one logged): when it fails to start, refuses its configuration or does not take
//! over in time, lagctl says why, exits non-zero, and the running lagd keeps the bond (lagctl
//! exits once it answers on its control socket again, which it took back from the handover).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::anyhow;

use super::CliError;
use super::show::{ShowArgs, socket_path_for};
use crate::control::ADOPT_TIME;

/// How long the new lagd may take to start and check its configuration before it asks.
const START_TIME: Duration = Duration::from_secs(10);
/// How long the running lagd may take, after a handover failed, to answer on its control
/// socket again (it takes the socket's name back once it reads the end of the handover's
/// connection, which a busy one-CPU machine may run after the new lagd's exit).
const RETURN_TIME: Duration = Duration::from_secs(5);

/// Arguments of `lagctl upgrade`.
#[derive(Debug, Clone, clap::Args)]
pub struct UpgradeArgs {
    /// The bond; may be left out when only one lagd runs in this network namespace.
    pub bond: Option<String>,
    /// The control socket file (default: /run/lagd/netns-N/BOND.sock, N this network
    /// namespace's inode). An abstract socket cannot be handed over.
    #[arg(long)]
    pub control: Option<PathBuf>,
    /// The new lagd binary (default: the file the running lagd was started from, as it is on
    /// disk now: after a package upgrade, the new one).
    #[arg(long, value_name = "PATH")]
    pub binary: Option<PathBuf>,
}

/// `lagctl upgrade`.
pub fn main(args: UpgradeArgs) -> Result<(), CliError> {
    if lagd_sys::lock::effective_uid() != 0 {
        return Err(CliError::Failed(anyhow!(
            "only root may upgrade lagd (uid {})",
            lagd_sys::lock::effective_uid()
        )));
    }
    let endpoint = socket_path_for(&ShowArgs {
        bond: args.bond,
        json: false,
        control: args.control,
    })?;
    let old = {
        let stream = endpoint
            .connect()
            .map_err(|e| anyhow!("no lagd answers on {endpoint}: {e}"))?;
        lagd_sys::peer::peer_credentials(&stream)
            .map_err(|e| anyhow!("{endpoint}: {e}"))?
            .pid
    };
    if old == 0 {
        return Err(CliError::Failed(anyhow!(
            "the lagd on {endpoint} runs in another PID namespace: upgrade it from there"
        )));
    }
    let proc_dir = PathBuf::from(format!("/proc/{old}"));
    let cmdline = std::fs::read(proc_dir.join("cmdline"))
        .map_err(|e| anyhow!("the running lagd's arguments (pid {old}): {e}"))?;
    let arguments = lagd_arguments(&cmdline);
    let binary = match args.binary {
        Some(b) => b,
        None => started_from(&proc_dir.join("exe"))
            .map_err(|e| anyhow!("the running lagd's binary (pid {old}): {e}"))?,
    };
    // Relative paths in the arguments (`--config lagd.toml`) mean what they meant to it.
    let cwd = std::fs::read_link(proc_dir.join("cwd"))
        .map_err(|e| anyhow!("the running lagd's directory (pid {old}): {e}"))?;
    let mut command = Command::new(&binary);
    command
        .current_dir(&cwd)
        .args(&arguments)
        .arg("--take-over")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    // Not as lagctl's child but as an orphan, the service manager's child from the start: a
    // service manager takes the new lagd as the main process (`MAINPID=`) while lagctl still
    // runs, and systemd does not wait, when the service stops, for a main process that was not
    // its own child then (`lagd_sys::orphan`).
    let mut child = lagd_sys::orphan::spawn(&mut command).map_err(|e| {
        anyhow!(
            "starting {}: {e}; lagd {old} keeps the bond",
            binary.display()
        )
    })?;
    let new = child.id();
    let (said, ended) = collect_stderr(&mut child);
    let deadline = Instant::now() + START_TIME + ADOPT_TIME;
    let keeps = format!("lagd {old} keeps the bond");
    // Said once the running lagd answers on its socket again, so that the next lagctl finds it.
    let keeps_answering = || {
        if answers(&endpoint, old, RETURN_TIME) {
            keeps.clone()
        } else {
            format!(
                "lagd {old} keeps the bond, but has not answered on {endpoint} within {} s",
                RETURN_TIME.as_secs()
            )
        }
    };
    let failed = |why: String, after: &str, said: &mpsc::Receiver<Vec<u8>>| {
        let text = String::from_utf8_lossy(
            &said
                .recv_timeout(Duration::from_secs(1))
                .unwrap_or_default(),
        )
        .trim()
        .to_owned();
        let text = if text.is_empty() {
            "(it said nothing)".to_owned()
        } else {
            text
        };
        CliError::Failed(anyhow!(
            "the new lagd ({}, pid {new}) {why}; {after}. It said:\n{text}",
            binary.display()
        ))
    };
    let mut closed = false;
    loop {
        // Its standard error is the old lagd's log once it has taken over.
        closed = closed || ended.try_recv().is_ok();
        if closed && answers(&endpoint, new, Duration::ZERO) {
            println!("upgraded: lagd {old} handed over to lagd {new}");
            return Ok(());
        }
        // Its exit status goes to its parent, the service manager or init: the reason is what
        // it said. Its standard error also closes when it exits, a moment before the exit
        // shows, so that does not tell: it had taken over only if the old lagd let go, which
        // the old one does by exiting.
        if child.exited().map_err(CliError::Io)? {
            if lagd_sys::orphan::alive(old as i32) {
                return Err(failed(
                    "exited before taking over".into(),
                    &keeps_answering(),
                    &said,
                ));
            }
            return Err(failed(
                "exited while taking over".into(),
                &format!(
                    "lagd {old} had let go: no lagd drives the bond (its kernel path \
                     forwards on the last table until the bound; start lagd)"
                ),
                &said,
            ));
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            return Err(failed(
                format!(
                    "did not take over within {} s (stopped)",
                    (START_TIME + ADOPT_TIME).as_secs()
                ),
                &keeps_answering(),
                &said,
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Whether the lagd with pid `pid` answers on `endpoint` within `within`.
fn answers(endpoint: &crate::control::Endpoint, pid: u32, within: Duration) -> bool {
    let until = Instant::now() + within;
    loop {
        let serving = endpoint
            .connect()
            .ok()
            .and_then(|s| lagd_sys::peer::peer_credentials(&s).ok())
            .is_some_and(|p| p.pid == pid);
        if serving || Instant::now() >= until {
            return serving;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Reads `child`'s standard error on a thread: what it said comes on the first channel once
/// it closes (the second says when).
fn collect_stderr(
    child: &mut lagd_sys::orphan::Orphan,
) -> (mpsc::Receiver<Vec<u8>>, mpsc::Receiver<()>) {
    let (said_tx, said) = mpsc::channel();
    let (ended_tx, ended) = mpsc::channel();
    if let Some(mut pipe) = child.stderr.take() {
        std::thread::spawn(move || {
            let mut text = Vec::new();
            let _ = (&mut pipe).take(1 << 20).read_to_end(&mut text);
            let _ = ended_tx.send(());
            let _ = said_tx.send(text);
        });
    }
    (said, ended)
}

/// The running lagd's arguments from its `/proc/PID/cmdline` (NUL-separated, the program
/// first), without the program and without a `--take-over` of its own start.
fn lagd_arguments(cmdline: &[u8]) -> Vec<std::ffi::OsString> {
    use std::os::unix::ffi::OsStrExt;
    cmdline
        .split(|&b| b == 0)
        .skip(1)
        .filter(|a| !a.is_empty() && *a != b"--take-over")
        .map(|a| std::ffi::OsStr::from_bytes(a).to_owned())
        .collect()
}

/// The path the process whose `/proc/PID/exe` is `exe` was started from, as it names a file
/// now: a binary replaced on disk (a package upgrade) reads as "PATH (deleted)", and the new
/// file at PATH is the one to run.
fn started_from(exe: &Path) -> std::io::Result<PathBuf> {
    let link = std::fs::read_link(exe)?;
    let text = link.to_string_lossy();
    Ok(match text.strip_suffix(" (deleted)") {
        Some(path) => PathBuf::from(path),
        None => link,
    })
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn arguments_are_the_running_ones_without_the_program_or_take_over() {
        let cmdline = b"/usr/sbin/lagd\0--bond\0bond0\0--take-over\0--members\0a,b\0";
        let args: Vec<String> = lagd_arguments(cmdline)
            .into_iter()
            .map(|a| a.into_string().unwrap())
            .collect();
        assert_eq!(args, ["--bond", "bond0", "--members", "a,b"]);
    }

    #[test]
    fn a_replaced_binary_is_run_from_its_path() {
        let dir = std::env::temp_dir().join(format!("lagctl-upgrade-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let link = dir.join("exe");
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink("/usr/sbin/lagd (deleted)", &link).unwrap();
        assert_eq!(started_from(&link).unwrap(), Path::new("/usr/sbin/lagd"));
        std::fs::remove_file(&link).unwrap();
        std::os::unix::fs::symlink("/usr/sbin/lagd", &link).unwrap();
        assert_eq!(started_from(&link).unwrap(), Path::new("/usr/sbin/lagd"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
