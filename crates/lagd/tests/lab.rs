//! `lagctl lab` as a user runs it: the real binary building real namespaces, veths, tc shaping,
//! lagd / Open vSwitch / plain addresses, and real TCP traffic; then the figures it reports and
//! the cleanup it promises (also after SIGINT, also with two labs at once).
//!
//! Needs root, iproute2, iperf3 and Open vSwitch (CI installs them). Without root these tests
//! fail, loudly: a skipped test would say nothing about the lab. The links are shaped to
//! 100 Mbit/s so that every figure has an exact ceiling: TCP goodput 0.0956 Gbit/s per link
//! (1448 payload bytes per 1514-byte frame).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use serde_json::Value;

/// TCP goodput of one 100 Mbit/s link, Gbit/s.
const LINK_GBPS: f64 = 0.1 * 1448.0 / 1514.0;

fn lagctl() -> Command {
    Command::new(env!("CARGO_BIN_EXE_lagctl"))
}

fn lagd() -> &'static str {
    env!("CARGO_BIN_EXE_lagd")
}

fn require_root() {
    let status = std::fs::read_to_string("/proc/self/status").expect("read /proc/self/status");
    let euid = status
        .lines()
        .find(|l| l.starts_with("Uid:"))
        .and_then(|l| l.split_whitespace().nth(2))
        .expect("Uid line");
    assert_eq!(
        euid, "0",
        "the lab tests need root (they create network namespaces); run them as root"
    );
}

/// Runs `lagctl lab ARGS --quiet` to completion.
fn lab(args: &[&str]) -> Output {
    require_root();
    lagctl()
        .arg("lab")
        .args(args)
        .arg("--quiet")
        .output()
        .expect("run lagctl")
}

/// Runs a lab that must succeed and print one JSON object; checks that it left nothing behind.
fn lab_json(args: &[&str]) -> Value {
    let out = lab(&[args, &["--json"]].concat());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "lagctl lab {args:?} failed ({}): {stderr}",
        out.status
    );
    let stdout = String::from_utf8(out.stdout).expect("utf-8");
    assert_eq!(stdout.lines().count(), 1, "one JSON object: {stdout}");
    let v: Value = serde_json::from_str(&stdout).expect("valid JSON");
    let prefix = v["prefix"].as_str().expect("prefix").to_string();
    assert!(prefix.starts_with("lagdlab-"), "{prefix}");
    assert_no_leftovers(&prefix);
    v
}

/// Starts `lagctl lab --rate 100mbit --duration 3 --json --quiet ARGS` in the background.
fn spawn_lab(args: &[&str]) -> Child {
    require_root();
    lagctl()
        .args([
            "lab",
            "--rate",
            "100mbit",
            "--duration",
            "3",
            "--json",
            "--quiet",
        ])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start lagctl lab")
}

/// Waits for a lab of [`spawn_lab`], which must succeed; its JSON.
fn finish_lab(child: Child) -> Value {
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("valid JSON")
}

/// Lab namespaces whose names start with `prefix`.
fn namespaces(prefix: &str) -> Vec<String> {
    let out = Command::new("ip")
        .args(["netns", "list"])
        .output()
        .expect("ip netns list");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| n.starts_with(prefix))
        .map(str::to_string)
        .collect()
}

fn assert_no_leftovers(prefix: &str) {
    assert_eq!(namespaces(prefix), Vec::<String>::new(), "namespaces left");
    let dir = std::env::temp_dir().join(prefix);
    assert!(!dir.exists(), "scratch directory {} left", dir.display());
}

fn gbps(v: &Value) -> f64 {
    v["aggregate_gbps"].as_f64().expect("aggregate_gbps")
}

fn members(v: &Value) -> &Vec<Value> {
    v["members"].as_array().expect("members")
}

fn share(m: &Value) -> f64 {
    m["share"].as_f64().expect("share")
}

fn assert_near(got: f64, want: f64, tolerance: f64, what: &str) {
    assert!(
        (got - want).abs() <= want * tolerance,
        "{what}: {got:.4} is not within {:.0} % of {want:.4}",
        tolerance * 100.0
    );
}

/// Both members carry about half of the bytes each.
fn assert_balanced(v: &Value) {
    let m = members(v);
    assert_eq!(m.len(), 2, "{v}");
    for member in m {
        assert!(
            member["tx_bytes"].as_u64().unwrap() > 10_000_000,
            "member carried too little: {v}"
        );
        assert!(
            member["rx_bytes"].as_u64().is_some(),
            "rx_bytes is a number: {v}"
        );
        assert_near(share(member), 0.5, 0.2, "member share");
    }
}

