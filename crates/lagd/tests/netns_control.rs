//! The control socket under abuse and across network namespaces: two hosts (namespaces) joined
//! by veth links, lagd at both ends carrying the frames itself (`fastpath=off`, so that a
//! stalled loop would stall the traffic), and clients that are slow, idle, oversized or not
//! root.

use std::io::{Read, Write};
use std::net::Ipv4Addr;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use lagd::control::{Endpoint, MAX_REQUEST, REQUEST_TIME};
use lagd::control::{query_status, status_at};
use lagd_lab::topology::{ProcessId, Side, Topology, is_root, require_program};
use lagd_lab::traffic::checked_transfer;

mod common;

use common::{address_bonds, lagctl_ok, start_lagd};

const LAGD: &str = env!("CARGO_BIN_EXE_lagd");
const LAGCTL: &str = env!("CARGO_BIN_EXE_lagctl");

fn need_root() {
    assert!(
        is_root(),
        "network namespace tests need root (CI runs them as root)"
    );
}

/// Pings `to` from `from` every 50 ms for `seconds`; returns (sent, received, max rtt ms).
fn ping(topo: &Topology, from: Side, to: Ipv4Addr, seconds: u32) -> (u32, u32, f64) {
    require_program("ping", "iputils-ping").unwrap_or_else(|e| panic!("{e:#}"));
    let count = (seconds * 20).to_string();
    let out = Command::new("ip")
        .args(["netns", "exec", topo.ns(from), "ping", "-q", "-n"])
        .args(["-i", "0.05", "-W", "1", "-c", &count, &to.to_string()])
        .output()
        .expect("ping");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    // "N packets transmitted, M received, ..." and "rtt min/avg/max/mdev = a/b/c/d ms".
    let line = text
        .lines()
        .find(|l| l.contains("packets transmitted"))
        .unwrap_or_else(|| panic!("no ping summary: {text}"));
    let nums: Vec<u32> = line
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|w| w.parse().ok())
        .collect();
    let max = text
        .lines()
        .find(|l| l.starts_with("rtt"))
        .and_then(|l| l.split('=').nth(1))
        .and_then(|v| v.trim().split('/').nth(2))
        .and_then(|v| v.parse().ok())
        .unwrap_or(f64::NAN);
    (nums[0], nums[1], max)
}

/// The process id of the lagd serving `endpoint`, from the kernel (`SO_PEERCRED`).
fn lagd_pid(endpoint: &Endpoint) -> u32 {
    let s = endpoint.connect().expect("connect");
    lagd_sys::peer::peer_credentials(&s).expect("peer").pid
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .expect("VmRSS")
}

/// Two hosts, two links, lagd at both ends with `opts` (control socket files), addresses.
fn lab(opts: &str) -> (Topology, [PathBuf; 2], [Ipv4Addr; 2]) {
    need_root();
    let mut topo = Topology::create(2).expect("create topology");
    let mut controls = [PathBuf::new(), PathBuf::new()];
    let mut bonds = [String::new(), String::new()];
    for (i, side) in [Side::A, Side::B].into_iter().enumerate() {
        let bond = format!("{}b{}", topo.tag(), side.letter());
        let (_, control) = start_lagd(&mut topo, side, &bond, opts);
        controls[i] = control;
        bonds[i] = bond;
    }
    let addrs = address_bonds(&topo, &bonds);
    // Both bonds carry: the first pings may wait for ARP.
    let t = Instant::now();
    while ping(&topo, Side::A, addrs[1], 1).1 == 0 {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "the bonds never carried a ping"
        );
    }
    (topo, controls, addrs)
}

/// A client that sends its request one byte every 0.4 s, reconnecting whenever it is cut off,
/// until `stop`.
fn slow_client(path: PathBuf, stop: Arc<AtomicBool>) -> thread::JoinHandle<u32> {
    thread::spawn(move || {
        let mut cut_off = 0;
        while !stop.load(Ordering::Relaxed) {
            let Ok(mut s) = UnixStream::connect(&path) else {
                thread::sleep(Duration::from_millis(100));
                continue;
            };
            for b in b"{\"cmd\":\"status\"}\n" {
                if stop.load(Ordering::Relaxed) || s.write_all(&[*b]).is_err() {
                    break;
                }
                thread::sleep(Duration::from_millis(400));
            }
            cut_off += 1;
        }
        cut_off
    })
}

