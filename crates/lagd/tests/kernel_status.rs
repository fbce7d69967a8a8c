//! Status parity: the kernel's `/proc/net/bonding/BOND` beside lagd's status text (what
//! `lagctl show` prints, `Status::render`) for the same configuration, in every mode, in each
//! kernel of the matrix (user-mode Linux guests, `tools/uml.py`).
//!
//! In the guest, host B holds a kernel bond and host A lagd (`fastpath=off`) over the same two
//! veth links, both with the same mode and options; in 802.3ad they are each other's LACP
//! partner and the texts are taken once both distribute. Member names and MAC addresses are
//! replaced by placeholders, then the two texts are compared line by line: the differences
//! are printed (`diff -u`, kernel first) for the parity table in bench/interop.md.
//!
//! Asserted: the lines that scripts parse to recognise a bond read the same (`Bonding Mode`,
//! `Transmit Hash Policy`, the bond's `MII Status`, `MII Polling Interval`, `Up Delay`,
//! `Down Delay`, the member list with each member's `MII Status`), and in 802.3ad the
//! `Aggregator ID` lines exist for every member at both.
//!
//! Needs root, diff (diffutils) and the kernels `tools/uml.py` fetches; fails, never skips,
//! without them.

mod guest;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use guest::{in_guest, sh};
use lagd::control::query_status;
use lagd_lab::topology::{Side, Topology};

const LAGD: &str = env!("CARGO_BIN_EXE_lagd");

/// The modes compared, with the kernel's and lagd's options beyond the mode.
const MODES: [(&str, &[&str]); 7] = [
    ("balance-rr", &["miimon", "100"]),
    ("active-backup", &["miimon", "100"]),
    (
        "balance-xor",
        &["miimon", "100", "xmit_hash_policy", "layer3+4"],
    ),
    ("broadcast", &["miimon", "100"]),
    (
        "802.3ad",
        &[
            "miimon",
            "100",
            "xmit_hash_policy",
            "layer3+4",
            "lacp_rate",
            "fast",
        ],
    ),
    ("balance-tlb", &["miimon", "100"]),
    ("balance-alb", &["miimon", "100"]),
];

/// Replaces member names and MAC addresses with placeholders, and drops trailing spaces.
fn normalise(text: &str, members: &[String]) -> String {
    let mut out = String::new();
    for line in text.lines() {
        let mut l = line.trim_end().to_owned();
        for (i, m) in members.iter().enumerate() {
            l = l.replace(m.as_str(), &format!("MEMBER{i}"));
        }
        // MACs: six two-digit hex groups joined by colons.
        let words: Vec<String> = l
            .split(' ')
            .map(|w| {
                let parts: Vec<&str> = w.split(':').collect();
                if parts.len() == 6
                    && parts
                        .iter()
                        .all(|p| p.len() == 2 && p.chars().all(|c| c.is_ascii_hexdigit()))
                {
                    "MAC".to_owned()
                } else {
                    w.to_owned()
                }
            })
            .collect();
        out.push_str(&words.join(" "));
        out.push('\n');
    }
    out
}

/// The value of the first line starting with `key` after `from` lines.
fn values<'a>(text: &'a str, key: &str) -> Vec<&'a str> {
    text.lines()
        .filter_map(|l| l.strip_prefix(key))
        .map(str::trim)
        .collect()
}

