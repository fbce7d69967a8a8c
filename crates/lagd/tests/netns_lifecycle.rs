//! lagd's lifecycle in network namespaces (root): a refused start changes nothing; every stop
//! (SIGTERM, SIGINT, and `kill -9` followed by a restart and a clean stop) leaves the members as
//! they were before lagd; a member another lagd drives is refused by name; the running daemon
//! keeps only the capabilities it needs and runs under its seccomp filter; the service manager
//! hears READY=1 and the watchdog.

mod common;

use common::lagctl_ok;

use std::collections::BTreeMap;
use std::fs;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::path::{Path, PathBuf};
use std::thread;
use std::time::{Duration, Instant};

use lagd::control::query_status;
use lagd_lab::topology::{ProcessId, Side, Topology};

const LAGD: &str = env!("CARGO_BIN_EXE_lagd");

/// Everything lagd may change in host A: `ip -d link` of every interface, the members'
/// sysctls, qdiscs and tc filters, and the files in the control socket's directory.
#[derive(Debug, PartialEq, Eq)]
struct Snapshot {
    links: BTreeMap<String, String>,
    sysctls: BTreeMap<String, String>,
    tc: BTreeMap<String, String>,
    files: Vec<String>,
}

/// `tc ARGS` in host A.
fn tc(topo: &Topology, args: &[&str]) -> String {
    let out = std::process::Command::new("ip")
        .args(["netns", "exec", topo.ns(Side::A), "tc"])
        .args(args)
        .output()
        .expect("tc (iproute2)");
    assert!(
        out.status.success(),
        "tc {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn snapshot(topo: &Topology, dir: &Path) -> Snapshot {
    let out = topo
        .ip(Side::A, &["-d", "-o", "link", "show"])
        .expect("ip link");
    let mut links = BTreeMap::new();
    for line in out.lines() {
        // "3: name@if2: <FLAGS> ..." with the index first.
        let name = line
            .split(':')
            .nth(1)
            .map(|n| n.trim().split('@').next().unwrap_or("").to_owned())
            .unwrap_or_default();
        links.insert(name, line.to_owned());
    }
    let mut sysctls = BTreeMap::new();
    for l in topo.links() {
        for key in [
            format!("net.ipv4.conf.{}.arp_ignore", l.name),
            format!("net.ipv6.conf.{}.disable_ipv6", l.name),
        ] {
            let v = topo
                .in_ns(Side::A, || {
                    fs::read_to_string(format!("/proc/sys/{}", key.replace('.', "/")))
                })
                .expect("namespace")
                .unwrap_or_else(|e| format!("unreadable: {e}"));
            sysctls.insert(key, v.trim().to_owned());
        }
    }
    let mut tc_state = BTreeMap::new();
    for l in topo.links() {
        let n = l.name.as_str();
        tc_state.insert(format!("{n} qdisc"), tc(topo, &["qdisc", "show", "dev", n]));
        for hook in ["ingress", "egress"] {
            tc_state.insert(
                format!("{n} {hook}"),
                tc(topo, &["filter", "show", "dev", n, hook]),
            );
        }
    }
    let mut files: Vec<String> = fs::read_dir(dir)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.ends_with(".sock") || n.ends_with(".state") || n.ends_with(".tmp"))
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    Snapshot {
        links,
        sysctls,
        tc: tc_state,
        files,
    }
}

/// A lab of `links` veth pairs whose members start from non-default settings (so that a
/// restore to the kernel's defaults would show): arp_ignore=1, IPv6 on, MTU 1400, one member
/// down.
fn lab(links: usize) -> Topology {
    let topo = Topology::create(links).expect("lab topology (needs root and iproute2)");
    for (i, l) in topo.links().iter().enumerate() {
        topo.sysctl(
            Side::A,
            &format!("net/ipv4/conf/{}/arp_ignore", l.name),
            "1",
        )
        .expect("sysctl");
        topo.sysctl(
            Side::A,
            &format!("net/ipv6/conf/{}/disable_ipv6", l.name),
            "0",
        )
        .expect("sysctl");
        topo.ip(Side::A, &["link", "set", &l.name, "mtu", "1400"])
            .expect("mtu");
        if i == links - 1 && links > 1 {
            topo.ip(Side::A, &["link", "set", &l.name, "down"])
                .expect("down");
        }
    }
    topo
}

