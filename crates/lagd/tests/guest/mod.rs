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
use std::process::{Command, Stdio};

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
    if let Some(version) = guest_kernel() {
        assert_eq!(
            version, kernel,
            "test {test} for kernel {kernel} runs in a {version} guest"
        );
        body(&version);
        return String::new();
    }
    assert!(
        lagd::lab::topology::is_root(),
        "the kernel-matrix tests boot user-mode Linux kernels (ptrace, hostfs of /): run them as \
         root (CI does)"
    );
    let uml = repo_root().join("tools/uml.py");
    assert!(uml.exists(), "{} is missing", uml.display());
    let exe = std::env::current_exe().expect("this test binary's path");
    let started = std::time::Instant::now();
    let out = Command::new("python3")
        .arg(&uml)
        .args(["run", kernel, "--timeout", &timeout_s.to_string(), "-e"])
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
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    eprintln!(
        "--- guest {kernel}, test {test}: {} in {:.1} s\n{stdout}{stderr}",
        out.status,
        started.elapsed().as_secs_f64()
    );
    assert!(
        out.status.success(),
        "test {test} in the {kernel} guest failed ({}); see its output above. tools/uml.py needs \
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