/// The direct baseline over 2 links shaped to 100 Mbit/s for `secs` seconds, `streams`
/// streams (none given: the default) from `generator`.
fn direct_run(streams: Option<&str>, secs: &str, generator: &str) -> Value {
    let mut args = vec![
        "--baseline",
        "direct",
        "--links",
        "2",
        "--rate",
        "100mbit",
        "--duration",
        secs,
        "--generator",
        generator,
    ];
    if let Some(n) = streams {
        args.extend(["--streams", n]);
    }
    lab_json(&args)
}

/// The figures of each flow (one generator process pair) of a run: (source, destination,
/// streams); their goodput adds up to the aggregate.
fn flows(v: &Value) -> Vec<(String, String, u64)> {
    let flows = v["flows"].as_array().expect("flows");
    let sum: f64 = flows.iter().map(|f| f["gbps"].as_f64().unwrap()).sum();
    assert_near(sum, gbps(v), 0.01, "flows add up to the aggregate");
    flows
        .iter()
        .map(|f| {
            (
                f["src"].as_str().unwrap().to_owned(),
                f["dst"].as_str().unwrap().to_owned(),
                f["streams"].as_u64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn direct_baseline_reaches_two_link_ceiling_with_iperf3() {
    let v = direct_run(None, "3", "iperf3");
    assert_eq!(v["setup"], "direct");
    assert_eq!(v["mode"], "none");
    assert_eq!(v["policy"], "none");
    assert_eq!(v["streams"], 8, "default streams");
    assert_eq!(v["generator"], "iperf3");
    assert_near(gbps(&v), 2.0 * LINK_GBPS, 0.05, "aggregate");
    assert_near(
        v["ceiling_gbps"].as_f64().unwrap(),
        2.0 * LINK_GBPS,
        0.001,
        "ceiling",
    );
    assert!(v["retransmits"].is_u64(), "{v}");
    assert_balanced(&v);
    // One iperf3 pair per address pair (one per link), four streams each.
    let f = flows(&v);
    assert_eq!(f.len(), 2, "{f:?}");
    assert!(f.iter().all(|x| x.2 == 4), "{f:?}");
    assert_ne!(f[0].0, f[1].0, "{f:?}");
}

/// The bridged baseline: host B is a Linux bridge over its two link ends (seen in its
/// namespace while the run goes on, both ends its ports), and direct veth's address pairs
/// still carry both links' ceiling through it, one iperf3 pair per link.
#[test]
fn bridge_baseline_runs_both_links_through_host_bs_bridge() {
    let child = spawn_lab(&["--baseline", "bridge", "--links", "2"]);
    // The lab's namespaces are `lagdlab-<its pid>-<tag>-a` and `-b`.
    let mine = format!("lagdlab-{}-", child.id());
    let mut ports = None;
    let start = Instant::now();
    while ports.is_none() && start.elapsed() < Duration::from_secs(5) {
        if let Some(b) = namespaces(&mine).into_iter().find(|n| n.ends_with("-b")) {
            let ip = |args: &[&str]| {
                let out = Command::new("ip").arg("-n").arg(&b).args(args).output();
                out.map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
                    .unwrap_or_default()
            };
            let bridges = ip(&["-o", "link", "show", "type", "bridge"]);
            if let Some(name) = bridges
                .lines()
                .next()
                .and_then(|l| l.split(": ").nth(1))
                .map(|n| n.trim().to_string())
            {
                let n = ip(&["-o", "link", "show", "master", &name]).lines().count();
                if n == 2 {
                    ports = Some(n);
                }
            }
        }
        thread::sleep(Duration::from_millis(100));
    }
    let v = finish_lab(child);
    assert_eq!(
        ports,
        Some(2),
        "host B's bridge with both link ends as its ports"
    );
    assert_eq!(v["setup"], "bridge");
    assert_eq!(v["mode"], "none");
    assert_near(
        gbps(&v),
        2.0 * LINK_GBPS,
        0.05,
        "aggregate through the bridge",
    );
    assert_balanced(&v);
    assert_eq!(flows(&v).len(), 2, "one flow per address pair");
    assert_no_leftovers(v["prefix"].as_str().unwrap());
}

#[test]
fn builtin_generator_measures_the_same_ceiling() {
    let v = direct_run(Some("2"), "3", "builtin");
    assert_eq!(v["generator"], "builtin");
    assert_eq!(v["streams"], 2);
    assert_near(gbps(&v), 2.0 * LINK_GBPS, 0.05, "aggregate");
    assert!(v["retransmits"].is_u64(), "TcpRetransSegs delta: {v}");
    assert!(v["max_stall_ms"].is_f64(), "{v}");
    assert_balanced(&v);
}

/// One iperf3 process pair per stream (iperf3 before 3.16 runs every `-P` stream in one
/// thread): every pair's port served, its report summed into the flow's figure.
#[test]
fn iperf3_each_runs_a_process_per_stream() {
    let v = direct_run(Some("4"), "3", "iperf3-each");
    assert_eq!(v["generator"], "iperf3-each");
    assert_eq!(v["streams"], 4);
    assert_near(gbps(&v), 2.0 * LINK_GBPS, 0.05, "aggregate");
    flows(&v);
    assert!(v["retransmits"].is_u64(), "{v}");
    assert_balanced(&v);
}

#[test]
fn one_stream_on_direct_links_uses_one_link() {
    let v = direct_run(Some("1"), "2", "builtin");
    assert_near(gbps(&v), LINK_GBPS, 0.05, "aggregate");
    let shares: Vec<f64> = members(&v).iter().map(share).collect();
    assert!(shares[0] > 0.99 && shares[1] < 0.01, "{shares:?}");
}

/// 16 streams over 2 links shaped to 100 Mbit/s through `setup` (lagd or the relay): both
/// links' capacity, spread over both members. The chance that layer3+4 puts all 16 streams on
/// one member is 2^-15.
fn sixteen_streams_over_two_links(setup: &[&str], name: &str) -> Value {
    let args = [
        setup,
        &[
            "--links",
            "2",
            "--rate",
            "100mbit",
            "--streams",
            "16",
            "--duration",
            "3",
        ],
    ]
    .concat();
    let v = lab_json(&args);
    assert_eq!(v["setup"], name);
    assert_eq!(v["streams"], 16);
    assert_near(
        gbps(&v),
        2.0 * LINK_GBPS,
        0.1,
        &format!("aggregate through {name}"),
    );
    assert_balanced(&v);
    v
}

#[test]
fn lagd_layer34_spreads_streams_over_both_members() {
    let v = sixteen_streams_over_two_links(&["--lagd", lagd()], "lagd");
    assert_eq!(v["mode"], "balance-xor");
    assert_eq!(v["policy"], "layer3+4");
    // As many generator process pairs as the direct baseline runs (one per link), all on the
    // bond's one address pair: the same number of sending and receiving threads.
    let f = flows(&v);
    assert_eq!(f.len(), 2, "{f:?}");
    assert!(f.iter().all(|x| x.2 == 8), "{f:?}");
    assert_eq!((&f[0].0, &f[0].1), (&f[1].0, &f[1].1), "{f:?}");
}

/// The dataplane benchmark's floor, `examples/bare_relay.rs` (built by `cargo test` beside the
/// binaries), carries TCP through the lab at both links' capacity, hashed over both members.
#[test]
fn bare_relay_carries_tcp_over_both_members() {
    let relay = Path::new(lagd())
        .with_file_name("examples")
        .join("bare_relay");
    assert!(
        relay.is_file(),
        "{} missing: `cargo test --workspace` builds the examples before the tests (or run `cargo build -p lagd --example bare_relay`)",
        relay.display()
    );
    sixteen_streams_over_two_links(&["--relay", relay.to_str().unwrap()], "relay");
}

/// `lagctl lab --mode 802.3ad`: LACP forms between the two lagds and 16 streams use both
/// members' worth of capacity.
#[test]
fn lagd_8023ad_aggregates_both_links() {
    let v = lab_json(&[
        "--lagd",
        lagd(),
        "--mode",
        "802.3ad",
        "--rate",
        "100mbit",
        "--streams",
        "16",
        "--duration",
        "3",
    ]);
    assert_eq!(v["mode"], "802.3ad");
    assert_eq!(v["policy"], "layer3+4");
    assert_near(
        gbps(&v),
        2.0 * LINK_GBPS,
        0.1,
        "aggregate through an 802.3ad lagd bond",
    );
    assert_balanced(&v);
}

#[test]
fn lagd_active_backup_keeps_one_member() {
    let v = lab_json(&[
        "--lagd",
        lagd(),
        "--mode",
        "active-backup",
        "--rate",
        "100mbit",
        "--streams",
        "4",
        "--duration",
        "2",
    ]);
    assert_eq!(v["mode"], "active-backup");
    assert_near(gbps(&v), LINK_GBPS, 0.1, "aggregate through one member");
    let mut shares: Vec<f64> = members(&v).iter().map(share).collect();
    shares.sort_by(f64::total_cmp);
    assert!(
        shares[1] > 0.99,
        "one member carries everything: {shares:?}"
    );
}

#[test]
fn failover_gap_is_measured_when_a_member_loses_carrier() {
    let v = lab_json(&[
        "--lagd",
        lagd(),
        "--rate",
        "100mbit",
        "--streams",
        "4",
        "--duration",
        "4",
        "--fail-after",
        "1.5",
    ]);
    assert_eq!(
        v["generator"], "builtin",
        "failover forces the built-in generator"
    );
    let f = &v["failover"];
    let member = f["member"].as_str().expect("failed member");
    assert!(
        members(&v).iter().any(|m| m["name"] == member),
        "{member} is a member: {v}"
    );
    assert_near(f["at_s"].as_f64().unwrap(), 1.5, 0.1, "failure time");
    let gap = f["gap_ms"].as_f64().expect("gap_ms");
    assert!(
        f["recovered"] == true,
        "traffic resumed on the other member: {v}"
    );
    assert!(gap < 2500.0, "gap {gap} ms");
    // After the failure one link is left: more than one link's worth over the whole run is
    // impossible, less than 1.5 s of one link would mean traffic stopped.
    let g = gbps(&v);
    assert!(
        g > LINK_GBPS * 0.5 && g < 2.0 * LINK_GBPS,
        "aggregate {g} with one link lost after 1.5 of 4 s"
    );
}

#[test]
fn ovs_baseline_runs_an_active_backup_bond() {
    let v = lab_json(&[
        "--baseline",
        "ovs",
        "--mode",
        "active-backup",
        "--rate",
        "100mbit",
        "--streams",
        "2",
        "--duration",
        "3",
    ]);
    assert_eq!(v["setup"], "ovs");
    assert_eq!(v["ovs_bond_mode"], "active-backup");
    assert_eq!(v["lacp"], "off");
    // OVS drops behind tbf (its send buffer overflows), so only a floor is certain.
    let g = gbps(&v);
    assert!(g > 0.2 * LINK_GBPS && g < 1.1 * LINK_GBPS, "aggregate {g}");
    let mut shares: Vec<f64> = members(&v).iter().map(share).collect();
    shares.sort_by(f64::total_cmp);
    assert!(
        shares[1] > 0.95,
        "active-backup uses one member: {shares:?}"
    );
}

/// Starts a long lab, waits for its traffic phase, sends SIGINT and checks that the lab removed
/// its namespaces and stopped every process it had started in them.
fn sigint_mid_run(extra: &[&str]) {
    require_root();
    let mut child: Child = lagctl()
        .args(["lab", "--rate", "100mbit", "--duration", "60"])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start lagctl lab");
    let pid = child.id();
    let prefix = format!("lagdlab-{pid}-");
    // Progress lines go to stderr (one per phase when it is not a terminal).
    let (tx, rx) = mpsc::channel();
    let stderr = child.stderr.take().unwrap();
    let reader = thread::spawn(move || {
        let mut all = String::new();
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if line.contains("traffic") {
                let _ = tx.send(());
            }
            all.push_str(&line);
            all.push('\n');
        }
        all
    });
    let started = rx.recv_timeout(Duration::from_secs(30));
    if started.is_err() {
        let _ = child.kill();
        let _ = child.wait();
        panic!("no traffic phase: {}", reader.join().unwrap());
    }
    thread::sleep(Duration::from_millis(1500));
    let spaces = namespaces(&prefix);
    assert_eq!(
        spaces.len(),
        2,
        "two lab namespaces while running: {spaces:?}"
    );
    let mut pids = Vec::new();
    for ns in &spaces {
        let out = Command::new("ip")
            .args(["netns", "pids", ns])
            .output()
            .unwrap();
        pids.extend(
            String::from_utf8_lossy(&out.stdout)
                .split_whitespace()
                .map(str::to_string),
        );
    }
    assert!(!pids.is_empty(), "processes run in the lab");
    let t = Instant::now();
    let kill = Command::new("kill")
        .args(["-INT", &pid.to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if t.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            panic!("lagctl lab did not stop within 20 s of SIGINT");
        }
        thread::sleep(Duration::from_millis(50));
    };
    let stderr = reader.join().unwrap();
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("interrupted by SIGINT"), "{stderr}");
    assert_eq!(namespaces(&prefix), Vec::<String>::new(), "namespaces left");
    for p in &pids {
        assert!(
            !Path::new(&format!("/proc/{p}")).exists() || is_zombie(p),
            "process {p} from the lab still runs"
        );
    }
    let leftovers: Vec<PathBuf> = std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.to_string_lossy().contains(&prefix))
        .collect();
    assert!(leftovers.is_empty(), "scratch left: {leftovers:?}");
}

fn is_zombie(pid: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| {
            s.rsplit_once(')')
                .is_some_and(|(_, r)| r.trim_start().starts_with('Z'))
        })
        .unwrap_or(true)
}