fn compare(kernel: &str, mode: &str, opts: &[&str]) {
    let mut topo = Topology::create(2).expect("topology");
    let mut args = vec!["link", "add", "kb0", "type", "bond", "mode", mode];
    args.extend_from_slice(opts);
    topo.ip(Side::B, &args).expect("kernel bond");
    for l in topo.links() {
        topo.ip(Side::B, &["link", "set", &l.name, "down"]).unwrap();
        topo.ip(Side::B, &["link", "set", &l.name, "master", "kb0"])
            .unwrap();
    }
    topo.ip(Side::B, &["link", "set", "kb0", "up"]).unwrap();
    let lagd_opts: Vec<String> = std::iter::once(format!("mode={mode}"))
        .chain(opts.chunks(2).map(|kv| format!("{}={}", kv[0], kv[1])))
        .chain(std::iter::once("fastpath=off".to_owned()))
        .collect();
    let control: PathBuf = topo.dir().join("lb0.sock");
    let members = topo.member_list();
    let id = topo
        .spawn(
            Side::A,
            "lagd-a",
            Path::new(LAGD),
            &[
                "--bond",
                "lb0",
                "--members",
                &members,
                "--opts",
                &lagd_opts.join(" "),
                "--control",
                &control.to_string_lossy(),
            ],
        )
        .expect("lagd");
    let names: Vec<String> = topo.links().iter().map(|l| l.name.clone()).collect();
    let proc_text = || {
        sh(
            "ip",
            &[
                "netns",
                "exec",
                topo.ns(Side::B),
                "cat",
                "/proc/net/bonding/kb0",
            ],
        )
    };
    // Settled: lagd answers, every member is up at both, and in 802.3ad both distribute.
    let started = Instant::now();
    let (kt, lt) = loop {
        thread::sleep(Duration::from_millis(200));
        let Ok(status) = query_status(&control) else {
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "lagd did not come up:\n{}",
                topo.log_tail(id, 20)
            );
            continue;
        };
        let kt = proc_text();
        let lt = status.render();
        let settled = if mode == "802.3ad" {
            status
                .members
                .iter()
                .all(|m| m.lacp.as_ref().is_some_and(|l| l.distributing))
                && kt.matches("port state: 63").count() >= 2
        } else {
            kt.matches("MII Status: up").count() == 3 && lt.matches("MII Status: up").count() == 3
        };
        if settled && started.elapsed() > Duration::from_secs(3) {
            break (kt, lt);
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "{mode}: not settled after 30 s:\n{kt}\n{lt}"
        );
    };
    let k = normalise(&kt, &names);
    let l = normalise(&lt, &names);
    let dir = topo.dir().to_path_buf();
    std::fs::write(dir.join("kernel.txt"), &k).unwrap();
    std::fs::write(dir.join("lagd.txt"), &l).unwrap();
    let diff = Command::new("diff")
        .args(["-u", "--label", "kernel", "--label", "lagd"])
        .arg(dir.join("kernel.txt"))
        .arg(dir.join("lagd.txt"))
        .output()
        .expect("diff (diffutils)");
    let diff = String::from_utf8_lossy(&diff.stdout);
    let changed = diff
        .lines()
        .skip(2)
        .filter(|l| l.starts_with('-') || l.starts_with('+'))
        .count();
    println!(
        "STATUS kernel {kernel} mode {mode}: kernel {} lines, lagd {} lines, {changed} lines \
         differ",
        k.lines().count(),
        l.lines().count()
    );
    for line in diff.lines() {
        println!("STATUSDIFF {kernel} {mode} {line}");
    }
    for key in [
        "Bonding Mode:",
        "Transmit Hash Policy:",
        "MII Polling Interval (ms):",
        "Up Delay (ms):",
        "Down Delay (ms):",
        "Slave Interface:",
        "MII Status:",
    ] {
        assert_eq!(
            values(&k, key),
            values(&l, key),
            "{mode}: the '{key}' lines differ:\n{diff}"
        );
    }
    if mode == "802.3ad" {
        assert_eq!(
            values(&k, "Aggregator ID:").len(),
            values(&l, "Aggregator ID:").len(),
            "802.3ad: Aggregator ID lines:\n{diff}"
        );
    }
    topo.stop(id);
}

fn parity(kernel: &str) {
    for (mode, opts) in MODES {
        compare(kernel, mode, opts);
    }
}

#[test]
#[ignore = "about 2 minutes per kernel: run with --ignored (CI does, beside its kernel matrix)"]
fn kernel_status_5_10() {
    in_guest("5.10", "kernel_status_5_10", 600, parity);
}

#[test]
#[ignore = "about 2 minutes per kernel: run with --ignored (CI does, beside its kernel matrix)"]
fn kernel_status_6_1() {
    in_guest("6.1", "kernel_status_6_1", 600, parity);
}

#[test]
#[ignore = "about 2 minutes per kernel: run with --ignored (CI does, beside its kernel matrix)"]
fn kernel_status_6_12() {
    in_guest("6.12", "kernel_status_6_12", 600, parity);
}