/// Starts lagd in host A with `args` (the control socket is `<lab dir>/<bond>.sock` unless
/// `args` name one).
fn spawn(topo: &mut Topology, label: &str, bond: &str, args: &[&str]) -> (ProcessId, PathBuf) {
    spawn_env(topo, label, bond, args, &[])
}

fn spawn_env(
    topo: &mut Topology,
    label: &str,
    bond: &str,
    args: &[&str],
    env: &[(&str, &str)],
) -> (ProcessId, PathBuf) {
    let control = topo.dir().join(format!("{bond}.sock"));
    let control_s = control.to_string_lossy().into_owned();
    let mut full = vec!["--bond", bond];
    if !args.contains(&"--control") {
        full.extend(["--control", &control_s]);
    }
    full.extend_from_slice(args);
    let id = topo
        .spawn_with_env(Side::A, label, Path::new(LAGD), &full, env)
        .expect("start lagd");
    (id, control)
}

/// Waits until lagd answers on `control` (it must not exit first).
fn wait_up(topo: &mut Topology, id: ProcessId, control: &Path) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while query_status(control).is_err() {
        let exited = topo.try_wait(id).expect("try_wait");
        assert!(
            exited.is_none() && Instant::now() < deadline,
            "lagd did not come up on {} ({exited:?}):\n{}",
            control.display(),
            topo.log_tail(id, 20)
        );
        thread::sleep(Duration::from_millis(50));
    }
}

/// Runs lagd to completion (it must refuse to start) and returns its exit code and stderr.
fn refused(topo: &mut Topology, label: &str, bond: &str, args: &[&str]) -> (i32, String) {
    let (id, _) = spawn(topo, label, bond, args);
    let status = topo
        .wait_exit(id, Duration::from_secs(20))
        .expect("wait")
        .unwrap_or_else(|| panic!("lagd ({label}) kept running: {}", topo.log_tail(id, 20)));
    (status.code().unwrap_or(-1), topo.log_tail(id, 20))
}

fn stop(topo: &mut Topology, id: ProcessId, sig: &str) {
    topo.signal(id, sig).expect("signal");
    let status = topo
        .wait_exit(id, Duration::from_secs(20))
        .expect("wait")
        .unwrap_or_else(|| panic!("lagd did not stop on SIG{sig}"));
    if sig != "KILL" {
        assert!(
            status.success(),
            "lagd exited with {status} on SIG{sig}:\n{}",
            topo.log_tail(id, 20)
        );
    }
}

fn sysctl(topo: &Topology, key: &str) -> String {
    topo.in_ns(Side::A, || {
        fs::read_to_string(format!("/proc/sys/{}", key.replace('.', "/")))
    })
    .expect("namespace")
    .expect("sysctl")
    .trim()
    .to_owned()
}

