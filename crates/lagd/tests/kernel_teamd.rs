//! lagd's LACP against teamd's lacp runner (libteam's `teamd` over the kernel's team driver),
//! in the user-mode Linux guests of the kernel matrix (`tools/uml.py`: the host's kernel has no
//! team driver).
//!
//! In the guest, host A runs lagd (`mode=802.3ad`, `fastpath=off`) and host B teamd, in the
//! foreground as this test's child, with the lacp runner (active, fast rate, hashing
//! eth/ipv4/ipv6, the ethtool link watch) over the same two veth links, named as ports in its
//! configuration. Each scenario measures the time until both ends distribute on every member
//! (lagd's status; teamd's `teamdctl DEV state dump`: the runner selected the port and its
//! actor state has Distributing) and the pings lost (10 ms apart, from A to B):
//!
//! - both active, fast rate, and lagd passive against teamd active;
//! - each member lost and returned (its link set down for 1.3 s on lagd's side);
//! - teamd killed (SIGKILL) and started again, re-creating its team device (a partner
//!   restart);
//! - lagd killed (SIGKILL) and started again: it resumes from its state file, and teamd's
//!   ports never leave selected and distributing (sampled across the restart).
//!
//! Asserted: convergence within the bounds the standard's timers give, no loss on a converged
//! bond, the bond reconverging after each flap and after the restart, no `not_collecting` drop
//! at lagd on a member after it comes back, and no loss once it has reconverged. The losses of
//! the flap and the restart are measured and reported (bench/interop.md).
//!
//! Needs root (user-mode Linux runs under ptrace), ping, teamd and teamdctl (libteam-utils)
//! and the kernels `tools/uml.py` fetches; fails, never skips, without them.

mod common;
mod guest;

use std::path::{Path, PathBuf};
use std::process::Child;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use guest::{in_guest, sh, try_sh};
use lagd::control::query_status;
use lagd::status::Status;
use lagd_lab::dataplane::address_bond;
use lagd_lab::topology::{ProcessId, Side, Topology, in_path};
use serde_json::Value;

/// lagd's bond in host A.
const LBOND: &str = "lb0";
/// Ping interval in the measurements.
const PING_INTERVAL: Duration = Duration::from_millis(10);
/// Actor state bit Distributing.
const DISTRIBUTING: u64 = 0x20;

struct Lab {
    topo: Topology,
    lagd: ProcessId,
    control: PathBuf,
    teamd: ProcessId,
    /// teamd's team device in host B.
    team: String,
    /// teamd's configuration file.
    conf: PathBuf,
    kernel: String,
    /// When lagd was started (after teamd answered on its control socket).
    lagd_started: Instant,
    /// How many teamd processes this lab started (labels their logs).
    teamd_runs: u32,
}

fn start_lagd(topo: &mut Topology, opts: &str) -> (ProcessId, PathBuf) {
    common::start_lagd(topo, Side::A, LBOND, opts)
}

/// teamd's configuration: the lacp runner, active and fast, over every link of the lab.
fn teamd_config(topo: &Topology, team: &str) -> String {
    let ports: serde_json::Map<String, Value> = topo
        .links()
        .iter()
        .map(|l| (l.name.clone(), serde_json::json!({})))
        .collect();
    serde_json::json!({
        "device": team,
        "runner": {
            "name": "lacp",
            "active": true,
            "fast_rate": true,
            "tx_hash": ["eth", "ipv4", "ipv6"],
        },
        "link_watch": { "name": "ethtool" },
        "ports": ports,
    })
    .to_string()
}

