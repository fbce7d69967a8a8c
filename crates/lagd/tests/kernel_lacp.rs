//! lagd's LACP against the Linux bonding driver's 802.3ad, in each kernel of the matrix (5.10,
//! 6.1, 6.12 as user-mode Linux guests, `tools/uml.py`).
//!
//! In the guest, host A runs lagd (`mode=802.3ad`, `fastpath=off`: its own dataplane, the same
//! on every kernel) and host B a kernel bond in 802.3ad mode over the same two veth links. Each
//! scenario measures the time until both ends distribute on every member (lagd's status; the
//! kernel's `/proc/net/bonding` actor port state, with the slave enabled and the bond's
//! carrier up) and the pings lost while it runs (10 ms apart, from A to B):
//!
//! - both active, fast rate, and lagd passive against the kernel (fast);
//! - both active, slow rate (LACPDUs every 30 s; both ends still converge on the first ones);
//! - each member lost and returned (its link set down for 1 s on lagd's side);
//! - the kernel side's bond deleted and created again (a partner restart).
//!
//! Asserted: convergence (the times are reported: the standard's timers give 3-5 s, bench/
//! interop.md has them; the bounds asserted are wide, since the clock runs from before lagd
//! starts and a one-CPU guest on a loaded machine starts processes slowly), no loss on a converged
//! bond, the bond reconverging after each flap and after the partner restart, and no
//! `not_collecting` drop at lagd on a member after it comes back. The losses of the flap and
//! the restart are measured and reported (the kernel may still drop what lagd sends on the
//! returning member for up to one of its ticks: bench/interop.md).
//!
//! Needs root (user-mode Linux runs under ptrace), ping and the kernels `tools/uml.py` fetches;
//! fails, never skips, without them.

mod common;
mod guest;

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use guest::{in_guest, sh};
use lagd::control::query_status;
use lagd::lab::dataplane::address_bond;
use lagd::lab::topology::{ProcessId, Side, Topology};
use lagd::status::Status;

/// The kernel bond in host B.
const KBOND: &str = "kb0";
/// lagd's bond in host A.
const LBOND: &str = "lb0";
/// Ping interval in the measurements.
const PING_INTERVAL: Duration = Duration::from_millis(10);

struct Lab {
    topo: Topology,
    lagd: ProcessId,
    control: PathBuf,
    kernel: String,
}

fn start_lagd(topo: &mut Topology, opts: &str) -> (ProcessId, PathBuf) {
    common::start_lagd(topo, Side::A, LBOND, opts)
}

/// Creates the kernel's 802.3ad bond over every link of host B, up, with address 2.
fn kernel_bond(topo: &Topology, opts: &[&str]) {
    let mut args = vec![
        "link", "add", KBOND, "type", "bond", "mode", "802.3ad", "miimon", "100",
    ];
    args.extend_from_slice(opts);
    topo.ip(Side::B, &args).expect("kernel bond");
    for l in topo.links() {
        topo.ip(Side::B, &["link", "set", &l.name, "down"]).unwrap();
        topo.ip(Side::B, &["link", "set", &l.name, "master", KBOND])
            .expect("enslave");
    }
    address_bond(topo, Side::B, KBOND, 2).expect("kernel bond address");
}

impl Lab {
    fn new(kernel: &str, lagd_opts: &str, kernel_opts: &[&str]) -> Self {
        let mut topo = Topology::create(2).expect("topology");
        kernel_bond(&topo, kernel_opts);
        let (lagd, control) = start_lagd(&mut topo, lagd_opts);
        address_bond(&topo, Side::A, LBOND, 1).expect("lagd bond address");
        Self {
            topo,
            lagd,
            control,
            kernel: kernel.to_owned(),
        }
    }

    fn status(&self) -> Status {
        query_status(&self.control).expect("lagd status")
    }

    /// The kernel bond's `/proc/net/bonding` text.
    fn proc_bonding(&self) -> String {
        sh(
            "ip",
            &[
                "netns",
                "exec",
                self.topo.ns(Side::B),
                "cat",
                &format!("/proc/net/bonding/{KBOND}"),
            ],
        )
    }