#[test]
fn refused_starts_change_nothing() {
    // 17 links: one more than the kernel path's table holds, for the late refusal.
    let mut topo = lab(17);
    let dir = topo.dir().to_path_buf();
    let [m0, m1] = [0, 1].map(|i| topo.links()[i].name.clone());
    let before = snapshot(&topo, &dir);

    let (code, log) = refused(
        &mut topo,
        "nosuch",
        "lcb0",
        &["--members", &format!("{m0},nosuch")],
    );
    assert_eq!(code, 2, "{log}");
    assert!(log.contains("'nosuch'"), "{log}");
    assert_eq!(snapshot(&topo, &dir), before, "nonexistent member");

    let members = format!("{m0},{m1}");
    let (code, log) = refused(
        &mut topo,
        "mtu",
        "lcb0",
        &["--members", &members, "--mtu", "65530"],
    );
    assert_eq!(code, 2, "{log}");
    assert!(log.contains("'mtu'") && log.contains("65530"), "{log}");
    assert_eq!(snapshot(&topo, &dir), before, "MTU 65530");

    // A control socket path lagd cannot make.
    let bad = dir.join("missing").join("deeper").join("x.sock");
    let bad = bad.to_string_lossy().into_owned();
    let (code, log) = refused(
        &mut topo,
        "badpath",
        "lcb0",
        &["--members", &members, "--control", &bad],
    );
    assert_ne!(code, 0, "{log}");
    assert!(log.contains("missing"), "{log}");
    assert!(!dir.join("missing").exists(), "{log}");
    assert_eq!(snapshot(&topo, &dir), before, "bad control path");

    // Refused after the TAP was created and the members' settings recorded (the kernel path
    // cannot carry more members than its table holds): the TAP and the state file go again.
    let all = topo
        .links()
        .iter()
        .map(|l| l.name.clone())
        .collect::<Vec<_>>()
        .join(",");
    let late = [
        "--members",
        &all,
        "--mtu",
        "9000",
        "--opts",
        "mode=active-backup miimon=100 fastpath=on",
    ];
    let (code, log) = refused(&mut topo, "late", "lcb0", &late);
    assert_eq!(code, 2, "{log}");
    assert!(log.contains("fastpath=on"), "{log}");
    assert_eq!(
        snapshot(&topo, &dir),
        before,
        "refused after the first changes"
    );

    // Another lagd runs on m0 with the control socket lcb1.sock.
    let (first, control) = spawn(&mut topo, "first", "lcb1", &["--members", &m0]);
    wait_up(&mut topo, first, &control);
    let running = snapshot(&topo, &dir);

    // The same control socket for another bond over m1.
    let control_s = control.to_string_lossy().into_owned();
    let (id, _) = spawn(
        &mut topo,
        "occupied",
        "lcb2",
        &["--members", &m1, "--control", &control_s],
    );
    let status = topo.wait_exit(id, Duration::from_secs(20)).expect("wait");
    let log = topo.log_tail(id, 20);
    assert!(status.is_some_and(|s| !s.success()), "{log}");
    assert!(log.contains("already serving"), "{log}");
    assert_eq!(snapshot(&topo, &dir), running, "occupied control socket");

    // m0 belongs to the first lagd: refused by name, m1 untouched.
    let both = format!("{m1},{m0}");
    let (code, log) = refused(&mut topo, "taken", "lcb3", &["--members", &both]);
    assert_ne!(code, 0, "{log}");
    assert!(
        log.contains(&format!("member '{m0}' is already driven by another lagd")),
        "{log}"
    );
    assert_eq!(snapshot(&topo, &dir), running, "a member of another lagd");
    assert!(query_status(&control).is_ok(), "the first lagd still runs");

    // Its TAP cannot be removed while it runs.
    let out = std::process::Command::new("ip")
        .args(["netns", "exec", topo.ns(Side::A), LAGD, "--remove", "lcb1"])
        .output()
        .expect("lagd --remove");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("stop it first"),
        "{err}"
    );
    assert_eq!(
        snapshot(&topo, &dir),
        running,
        "lagd --remove of a running bond"
    );

    stop(&mut topo, first, "TERM");
    topo.ip(Side::A, &["link", "del", "lcb1"])
        .expect("the first lagd's TAP");
    assert_eq!(
        snapshot(&topo, &dir),
        before,
        "after the first lagd stopped"
    );
    topo.teardown().expect("teardown");
}

/// Starts lagd over every link, checks it changed the members, stops it with `how`, and checks
/// the members and the directory are as before; then `lagd --remove` takes the TAP away.
fn stop_restores(how: &str, opts: &str) {
    let mut topo = lab(2);
    let dir = topo.dir().to_path_buf();
    let members = topo.member_list();
    let m0 = topo.links()[0].name.clone();
    let before = snapshot(&topo, &dir);
    let bond = "lcs0";
    let args = ["--members", &members, "--mtu", "1500", "--opts", opts];
    let (id, control) = spawn(&mut topo, "lagd", bond, &args);
    wait_up(&mut topo, id, &control);
    assert_eq!(
        sysctl(&topo, &format!("net.ipv4.conf.{m0}.arp_ignore")),
        "8"
    );
    assert!(dir.join(format!("{bond}.state")).exists());
    if how == "KILL" {
        stop(&mut topo, id, "KILL");
        // Nothing could run: the members keep lagd's settings, the state file their originals.
        assert_eq!(
            sysctl(&topo, &format!("net.ipv4.conf.{m0}.arp_ignore")),
            "8"
        );
        let (again, control) = spawn(&mut topo, "lagd-again", bond, &args);
        wait_up(&mut topo, again, &control);
        stop(&mut topo, again, "TERM");
    } else {
        stop(&mut topo, id, how);
    }
    let mut after = snapshot(&topo, &dir);
    let tap = after.links.remove(bond);
    assert!(tap.is_some(), "the TAP stays by design");
    assert_eq!(after, before, "after SIG{how}");

    let out = std::process::Command::new("ip")
        .args(["netns", "exec", topo.ns(Side::A), LAGD, "--remove", bond])
        .output()
        .expect("lagd --remove");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(snapshot(&topo, &dir), before, "after lagd --remove");
    topo.teardown().expect("teardown");
}