/// Starts teamd in the foreground in host B (`-r`: a team device left behind by a killed
/// teamd is re-created), waits for its control socket and gives the team device address 2.
fn start_teamd(topo: &mut Topology, team: &str, conf: &Path, run: u32) -> ProcessId {
    // The team driver refuses a port that is up (EBUSY, and teamd 1.31 does not set it down
    // itself): the links go down first, and teamd sets them up as it adds them.
    for l in topo.links() {
        topo.ip(Side::B, &["link", "set", &l.name, "down"]).unwrap();
    }
    let pidfile = topo.dir().join(format!("teamd-{run}.pid"));
    let id = topo
        .spawn(
            Side::B,
            &format!("teamd-b-{run}"),
            Path::new("/usr/bin/teamd"),
            &[
                "-f",
                &conf.to_string_lossy(),
                "-t",
                team,
                "-r",
                "-p",
                &pidfile.to_string_lossy(),
            ],
        )
        .expect("start teamd (libteam-utils)");
    let deadline = Instant::now() + Duration::from_secs(20);
    while teamd_dump(topo, team).is_err() {
        let exited = topo.try_wait(id).expect("teamd's status");
        assert!(
            exited.is_none() && Instant::now() < deadline,
            "teamd did not come up ({exited:?}):\n{}",
            topo.log_tail(id, 30)
        );
        thread::sleep(Duration::from_millis(50));
    }
    address_bond(topo, Side::B, team, 2).expect("team device address");
    id
}

/// `teamdctl TEAM state dump` in host B, parsed.
fn teamd_dump(topo: &Topology, team: &str) -> Result<Value, String> {
    let text = try_sh(
        "ip",
        &[
            "netns",
            "exec",
            topo.ns(Side::B),
            "teamdctl",
            team,
            "state",
            "dump",
        ],
    )?;
    serde_json::from_str(&text).map_err(|e| format!("teamdctl's state dump: {e}: {text}"))
}

impl Lab {
    fn new(kernel: &str, lagd_opts: &str) -> Self {
        assert!(
            in_path("teamd") && in_path("teamdctl"),
            "teamd and teamdctl are needed (apt-get install libteam-utils)"
        );
        let mut topo = Topology::create(2).expect("topology");
        let team = format!("{}t", topo.tag());
        let conf = topo.dir().join("teamd.conf");
        std::fs::write(&conf, teamd_config(&topo, &team)).expect("teamd configuration");
        topo.remove_at_end(PathBuf::from(format!("/run/teamd/{team}.sock")));
        let teamd = start_teamd(&mut topo, &team, &conf, 1);
        let lagd_started = Instant::now();
        let (lagd, control) = start_lagd(&mut topo, lagd_opts);
        address_bond(&topo, Side::A, LBOND, 1).expect("lagd bond address");
        Self {
            topo,
            lagd,
            control,
            teamd,
            team,
            conf,
            kernel: kernel.to_owned(),
            lagd_started,
            teamd_runs: 1,
        }
    }

    fn status(&self) -> Status {
        query_status(&self.control).expect("lagd status")
    }

    /// teamd's state dump; panics with teamd's log when it cannot be had.
    fn dump(&self) -> Value {
        teamd_dump(&self.topo, &self.team).unwrap_or_else(|e| {
            panic!(
                "teamdctl {} state dump: {e}\nteamd's log:\n{}",
                self.team,
                self.topo.log_tail(self.teamd, 30)
            )
        })
    }

    /// teamd's runner state of member `i` in `dump`: (selected, actor state, partner state,
    /// port state name).
    fn teamd_port(&self, dump: &Value, i: usize) -> (bool, u64, u64, String) {
        let runner = &dump["ports"][&self.topo.links()[i].name]["runner"];
        (
            runner["selected"].as_bool().unwrap_or(false),
            runner["actor_lacpdu_info"]["state"].as_u64().unwrap_or(0),
            runner["partner_lacpdu_info"]["state"].as_u64().unwrap_or(0),
            runner["state"].as_str().unwrap_or("?").to_owned(),
        )
    }

    /// Per member (in link order): whether teamd selected it and its actor distributes.
    fn teamd_distributing(&self) -> Vec<bool> {
        let dump = self.dump();
        (0..self.topo.links().len())
            .map(|i| {
                let (selected, actor, _, _) = self.teamd_port(&dump, i);
                selected && actor & DISTRIBUTING != 0
            })
            .collect()
    }

    fn lagd_distributing(&self) -> Vec<bool> {
        guest::lagd_distributing(&self.status())
    }