    /// Per member of the kernel bond (in link order): whether it carries traffic: its actor
    /// says it distributes (`/proc/net/bonding`), the driver has enabled it (slave state
    /// `ACTIVE`: the driver sets the Distributing bit before it enables the port when the
    /// port's aggregator is not yet the active one, and drops what an inactive slave receives)
    /// and the bond has its carrier.
    fn kernel_distributing(&self) -> Vec<bool> {
        let text = self.proc_bonding();
        let enabled = self.kernel_enabled();
        self.topo
            .links()
            .iter()
            .zip(enabled)
            .map(|(l, enabled)| {
                if !enabled {
                    return false;
                }
                let Some(at) = text.find(&format!("Slave Interface: {}\n", l.name)) else {
                    return false;
                };
                let part = &text[at..];
                let part = &part[..part[1..]
                    .find("Slave Interface:")
                    .map_or(part.len(), |e| e + 1)];
                let Some(actor) = part.find("details actor lacp pdu:") else {
                    return false;
                };
                part[actor..]
                    .lines()
                    .find_map(|l| l.trim().strip_prefix("port state: "))
                    .and_then(|s| s.trim().parse::<u8>().ok())
                    .is_some_and(|s| s & 0x20 != 0)
            })
            .collect()
    }

    /// Per member of the kernel bond (in link order): whether the driver has enabled it
    /// (`ip -d -j link`: slave state `ACTIVE`) while the bond has its carrier (`LOWER_UP`).
    fn kernel_enabled(&self) -> Vec<bool> {
        // One `ip` for every link of host B (a process costs tens of ms in the guest).
        let text = sh(
            "ip",
            &[
                "netns",
                "exec",
                self.topo.ns(Side::B),
                "ip",
                "-d",
                "-j",
                "link",
                "show",
            ],
        );
        let links: Vec<serde_json::Value> = serde_json::from_str(&text).unwrap_or_default();
        let link = |name: &str| links.iter().find(|l| l["ifname"] == name);
        let carrier = link(KBOND).is_some_and(|b| {
            b["flags"]
                .as_array()
                .is_some_and(|f| f.iter().any(|f| f == "LOWER_UP"))
        });
        self.topo
            .links()
            .iter()
            .map(|l| {
                carrier
                    && link(&l.name)
                        .is_some_and(|m| m["linkinfo"]["info_slave_data"]["state"] == "ACTIVE")
            })
            .collect()
    }

    /// The kernel's actor and partner port state bytes of member `i`.
    fn kernel_states(&self, i: usize) -> (u8, u8) {
        let text = self.proc_bonding();
        let name = &self.topo.links()[i].name;
        let Some(at) = text.find(&format!("Slave Interface: {name}\n")) else {
            return (0, 0);
        };
        let part = &text[at..];
        let part = &part[..part[1..]
            .find("Slave Interface:")
            .map_or(part.len(), |e| e + 1)];
        let state = |section: &str| {
            part.find(section).map_or(0, |at| {
                part[at..]
                    .lines()
                    .find_map(|l| l.trim().strip_prefix("port state: "))
                    .and_then(|s| s.trim().parse::<u8>().ok())
                    .unwrap_or(0)
            })
        };
        (
            state("details actor lacp pdu:"),
            state("details partner lacp pdu:"),
        )
    }

    /// Polls both ends every 20 ms from `since` until both distribute on every member, and
    /// returns the changes of member `i`'s states at both ends with their times (a timeline
    /// for the report).
    fn timeline(&self, i: usize, since: Instant, within: Duration) -> Vec<String> {
        let mut out = Vec::new();
        let mut last = String::new();
        loop {
            let t = since.elapsed();
            let s = self.status();
            let m = &s.members[i];
            let l = m.lacp.as_ref().expect("member LACP status");
            let drops = m
                .rx_dropped
                .iter()
                .find(|(r, _)| r == "not_collecting")
                .map_or(0, |(_, n)| *n);
            let (ka, kp) = self.kernel_states(i);
            let now = format!(
                "lagd mux {} actor 0x{:02x} partner 0x{:02x} collecting {} not_collecting {drops} \
                 | kernel actor 0x{ka:02x} partner 0x{kp:02x}",
                l.mux_state, l.actor.state, l.partner.state, l.collecting
            );
            if now != last {
                out.push(format!("{:6.3} s {now}", t.as_secs_f64()));
                last = now;
            }
            if self.lagd_distributing().iter().all(|&d| d)
                && self.kernel_distributing().iter().all(|&d| d)
            {
                return out;
            }
            assert!(t < within, "not distributing again:\n{}", out.join("\n"));
            thread::sleep(Duration::from_millis(20));
        }
    }