/// A client that connects and sends nothing, reconnecting when it is closed, until `stop`.
fn idle_client(path: PathBuf, stop: Arc<AtomicBool>) -> thread::JoinHandle<()> {
    thread::spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            let Ok(mut s) = UnixStream::connect(&path) else {
                thread::sleep(Duration::from_millis(100));
                continue;
            };
            s.set_read_timeout(Some(Duration::from_millis(200)))
                .unwrap();
            let mut buf = [0u8; 256];
            // Until the server closes the connection (or we are told to stop).
            while !stop.load(Ordering::Relaxed) {
                match s.read(&mut buf) {
                    Ok(0) => break,
                    Ok(_) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                    Err(_) => break,
                }
            }
        }
    })
}

#[test]
fn slow_and_idle_clients_stall_neither_forwarding_nor_other_clients() {
    hog_the_control_socket("mode=active-backup miimon=100 fastpath=off");
}

#[test]
fn slow_and_idle_clients_do_not_disturb_fast_lacp() {
    // LACP's short timeout is 3 s: a loop stalled that long loses the partner.
    hog_the_control_socket("mode=802.3ad lacp_rate=fast miimon=100 fastpath=off");
}

/// Slow and idle clients on A's control socket for 8 s while A pings B through the bonds
/// (carried by lagd's own loop): no ping is lost, a well-behaved client is always answered,
/// and with 802.3ad every member still distributes at both ends.
fn hog_the_control_socket(opts: &str) {
    let (topo, controls, addrs) = lab(opts);
    if opts.contains("802.3ad") {
        // Every member distributing first (the first pings may pass with one).
        let t = Instant::now();
        for c in &controls {
            while !query_status(c).unwrap().members.iter().all(distributing) {
                assert!(t.elapsed() < Duration::from_secs(30), "LACP did not settle");
                thread::sleep(Duration::from_millis(100));
            }
        }
    }
    let stop = Arc::new(AtomicBool::new(false));
    let mut slow = Vec::new();
    let mut idle = Vec::new();
    for _ in 0..4 {
        slow.push(slow_client(controls[0].clone(), Arc::clone(&stop)));
    }
    for _ in 0..20 {
        idle.push(idle_client(controls[0].clone(), Arc::clone(&stop)));
    }
    // A well-behaved client keeps asking while the others hog connections.
    let asker = {
        let path = controls[0].clone();
        let stop = Arc::clone(&stop);
        thread::spawn(move || {
            let mut answered = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                let t = Instant::now();
                let ok = query_status(&path).map(drop).map_err(|e| format!("{e:#}"));
                answered.push((ok, t.elapsed()));
                thread::sleep(Duration::from_millis(200));
            }
            answered
        })
    };
    thread::sleep(Duration::from_millis(300));
    let (sent, received, max_rtt) = ping(&topo, Side::A, addrs[1], 8);
    stop.store(true, Ordering::Relaxed);
    let cut_off: u32 = slow.into_iter().map(|h| h.join().unwrap()).sum();
    for h in idle {
        h.join().unwrap();
    }
    let answered = asker.join().unwrap();
    eprintln!(
        "ping: {received}/{sent}, max rtt {max_rtt} ms; status queries: {} (slowest {:?}); slow clients cut off {cut_off} times",
        answered.len(),
        answered.iter().map(|a| a.1).max()
    );
    assert_eq!(
        received, sent,
        "pings lost while clients hogged the control socket"
    );
    assert!(answered.len() >= 5, "{answered:?}");
    assert!(
        answered.iter().all(|a| a.0.is_ok()),
        "a status query failed: {answered:?}"
    );
    // Each slow client was cut off at the request deadline (8 s / 2 s), not served to the end.
    assert!(cut_off >= 4 * 2, "slow clients were not cut off: {cut_off}");
    if opts.contains("802.3ad") {
        for c in &controls {
            let s = query_status(c).unwrap();
            assert!(s.members.iter().all(distributing), "{}", s.render());
        }
    }
    assert!(query_status(&controls[1]).is_ok());
    topo.teardown().expect("teardown");
}