/// A member added at run time is claimed like the ones lagd started with (another lagd is
/// refused it), gets back its settings when it is removed, and the stop leaves the host as it
/// was.
#[test]
fn a_member_added_at_run_time_is_claimed_and_given_back_when_removed() {
    let mut topo = lab(3);
    let dir = topo.dir().to_path_buf();
    let names: Vec<String> = topo.links().iter().map(|l| l.name.clone()).collect();
    let before = snapshot(&topo, &dir);
    let bond = "lcm0";
    let first_two = format!("{},{}", names[0], names[1]);
    let args = [
        "--members",
        &first_two,
        "--mtu",
        "1500",
        "--opts",
        "mode=balance-xor",
    ];
    let (id, control) = spawn(&mut topo, "lagd", bond, &args);
    wait_up(&mut topo, id, &control);
    let added = &names[2];
    let arp_ignore = format!("net.ipv4.conf.{added}.arp_ignore");
    assert_eq!(sysctl(&topo, &arp_ignore), "1");
    lagctl_ok(&control, &["member", "add", added]);
    assert_eq!(
        sysctl(&topo, &arp_ignore),
        "8",
        "lagd's settings on the new member"
    );
    let (code, log) = refused(
        &mut topo,
        "other",
        "lcm1",
        &["--members", added, "--mtu", "1500"],
    );
    assert_eq!(code, 1, "{log}");
    assert!(
        log.contains(&format!(
            "member '{added}' is already driven by another lagd"
        )),
        "{log}"
    );
    lagctl_ok(&control, &["member", "remove", added]);
    assert_eq!(sysctl(&topo, &arp_ignore), "1", "given back on removal");
    // Free again: another lagd may take it now (and is stopped at once).
    let (other, other_control) = spawn(&mut topo, "other-again", "lcm1", &["--members", added]);
    wait_up(&mut topo, other, &other_control);
    stop(&mut topo, other, "TERM");
    stop(&mut topo, id, "TERM");
    let mut after = snapshot(&topo, &dir);
    assert!(
        after.links.remove(bond).is_some(),
        "the TAP stays by design"
    );
    after.links.remove("lcm1");
    assert_eq!(after, before, "after the stop");
    for b in [bond, "lcm1"] {
        let _ = std::process::Command::new("ip")
            .args(["netns", "exec", topo.ns(Side::A), LAGD, "--remove", b])
            .output();
    }
    topo.teardown().expect("teardown");
}

#[test]
fn sigterm_restores_the_members() {
    stop_restores("TERM", "mode=active-backup fail_over_mac=follow");
}

#[test]
fn sigint_restores_the_members() {
    stop_restores("INT", "mode=balance-xor fastpath=off");
}

#[test]
fn kill_9_then_restart_and_stop_restores_the_members() {
    stop_restores("KILL", "mode=balance-xor");
}

/// With clsact filters, which outlive a killed lagd: the restarted lagd's stop removes them
/// and the qdiscs the first one added.
#[test]
fn kill_9_then_restart_and_stop_restores_the_members_tc() {
    stop_restores("KILL", "mode=balance-xor fastpath_attach=tc");
}

#[test]
fn kill_9_then_restart_and_stop_restores_the_members_tc_drop() {
    stop_restores("KILL", "mode=balance-xor fastpath=off fastpath_attach=tc");
}