    fn lagd_distributing(&self) -> Vec<bool> {
        self.status()
            .members
            .iter()
            .map(|m| m.lacp.as_ref().is_some_and(|l| l.distributing))
            .collect()
    }

    /// Waits until both ends distribute on every member; returns when each end first did,
    /// counted from `since`.
    fn wait_distributing(&self, since: Instant, within: Duration) -> (Duration, Duration) {
        let (mut a, mut b) = (None, None);
        while a.is_none() || b.is_none() {
            let t = since.elapsed();
            if a.is_none() && self.lagd_distributing().iter().all(|&d| d) {
                a = Some(t);
            }
            if b.is_none() && self.kernel_distributing().iter().all(|&d| d) {
                b = Some(t);
            }
            assert!(
                t < within,
                "kernel {}: not distributing on every member after {within:?} (lagd {:?}, \
                 kernel {:?}):\n{}\n{}\n{}",
                self.kernel,
                self.lagd_distributing(),
                self.kernel_distributing(),
                self.status().render(),
                self.proc_bonding(),
                self.topo.log_tail(self.lagd, 40)
            );
            thread::sleep(Duration::from_millis(20));
        }
        (a.unwrap(), b.unwrap())
    }

    /// Starts `count` pings from A to B, `PING_INTERVAL` apart.
    fn ping(&self, count: u32) -> Child {
        self.ping_from(Side::A, count)
    }