    /// Waits until both ends distribute on every member; returns when each end first did,
    /// counted from `since`.
    fn wait_distributing(&self, since: Instant, within: Duration) -> (Duration, Duration) {
        guest::wait_both(
            since,
            within,
            || self.lagd_distributing().iter().all(|&d| d),
            || self.teamd_distributing().iter().all(|&d| d),
            || {
                format!(
                    "kernel {}: lagd {:?}, teamd {:?}\n{}\n{}\nlagd:\n{}\nteamd:\n{}",
                    self.kernel,
                    self.lagd_distributing(),
                    self.teamd_distributing(),
                    self.status().render(),
                    serde_json::to_string_pretty(&self.dump()["ports"]).unwrap_or_default(),
                    self.topo.log_tail(self.lagd, 40),
                    self.topo.log_tail(self.teamd, 40),
                )
            },
        )
    }

    /// Polls both ends from `since` until both distribute on every member, and returns the
    /// changes of member `i`'s states at both ends with their times.
    fn timeline(&self, i: usize, since: Instant, within: Duration) -> Vec<String> {
        let mut out = Vec::new();
        let mut last = String::new();
        loop {
            let t = since.elapsed();
            let s = self.status();
            let m = &s.members[i];
            let l = m.lacp.as_ref().expect("member LACP status");
            let dump = self.dump();
            let (sel, ta, tp, st) = self.teamd_port(&dump, i);
            let now = format!(
                "lagd mux {} actor 0x{:02x} partner 0x{:02x} collecting {} | teamd {st} \
                 selected {sel} actor 0x{ta:02x} partner 0x{tp:02x}",
                l.mux_state, l.actor.state, l.partner.state, l.collecting
            );
            if now != last {
                out.push(format!("{:6.3} s {now}", t.as_secs_f64()));
                last = now;
            }
            // Both ends from the same samples as the line above.
            let lagd_all = s
                .members
                .iter()
                .all(|m| m.lacp.as_ref().is_some_and(|l| l.distributing));
            let teamd_all = (0..self.topo.links().len()).all(|k| {
                let (selected, actor, _, _) = self.teamd_port(&dump, k);
                selected && actor & DISTRIBUTING != 0
            });
            if lagd_all && teamd_all {
                return out;
            }
            assert!(t < within, "not distributing again:\n{}", out.join("\n"));
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// Starts `count` pings from `side` to the other host, `PING_INTERVAL` apart.
    fn ping_from(&self, side: Side, count: u32) -> Child {
        guest::ping_other_host(&self.topo, side, count, PING_INTERVAL)
    }

    fn ping(&self, count: u32) -> Child {
        self.ping_from(Side::A, count)
    }

    /// Waits for a ping; returns (sent, received, when each lost request was sent in epoch
    /// seconds, estimated from the replies around it).
    fn ping_losses(child: Child) -> (u32, u32, Vec<f64>) {
        guest::ping_losses(child, PING_INTERVAL)
    }

    fn ping_result(child: Child) -> (u32, u32) {
        let (sent, got, _) = Self::ping_losses(child);
        (sent, got)
    }

    /// lagd's `not_collecting` drops on member `i`.
    fn not_collecting(&self, i: usize) -> u64 {
        self.status().members[i]
            .rx_dropped
            .iter()
            .find(|(r, _)| r == "not_collecting")
            .map_or(0, |(_, n)| *n)
    }

    /// lagd's partner system (priority, MAC) on each member.
    fn partner_system(&self) -> String {
        self.status()
            .members
            .iter()
            .map(|m| {
                m.lacp.as_ref().map_or_else(
                    || "-".to_owned(),
                    |l| format!("{},{}", l.partner.system_priority, l.partner.system_mac),
                )
            })
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// Kills teamd (SIGKILL: it leaves its team device behind) and checks it is gone.
    fn kill_teamd(&mut self) {
        self.topo
            .signal(self.teamd, "KILL")
            .expect("SIGKILL to teamd");
        let status = self
            .topo
            .wait_exit(self.teamd, Duration::from_secs(5))
            .unwrap();
        assert!(status.is_some(), "teamd did not exit on SIGKILL");
    }

    /// Starts teamd again over the team device the killed one left.
    fn restart_teamd(&mut self) {
        // A killed teamd leaves its control socket behind: this instance's own file.
        let _ = std::fs::remove_file(format!("/run/teamd/{}.sock", self.team));
        self.teamd_runs += 1;
        self.teamd = start_teamd(&mut self.topo, &self.team, &self.conf, self.teamd_runs);
    }

    /// Stops lagd and teamd (SIGTERM: teamd removes its team device) and checks the device is
    /// gone, then removes the namespaces.
    fn stop(mut self) {
        self.topo.stop(self.lagd);
        self.topo.stop(self.teamd);
        let links = sh("ip", &["-n", self.topo.ns(Side::B), "-o", "link", "show"]);
        assert!(
            !links.contains(&format!(" {}:", self.team)),
            "teamd left its team device {} behind after SIGTERM:\n{links}",
            self.team
        );
        self.topo.teardown().expect("lab cleanup");
    }
}

/// Prints one result line (collected by the host side into the report).
fn report(kernel: &str, scenario: &str, text: &str) {
    println!("LACP teamd kernel {kernel} | {scenario} | {text}");
}

fn epoch_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// The lost pings' (estimated) send times as bursts (gaps over 50 ms split them), in seconds
/// from `zero`: `start..end (count)`.
fn bursts(lost: &[f64], zero: f64) -> String {
    let mut out: Vec<(f64, f64, usize)> = Vec::new();
    for &t in lost.iter().filter(|t| t.is_finite()) {
        match out.last_mut() {
            Some(b) if t - b.1 <= 0.05 => {
                b.1 = t;
                b.2 += 1;
            }
            _ => out.push((t, t, 1)),
        }
    }
    out.iter()
        .map(|(f, l, n)| format!("{:+.2}..{:+.2} s ({n})", f - zero, l - zero))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Convergence from a cold start (counted from lagd's start; teamd runs by then), then 300
/// pings on the converged bond: none may be lost.
fn converge(kernel: &str, scenario: &str, lagd_opts: &str, within: Duration) {
    let lab = Lab::new(kernel, lagd_opts);
    let (a, b) = lab.wait_distributing(lab.lagd_started, within);
    let (sent, got) = Lab::ping_result(lab.ping(300));
    report(
        kernel,
        scenario,
        &format!(
            "distributing: lagd {:.2} s, teamd {:.2} s after lagd's start; pings lost {} of \
             {sent}",
            a.as_secs_f64(),
            b.as_secs_f64(),
            sent - got
        ),
    );
    assert_eq!(got, sent, "{scenario}: pings lost on a converged bond");
    lab.stop();
}

/// Each member flapped (down 1.3 s on lagd's side) while pings run; then teamd killed and
/// started again.
fn flap_and_restart(kernel: &str) {
    let mut lab = Lab::new(kernel, "mode=802.3ad lacp_rate=fast fastpath=off");
    lab.wait_distributing(lab.lagd_started, Duration::from_secs(15));
    for i in 0..lab.topo.links().len() {
        let name = lab.topo.links()[i].name.clone();
        let ping = lab.ping(800); // 8 s
        let from_b = lab.ping_from(Side::B, 800);
        thread::sleep(Duration::from_millis(1000));
        lab.topo
            .ip(Side::A, &["link", "set", &name, "down"])
            .unwrap();
        thread::sleep(Duration::from_millis(1300));
        let drops_down = lab.not_collecting(i);
        let up = Instant::now();
        let up_epoch = epoch_now();
        lab.topo.ip(Side::A, &["link", "set", &name, "up"]).unwrap();
        let timeline = lab.timeline(i, up, Duration::from_secs(10));
        let (a, b) = lab.wait_distributing(up, Duration::from_secs(10));
        let (sent, got, lost) = Lab::ping_losses(ping);
        let (b_sent, b_got, b_lost) = Lab::ping_losses(from_b);
        let after = |l: &[f64]| l.iter().filter(|&&t| t >= up_epoch).count();
        for line in &timeline {
            println!("TIMELINE teamd kernel {kernel} member {i}: {line}");
        }
        let drops_after_up = lab.not_collecting(i) - drops_down;
        report(
            kernel,
            &format!("member {i} down 1.3 s, up"),
            &format!(
                "distributing again: lagd {:.2} s, teamd {:.2} s after up; pings lost A->B {} \
                 of {sent} ({} after the link came back), B->A {} of {b_sent} ({} after); \
                 lagd not_collecting drops after up {drops_after_up}",
                a.as_secs_f64(),
                b.as_secs_f64(),
                sent - got,
                after(&lost),
                b_sent - b_got,
                after(&b_lost),
            ),
        );
        assert_eq!(
            drops_after_up, 0,
            "kernel {kernel}: member {i} dropped frames as not_collecting after it came back"
        );
        let (sent, got) = Lab::ping_result(lab.ping(200));
        assert_eq!(got, sent, "member {i}: pings lost after the flap converged");
    }
    // Partner restart: teamd killed, started again 0.5 s later.
    let ping = lab.ping(1000); // 10 s
    thread::sleep(Duration::from_millis(1000));
    let partner_before = lab.partner_system();
    let gone = Instant::now();
    let gone_epoch = epoch_now();
    lab.kill_teamd();
    // The killed teamd's team device stays, its ports still enabled in the kernel.
    sh(
        "ip",
        &["-n", lab.topo.ns(Side::B), "link", "show", "dev", &lab.team],
    );
    thread::sleep(Duration::from_millis(500));
    let again = Instant::now();
    let again_epoch = epoch_now();
    lab.restart_teamd();
    let (a, b) = lab.wait_distributing(again, Duration::from_secs(15));
    let (sent, got, lost) = Lab::ping_losses(ping);
    report(
        kernel,
        "teamd killed (SIGKILL), started again 0.5 s later",
        &format!(
            "distributing again: lagd {:.2} s, teamd {:.2} s after the start ({:.2} s after \
             the kill); pings lost {} of {sent} ({} between the kill and the start, {} after \
             the start; bursts from the kill: {}); lagd's partner system {partner_before} before, {} after",
            a.as_secs_f64(),
            b.as_secs_f64(),
            gone.elapsed().as_secs_f64() - again.elapsed().as_secs_f64()
                + a.as_secs_f64().max(b.as_secs_f64()),
            sent - got,
            lost.iter()
                .filter(|&&t| t >= gone_epoch && t < again_epoch)
                .count(),
            lost.iter().filter(|&&t| t >= again_epoch).count(),
            bursts(&lost, gone_epoch),
            lab.partner_system()
        ),
    );
    let (sent, got) = Lab::ping_result(lab.ping(200));
    assert_eq!(got, sent, "pings lost after the partner restart converged");
    lab.stop();
}

/// lagd killed (SIGKILL) and started again with the same bond and control socket while teamd
/// runs on: lagd resumes from its state file with the partner it had (no aggregate wait), back
/// well within teamd's fast timeout (3 s), so teamd never sees the restart: sampled every 50 ms
/// across the kill and the restart, each of teamd's ports stays selected and distributing. The
/// pings lost while no lagd forwards (its own dataplane) are reported; none may be lost once it
/// is back.
fn lagd_kill_and_restart(kernel: &str) {
    let begun = Instant::now();
    let opts = "mode=802.3ad lacp_rate=fast fastpath=off";
    let mut lab = Lab::new(kernel, opts);
    lab.wait_distributing(lab.lagd_started, Duration::from_secs(15));
    let ping = lab.ping(600); // 6 s
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (ns, team, stop) = (
            lab.topo.ns(Side::B).to_owned(),
            lab.team.clone(),
            Arc::clone(&stop),
        );
        let links: Vec<String> = lab.topo.links().iter().map(|l| l.name.clone()).collect();
        thread::spawn(move || {
            let t0 = Instant::now();
            let (mut samples, mut left) = (0u32, Vec::new());
            while !stop.load(Ordering::Relaxed) {
                let text = try_sh(
                    "ip",
                    &["netns", "exec", &ns, "teamdctl", &team, "state", "dump"],
                );
                let dump: Option<Value> = text.ok().and_then(|t| serde_json::from_str(&t).ok());
                samples += 1;
                let ports: Vec<(bool, u64)> = links
                    .iter()
                    .map(|l| {
                        let r = dump.as_ref().map(|d| &d["ports"][l]["runner"]);
                        (
                            r.and_then(|r| r["selected"].as_bool()).unwrap_or(false),
                            r.and_then(|r| r["actor_lacpdu_info"]["state"].as_u64())
                                .unwrap_or(0),
                        )
                    })
                    .collect();
                if !ports.iter().all(|&(sel, st)| sel && st & DISTRIBUTING != 0) {
                    left.push(format!(
                        "{:.3} s: (selected, actor state) {ports:?}",
                        t0.elapsed().as_secs_f64()
                    ));
                }
                thread::sleep(Duration::from_millis(50));
            }
            (samples, left)
        })
    };
    thread::sleep(Duration::from_millis(1000));
    let partner_before = lab.partner_system();
    let killed = Instant::now();
    let killed_epoch = epoch_now();
    lab.topo.signal(lab.lagd, "KILL").expect("kill -9 lagd");
    let gone = lab
        .topo
        .wait_exit(lab.lagd, Duration::from_secs(5))
        .expect("lagd's exit");
    assert!(gone.is_some(), "lagd still runs 5 s after SIGKILL");
    let (lagd, control) = start_lagd(&mut lab.topo, opts);
    lab.lagd = lagd;
    lab.control = control;
    let answering = killed.elapsed();
    let (a, b) = lab.wait_distributing(killed, Duration::from_secs(15));
    thread::sleep(Duration::from_millis(1000));
    stop.store(true, Ordering::Relaxed);
    let (samples, left) = sampler.join().expect("the sampling thread");
    let (sent, got, lost) = Lab::ping_losses(ping);
    let log = lab.topo.log_tail(lab.lagd, 400);
    let resumed = log.matches("the member takes up with this partner").count();
    report(
        kernel,
        "lagd killed (-9), started again",
        &format!(
            "lagd answering {:.2} s, distributing {:.2} s after the kill (teamd {:.2} s); \
             members resumed {resumed} of {}; teamd's ports out of selected/distributing in {} \
             of {samples} samples; pings lost {} of {sent} (bursts from the kill: {}); lagd's \
             partner system {partner_before} before, {} after; the scenario took {:.1} s",
            answering.as_secs_f64(),
            a.as_secs_f64(),
            b.as_secs_f64(),
            lab.topo.links().len(),
            left.len(),
            sent - got,
            bursts(&lost, killed_epoch),
            lab.partner_system(),
            begun.elapsed().as_secs_f64()
        ),
    );
    assert_eq!(
        resumed,
        lab.topo.links().len(),
        "kernel {kernel}: the restarted lagd did not resume every member:\n{log}"
    );
    assert!(
        samples >= 5 && left.is_empty(),
        "kernel {kernel}: teamd's ports left selected/distributing across lagd's restart \
         ({samples} samples):\n{}\n{log}\nteamd:\n{}",
        left.join("\n"),
        lab.topo.log_tail(lab.teamd, 40)
    );
    let (sent, got) = Lab::ping_result(lab.ping(200));
    assert_eq!(
        got, sent,
        "kernel {kernel}: pings lost after lagd's restart"
    );
    lab.stop();
}

fn scenarios(kernel: &str) {
    assert!(in_path("ping"), "ping (iputils-ping) is needed");
    // Fast: the aggregate wait (2 s) plus a few fast periodic LACPDUs (1 s apart).
    converge(
        kernel,
        "both active, fast",
        "mode=802.3ad lacp_rate=fast fastpath=off",
        Duration::from_secs(10),
    );
    converge(
        kernel,
        "lagd passive, teamd active, fast",
        "mode=802.3ad lacp_rate=fast lacp_active=off fastpath=off",
        Duration::from_secs(10),
    );
    flap_and_restart(kernel);
    lagd_kill_and_restart(kernel);
}

#[test]
#[ignore = "about 1.5 minutes per kernel: run with --ignored (CI does, beside its kernel matrix)"]
fn kernel_teamd_5_10() {
    in_guest("5.10", "kernel_teamd_5_10", 600, scenarios);
}

#[test]
#[ignore = "about 1.5 minutes per kernel: run with --ignored (CI does, beside its kernel matrix)"]
fn kernel_teamd_6_1() {
    in_guest("6.1", "kernel_teamd_6_1", 600, scenarios);
}

#[test]
#[ignore = "about 1.5 minutes per kernel: run with --ignored (CI does, beside its kernel matrix)"]
fn kernel_teamd_6_12() {
    in_guest("6.12", "kernel_teamd_6_12", 600, scenarios);
}