#[test]
fn keeps_only_the_capabilities_it_needs() {
    let mut topo = lab(2);
    let members = topo.member_list();
    let (id, control) = spawn(&mut topo, "lagd", "lcc0", &["--members", &members]);
    wait_up(&mut topo, id, &control);
    let status = fs::read_to_string(format!("/proc/{}/status", topo.pid(id))).expect("status");
    let field = |name: &str| {
        let line = status
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("{name} in /proc/PID/status"));
        u64::from_str_radix(line.split_whitespace().nth(1).expect("value"), 16).expect("hex")
    };
    let (eff, prm, bnd) = (field("CapEff:"), field("CapPrm:"), field("CapBnd:"));
    let bit = |c: u32| 1u64 << c;
    // CAP_NET_ADMIN (12), CAP_NET_RAW (13), CAP_BPF (39) where the kernel has it.
    let bpf = if fs::read_to_string("/proc/sys/kernel/cap_last_cap")
        .ok()
        .and_then(|s| s.trim().parse::<u32>().ok())
        .is_some_and(|l| l >= 39)
    {
        39
    } else {
        21
    };
    let want = bit(12) | bit(13) | bit(bpf);
    assert_eq!(eff, want, "CapEff {eff:#x}");
    assert_eq!(prm, want, "CapPrm {prm:#x}");
    assert_eq!(bnd, want, "CapBnd {bnd:#x}");
    // Capabilities are per thread: the loop's are above; the control socket's threads (and the
    // metrics server's) keep none.
    let pid = topo.pid(id);
    let mut others = 0;
    for task in fs::read_dir(format!("/proc/{pid}/task")).expect("/proc/PID/task") {
        let task = task.expect("task").path();
        if task.ends_with(pid.to_string()) {
            continue;
        }
        // A thread that ended since the directory was read has nothing left to check.
        let status = match fs::read_to_string(task.join("status")) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            r => r.expect("task status"),
        };
        let eff = status
            .lines()
            .find_map(|l| l.strip_prefix("CapEff:"))
            .expect("CapEff");
        let name = fs::read_to_string(task.join("comm")).unwrap_or_default();
        assert_eq!(
            u64::from_str_radix(eff.trim(), 16).expect("hex"),
            0,
            "thread {} ({})",
            task.display(),
            name.trim()
        );
        others += 1;
    }
    assert!(others >= 1, "the control socket's thread");
    assert!(
        topo.log_tail(id, 40).contains("capabilities dropped"),
        "{}",
        topo.log_tail(id, 40)
    );
    stop(&mut topo, id, "TERM");
    topo.teardown().expect("teardown");
}

/// The `Seccomp`, `Seccomp_filters` and `NoNewPrivs` lines of every thread of `pid`.
fn seccomp_lines(pid: u32) -> Vec<(String, String)> {
    let mut threads = Vec::new();
    for task in fs::read_dir(format!("/proc/{pid}/task")).expect("/proc/PID/task") {
        let task = task.expect("task").path();
        // A thread that ended since the directory was read has nothing left to check.
        let status = match fs::read_to_string(task.join("status")) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            r => r.expect("task status"),
        };
        let keep: Vec<&str> = status
            .lines()
            .filter(|l| {
                l.starts_with("Seccomp:")
                    || l.starts_with("Seccomp_filters:")
                    || l.starts_with("NoNewPrivs:")
            })
            .collect();
        threads.push((task.display().to_string(), keep.join(" ")));
    }
    threads
}

/// lagd runs under its seccomp filter on every thread (installed after start-up, on the
/// threads already started too), and still does what it does at run time: a `set` that changes
/// the transmit hash (the fast path's programs and maps), a member disabled and enabled, the
/// status, and a clean stop that restores the members. `--no-seccomp` runs without it.
/// Whether this is a 5.10 kernel (`uname -r`).
fn kernel_5_10() -> bool {
    fs::read_to_string("/proc/sys/kernel/osrelease").is_ok_and(|r| r.starts_with("5.10."))
}