    /// Starts `count` pings from `side` to the other host, `PING_INTERVAL` apart.
    fn ping_from(&self, side: Side, count: u32) -> Child {
        let to = if side == Side::A { 2 } else { 1 };
        Command::new("ip")
            .args(["netns", "exec", self.topo.ns(side), "ping", "-D", "-n"])
            .args(["-c", &count.to_string(), "-W", "1", "-i"])
            .arg(format!("{}", PING_INTERVAL.as_secs_f64()))
            .arg(self.topo.address(to).to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("ping (iputils-ping)")
    }

    /// Waits for a ping started by [`Lab::ping`]; returns (sent, received).
    fn ping_result(child: Child) -> (u32, u32) {
        let (sent, got, _) = Self::ping_losses(child);
        (sent, got)
    }

    /// Waits for a ping started by [`Lab::ping`]; returns (sent, received, when each lost
    /// request was sent in epoch seconds, estimated from the replies around it).
    fn ping_losses(child: Child) -> (u32, u32, Vec<f64>) {
        guest::ping_losses(child, PING_INTERVAL)
    }

    /// lagd's `not_collecting` drops on member `i`.
    fn not_collecting(&self, i: usize) -> u64 {
        self.status().members[i]
            .rx_dropped
            .iter()
            .find(|(r, _)| r == "not_collecting")
            .map_or(0, |(_, n)| *n)
    }

    fn stop(mut self) {
        self.topo.stop(self.lagd);
    }
}

/// Prints one result line (collected by the host side into the report).
fn report(kernel: &str, scenario: &str, text: &str) {
    println!("LACP kernel {kernel} | {scenario} | {text}");
}

/// Convergence from a cold start, then 300 pings on the converged bond: none may be lost.
fn converge(kernel: &str, scenario: &str, lagd_opts: &str, kernel_opts: &[&str], within: Duration) {
    let started = Instant::now();
    let lab = Lab::new(kernel, lagd_opts, kernel_opts);
    let (a, b) = lab.wait_distributing(started, within);
    let pinged = Instant::now();
    let (sent, got, lost) = Lab::ping_losses(lab.ping(300));
    report(
        kernel,
        scenario,
        &format!(
            "distributing: lagd {:.2} s, kernel {:.2} s; pings lost {} of {sent}",
            a.as_secs_f64(),
            b.as_secs_f64(),
            sent - got
        ),
    );
    if got != sent {
        // When the lost requests were sent, counted from the start of the pings.
        let epoch = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64()
            - pinged.elapsed().as_secs_f64();
        let at: Vec<String> = lost.iter().map(|t| format!("{:.3}", t - epoch)).collect();
        panic!(
            "{scenario}: pings lost on a converged bond: {} of {sent}, sent at {} s after the \
             first\n{}\n{}\n{}",
            sent - got,
            at.join(", "),
            lab.status().render(),
            lab.proc_bonding(),
            lab.topo.log_tail(lab.lagd, 40)
        );
    }
    lab.stop();
}

/// Each member flapped (down 1 s on lagd's side) while pings run; then the bond deleted and
/// created again on the kernel's side.
fn flap_and_restart(kernel: &str) {
    let started = Instant::now();
    // layer3+4 at the kernel: the echo requests of several pings from B (one ICMP identifier
    // each) spread over both members, so some arrive on the member that comes back.
    let lab = Lab::new(
        kernel,
        "mode=802.3ad lacp_rate=fast fastpath=off",
        &["lacp_rate", "fast", "xmit_hash_policy", "layer3+4"],
    );
    lab.wait_distributing(started, Duration::from_secs(30));
    for i in 0..lab.topo.links().len() {
        let name = lab.topo.links()[i].name.clone();
        let drops_before = lab.not_collecting(i);
        let ping = lab.ping(800); // 8 s
        let from_b: Vec<Child> = (0..6).map(|_| lab.ping_from(Side::B, 800)).collect();
        let dump = Command::new("ip")
            .args([
                "netns",
                "exec",
                lab.topo.ns(Side::A),
                "tcpdump",
                "-i",
                &name,
            ])
            .args(["-n", "-l", "-e", "--immediate-mode", "-tt", "-v"])
            .args(["ether", "proto", "0x8809"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("tcpdump");
        thread::sleep(Duration::from_millis(1000));
        lab.topo
            .ip(Side::A, &["link", "set", &name, "down"])
            .unwrap();
        thread::sleep(Duration::from_millis(1000));
        thread::sleep(Duration::from_millis(300));
        // The link is down: nothing arrives on it until it is set up.
        let drops_down = lab.not_collecting(i);
        let up = Instant::now();
        let up_epoch = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        lab.topo.ip(Side::A, &["link", "set", &name, "up"]).unwrap();
        let timeline = lab.timeline(i, up, Duration::from_secs(20));
        let (a, b) = lab.wait_distributing(up, Duration::from_secs(20));
        let (sent, got, lost) = Lab::ping_losses(ping);
        let lost_after_up = lost.iter().filter(|&&t| t >= up_epoch).count();
        let (mut b_sent, mut b_lost, mut b_after_up) = (0, 0, 0);
        for child in from_b {
            let (s, g, lost) = Lab::ping_losses(child);
            b_sent += s;
            b_lost += s - g;
            b_after_up += lost.iter().filter(|&&t| t >= up_epoch).count();
        }
        let drops = lab.not_collecting(i) - drops_before;
        for line in &timeline {
            println!("TIMELINE kernel {kernel} member {i}: {line}");
        }
        let drops_after_up = lab.not_collecting(i) - drops_down;
        // The capture ends with SIGTERM (to its PID), which tcpdump answers by flushing.
        sh("kill", &[&dump.id().to_string()]);
        let captured = dump.wait_with_output().expect("tcpdump output");
        // One line per LACPDU from the link's return on: direction and both state bytes.
        let text = String::from_utf8_lossy(&captured.stdout);
        let mut pdu: Option<(f64, String)> = None;
        let mut states = Vec::new();
        for line in text.lines().chain(std::iter::once("0.0 end")) {
            if let Some((t, rest)) = line.split_once(' ')
                && let Ok(t) = t.parse::<f64>()
            {
                if let Some((pt, from)) = pdu.take()
                    && pt >= up_epoch - 0.05
                {
                    println!(
                        "LACPDU kernel {kernel} member {i}: {:6.3} s from {from}: actor state \
                         {} partner state {}",
                        pt - up_epoch,
                        states.first().map_or("?", String::as_str),
                        states.get(1).map_or("?", String::as_str)
                    );
                }
                states.clear();
                pdu = Some((t, rest.split_whitespace().next().unwrap_or("?").to_owned()));
            } else if let Some(st) = line.trim().strip_prefix("State Flags [") {
                states.push(st.trim_end_matches(']').to_owned());
            }
        }
        report(
            kernel,
            &format!("member {i} down 1 s, up"),
            &format!(
                "distributing again: lagd {:.2} s, kernel {:.2} s after up; pings lost {} of \
                 {sent} ({} after the link came back); from B (6 pings, layer3+4 at the \
                 kernel) lost {b_lost} of {b_sent} ({b_after_up} after the link came back); lagd \
                 not_collecting drops on it {drops}",
                a.as_secs_f64(),
                b.as_secs_f64(),
                sent - got,
                lost_after_up
            ),
        );
        // The kernel distributes on the returning member as soon as it has our Sync and
        // tells us its own up to 300 ms later: lagd takes those frames (it is attached in
        // sync), so none is a not_collecting drop.
        assert_eq!(
            drops_after_up, 0,
            "kernel {kernel}: member {i} dropped frames as not_collecting after it came back"
        );
    }
    // Partner restart: the kernel's bond deleted and created again.
    let ping = lab.ping(1000); // 10 s
    thread::sleep(Duration::from_millis(1000));
    let gone = Instant::now();
    lab.topo.ip(Side::B, &["link", "del", KBOND]).unwrap();
    // The links stay up in B (deleting the bond sets its members down: bring them back).
    for l in lab.topo.links() {
        lab.topo
            .ip(Side::B, &["link", "set", &l.name, "up"])
            .unwrap();
    }
    thread::sleep(Duration::from_millis(500));
    for l in lab.topo.links() {
        lab.topo
            .ip(Side::B, &["link", "set", &l.name, "down"])
            .unwrap();
    }
    let again = Instant::now();
    kernel_bond(&lab.topo, &["lacp_rate", "fast"]);
    let (a, b) = lab.wait_distributing(again, Duration::from_secs(30));
    let (sent, got) = Lab::ping_result(ping);
    report(
        kernel,
        "kernel bond deleted, re-created 0.5 s later",
        &format!(
            "distributing again: lagd {:.2} s, kernel {:.2} s after re-creation ({:.2} s after \
             deletion); pings lost {} of {sent}",
            a.as_secs_f64(),
            b.as_secs_f64(),
            gone.elapsed().as_secs_f64() - again.elapsed().as_secs_f64()
                + a.as_secs_f64().max(b.as_secs_f64()),
            sent - got
        ),
    );
    let (sent, got) = Lab::ping_result(lab.ping(200));
    assert_eq!(got, sent, "pings lost after the partner restart converged");
    lab.stop();
}

fn scenarios(kernel: &str) {
    assert!(
        lagd::lab::topology::in_path("ping"),
        "ping (iputils-ping) is needed"
    );
    // Fast: AGGREGATE_WAIT_TIME (2 s) plus a few fast periodic LACPDUs (1 s apart); 4-5 s
    // measured on a quiet machine, up to 10 in a guest beside builds.
    converge(
        kernel,
        "both active, fast",
        "mode=802.3ad lacp_rate=fast fastpath=off",
        &["lacp_rate", "fast"],
        Duration::from_secs(30),
    );
    converge(
        kernel,
        "lagd passive, kernel active, fast",
        "mode=802.3ad lacp_rate=fast lacp_active=off fastpath=off",
        &["lacp_rate", "fast"],
        Duration::from_secs(30),
    );
    // Slow: the first LACPDUs go out at once (NTT), later ones every 30 s.
    converge(
        kernel,
        "both active, slow",
        "mode=802.3ad lacp_rate=slow fastpath=off",
        &["lacp_rate", "slow"],
        Duration::from_secs(60),
    );
    flap_and_restart(kernel);
}

#[test]
#[ignore = "about 2 minutes per kernel: run with --ignored (CI does, in its last stage)"]
fn kernel_lacp_5_10() {
    in_guest("5.10", "kernel_lacp_5_10", 600, scenarios);
}

#[test]
#[ignore = "about 2 minutes per kernel: run with --ignored (CI does, in its last stage)"]
fn kernel_lacp_6_1() {
    in_guest("6.1", "kernel_lacp_6_1", 600, scenarios);
}

#[test]
#[ignore = "about 2 minutes per kernel: run with --ignored (CI does, in its last stage)"]
fn kernel_lacp_6_12() {
    in_guest("6.12", "kernel_lacp_6_12", 600, scenarios);
}
