//! Runs part of a test inside another Linux kernel (Debian's user-mode-Linux builds, through
//! `tools/uml.py`), for the tests that need the kernel's bonding driver, which the host's kernel
//! lacks.
//!
//! A test calls [`in_guest`] with its own name: on the host that boots the kernel and runs this
//! very test binary inside it, filtered to that test, with [`GUEST_ENV`] set to the kernel's
//! version; inside the guest the same call runs the closure it was given and prints its
//! report. The host-side call fails (never skips) when the guest cannot boot, naming what is
//! missing, and when the guest's run fails.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use lagd::status::Status;
use lagd_lab::topology::{Side, Topology};

/// Set in the guest to the version of the kernel it runs (`5.10`, `6.1`, `6.12`).
pub(crate) const GUEST_ENV: &str = "LAGD_GUEST_KERNEL";

/// The kernels of the matrix (`tools/uml.py list`).
pub(crate) const KERNELS: [&str; 3] = ["5.10", "6.1", "6.12"];

/// The repository's root.
pub(crate) fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("the repository root")
}

/// The kernel version this process runs under as a guest, if it is one.
pub(crate) fn guest_kernel() -> Option<String> {
    std::env::var(GUEST_ENV).ok().filter(|v| !v.is_empty())
}

/// On the host: runs test `test` (this binary's test of that exact name) in a guest running
/// kernel `kernel` and returns its output; panics with the output when it fails. In the guest
/// (when [`GUEST_ENV`] is set): runs `body` and returns an empty string.
pub(crate) fn in_guest(
    kernel: &str,
    test: &str,
    timeout_s: u32,
    body: impl FnOnce(&str),
) -> String {
    guest_run(kernel, test, timeout_s, body, false)
}

/// What [`in_guest`] and [`in_systemd_guest`] do; `systemd`: the guest's PID 1 is systemd.
fn guest_run(
    kernel: &str,
    test: &str,
    timeout_s: u32,
    body: impl FnOnce(&str),
    systemd: bool,
) -> String {
    if let Some(version) = guest_kernel() {
        assert_eq!(
            version, kernel,
            "test {test} for kernel {kernel} runs in a {version} guest"
        );
        body(&version);
        return String::new();
    }
    assert!(
        lagd_lab::topology::is_root(),
        "the kernel-matrix tests boot user-mode Linux kernels (ptrace, hostfs of /): run them as \
         root (CI does)"
    );
    if systemd {
        assert!(
            std::path::Path::new("/lib/systemd/systemd").exists(),
            "/lib/systemd/systemd is missing (apt-get install systemd): the guest boots it as \
             PID 1"
        );
    }
    let uml = repo_root().join("tools/uml.py");
    assert!(uml.exists(), "{} is missing", uml.display());
    let exe = std::env::current_exe().expect("this test binary's path");
    let started = Instant::now();
    let mut run = Command::new("python3");
    run.arg(&uml).args(["run", kernel]);
    if systemd {
        run.arg("--systemd");
    }
    let out = run
        .args(["--timeout", &timeout_s.to_string(), "-e"])
        .arg(format!("{GUEST_ENV}={kernel}"))
        .arg("--")
        .arg(&exe)
        .args([
            "--exact",
            test,
            "--nocapture",
            "--test-threads=1",
            "--include-ignored",
        ])
        .current_dir(repo_root())
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "cannot run python3 {} (python3 is needed): {e}",
                uml.display()
            )
        });
    let guest = if systemd {
        "guest with systemd"
    } else {
        "guest"
    };
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    eprintln!(
        "--- {guest} {kernel}, test {test}: {} in {:.1} s\n{stdout}{stderr}",
        out.status,
        started.elapsed().as_secs_f64()
    );
    assert!(
        out.status.success(),
        "test {test} in the {kernel} {guest} failed ({}); see its output above. tools/uml.py needs \
         root, python3, apt-get and dpkg-deb with access to Debian's registry for the first \
         install, a C compiler, kmod and, for 6.12 on an older glibc, patchelf",
        out.status
    );
    // The guest's test harness must have run the test, not filtered it away.
    assert!(
        stdout.contains("1 passed"),
        "the guest did not run test {test}:\n{stdout}"
    );
    stdout
}

/// Runs a program in the guest and returns its standard output; panics naming the command and
/// its error output when it fails.
pub(crate) fn sh(cmd: &str, args: &[&str]) -> String {
    let out = Command::new(cmd)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd}: {e}"));
    assert!(
        out.status.success(),
        "`{cmd} {}` failed ({}): {}",
        args.join(" "),
        out.status,
        String::from_utf8_lossy(&out.stderr).trim()
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Like [`sh`], returning the error output instead of panicking when the command fails.
pub(crate) fn try_sh(cmd: &str, args: &[&str]) -> Result<String, String> {
    let out = Command::new(cmd)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {cmd}: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).trim().to_owned())
    }
}