#[test]
fn runs_under_a_seccomp_filter_on_every_thread() {
    let mut topo = lab(2);
    let members = topo.member_list();
    let m0 = topo.links()[0].name.clone();
    let args = ["--members", &members, "--opts", "mode=balance-xor"];
    let (id, control) = spawn(&mut topo, "lagd", "lse0", &args);
    wait_up(&mut topo, id, &control);
    let threads = seccomp_lines(topo.pid(id));
    assert!(threads.len() >= 2, "lagd's threads: {threads:?}");
    for (task, lines) in &threads {
        // Mode 2 is a filter; lagd installs one (the test harness none).
        assert!(
            lines.contains("Seccomp:\t2"),
            "{task}: {lines} (log: {})",
            topo.log_tail(id, 20)
        );
        assert!(lines.contains("NoNewPrivs:\t1"), "{task}: {lines}");
        // Seccomp_filters appeared in Linux 5.9. The main thread installs the filter and
        // counts it; early 5.10 kernels (Debian 11's 5.10.46, the kernel matrix's) do not count
        // it on the threads that got it by TSYNC (a kernel fix, "seccomp: Fix setting loaded
        // filter count during TSYNC", came later), though their mode above is 2.
        if lines.contains("Seccomp_filters:") {
            let main = task.ends_with(&format!("/task/{}", topo.pid(id)));
            let uncounted = !main && lines.contains("Seccomp_filters:\t0") && kernel_5_10();
            assert!(
                lines.contains("Seccomp_filters:\t1") || uncounted,
                "{task}: {lines}"
            );
        }
    }
    assert!(
        topo.log_tail(id, 40).contains("seccomp filter installed"),
        "{}",
        topo.log_tail(id, 40)
    );
    let out = lagctl_ok(&control, &["set", "xmit_hash_policy=layer3+4", "miimon=50"]);
    assert!(out.contains("changed"), "{out}");
    lagctl_ok(&control, &["member", "disable", &m0]);
    lagctl_ok(&control, &["member", "enable", &m0]);
    let status = query_status(&control).expect("status after the changes");
    assert_eq!(status.members.len(), 2);
    assert!(
        topo.try_wait(id).expect("try_wait").is_none(),
        "lagd exited"
    );
    stop(&mut topo, id, "TERM");
    let (id, control) = spawn(
        &mut topo,
        "lagd-off",
        "lse0",
        &["--no-seccomp", "--members", &members],
    );
    wait_up(&mut topo, id, &control);
    for (task, lines) in seccomp_lines(topo.pid(id)) {
        assert!(lines.contains("Seccomp:\t0"), "{task}: {lines}");
    }
    stop(&mut topo, id, "TERM");
    topo.teardown().expect("teardown");
}

/// READY=1 once the control socket answers, then WATCHDOG=1 at half of WATCHDOG_USEC, to a
/// datagram socket at `target` (a path, or `@name` in host A's namespace).
fn notifies(abstract_name: bool) {
    let mut topo = lab(2);
    let members = topo.member_list();
    let (listener, target) = if abstract_name {
        let name = format!("{}-notify", topo.prefix());
        let n = name.clone();
        let l = topo
            .in_ns(Side::A, move || {
                UnixDatagram::bind_addr(&SocketAddr::from_abstract_name(n.as_bytes())?)
            })
            .expect("namespace")
            .expect("bind abstract");
        (l, format!("@{name}"))
    } else {
        let path = topo.dir().join("notify.sock");
        let l = UnixDatagram::bind(&path).expect("bind");
        (l, path.to_string_lossy().into_owned())
    };
    listener
        .set_read_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    let env = [
        ("NOTIFY_SOCKET", target.as_str()),
        ("WATCHDOG_USEC", "400000"),
    ];
    let (id, control) = spawn_env(&mut topo, "lagd", "lcn0", &["--members", &members], &env);
    let mut buf = [0u8; 512];
    let len = listener
        .recv(&mut buf)
        .unwrap_or_else(|e| panic!("no notification: {e}\n{}", topo.log_tail(id, 20)));
    let first = String::from_utf8_lossy(&buf[..len]).into_owned();
    assert!(first.lines().any(|l| l == "READY=1"), "{first:?}");
    assert!(first.contains("STATUS=bond lcn0"), "{first:?}");
    // The bond works when READY=1 arrives: its control socket answers.
    assert!(
        query_status(&control).is_ok(),
        "READY=1 before the bond answered"
    );
    let start = Instant::now();
    let mut watchdogs = 0;
    while watchdogs < 5 {
        let len = listener.recv(&mut buf).expect("WATCHDOG=1 within 20 s");
        if &buf[..len] == b"WATCHDOG=1" {
            watchdogs += 1;
        }
    }
    // Five keep-alives every 200 ms take at least 0.8 s (the first comes at once).
    assert!(
        start.elapsed() >= Duration::from_millis(700),
        "{:?}",
        start.elapsed()
    );
    stop(&mut topo, id, "TERM");
    let mut stopping = false;
    listener
        .set_read_timeout(Some(Duration::from_millis(500)))
        .expect("timeout");
    while let Ok(len) = listener.recv(&mut buf) {
        stopping |= &buf[..len] == b"STOPPING=1";
    }
    assert!(stopping, "STOPPING=1 on SIGTERM");
    topo.teardown().expect("teardown");
}