#[test]
fn sigint_during_iperf3_traffic_cleans_up() {
    sigint_mid_run(&["--baseline", "direct", "--generator", "iperf3"]);
}

#[test]
fn sigint_during_lagd_run_with_builtin_generator_cleans_up() {
    sigint_mid_run(&["--lagd", lagd(), "--generator", "builtin"]);
}

#[test]
fn sigint_during_ovs_run_cleans_up() {
    sigint_mid_run(&["--baseline", "ovs"]);
}

#[test]
fn two_labs_run_at_once() {
    let a = spawn_lab(&["--baseline", "direct"]);
    let b = spawn_lab(&["--lagd", lagd(), "--streams", "16"]);
    let mut prefixes = Vec::new();
    for child in [a, b] {
        let v = finish_lab(child);
        assert_near(
            gbps(&v),
            2.0 * LINK_GBPS,
            0.1,
            "aggregate of a concurrent lab",
        );
        assert_balanced(&v);
        let prefix = v["prefix"].as_str().unwrap().to_string();
        assert_no_leftovers(&prefix);
        prefixes.push(prefix);
    }
    assert_ne!(prefixes[0], prefixes[1]);
}

#[test]
fn sweep_writes_table_chart_and_json() {
    let out_dir = std::env::temp_dir().join(format!("lagd-lab-test-sweep-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out_dir);
    let out = lab(&[
        "--sweep",
        "--lagd",
        lagd(),
        "--rate",
        "100mbit",
        "--duration",
        "1",
        "--sweep-modes",
        "balance-xor",
        "--sweep-policies",
        "layer3+4",
        "--sweep-streams",
        "1,16",
        "--out",
        out_dir.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let md = std::fs::read_to_string(out_dir.join("sweep.md")).expect("sweep.md");
    assert!(
        md.contains("| configuration | 1 stream | 16 streams |"),
        "{md}"
    );
    assert!(md.contains("| direct veth |"), "{md}");
    assert!(md.contains("| lagd balance-xor layer3+4 |"), "{md}");
    assert_eq!(
        stdout.lines().next(),
        md.lines().next(),
        "the table is printed too"
    );
    let svg = std::fs::read_to_string(out_dir.join("sweep.svg")).expect("sweep.svg");
    assert!(svg.starts_with("<svg ") && svg.trim_end().ends_with("</svg>"));
    assert!(svg.contains("lagd balance-xor layer3+4"));
    let json: Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("sweep.json")).unwrap())
            .unwrap();
    let runs = json["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 4, "2 configurations × 2 stream counts");
    for r in runs {
        assert_no_leftovers(r["prefix"].as_str().unwrap());
        let want = if r["streams"] == 1 {
            LINK_GBPS
        } else {
            2.0 * LINK_GBPS
        };
        assert_near(
            gbps(r),
            want,
            0.15,
            &format!("{} {}", r["setup"], r["streams"]),
        );
    }
    std::fs::remove_dir_all(&out_dir).unwrap();
}

#[test]
fn bad_arguments_are_usage_errors() {
    for (args, needle) in [
        (&["--links", "0"][..], "--links"),
        (&["--rate", "fast"][..], "rate"),
        (
            &["--baseline", "direct", "--fail-after", "1"][..],
            "needs a bond",
        ),
        (
            &["--baseline", "bridge", "--fail-after", "1"][..],
            "needs a bond",
        ),
        (
            &["--baseline", "bridge", "--switch", "bridge"][..],
            "no --switch",
        ),
        (&["--baseline", "bridge", "--sweep"][..], "no --sweep"),
        (
            &["--baseline", "ovs", "--mode", "balance-rr"][..],
            "Open vSwitch",
        ),
        (&["--udp", "--generator", "builtin"][..], "iperf3"),
        (
            &["--relay", "/bin/true", "--fail-after", "1"][..],
            "throughput only",
        ),
        (
            &["--relay", "/bin/true", "--baseline", "ovs"][..],
            "cannot be used",
        ),
        (
            &["--fail-after", "20", "--duration", "10"][..],
            "inside the run",
        ),
    ] {
        let out = lab(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
    }
}
