//! `lagctl stop`: a stop that leaves the kernel path to the next lagd. Under systemd,
//! `systemctl restart` is a stop (`ExecStop=`, then `SIGTERM`) followed by a start, and lagd
//! cannot tell it from a stop by the signal alone; the unit's `ExecStop=lagctl stop --unit %n
//! %i` asks the service manager whether a restart job runs for the unit (`systemctl list-jobs`,
//! read-only: no job is queued, so nothing waits on this one). If so lagd is told to leave
//! (see [`handover`](crate::daemon::handover)): its descriptors stay in the unit's store,
//! which systemd keeps while a job runs for the unit, and the started lagd adopts them;
//! otherwise lagctl does nothing and the `SIGTERM` that follows stops lagd as always,
//! restoring the members. `--leave` leaves whatever comes next.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use anyhow::anyhow;

use super::CliError;
use super::show::{ShowArgs, socket_path_for};

/// How long lagctl waits for lagd to answer and exit.
const LEAVE_TIME: Duration = Duration::from_secs(5);

/// Arguments of `lagctl stop`.
#[derive(Debug, Clone, clap::Args)]
#[command(group(clap::ArgGroup::new("how").required(true).args(["unit", "leave"])))]
pub struct StopArgs {
    /// The bond; may be left out when only one lagd runs in this network namespace.
    pub bond: Option<String>,
    /// The control socket file (default: /run/lagd/netns-N/BOND.sock).
    #[arg(long)]
    pub control: Option<PathBuf>,
    /// The systemd unit that runs lagd (`%n` in `ExecStop=`): lagd leaves the kernel path to
    /// the next lagd when a restart job runs for it; otherwise nothing is done (the service
    /// manager's SIGTERM then stops lagd, restoring the members).
    #[arg(long, value_name = "UNIT")]
    pub unit: Option<String>,
    /// Leave the kernel path to the next lagd whatever comes next (refused unless a service
    /// manager keeps lagd's descriptors; a lagd must start within 3 s, or the programs stop
    /// forwarding).
    #[arg(long)]
    pub leave: bool,
}

/// What a stop of the unit is, from the service manager's jobs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopKind {
    /// A restart job runs or waits for the unit: a start follows the stop.
    Restart,
    /// Anything else (a stop job, no job, jobs that cannot be read): a real stop.
    Stop,
}

/// The kind of stop `systemctl list-jobs --no-legend --full` output `jobs` shows for `unit`
/// (lines `ID UNIT TYPE STATE`). A restart (`restart`, and the job types systemd turns into one
/// when it runs: `try-restart`, `reload-or-restart`) leaves; anything else, and any line that
/// is not understood, stops: a real stop must restore the members.
pub fn stop_kind(jobs: &str, unit: &str) -> StopKind {
    let restart = jobs.lines().any(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        f.len() >= 4
            && f[0].parse::<u64>().is_ok()
            && f[1] == unit
            && matches!(f[2], "restart" | "try-restart" | "reload-or-restart")
    });
    if restart {
        StopKind::Restart
    } else {
        StopKind::Stop
    }
}

/// `lagctl stop`.
pub fn main(args: StopArgs) -> Result<(), CliError> {
    if let Some(unit) = &args.unit {
        let out = Command::new("systemctl")
            .args(["list-jobs", "--no-legend", "--full", "--no-pager"])
            .output();
        let kind = match out {
            Ok(o) if o.status.success() => stop_kind(&String::from_utf8_lossy(&o.stdout), unit),
            Ok(o) => {
                eprintln!(
                    "lagctl: systemctl list-jobs: {}: {}",
                    o.status,
                    String::from_utf8_lossy(&o.stderr).trim()
                );
                StopKind::Stop
            }
            Err(e) => {
                eprintln!("lagctl: systemctl list-jobs: {e}");
                StopKind::Stop
            }
        };
        if kind == StopKind::Stop {
            println!("{unit}: no restart job: lagd stops as always (SIGTERM)");
            return Ok(());
        }
    }
    let endpoint = socket_path_for(&ShowArgs {
        bond: args.bond,
        json: false,
        control: args.control,
    })?;
    let stream = endpoint
        .connect()
        .map_err(|e| anyhow!("no lagd answers on {endpoint}: {e}"))?;
    stream
        .set_read_timeout(Some(LEAVE_TIME))
        .and_then(|()| stream.set_write_timeout(Some(LEAVE_TIME)))
        .and_then(|()| (&stream).write_all(b"{\"cmd\":\"leave\"}\n"))
        .map_err(|e| anyhow!("asking lagd on {endpoint} to leave: {e}"))?;
    let mut reader = BufReader::new(&stream);
    let mut line = String::new();
    (&mut reader)
        .take(4096)
        .read_line(&mut line)
        .map_err(|e| anyhow!("waiting for lagd on {endpoint}: {e}"))?;
    let value: serde_json::Value = serde_json::from_str(line.trim())
        .map_err(|e| anyhow!("lagd on {endpoint} answered {:?}: {e}", line.trim()))?;
    if let Some(e) = value.get("error").and_then(|e| e.as_str()) {
        return Err(CliError::Failed(anyhow!("lagd refused to leave: {e}")));
    }
    let pid = value["left"]["pid"]
        .as_u64()
        .ok_or_else(|| anyhow!("lagd on {endpoint} answered {:?}", line.trim()))?;
    // Its end closes when it has exited.
    let mut rest = Vec::new();
    if let Err(e) = reader.read_to_end(&mut rest) {
        return Err(CliError::Failed(anyhow!(
            "lagd {pid} said it leaves but has not exited within {} s: {e}",
            LEAVE_TIME.as_secs()
        )));
    }
    println!("left: lagd {pid} exited, leaving the kernel path to the next lagd");
    Ok(())
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn only_a_restart_job_of_the_unit_leaves() {
        let unit = "lagd@bond0.service";
        let jobs = |t: &str| format!("  91 {unit} {t} running\n 92 other.service start waiting\n");
        for t in ["restart", "try-restart", "reload-or-restart"] {
            assert_eq!(stop_kind(&jobs(t), unit), StopKind::Restart, "{t}");
        }
        for t in ["stop", "start", "reload", "verify-active"] {
            assert_eq!(stop_kind(&jobs(t), unit), StopKind::Stop, "{t}");
        }
        // Another unit's restart, another instance, no job, output not understood.
        assert_eq!(
            stop_kind("91 other.service restart running\n", unit),
            StopKind::Stop
        );
        assert_eq!(
            stop_kind("91 lagd@bond1.service restart running\n", unit),
            StopKind::Stop
        );
        assert_eq!(stop_kind("", unit), StopKind::Stop);
        assert_eq!(stop_kind("No jobs running.\n", unit), StopKind::Stop);
        assert_eq!(
            stop_kind(&format!("x {unit} restart running\n"), unit),
            StopKind::Stop
        );
        assert_eq!(
            stop_kind(&format!("91 {unit} restart\n"), unit),
            StopKind::Stop
        );
    }
}