fn distributing(m: &lagd::status::MemberStatus) -> bool {
    m.lacp.as_ref().is_some_and(|l| l.distributing)
}

#[test]
fn an_oversized_request_is_refused_without_growing_the_daemon() {
    let (topo, controls, _) = lab("mode=active-backup miimon=100 fastpath=off");
    let endpoint = Endpoint::File(controls[0].clone());
    let pid = lagd_pid(&endpoint);
    let before = rss_kib(pid);
    // Up to 512 MiB in one line (no newline): the server stops reading at 64 KiB.
    let mut s = endpoint.connect().unwrap();
    s.set_write_timeout(Some(Duration::from_secs(10))).unwrap();
    let chunk = vec![b'x'; 1 << 20];
    let mut written = 0usize;
    while written < 512 << 20 {
        match s.write(&chunk) {
            Ok(n) => written += n,
            Err(_) => break,
        }
    }
    let mut reply = String::new();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let _ = s.read_to_string(&mut reply);
    let after = rss_kib(pid);
    eprintln!("wrote {written} bytes; lagd RSS {before} KiB -> {after} KiB; reply {reply:?}");
    assert!(
        written < 64 << 20,
        "the server kept reading: {written} bytes"
    );
    assert!(
        reply.contains("longer than") && reply.contains(&MAX_REQUEST.to_string()),
        "{reply}"
    );
    assert!(
        reply.len() < 300,
        "the error repeats the request: {} bytes",
        reply.len()
    );
    assert!(
        after < before + 16 * 1024,
        "RSS grew from {before} to {after} KiB"
    );
    // A long line that is JSON: refused at the limit as well; a bad short one is named briefly.
    let mut s = endpoint.connect().unwrap();
    let long = format!("{{\"cmd\":\"{}\"}}\n", "y".repeat(2 * MAX_REQUEST));
    let _ = s.write_all(long.as_bytes());
    let mut reply = String::new();
    let _ = s.read_to_string(&mut reply);
    assert!(reply.contains("longer than"), "{reply}");
    let mut s = endpoint.connect().unwrap();
    s.write_all(format!("{}\n", "z".repeat(1000)).as_bytes())
        .unwrap();
    let mut reply = String::new();
    s.read_to_string(&mut reply).unwrap();
    assert!(
        reply.contains("bad request") && reply.len() < 300,
        "{reply}"
    );
    // The daemon still serves.
    assert!(status_at(&endpoint).is_ok());
    // SIGHUP without --config: logged, and lagd carries on (it used to exit with 129).
    let out = Command::new("kill")
        .args(["-HUP", &pid.to_string()])
        .output()
        .expect("kill");
    assert!(out.status.success());
    thread::sleep(Duration::from_millis(300));
    assert!(status_at(&endpoint).is_ok(), "lagd did not survive SIGHUP");
    assert_eq!(lagd_pid(&endpoint), pid);
    topo.teardown().expect("teardown");
}

#[test]
fn a_slow_request_is_cut_off_at_its_deadline() {
    let (topo, controls, _) = lab("mode=active-backup miimon=100 fastpath=off");
    let mut s = UnixStream::connect(&controls[0]).unwrap();
    s.write_all(b"{\"cmd\":").unwrap();
    let t = Instant::now();
    let mut reply = String::new();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s.read_to_string(&mut reply).unwrap();
    let took = t.elapsed();
    assert!(reply.contains("not complete within"), "{reply}");
    assert!(
        took >= REQUEST_TIME - Duration::from_millis(100),
        "{took:?}"
    );
    topo.teardown().expect("teardown");
}

/// Runs lagd to completion in `side` (it is expected to refuse to start).
fn run_lagd(topo: &Topology, side: Side, args: &[&str]) -> Output {
    Command::new("ip")
        .args(["netns", "exec", topo.ns(side), LAGD])
        .args(args)
        .output()
        .expect("run lagd")
}