#[test]
fn notifies_a_path_socket() {
    notifies(false);
}

#[test]
fn notifies_an_abstract_socket() {
    notifies(true);
}

/// A TCP connection through the bond outlives `kill -9` of lagd and a restart, on the kernel
/// fast path and through lagd: the TAP and the host's configuration stay, the new lagd takes
/// over the same TAP, and the data sent across the outage arrives.
fn tcp_survives_restart(opts: &str) {
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};

    let mut topo = Topology::create(2).expect("lab topology (needs root and iproute2)");
    let bonds = ["lcr0".to_owned(), "lcr1".to_owned()];
    let (a, control_a) = common::start_lagd(&mut topo, Side::A, &bonds[0], opts);
    let (_b, _) = common::start_lagd(&mut topo, Side::B, &bonds[1], opts);
    let [_, addr_b] = common::address_bonds(&topo, &bonds);
    let listener = topo
        .in_ns(Side::B, move || TcpListener::bind((addr_b, 5001)))
        .expect("namespace")
        .expect("listen");
    // An echo server: every byte comes back.
    let server = thread::spawn(move || -> std::io::Result<u64> {
        let (mut s, _) = listener.accept()?;
        s.set_read_timeout(Some(Duration::from_secs(60)))?;
        let mut buf = [0u8; 65536];
        let mut total = 0;
        loop {
            let n = s.read(&mut buf)?;
            if n == 0 {
                return Ok(total);
            }
            s.write_all(&buf[..n])?;
            total += n as u64;
        }
    });
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut client = loop {
        match topo
            .in_ns(Side::A, move || {
                TcpStream::connect_timeout(&(addr_b, 5001).into(), Duration::from_secs(2))
            })
            .expect("namespace")
        {
            Ok(c) => break c,
            Err(e) => {
                assert!(
                    Instant::now() < deadline,
                    "no TCP connection through the bond: {e}"
                );
                thread::sleep(Duration::from_millis(200));
            }
        }
    };
    client
        .set_read_timeout(Some(Duration::from_secs(60)))
        .expect("timeout");
    let round = |client: &mut TcpStream, fill: u8| {
        let data = vec![fill; 256 * 1024];
        let mut back = vec![0u8; data.len()];
        // Write and read in chunks so that neither side's buffers fill up.
        for (chunk, echo) in data.chunks(16384).zip(back.chunks_mut(16384)) {
            client.write_all(chunk).expect("write");
            client.read_exact(echo).expect("echo");
        }
        assert!(back == data, "the echo differs");
    };
    round(&mut client, 1);

    stop(&mut topo, a, "KILL");
    // Sent while no lagd runs: the host queues and retransmits.
    client
        .write_all(&[2; 4096])
        .expect("write during the outage");
    let mut echo = [0u8; 4096];
    let members = topo.member_list();
    let control_s = control_a.to_string_lossy().into_owned();
    let (again, _) = spawn(
        &mut topo,
        "lagd-again",
        &bonds[0],
        &[
            "--members",
            &members,
            "--opts",
            opts,
            "--control",
            &control_s,
        ],
    );
    wait_up(&mut topo, again, &control_a);
    client
        .read_exact(&mut echo)
        .expect("the echo of what was sent during the outage");
    assert!(echo.iter().all(|&b| b == 2));
    round(&mut client, 3);
    drop(client);
    let total = server.join().expect("server").expect("echo server");
    assert_eq!(total, 2 * 256 * 1024 + 4096);
    stop(&mut topo, again, "TERM");
    topo.teardown().expect("teardown");
}

#[test]
fn tcp_survives_kill_9_and_restart_kernel_path() {
    tcp_survives_restart("mode=balance-xor xmit_hash_policy=layer3+4 fastpath=on");
}