/// `ip ARGS...` split on whitespace.
pub(crate) fn ip(args: &str) {
    sh("ip", &args.split_whitespace().collect::<Vec<_>>());
}

/// Waits for a `ping -D -i INTERVAL` started by the caller; returns (sent, received, when each
/// lost request was sent in epoch seconds, estimated from the replies around it). Only echo
/// replies count ("64 bytes from ..."), not the errors ping prints with a sequence number
/// ("From ... icmp_seq=17 Destination Host Unreachable").
pub(crate) fn ping_losses(child: Child, interval: Duration) -> (u32, u32, Vec<f64>) {
    let out = child.wait_with_output().expect("ping");
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.contains("packets transmitted"))
        .unwrap_or_else(|| panic!("ping said: {text}{}", String::from_utf8_lossy(&out.stderr)));
    let num = |word: &str| -> u32 {
        let part = line.split(',').find(|p| p.contains(word)).expect(word);
        part.split_whitespace().next().unwrap().parse().unwrap()
    };
    let (sent, got) = (num("transmitted"), num("received"));
    // "[1764345600.123456] 64 bytes from 10.x.y.2: icmp_seq=17 ttl=64 time=0.3 ms"
    let mut replies: Vec<(u32, f64)> = text
        .lines()
        .filter(|l| l.contains(" bytes from "))
        .filter_map(|l| {
            let ts = l
                .strip_prefix('[')?
                .split(']')
                .next()?
                .parse::<f64>()
                .ok()?;
            let seq = l.split("icmp_seq=").nth(1)?.split_whitespace().next()?;
            Some((seq.parse().ok()?, ts))
        })
        .collect();
    replies.sort_by_key(|r| r.0);
    replies.dedup_by_key(|r| r.0);
    let step = interval.as_secs_f64();
    let lost = (1..=sent)
        .filter(|seq| replies.binary_search_by_key(seq, |r| r.0).is_err())
        .map(|seq| {
            let before = replies.iter().rev().find(|r| r.0 < seq);
            let after = replies.iter().find(|r| r.0 > seq);
            match (before, after) {
                (Some(b), _) => b.1 + f64::from(seq - b.0) * step,
                (None, Some(a)) => a.1 - f64::from(a.0 - seq) * step,
                (None, None) => f64::NAN,
            }
        })
        .collect();
    (sent, got, lost)
}

/// Per member of lagd's `status` (in its order): whether its LACP actor distributes.
pub(crate) fn lagd_distributing(status: &Status) -> Vec<bool> {
    status
        .members
        .iter()
        .map(|m| m.lacp.as_ref().is_some_and(|l| l.distributing))
        .collect()
}

/// Polls two ends of an aggregation every 20 ms until each says it distributes on every
/// member (`lagd`, `peer`); returns when each first did, counted from `since`. Past `within`
/// it panics with what `failure` says (the ends' states and logs).
pub(crate) fn wait_both(
    since: Instant,
    within: Duration,
    mut lagd: impl FnMut() -> bool,
    mut peer: impl FnMut() -> bool,
    failure: impl Fn() -> String,
) -> (Duration, Duration) {
    let (mut a, mut b) = (None, None);
    loop {
        let t = since.elapsed();
        if a.is_none() && lagd() {
            a = Some(t);
        }
        if b.is_none() && peer() {
            b = Some(t);
        }
        if let (Some(a), Some(b)) = (a, b) {
            return (a, b);
        }
        assert!(
            t < within,
            "not distributing on every member after {within:?} (lagd {}, peer {}):\n{}",
            a.is_some(),
            b.is_some(),
            failure()
        );
        thread::sleep(Duration::from_millis(20));
    }
}

/// Starts `count` pings (`ping -D`, `interval` apart) from `side` of a two-host topology to the
/// other host's address; [`ping_losses`] waits for them.
pub(crate) fn ping_other_host(
    topo: &Topology,
    side: Side,
    count: u32,
    interval: Duration,
) -> Child {
    let to = if side == Side::A { 2 } else { 1 };
    Command::new("ip")
        .args(["netns", "exec", topo.ns(side), "ping", "-D", "-n"])
        .args(["-c", &count.to_string(), "-W", "1", "-i"])
        .arg(format!("{}", interval.as_secs_f64()))
        .arg(topo.address(to).to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("ping (iputils-ping)")
}

/// Like [`in_guest`], with systemd as the guest's PID 1 (`tools/uml.py run --systemd`): the
/// test runs as a service of it and may use `systemctl`.
pub(crate) fn in_systemd_guest(
    kernel: &str,
    test: &str,
    timeout_s: u32,
    body: impl FnOnce(&str),
) -> String {
    guest_run(kernel, test, timeout_s, body, true)
}