#[test]
fn control_on_a_regular_file_refuses_and_leaves_it() {
    need_root();
    let topo = Topology::create(1).expect("topology");
    let file = topo.dir().join("precious.txt");
    std::fs::write(&file, "keep me\n").unwrap();
    let bond = format!("{}f", topo.tag());
    let out = run_lagd(
        &topo,
        Side::A,
        &[
            "--bond",
            &bond,
            "--members",
            &topo.member_list(),
            "--control",
            &file.to_string_lossy(),
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("not a socket"), "{err}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "keep me\n");
    // Nothing was set up: the bond's TAP was not created.
    assert!(topo.ip(Side::A, &["link", "show", &bond]).is_err());
    topo.teardown().expect("teardown");
}

fn lagctl_in(topo: &Topology, side: Side, prefix: &[&str], args: &[&str]) -> Output {
    Command::new("ip")
        .args(["netns", "exec", topo.ns(side)])
        .args(prefix)
        .arg(LAGCTL)
        .args(args)
        .output()
        .expect("run lagctl")
}

/// Starts lagd for `bond0` on every link of `side` with the default control endpoint and
/// `extra` arguments; waits until it answers there.
fn start_bond0(topo: &mut Topology, side: Side, extra: &[&str]) -> ProcessId {
    let members = topo.member_list();
    let mut args = vec![
        "--bond",
        "bond0",
        "--members",
        &members,
        "--opts",
        "mode=active-backup miimon=100",
    ];
    args.extend_from_slice(extra);
    let id = topo
        .spawn(
            side,
            &format!("lagd-{}", side.letter()),
            Path::new(LAGD),
            &args,
        )
        .expect("start lagd");
    let t = Instant::now();
    let endpoint = Endpoint::default_for("bond0");
    while topo
        .in_ns(side, || status_at(&endpoint).is_err())
        .expect("in ns")
    {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "lagd did not come up:\n{}",
            topo.log_tail(id, 20)
        );
        thread::sleep(Duration::from_millis(50));
    }
    id
}

#[test]
fn one_bond0_per_network_namespace_each_reachable() {
    need_root();
    let mut topo = Topology::create(2).expect("topology");
    start_bond0(&mut topo, Side::A, &[]);
    start_bond0(&mut topo, Side::B, &[]);
    let mac_of = |side| {
        let out = topo.ip(side, &["-o", "link", "show", "bond0"]).unwrap();
        let at = out.find("link/ether ").expect("mac") + "link/ether ".len();
        out[at..at + 17].to_owned()
    };
    let mut seen = Vec::new();
    for side in [Side::A, Side::B] {
        // Named, and chosen when the namespace has a single bond.
        for args in [&["show", "bond0", "--json"][..], &["show", "--json"]] {
            let out = lagctl_in(&topo, side, &[], args);
            assert!(
                out.status.success(),
                "{side:?} {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            assert_eq!(v["bond"], "bond0");
            assert_eq!(v["mac"].as_str().unwrap(), mac_of(side), "{side:?}");
            seen.push(v["mac"].as_str().unwrap().to_owned());
        }
    }
    assert_ne!(seen[0], seen[2], "both namespaces reached the same bond");
    // A second lagd for bond0 in A is refused, naming the bond and the namespace, and leaves
    // the first one serving.
    let out = run_lagd(
        &topo,
        Side::A,
        &["--bond", "bond0", "--members", &topo.member_list()],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("network namespace") && err.contains("'bond0'"),
        "{err}"
    );
    let out = lagctl_in(&topo, Side::A, &[], &["show", "bond0"]);
    assert!(out.status.success());
    topo.teardown().expect("teardown");
}

#[test]
fn non_root_clients_get_status_only_with_the_group() {
    need_root();
    require_program("setpriv", "util-linux").unwrap_or_else(|e| panic!("{e:#}"));
    let mut topo = Topology::create(1).expect("topology");
    // Side A: status open to group 4242; side B: root only.
    start_bond0(&mut topo, Side::A, &["--control-group", "4242"]);
    start_bond0(&mut topo, Side::B, &[]);
    let nobody_in = |gid: &str| -> Vec<String> {
        vec![
            "setpriv".into(),
            "--reuid=65534".into(),
            "--regid=65534".into(),
            format!("--groups={gid}"),
        ]
    };
    let with_group = nobody_in("4242");
    let with_group: Vec<&str> = with_group.iter().map(String::as_str).collect();
    let without = nobody_in("4243");
    let without: Vec<&str> = without.iter().map(String::as_str).collect();
    let out = lagctl_in(&topo, Side::A, &with_group, &["show", "bond0", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["bond"], "bond0");
    // The group reads, but changes stay root's: nothing changes.
    for args in [
        &["set", "bond0", "miimon=50"][..],
        &["member", "bond0", "disable", &topo.links()[0].name],
        &["reload", "bond0"],
    ] {
        let out = lagctl_in(&topo, Side::A, &with_group, args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?}");
        assert!(err.contains("only root may change"), "{args:?}: {err}");
    }
    let out = lagctl_in(&topo, Side::A, &[], &["show", "bond0", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["miimon"], 100);
    assert!(v.get("disabled_members").is_none(), "{v}");
    // Root may.
    let out = lagctl_in(&topo, Side::A, &[], &["set", "bond0", "miimon=50"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for (side, prefix) in [(Side::A, &without), (Side::B, &with_group)] {
        let out = lagctl_in(&topo, side, prefix, &["show", "bond0"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{side:?}");
        assert!(err.contains("permission denied"), "{err}");
    }
    topo.teardown().expect("teardown");
}

/// Runs `lagctl ARGS --control CONTROL`, expecting a refusal; returns its standard error.
fn lagctl_refused(control: &Path, args: &[&str]) -> String {
    let out = Command::new(LAGCTL)
        .args(args)
        .arg("--control")
        .arg(control)
        .output()
        .expect("run lagctl");
    assert!(!out.status.success(), "lagctl {args:?} was not refused");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn config_text(bond: &str, members: &[&str], control: &Path, opts: &str) -> String {
    let members: Vec<String> = members.iter().map(|m| format!("\"{m}\"")).collect();
    let mut text = format!(
        "bond = \"{bond}\"\nmembers = [{}]\ncontrol = \"{}\"\n\n[options]\n",
        members.join(", "),
        control.display()
    );
    for pair in opts.split_whitespace() {
        let (k, v) = pair.split_once('=').unwrap();
        match v.parse::<u64>() {
            Ok(n) => text.push_str(&format!("{k} = {n}\n")),
            Err(_) => text.push_str(&format!("{k} = \"{v}\"\n")),
        }
    }
    text
}

/// Waits until `check` holds for the status at `control` (up to 10 s).
fn wait_status(control: &Path, what: &str, check: impl Fn(&lagd::status::Status) -> bool) {
    let t = Instant::now();
    loop {
        let s = query_status(control).expect("status");
        if check(&s) {
            return;
        }
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "{what}: {}",
            s.render()
        );
        thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn run_time_changes_keep_a_tcp_stream_alive() {
    run_time_changes("");
}

/// The same with the programs as clsact filters: a member removed at run time loses its
/// filter, one added gets one.
#[test]
fn run_time_changes_keep_a_tcp_stream_alive_tc() {
    run_time_changes("fastpath_attach=tc");
}

/// lagd's filters on `dev`'s ingress in host A (`tc filter show`).
fn lagd_filters(topo: &Topology, dev: &str) -> usize {
    let out = Command::new("ip")
        .args([
            "netns",
            "exec",
            topo.ns(Side::A),
            "tc",
            "filter",
            "show",
            "dev",
            dev,
        ])
        .arg("ingress")
        .output()
        .expect("tc (iproute2)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains("lagd_"))
        .count()
}

fn run_time_changes(extra: &str) {
    need_root();
    let opts = &format!("mode=balance-xor xmit_hash_policy=layer3+4 miimon=100 {extra}");
    let mut topo = Topology::create(3).expect("topology");
    let links: Vec<String> = topo.links().iter().map(|l| l.name.clone()).collect();
    let link: Vec<&str> = links.iter().map(String::as_str).collect();
    // A: from a configuration file (reloaded below); B: from the command line.
    let bond_a = format!("{}ba", topo.tag());
    let ctl_a = topo.dir().join("a.sock");
    let file = topo.dir().join("a.toml");
    std::fs::write(&file, config_text(&bond_a, &link, &ctl_a, opts)).unwrap();
    let file_s = file.to_string_lossy().into_owned();
    let lagd_a = topo
        .spawn(Side::A, "lagd-a", Path::new(LAGD), &["--config", &file_s])
        .expect("start lagd");
    let t = Instant::now();
    while query_status(&ctl_a).is_err() {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "lagd A did not come up:\n{}",
            topo.log_tail(lagd_a, 20)
        );
        thread::sleep(Duration::from_millis(50));
    }
    let bond_b = format!("{}bb", topo.tag());
    let (_, ctl_b) = start_lagd(&mut topo, Side::B, &bond_b, opts);
    let addrs = address_bonds(&topo, &[bond_a.clone(), bond_b.clone()]);
    let t = Instant::now();
    while ping(&topo, Side::A, addrs[1], 1).1 == 0 {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "no ping through the bonds"
        );
    }
    let path = query_status(&ctl_a).unwrap().dataplane.path;
    let both = [&ctl_a, &ctl_b];
    let (ns_a, ns_b) = (topo.ns(Side::A).to_owned(), topo.ns(Side::B).to_owned());
    let transfer = checked_transfer(
        &ns_a,
        &ns_b,
        std::net::SocketAddrV4::new(addrs[1], 5201),
        64 << 20,
        Some(Duration::from_millis(4)),
        || {
            thread::sleep(Duration::from_millis(500));
            // Live options.
            let out = lagctl_ok(&ctl_a, &["set", "xmit_hash_policy=layer2+3", "miimon=50"]);
            assert!(out.contains("miimon=50"), "{out}");
            wait_status(&ctl_a, "options applied", |s| {
                s.miimon == 50 && s.xmit_hash_policy.as_deref() == Some("layer2+3")
            });
            // Refused by the kernel's rules, changing nothing.
            let err = lagctl_refused(&ctl_a, &["set", "miimon=20", "mode=balance-rr"]);
            assert!(err.contains("mode") && err.contains("no members"), "{err}");
            let err = lagctl_refused(&ctl_a, &["set", "lacp_rate=fast"]);
            assert!(err.contains("down"), "{err}");
            if path == "kernel" {
                // The members' ARP frames reach lagd on the kernel path only when the ARP
                // monitor ran from the start.
                let err = lagctl_refused(
                    &ctl_a,
                    &[
                        "set",
                        "arp_interval=100",
                        &format!("arp_ip_target={}", addrs[1]),
                    ],
                );
                assert!(err.contains("ARP monitor"), "{err}");
            }
            assert_eq!(query_status(&ctl_a).unwrap().miimon, 50);
            // Remove the third member at both ends and add it back (with the fast path, its
            // member program is attached again).
            for c in both {
                lagctl_ok(c, &["member", "remove", link[2]]);
            }
            wait_status(&ctl_a, "m2 removed", |s| {
                s.members
                    .iter()
                    .filter(|m| m.name == link[2])
                    .all(|m| m.mii_status == "down")
            });
            thread::sleep(Duration::from_millis(300));
            for c in both {
                lagctl_ok(c, &["member", "add", link[2]]);
            }
            wait_status(&ctl_a, "m2 back", |s| {
                s.members
                    .iter()
                    .any(|m| m.name == link[2] && m.mii_status == "up")
            });
            thread::sleep(Duration::from_millis(300));
            // Only the re-added member left in use: the stream must move to it.
            for c in both {
                lagctl_ok(c, &["member", "disable", link[0]]);
                lagctl_ok(c, &["member", "disable", link[1]]);
            }
            wait_status(&ctl_a, "m0, m1 disabled", |s| {
                s.disabled_members.len() == 2
                    && s.members.iter().filter(|m| m.mii_status == "up").count() == 1
            });
            thread::sleep(Duration::from_millis(800));
            for c in both {
                lagctl_ok(c, &["member", "enable", link[0]]);
                lagctl_ok(c, &["member", "enable", link[1]]);
            }
            wait_status(&ctl_a, "enabled again", |s| {
                s.disabled_members.is_empty()
                    && s.members.iter().filter(|m| m.mii_status == "up").count() == 3
            });
        },
    )
    .expect("transfer");
    let s = query_status(&ctl_a).unwrap();
    eprintln!(
        "dataplane {path}; longest gap {:?}; changes {:?}",
        transfer.longest_gap, s.changes
    );
    assert!(transfer.intact(), "the TCP stream was damaged");
    // The re-added member carried the stream while it was the only one in use, both ways.
    let readded = |st: &lagd::status::Status| {
        st.members
            .iter()
            .rfind(|m| m.name == link[2])
            .map(|m| (m.mii_status.clone(), m.tx_bytes, m.rx_bytes))
            .unwrap()
    };
    let (mii, tx, _) = readded(&s);
    let (_, _, rx_b) = readded(&query_status(&ctl_b).unwrap());
    assert_eq!(mii, "up");
    assert!(
        tx > 1_000_000 && rx_b > 1_000_000,
        "re-added member: A sent {tx} bytes, B received {rx_b}"
    );
    // The changes are listed, in order, in the status and its text form.
    let wanted = [
        "set xmit_hash_policy=layer2+3 miimon=50",
        "member",
        "disable",
        "enable",
    ];
    for w in wanted {
        assert!(
            s.changes.iter().any(|c| c.contains(w)),
            "{w}: {:?}",
            s.changes
        );
    }
    assert!(s.render().contains("Changes:"));
    // SIGHUP re-reads the file: a live option applies.
    std::fs::write(
        &file,
        config_text(
            &bond_a,
            &link,
            &ctl_a,
            &format!("mode=balance-xor xmit_hash_policy=layer3+4 miimon=200 downdelay=400 {extra}"),
        ),
    )
    .unwrap();
    let pid = lagd_pid(&Endpoint::File(ctl_a.clone()));
    let out = Command::new("kill")
        .args(["-HUP", &pid.to_string()])
        .output()
        .expect("kill");
    assert!(out.status.success());
    wait_status(&ctl_a, "SIGHUP reload", |s| {
        s.miimon == 200 && s.downdelay == 400 && s.changes.iter().any(|c| c.contains("reload"))
    });
    // lagctl reload: a mode change is refused and nothing changes; a member list change applies.
    std::fs::write(
        &file,
        config_text(
            &bond_a,
            &link,
            &ctl_a,
            &format!("mode=active-backup miimon=10 {extra}"),
        ),
    )
    .unwrap();
    let err = lagctl_refused(&ctl_a, &["reload"]);
    assert!(err.contains("mode"), "{err}");
    assert_eq!(query_status(&ctl_a).unwrap().miimon, 200);
    std::fs::write(
        &file,
        config_text(
            &bond_a,
            &link[..2],
            &ctl_a,
            &format!("mode=balance-xor xmit_hash_policy=layer3+4 miimon=200 downdelay=400 {extra}"),
        ),
    )
    .unwrap();
    if extra.contains("fastpath_attach=tc") && path == "kernel" {
        assert_eq!(
            lagd_filters(&topo, link[2]),
            1,
            "the re-added member's filter"
        );
    }
    let out = lagctl_ok(&ctl_a, &["reload"]);
    assert!(
        out.contains(&format!("member {} removed", link[2])),
        "{out}"
    );
    if extra.contains("fastpath_attach=tc") {
        assert_eq!(
            lagd_filters(&topo, link[2]),
            0,
            "a removed member keeps no filter"
        );
        assert_eq!(lagd_filters(&topo, link[0]), usize::from(path == "kernel"));
    }
    // The daemon survived every step.
    assert!(topo.try_wait(lagd_a).unwrap().is_none(), "lagd A exited");
    topo.teardown().expect("teardown");
}

#[test]
fn the_active_member_moves_under_a_tcp_stream() {
    need_root();
    let mut topo = Topology::create(2).expect("topology");
    let links: Vec<String> = topo.links().iter().map(|l| l.name.clone()).collect();
    // A: active-backup taking frames on every member; B: balance-xor (any member).
    let bond_a = format!("{}ba", topo.tag());
    let bond_b = format!("{}bb", topo.tag());
    let (_, ctl_a) = start_lagd(
        &mut topo,
        Side::A,
        &bond_a,
        "mode=active-backup miimon=100 all_slaves_active=1",
    );
    let (_, ctl_b) = start_lagd(
        &mut topo,
        Side::B,
        &bond_b,
        "mode=balance-xor xmit_hash_policy=layer3+4 miimon=100",
    );
    let addrs = address_bonds(&topo, &[bond_a, bond_b]);
    let t = Instant::now();
    while ping(&topo, Side::A, addrs[1], 1).1 == 0 {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "no ping through the bonds"
        );
    }
    let active = |c: &Path| query_status(c).unwrap().active.unwrap_or_default();
    assert_eq!(active(&ctl_a), links[0]);
    let tx = |i: usize| query_status(&ctl_a).unwrap().members[i].tx_bytes;
    let (ns_a, ns_b) = (topo.ns(Side::A).to_owned(), topo.ns(Side::B).to_owned());
    let mut tx_m1 = 0;
    let transfer = checked_transfer(
        &ns_a,
        &ns_b,
        std::net::SocketAddrV4::new(addrs[1], 5202),
        32 << 20,
        Some(Duration::from_millis(4)),
        || {
            thread::sleep(Duration::from_millis(300));
            let before = tx(1);
            let out = lagctl_ok(&ctl_a, &["active", &links[1]]);
            assert!(out.contains("active"), "{out}");
            assert_eq!(active(&ctl_a), links[1]);
            thread::sleep(Duration::from_millis(800));
            tx_m1 = tx(1) - before;
            // Through primary, back to the first member.
            lagctl_ok(&ctl_a, &["set", &format!("primary={}", links[0])]);
            assert_eq!(active(&ctl_a), links[0]);
            // A primary that would take over again at once: refused, naming it.
            let err = lagctl_refused(&ctl_a, &["active", &links[1]]);
            assert!(err.contains("primary"), "{err}");
            let err = lagctl_refused(&ctl_b, &["active", &links[1]]);
            assert!(err.contains("no active member"), "{err}");
        },
    )
    .expect("transfer");
    eprintln!(
        "longest gap {:?}; {tx_m1} bytes sent on the second member while it was active",
        transfer.longest_gap
    );
    assert!(transfer.intact(), "the TCP stream was damaged");
    assert!(tx_m1 > 1_000_000, "the stream did not move: {tx_m1} bytes");
    let s = query_status(&ctl_a).unwrap();
    assert!(
        s.changes
            .iter()
            .any(|c| c.contains(&format!("active {}", links[1]))),
        "{:?}",
        s.changes
    );
    topo.teardown().expect("teardown");
}

/// A child process killed (by its id) and reaped when dropped, even if the test fails.
struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn events_show_a_failover_within_a_second() {
    let (topo, controls, _) = lab("mode=active-backup miimon=100");
    let link0 = topo.links()[0].name.clone();
    let link1 = topo.links()[1].name.clone();
    let mut child = Child(
        Command::new(LAGCTL)
            .args(["events", "--json", "--control"])
            .arg(&controls[0])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("lagctl events"),
    );
    let stdout = child.0.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { return };
            let v: serde_json::Value = serde_json::from_str(&line).expect("JSON event line");
            if tx.send((Instant::now(), v)).is_err() {
                return;
            }
        }
    });
    // Subscribed once a change shows up.
    let next = |what: &str, within: Duration| -> (Instant, serde_json::Value) {
        let deadline = Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let (t, v) = rx
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("no {what} event within {within:?}"));
            if v["event"] == what {
                return (t, v);
            }
        }
    };
    let t = Instant::now();
    loop {
        lagctl_ok(&controls[0], &["set", "resend_igmp=2"]);
        lagctl_ok(&controls[0], &["set", "resend_igmp=1"]);
        if rx.recv_timeout(Duration::from_millis(500)).is_ok() {
            break;
        }
        assert!(t.elapsed() < Duration::from_secs(10), "no event stream");
    }
    while rx.try_recv().is_ok() {}
    // The peer's end of the active member goes down: the failover is streamed.
    let t0 = Instant::now();
    topo.ip(Side::B, &["link", "set", &link0, "down"]).unwrap();
    let (t_active, v) = next("active", Duration::from_secs(5));
    eprintln!("failover event after {:?}: {v}", t_active - t0);
    assert_eq!(v["from"], link0.as_str());
    assert_eq!(v["to"], link1.as_str());
    assert!(
        t_active - t0 < Duration::from_secs(1),
        "failover shown after {:?}",
        t_active - t0
    );
    // And the link coming back.
    topo.ip(Side::B, &["link", "set", &link0, "up"]).unwrap();
    let (_, v) = next("link", Duration::from_secs(5));
    assert_eq!(v["member"], link0.as_str());
    drop(child);
    topo.teardown().expect("teardown");
}