#[test]
fn tcp_survives_kill_9_and_restart_kernel_path_tc() {
    tcp_survives_restart(
        "mode=balance-xor xmit_hash_policy=layer3+4 fastpath=on fastpath_attach=tc",
    );
}

#[test]
fn tcp_survives_kill_9_and_restart_lagd_path() {
    tcp_survives_restart("mode=balance-xor xmit_hash_policy=layer3+4 fastpath=off");
}

/// Whether host `side` reaches `addr` with one ping (1 s to answer).
fn pings(topo: &Topology, side: Side, addr: std::net::Ipv4Addr) -> bool {
    lagd_lab::topology::require_program("ping", "iputils-ping").unwrap_or_else(|e| panic!("{e:#}"));
    std::process::Command::new("ip")
        .args([
            "netns",
            "exec",
            topo.ns(side),
            "ping",
            "-q",
            "-c",
            "1",
            "-W",
            "1",
        ])
        .arg(addr.to_string())
        .output()
        .is_ok_and(|o| o.status.success())
}

/// When the bond loses its carrier (every member down; or lagd killed) the kernel drops the
/// host's neighbour entries, and a packet sent meanwhile leaves one being resolved whose next
/// solicitation waits for the retransmit timer. Once the carrier is back lagd deletes such
/// entries, so the host resolves at once: with the timer at 30 s, host A reaches B within
/// 10 s of a member coming back (kernel path and lagd's path).
#[test]
fn neighbours_resolve_at_once_when_the_bond_carrier_returns() {
    for opts in [
        "mode=balance-xor xmit_hash_policy=layer3+4 miimon=50 fastpath=on",
        "mode=balance-xor xmit_hash_policy=layer3+4 miimon=50 fastpath=off",
    ] {
        let mut topo = Topology::create(2).expect("lab topology (needs root and iproute2)");
        let bonds = ["lnr0".to_owned(), "lnr1".to_owned()];
        let (a, _) = common::start_lagd(&mut topo, Side::A, &bonds[0], opts);
        let (b, _) = common::start_lagd(&mut topo, Side::B, &bonds[1], opts);
        let [_, addr_b] = common::address_bonds(&topo, &bonds);
        topo.sysctl(Side::A, "net/ipv4/neigh/lnr0/retrans_time_ms", "30000")
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        while !pings(&topo, Side::A, addr_b) {
            assert!(
                Instant::now() < deadline,
                "{opts}: no ping through the bond"
            );
        }
        let members: Vec<String> = topo.links().iter().map(|l| l.name.clone()).collect();
        for m in &members {
            topo.ip(Side::B, &["link", "set", m, "down"]).unwrap();
        }
        // The kernel takes the bond's carrier loss in (operational state down: neighbours
        // dropped).
        let tap_state =
            |topo: &Topology| topo.ip(Side::A, &["-o", "link", "show", "lnr0"]).unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while !tap_state(&topo).contains("state DOWN") {
            assert!(
                Instant::now() < deadline,
                "{opts}: bond still up: {}",
                tap_state(&topo)
            );
            thread::sleep(Duration::from_millis(20));
        }
        // Sent while the bond is down: the entry is being resolved (for 30 s) when it is back.
        assert!(
            !pings(&topo, Side::A, addr_b),
            "{opts}: a ping with every member down"
        );
        let neigh = |topo: &Topology| {
            topo.ip(
                Side::A,
                &["neigh", "show", &addr_b.to_string(), "dev", "lnr0"],
            )
            .unwrap()
        };
        assert!(
            neigh(&topo).contains("INCOMPLETE"),
            "{opts}: {}",
            neigh(&topo)
        );
        topo.ip(Side::B, &["link", "set", &members[0], "up"])
            .unwrap();
        let back = Instant::now();
        while !pings(&topo, Side::A, addr_b) {
            assert!(
                back.elapsed() < Duration::from_secs(10),
                "{opts}: B unreachable 10 s after a member came back ({}):\n{}",
                neigh(&topo),
                topo.log_tail(a, 20)
            );
        }
        assert!(
            topo.log_tail(a, 1000)
                .contains("neighbour entries still being resolved deleted"),
            "{opts}: {}",
            topo.log_tail(a, 20)
        );
        stop(&mut topo, a, "TERM");
        stop(&mut topo, b, "TERM");
        topo.teardown().expect("teardown");
    }
}
