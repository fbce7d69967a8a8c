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
//! - the kernel side's bond deleted and created again (a partner restart);
//! - lagd killed (SIGKILL) and started again: it resumes from its state file, and the kernel's
//!   ports never leave distributing (sampled across the restart);
//! - `min_links=2` at both ends: one member down takes both carriers, up brings them back;
//! - `ad_actor_sys_prio` and `ad_user_port_key` at both ends: each end's partner view is what
//!   the other sends, and the LACPDUs of member 0, decoded by tshark in host B, are what each
//!   end's status says it sends and holds;
//! - the kernel with `lacp_active off` (5.15 and later; on 5.10 reported not applicable, its
//!   absence checked): against lagd active they converge, against lagd passive they never
//!   aggregate and lagd sends nothing (the kernel sends a LACPDU on its own state changes, none
//!   periodically: measured and reported);
//! - `ad_select` stable, bandwidth and count with the kernel bond as the oracle: an actor with
//!   links to two partner systems (two kernel bonds in two namespaces), the kernel bond and lagd
//!   each as that actor, the same link events in the same order; after each the partner each
//!   chose (the links it distributes on, the system MAC it holds there) must agree.
//!
//! Asserted: convergence (the times are reported: the standard's timers give 3-5 s, bench/
//! interop.md has them; the bounds asserted are wide, since the clock runs from before lagd
//! starts and a one-CPU guest on a loaded machine starts processes slowly), no loss on a converged
//! bond, the bond reconverging after each flap and after the partner restart, and no
//! `not_collecting` drop at lagd on a member after it comes back. The losses of the flap and
//! the restart are measured and reported (the kernel may still drop what lagd sends on the
//! returning member for up to one of its ticks: bench/interop.md).
//!
//! Needs root (user-mode Linux runs under ptrace), ping, tshark and the kernels `tools/uml.py` fetches;
//! fails, never skips, without them.

mod common;
mod guest;

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use guest::{in_guest, ip, sh};
use lagd::control::query_status;
use lagd::status::Status;
use lagd_lab::dataplane::address_bond;
use lagd_lab::topology::{ProcessId, Side, Topology};

/// The kernel bond in host B.
const KBOND: &str = "kb0";
/// lagd's bond in host A.
const LBOND: &str = "lb0";
/// Ping interval in the measurements.
const PING_INTERVAL: Duration = Duration::from_millis(10);

struct Lab {
    kv: KernelView,
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

/// The kernel bond's view, read from host B (owned names: a sampling thread can keep one while
/// the test restarts lagd).
#[derive(Clone)]
struct KernelView {
    ns: String,
    links: Vec<String>,
}

impl KernelView {
    /// The kernel bond's `/proc/net/bonding` text.
    fn proc_bonding(&self) -> String {
        sh(
            "ip",
            &[
                "netns",
                "exec",
                &self.ns,
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
        self.links
            .iter()
            .zip(enabled)
            .map(|(l, enabled)| {
                if !enabled {
                    return false;
                }
                slave_field(&text, l, ACTOR, "port state")
                    .and_then(|s| s.parse::<u8>().ok())
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
            &["netns", "exec", &self.ns, "ip", "-d", "-j", "link", "show"],
        );
        let links: Vec<serde_json::Value> = serde_json::from_str(&text).unwrap_or_default();
        let link = |name: &str| links.iter().find(|l| l["ifname"] == name);
        let carrier = link(KBOND).is_some_and(|b| {
            b["flags"]
                .as_array()
                .is_some_and(|f| f.iter().any(|f| f == "LOWER_UP"))
        });
        self.links
            .iter()
            .map(|l| {
                carrier
                    && link(l)
                        .is_some_and(|m| m["linkinfo"]["info_slave_data"]["state"] == "ACTIVE")
            })
            .collect()
    }

    /// The kernel's actor and partner port state bytes of member `i`.
    fn kernel_states(&self, i: usize) -> (u8, u8) {
        let text = self.proc_bonding();
        let state = |section: &str| {
            slave_field(&text, &self.links[i], section, "port state")
                .and_then(|s| s.parse::<u8>().ok())
                .unwrap_or(0)
        };
        (state(ACTOR), state(PARTNER))
    }

    /// A field of member `i`'s actor or partner section in `/proc/net/bonding` (`section`:
    /// [`ACTOR`] or [`PARTNER`], `key` e.g. `system priority`).
    fn slave_field(&self, i: usize, section: &str, key: &str) -> Option<String> {
        slave_field(&self.proc_bonding(), &self.links[i], section, key).map(str::to_owned)
    }

    /// Whether the kernel bond has its carrier (`LOWER_UP`).
    fn carrier(&self) -> bool {
        let text = sh(
            "ip",
            &["netns", "exec", &self.ns, "ip", "-j", "link", "show", KBOND],
        );
        serde_json::from_str::<serde_json::Value>(&text)
            .ok()
            .and_then(|v| v.get(0).cloned())
            .is_some_and(|b| {
                b["flags"]
                    .as_array()
                    .is_some_and(|f| f.iter().any(|f| f == "LOWER_UP"))
            })
    }
}

impl Lab {
    fn new(kernel: &str, lagd_opts: &str, kernel_opts: &[&str]) -> Self {
        let mut topo = Topology::create(2).expect("topology");
        kernel_bond(&topo, kernel_opts);
        let (lagd, control) = start_lagd(&mut topo, lagd_opts);
        address_bond(&topo, Side::A, LBOND, 1).expect("lagd bond address");
        let kv = KernelView {
            ns: topo.ns(Side::B).to_owned(),
            links: topo.links().iter().map(|l| l.name.clone()).collect(),
        };
        Self {
            kv,
            topo,
            lagd,
            control,
            kernel: kernel.to_owned(),
        }
    }

    fn status(&self) -> Status {
        query_status(&self.control).expect("lagd status")
    }

    fn proc_bonding(&self) -> String {
        self.kv.proc_bonding()
    }

    fn kernel_distributing(&self) -> Vec<bool> {
        self.kv.kernel_distributing()
    }

    fn kernel_states(&self, i: usize) -> (u8, u8) {
        self.kv.kernel_states(i)
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
        guest::lagd_distributing(&self.status())
    }

    /// Waits until both ends distribute on every member; returns when each end first did,
    /// counted from `since`.
    fn wait_distributing(&self, since: Instant, within: Duration) -> (Duration, Duration) {
        guest::wait_both(
            since,
            within,
            || self.lagd_distributing().iter().all(|&d| d),
            || self.kernel_distributing().iter().all(|&d| d),
            || {
                format!(
                    "kernel {}: lagd {:?}, kernel {:?}\n{}\n{}\nlagd:\n{}",
                    self.kernel,
                    self.lagd_distributing(),
                    self.kernel_distributing(),
                    self.status().render(),
                    self.proc_bonding(),
                    self.topo.log_tail(self.lagd, 40),
                )
            },
        )
    }

    /// Starts `count` pings from A to B, `PING_INTERVAL` apart.
    fn ping(&self, count: u32) -> Child {
        self.ping_from(Side::A, count)
    }

    /// Starts `count` pings from `side` to the other host, `PING_INTERVAL` apart.
    fn ping_from(&self, side: Side, count: u32) -> Child {
        guest::ping_other_host(&self.topo, side, count, PING_INTERVAL)
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

/// The actor's section of a slave in `/proc/net/bonding`.
const ACTOR: &str = "details actor lacp pdu:";
/// The partner's section of a slave in `/proc/net/bonding`.
const PARTNER: &str = "details partner lacp pdu:";

/// The value of `key` in `section` of slave `slave` in the `/proc/net/bonding` text `text`.
fn slave_field<'a>(text: &'a str, slave: &str, section: &str, key: &str) -> Option<&'a str> {
    let at = text.find(&format!("Slave Interface: {slave}\n"))?;
    let part = &text[at..];
    let part = &part[..part[1..]
        .find("Slave Interface:")
        .map_or(part.len(), |e| e + 1)];
    let at = part.find(section)?;
    let prefix = format!("{key}: ");
    part[at..]
        .lines()
        .find_map(|l| l.trim().strip_prefix(prefix.as_str()))
        .map(str::trim)
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

/// lagd killed (SIGKILL) and started again with the same bond and control socket: it finds its
/// state file and resumes LACP with the partner it had (no aggregate wait). The kernel's view
/// is sampled every 50 ms across the kill and the restart: its ports must stay distributing
/// (lagd is back well within the kernel's fast timeout of 3 s). The pings lost while no lagd
/// forwards (its own dataplane) are reported; none may be lost once it is back.
fn kill_and_restart(kernel: &str) {
    let started = Instant::now();
    let opts = "mode=802.3ad lacp_rate=fast fastpath=off";
    let mut lab = Lab::new(kernel, opts, &["lacp_rate", "fast"]);
    lab.wait_distributing(started, Duration::from_secs(15));
    let ping = lab.ping(600); // 6 s
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (kv, stop) = (lab.kv.clone(), Arc::clone(&stop));
        thread::spawn(move || {
            let t0 = Instant::now();
            let (mut samples, mut left) = (0u32, Vec::new());
            while !stop.load(Ordering::Relaxed) {
                let d = kv.kernel_distributing();
                samples += 1;
                if !d.iter().all(|&d| d) {
                    left.push(format!(
                        "{:.3} s: {d:?} (actor/partner states {:?})",
                        t0.elapsed().as_secs_f64(),
                        (0..d.len())
                            .map(|i| kv.kernel_states(i))
                            .collect::<Vec<_>>()
                    ));
                }
                thread::sleep(Duration::from_millis(50));
            }
            (samples, left)
        })
    };
    thread::sleep(Duration::from_millis(1000));
    let killed = Instant::now();
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
    let (sent, got) = Lab::ping_result(ping);
    let log = lab.topo.log_tail(lab.lagd, 400);
    let resumed = log.matches("the member takes up with this partner").count();
    report(
        kernel,
        "lagd killed (-9), started again",
        &format!(
            "lagd answering {:.2} s, distributing {:.2} s after the kill (kernel {:.2} s); \
             members resumed {resumed} of {}; kernel ports out of distributing in {} of \
             {samples} samples; pings lost {} of {sent}",
            answering.as_secs_f64(),
            a.as_secs_f64(),
            b.as_secs_f64(),
            lab.topo.links().len(),
            left.len(),
            sent - got
        ),
    );
    assert_eq!(
        resumed,
        lab.topo.links().len(),
        "kernel {kernel}: the restarted lagd did not resume every member:\n{log}"
    );
    assert!(
        left.is_empty(),
        "kernel {kernel}: the kernel's ports left distributing across lagd's restart:\n{}\n{}",
        left.join("\n"),
        log
    );
    let (sent, got) = Lab::ping_result(lab.ping(200));
    assert_eq!(got, sent, "kernel {kernel}: pings lost after the restart");
    lab.stop();
}

/// min_links=2 at both ends: one of lagd's members set down takes the carrier of both bonds
/// (lagd's `MII Status`, the kernel bond's `LOWER_UP`) while the other member still
/// distributes at both ends; set up again, both carriers return.
fn min_links(kernel: &str) {
    let started = Instant::now();
    let lab = Lab::new(
        kernel,
        "mode=802.3ad lacp_rate=fast fastpath=off min_links=2",
        &["lacp_rate", "fast", "min_links", "2"],
    );
    lab.wait_distributing(started, Duration::from_secs(15));
    let lagd_up = |lab: &Lab| lab.status().mii_status == "up";
    assert!(
        lagd_up(&lab) && lab.kv.carrier(),
        "carrier with both members"
    );
    let name = lab.topo.links()[0].name.clone();
    let down = Instant::now();
    lab.topo
        .ip(Side::A, &["link", "set", &name, "down"])
        .unwrap();
    let (mut a, mut b) = (None, None);
    while a.is_none() || b.is_none() {
        let t = down.elapsed();
        if a.is_none() && !lagd_up(&lab) {
            a = Some(t);
        }
        if b.is_none() && !lab.kv.carrier() {
            b = Some(t);
        }
        assert!(
            t < Duration::from_secs(5),
            "kernel {kernel}: with one member of two and min_links=2, a bond kept its carrier \
             (lagd {}, kernel {}):\n{}\n{}",
            lab.status().mii_status,
            lab.kv.carrier(),
            lab.status().render(),
            lab.proc_bonding()
        );
        thread::sleep(Duration::from_millis(20));
    }
    // The carrier went for min_links, not for LACP: the other member still distributes.
    thread::sleep(Duration::from_millis(500));
    assert!(
        lab.lagd_distributing()[1] && lab.kernel_states(1).0 & 0x20 != 0,
        "kernel {kernel}: the remaining member stopped distributing:\n{}\n{}",
        lab.status().render(),
        lab.proc_bonding()
    );
    assert!(!lagd_up(&lab) && !lab.kv.carrier(), "a carrier came back");
    let up = Instant::now();
    lab.topo.ip(Side::A, &["link", "set", &name, "up"]).unwrap();
    let (ua, ub) = lab.wait_distributing(up, Duration::from_secs(10));
    assert!(lagd_up(&lab), "lagd's carrier after the member returned");
    let (sent, got) = Lab::ping_result(lab.ping(100));
    report(
        kernel,
        "min_links=2 both ends, a member down, up",
        &format!(
            "carrier lost: lagd {:.2} s, kernel {:.2} s after the member went down; back with \
             both distributing: lagd {:.2} s, kernel {:.2} s after up; pings lost afterwards {} \
             of {sent}",
            a.unwrap().as_secs_f64(),
            b.unwrap().as_secs_f64(),
            ua.as_secs_f64(),
            ub.as_secs_f64(),
            sent - got
        ),
    );
    assert_eq!(got, sent, "kernel {kernel}: pings lost after min_links");
    lab.stop();
}

/// `ad_actor_sys_prio` and `ad_user_port_key` at both ends (kernel 100 and 5, lagd 200 and
/// 7): each end's partner information is what the other sends: system priority and key (the
/// user key in the key's upper 10 bits, as both encode it).
fn priorities_and_keys(kernel: &str) {
    let started = Instant::now();
    let lab = Lab::new(
        kernel,
        "mode=802.3ad lacp_rate=fast fastpath=off ad_actor_sys_prio=200 ad_user_port_key=7",
        &[
            "lacp_rate",
            "fast",
            "ad_actor_sys_prio",
            "100",
            "ad_user_port_key",
            "5",
        ],
    );
    lab.wait_distributing(started, Duration::from_secs(15));
    let status = lab.status();
    let (actor, partner) = (ACTOR, PARTNER);
    let mut seen = Vec::new();
    for (i, m) in status.members.iter().enumerate() {
        let l = m.lacp.as_ref().expect("member LACP status");
        let field = |section, key| {
            lab.kv
                .slave_field(i, section, key)
                .and_then(|v| v.parse::<u16>().ok())
                .unwrap_or_else(|| panic!("{key} of member {i}:\n{}", lab.proc_bonding()))
        };
        let kernel_key = field(actor, "port key");
        let context = || format!("{}\n{}", status.render(), lab.proc_bonding());
        assert_eq!(field(actor, "system priority"), 100, "{}", context());
        assert_eq!(kernel_key >> 6, 5, "kernel's key: {}", context());
        assert_eq!(l.partner.system_priority, 100, "{}", context());
        assert_eq!(l.partner.key, kernel_key, "{}", context());
        assert_eq!(l.actor.system_priority, 200, "{}", context());
        assert_eq!(l.actor.key >> 6, 7, "lagd's key: {}", context());
        assert_eq!(field(partner, "system priority"), 200, "{}", context());
        assert_eq!(field(partner, "oper key"), l.actor.key, "{}", context());
        seen.push(format!(
            "member {i}: lagd sees priority {} key {}, kernel sees priority {} key {}",
            l.partner.system_priority,
            l.partner.key,
            field(partner, "system priority"),
            field(partner, "oper key")
        ));
    }
    lacpdus_decoded(&lab, kernel);
    report(
        kernel,
        "ad_actor_sys_prio/ad_user_port_key: kernel 100/5, lagd 200/7",
        &format!("both ends see the other's; {}", seen.join("; ")),
    );
    lab.stop();
}

/// The LACPDUs on member 0 for 4 s, captured and decoded by tshark in host B (`-Y lacp`), each
/// end's last one checked against what that end's status says it sends and holds: lagd's
/// actor and partner information, and the kernel's (`/proc/net/bonding`).
fn lacpdus_decoded(lab: &Lab, kernel: &str) {
    assert!(
        lagd_lab::topology::in_path("tshark"),
        "tshark is needed (the LACPDU check)"
    );
    let link = &lab.kv.links[0];
    let fields = [
        "lacp.actor.sys_priority",
        "lacp.actor.sysid",
        "lacp.actor.key",
        "lacp.actor.port",
        "lacp.actor.state",
        "lacp.partner.sys_priority",
        "lacp.partner.sysid",
        "lacp.partner.key",
        "lacp.partner.port",
        "lacp.partner.state",
    ];
    let mut args = vec![
        "netns",
        "exec",
        lab.topo.ns(Side::B),
        "tshark",
        "-n",
        "-l",
        "-i",
        link,
        "-a",
        "duration:4",
        "-f",
        "ether proto 0x8809",
        "-Y",
        "lacp",
        "-T",
        "fields",
        "-E",
        "separator=,",
    ];
    for f in &fields {
        args.extend(["-e", f]);
    }
    let text = sh("ip", &args);
    let number = |v: &str| -> u64 {
        let v = v.trim();
        v.strip_prefix("0x")
            .map_or_else(|| v.parse().ok(), |h| u64::from_str_radix(h, 16).ok())
            .unwrap_or_else(|| panic!("tshark field {v:?} in:\n{text}"))
    };
    // One PDU: (actor, partner), each (priority, system, key, port, state).
    type Info = (u64, String, u64, u64, u64);
    let pdus: Vec<(Info, Info)> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            assert_eq!(f.len(), fields.len(), "tshark line {l:?}");
            let info = |o: usize| -> Info {
                (
                    number(f[o]),
                    f[o + 1].to_lowercase(),
                    number(f[o + 2]),
                    number(f[o + 3]),
                    number(f[o + 4]),
                )
            };
            (info(0), info(5))
        })
        .collect();
    let status = lab.status();
    let m = status.members[0].lacp.as_ref().expect("member LACP status");
    let ours = |i: &lagd::status::LacpInfoStatus| -> Info {
        (
            u64::from(i.system_priority),
            i.system_mac.to_lowercase(),
            u64::from(i.key),
            u64::from(i.port),
            u64::from(i.state),
        )
    };
    let field = |section: &str, key: &str| -> String {
        lab.kv
            .slave_field(0, section, key)
            .unwrap_or_else(|| panic!("{key}:\n{}", lab.proc_bonding()))
            .to_lowercase()
    };
    let kernel_info = |section: &str, key: &str| -> Info {
        (
            number(&field(section, "system priority")),
            field(section, "system mac address"),
            number(&field(section, key)),
            number(&field(section, "port number")),
            number(&field(section, "port state")),
        )
    };
    let kernel_actor = kernel_info(ACTOR, "port key");
    let kernel_partner = kernel_info(PARTNER, "oper key");
    let from_lagd: Vec<_> = pdus.iter().filter(|p| p.0.0 == 200).collect();
    let from_kernel: Vec<_> = pdus.iter().filter(|p| p.0.0 == 100).collect();
    let context = format!("{text}\n{}\n{}", status.render(), lab.proc_bonding());
    assert!(
        from_lagd.len() >= 2
            && from_kernel.len() >= 2
            && pdus.len() == from_lagd.len() + from_kernel.len(),
        "kernel {kernel}: LACPDUs in 4 s at the fast rate: {} from lagd, {} from the kernel, {} in all:\n{context}",
        from_lagd.len(),
        from_kernel.len(),
        pdus.len()
    );
    let (l, k) = (
        from_lagd[from_lagd.len() - 1],
        from_kernel[from_kernel.len() - 1],
    );
    // What lagd sends is its status; what the kernel sends is the kernel's status.
    assert_eq!(l.0, ours(&m.actor), "lagd's actor on the wire:\n{context}");
    assert_eq!(
        l.1,
        ours(&m.partner),
        "lagd's partner on the wire:\n{context}"
    );
    assert_eq!(
        k.0, kernel_actor,
        "the kernel's actor on the wire:\n{context}"
    );
    assert_eq!(
        k.1, kernel_partner,
        "the kernel's partner on the wire:\n{context}"
    );
    // And each end holds what the other sends.
    assert_eq!(
        k.0,
        ours(&m.partner),
        "lagd's partner vs the kernel's PDU:\n{context}"
    );
    assert_eq!(
        l.0, kernel_partner,
        "the kernel's partner vs lagd's PDU:\n{context}"
    );
    report(
        kernel,
        "LACPDUs on member 0 decoded by tshark (4 s, fast)",
        &format!(
            "{} from lagd, {} from the kernel; actor and partner (priority, system, key, port, \
             state) of each end's last one equal to that end's status and to the other's partner \
             view: lagd {:?}, kernel {:?}",
            from_lagd.len(),
            from_kernel.len(),
            l.0,
            k.0
        ),
    );
}

/// The kernel bond with `lacp_active off` (5.15 and later): against lagd active it converges;
/// against lagd passive neither end sends a LACPDU and they never aggregate.
fn kernel_passive(kernel: &str) {
    if kernel == "5.10" {
        // Not applicable: the option came with 5.15. Shown, not assumed: the driver's status
        // has no "LACP active" line.
        ip("link add lagdkpa0 type bond mode 802.3ad");
        let text = sh("cat", &["/proc/net/bonding/lagdkpa0"]);
        ip("link del lagdkpa0");
        assert!(
            !text.contains("LACP active"),
            "kernel 5.10 has lacp_active after all: enable the scenario\n{text}"
        );
        report(
            kernel,
            "kernel lacp_active off",
            "not applicable: the kernel has no lacp_active (5.15 and later)",
        );
        return;
    }
    let started = Instant::now();
    let lab = Lab::new(
        kernel,
        "mode=802.3ad lacp_rate=fast fastpath=off",
        &["lacp_rate", "fast", "lacp_active", "off"],
    );
    assert!(
        lab.proc_bonding().contains("LACP active: off"),
        "kernel {kernel}: lacp_active off not taken:\n{}",
        lab.proc_bonding()
    );
    let (a, b) = lab.wait_distributing(started, Duration::from_secs(15));
    let (sent, got) = Lab::ping_result(lab.ping(100));
    report(
        kernel,
        "kernel lacp_active off, lagd active, fast",
        &format!(
            "distributing: lagd {:.2} s, kernel {:.2} s; pings lost {} of {sent}",
            a.as_secs_f64(),
            b.as_secs_f64(),
            sent - got
        ),
    );
    assert_eq!(got, sent, "kernel {kernel}: pings lost, kernel passive");
    lab.stop();

    let lab = Lab::new(
        kernel,
        "mode=802.3ad lacp_rate=fast lacp_active=off fastpath=off",
        &["lacp_rate", "fast", "lacp_active", "off"],
    );
    // Long enough for either end's first LACPDUs, the 2 s aggregate wait and more.
    thread::sleep(Duration::from_secs(5));
    let status = lab.status();
    let count = |f: fn(&lagd::status::MemberLacp) -> u64| -> u64 {
        status
            .members
            .iter()
            .map(|m| m.lacp.as_ref().map_or(0, f))
            .sum()
    };
    let (tx, rx) = (count(|l| l.lacpdu_tx), count(|l| l.lacpdu_rx));
    // The kernels before the 2025 passive-mode fixes send a LACPDU on their own state
    // changes (the port's first selection) even when both ends are passive, but none
    // periodically: 2 s more (fast: 2 or more per member if it did) add none.
    thread::sleep(Duration::from_secs(2));
    let later = lab.status();
    let rx_later: u64 = later
        .members
        .iter()
        .map(|m| m.lacp.as_ref().map_or(0, |l| l.lacpdu_rx))
        .sum();
    let (lagd, kern) = (lab.lagd_distributing(), lab.kernel_distributing());
    report(
        kernel,
        "kernel lacp_active off, lagd passive",
        &format!(
            "LACPDUs sent in the first 5 s: by lagd {tx}, by the kernel {rx} (none \
             periodic: {} in the next 2 s); distributing: lagd {lagd:?}, kernel {kern:?}",
            rx_later - rx
        ),
    );
    let context = format!("{}\n{}", later.render(), lab.proc_bonding());
    assert!(
        !lagd.iter().any(|&d| d) && !kern.iter().any(|&d| d),
        "kernel {kernel}: two passive ends aggregated:\n{context}"
    );
    assert!(
        later
            .members
            .iter()
            .all(|m| m.lacp.as_ref().is_some_and(|l| l.lacpdu_tx == 0)),
        "kernel {kernel}: lagd passive sent LACPDUs:\n{context}"
    );
    assert_eq!(
        rx_later, rx,
        "kernel {kernel}: the passive kernel sends LACPDUs periodically:\n{context}"
    );
    lab.stop();
}

/// The links of the `ad_select` labs: partner B (a kernel bond in host B) on links 0 and 1,
/// partner C (a kernel bond in a third namespace) on links 2, 3 and 4, which start down (at
/// partner C's end).
const SELECT_LINKS: usize = 5;
/// Partner C's links in the `ad_select` labs; the others are partner B's.
const SELECT_C: [usize; 3] = [2, 3, 4];

/// The actor of an `ad_select` lab.
enum SelectActor {
    /// The kernel's 802.3ad bond `kb0` over every link of host A (the oracle).
    Kernel(KernelView),
    /// lagd over every link of host A.
    Lagd(ProcessId, PathBuf),
}

/// One actor with links to two partner systems (two kernel bonds, different system MACs): B on
/// 2 links, C on 3 (down at first); the actor must choose one aggregator.
struct SelectLab {
    topo: Topology,
    /// Partner C's namespace.
    c_ns: String,
    actor: SelectActor,
    /// Which links are up at the partners' ends.
    up: Vec<bool>,
    /// The partners' system MACs (B, C).
    macs: (String, String),
}

/// The partner of link `i` in an `ad_select` lab.
fn select_partner(i: usize) -> char {
    if SELECT_C.contains(&i) { 'C' } else { 'B' }
}

/// Runs `ip -n NS -batch -` with `commands` (one process: each costs tens of ms in a guest).
fn ip_batch(ns: &str, commands: &[String]) {
    use std::io::Write as _;
    let mut child = Command::new("ip")
        .args(["-n", ns, "-batch", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("ip -batch");
    child
        .stdin
        .take()
        .expect("ip's stdin")
        .write_all(commands.join("\n").as_bytes())
        .expect("writing to ip -batch");
    let out = child.wait_with_output().expect("ip -batch");
    assert!(
        out.status.success(),
        "ip -n {ns} -batch failed ({}): {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr).trim(),
        commands.join("\n")
    );
}

/// An 802.3ad bond `kb0` (fast rate, `extra` options) over `links` in namespace `ns`, up, its
/// links down first as the driver wants (it sets them up itself), then the links of `down` set
/// down again; returns its MAC (the system MAC it sends).
fn select_bond(ns: &str, extra: &str, links: &[String], down: &[String]) -> String {
    let mut cmds = vec![format!(
        "link add {KBOND} type bond mode 802.3ad miimon 100 lacp_rate fast {extra}"
    )];
    for l in links {
        cmds.push(format!("link set {l} down"));
        cmds.push(format!("link set {l} master {KBOND}"));
    }
    cmds.push(format!("link set {KBOND} up"));
    for l in down {
        cmds.push(format!("link set {l} down"));
    }
    ip_batch(ns, &cmds);
    let text = sh("ip", &["-n", ns, "-j", "link", "show", KBOND]);
    let v: serde_json::Value = serde_json::from_str(&text).expect("ip -j link");
    v[0]["address"].as_str().expect("the bond's MAC").to_owned()
}

impl SelectLab {
    /// The lab with actor `lagd` (else the kernel bond), `ad_select` `policy`; partner C's
    /// links down.
    fn new(lagd: bool, policy: &str) -> Self {
        let mut topo = Topology::create(SELECT_LINKS).expect("topology");
        let c_ns = topo.add_namespace("c").expect("partner C's namespace");
        let names: Vec<String> = topo.links().iter().map(|l| l.name.clone()).collect();
        let (b, c): (Vec<usize>, Vec<usize>) =
            (0..SELECT_LINKS).partition(|&i| select_partner(i) == 'B');
        let of = |v: &[usize]| -> Vec<String> { v.iter().map(|&i| names[i].clone()).collect() };
        ip_batch(
            topo.ns(Side::B),
            &c.iter()
                .map(|&i| format!("link set {} netns {c_ns}", names[i]))
                .collect::<Vec<_>>(),
        );
        let macs = (
            select_bond(topo.ns(Side::B), "", &of(&b), &[]),
            select_bond(&c_ns, "", &of(&c), &of(&c)),
        );
        let up: Vec<bool> = (0..SELECT_LINKS)
            .map(|i| select_partner(i) == 'B')
            .collect();
        let actor = if lagd {
            let (id, control) = start_lagd(
                &mut topo,
                &format!("mode=802.3ad lacp_rate=fast fastpath=off ad_select={policy}"),
            );
            SelectActor::Lagd(id, control)
        } else {
            let ns = topo.ns(Side::A).to_owned();
            select_bond(&ns, &format!("ad_select {policy}"), &names, &[]);
            SelectActor::Kernel(KernelView { ns, links: names })
        };
        Self {
            topo,
            c_ns,
            actor,
            up,
            macs,
        }
    }

    /// The links the actor distributes on, and the system MAC of the partner it holds on the
    /// first of them.
    fn distributing(&self) -> (Vec<usize>, String) {
        match &self.actor {
            SelectActor::Kernel(kv) => {
                let d = kv.kernel_distributing();
                let on: Vec<usize> = (0..d.len()).filter(|&i| d[i]).collect();
                let mac = on.first().map_or_else(String::new, |&i| {
                    kv.slave_field(i, PARTNER, "system mac address")
                        .unwrap_or_default()
                });
                (on, mac)
            }
            SelectActor::Lagd(_, control) => {
                let s = query_status(control).expect("lagd status");
                let on: Vec<usize> = (0..s.members.len())
                    .filter(|&i| s.members[i].lacp.as_ref().is_some_and(|l| l.distributing))
                    .collect();
                let mac = on.first().map_or_else(String::new, |&i| {
                    s.members[i]
                        .lacp
                        .as_ref()
                        .unwrap()
                        .partner
                        .system_mac
                        .clone()
                });
                (on, mac)
            }
        }
    }

    /// The partner the actor has settled on: it distributes on exactly that partner's links
    /// that are up, and holds that partner's system MAC there.
    fn settled(&self) -> Option<char> {
        let (on, mac) = self.distributing();
        let p = select_partner(*on.first()?);
        let want: Vec<usize> = (0..SELECT_LINKS)
            .filter(|&i| self.up[i] && select_partner(i) == p)
            .collect();
        let sys = if p == 'B' { &self.macs.0 } else { &self.macs.1 };
        (on == want && mac.eq_ignore_ascii_case(sys)).then_some(p)
    }

    /// Sets links `links` down or up at their partner's end (the actor sees their carrier go
    /// and come).
    fn set_links(&mut self, links: &[usize], up: bool) {
        let state = if up { "up" } else { "down" };
        for p in ['B', 'C'] {
            let cmds: Vec<String> = links
                .iter()
                .filter(|&&i| select_partner(i) == p)
                .map(|&i| format!("link set {} {state}", self.topo.links()[i].name))
                .collect();
            if !cmds.is_empty() {
                let ns = if p == 'C' {
                    self.c_ns.clone()
                } else {
                    self.topo.ns(Side::B).to_owned()
                };
                ip_batch(&ns, &cmds);
            }
        }
        for &i in links {
            self.up[i] = up;
        }
    }

    /// What the actor shows, for a failure message.
    fn describe(&self) -> String {
        match &self.actor {
            SelectActor::Kernel(kv) => kv.proc_bonding(),
            SelectActor::Lagd(id, control) => format!(
                "{}\n{}",
                query_status(control).map_or_else(|e| e.to_string(), |s| s.render()),
                self.topo.log_tail(*id, 30)
            ),
        }
    }

    fn stop(mut self) {
        if let SelectActor::Lagd(id, _) = self.actor {
            self.topo.stop(id);
        }
        self.topo.teardown().expect("lab cleanup");
    }
}

/// Waits until every lab has settled on a partner and stays there for 1 s; returns each one's
/// partner.
fn select_settle(
    labs: &[(String, SelectLab)],
    since: Instant,
    kernel: &str,
    step: &str,
) -> Vec<char> {
    let deadline = Duration::from_secs(20);
    loop {
        let now: Vec<Option<char>> = labs.iter().map(|(_, l)| l.settled()).collect();
        if now.iter().all(Option::is_some) {
            thread::sleep(Duration::from_secs(1));
            let again: Vec<Option<char>> = labs.iter().map(|(_, l)| l.settled()).collect();
            if again == now {
                return now.into_iter().flatten().collect();
            }
        }
        assert!(
            since.elapsed() < deadline,
            "kernel {kernel}, ad_select step {step:?}: not settled on one partner after \
             {deadline:?}: {}",
            labs.iter()
                .zip(&now)
                .map(|((name, l), p)| format!(
                    "\n--- {name}: {p:?}, distributing on {:?}\n{}",
                    l.distributing(),
                    l.describe()
                ))
                .collect::<String>()
        );
        thread::sleep(Duration::from_millis(100));
    }
}

/// `ad_select` stable, bandwidth and count with the kernel bond as the oracle: one actor with
/// links to two partner systems (partner B on links 0 and 1, partner C on 2, 3 and 4; all veth,
/// the same speed, so bandwidth ranks as count does), the kernel bond and lagd each as the actor
/// for each policy (six labs, built side by side, stepped together): start with only B's links
/// up; link 0 lost; returned; partner C gains its three links (C now has more); B's links lost.
/// After each step the partner each actor settled on (the links it distributes on, the system
/// MAC it holds there) must be the kernel's for the same policy.
fn ad_select(kernel: &str) {
    let begun = Instant::now();
    let policies = ["stable", "bandwidth", "count"];
    // Built side by side: most of a lab's setup is waiting for processes (`ip`, lagd's start).
    let mut labs: Vec<(String, SelectLab)> = thread::scope(|s| {
        let builders: Vec<_> = policies
            .iter()
            .flat_map(|&policy| [(false, policy), (true, policy)])
            .map(|(lagd, policy)| {
                s.spawn(move || {
                    let name = format!("{} {policy}", if lagd { "lagd" } else { "kernel" });
                    (name, SelectLab::new(lagd, policy))
                })
            })
            .collect();
        builders
            .into_iter()
            .map(|b| b.join().expect("building an ad_select lab"))
            .collect()
    });
    // The lagd labs' members came up as each lagd started: from here every actor has its
    // links.
    let started = Instant::now();
    let setup = begun.elapsed();
    let mut steps: Vec<(&str, Vec<char>)> =
        vec![("start", select_settle(&labs, started, kernel, "start"))];
    let events: [(&str, &[usize], bool); 4] = [
        ("link 0 (B, the chosen) lost", &[0], false),
        ("link 0 returned", &[0], true),
        ("partner C gains 3 links", &SELECT_C, true),
        ("partner B's links lost", &[0, 1], false),
    ];
    for (step, links, up) in events {
        for (_, l) in labs.iter_mut() {
            l.set_links(links, up);
        }
        let at = Instant::now();
        // Long enough for a new port's LACPDU exchange and selection (a change of the
        // active aggregator takes the old one's ports out at once, at both actors).
        thread::sleep(Duration::from_millis(2500));
        steps.push((step, select_settle(&labs, at, kernel, step)));
    }
    let mut disagree = Vec::new();
    for (step, got) in &steps {
        for (j, policy) in policies.iter().enumerate() {
            let (k, l) = (got[2 * j], got[2 * j + 1]);
            report(
                kernel,
                &format!("ad_select {policy}: {step}"),
                &format!("kernel chooses {k}, lagd chooses {l}"),
            );
            if k != l {
                disagree.push(format!("{policy}, {step}: kernel {k}, lagd {l}"));
            }
        }
    }
    report(
        kernel,
        "ad_select, two partners (B: 2 links, C: 3)",
        &format!(
            "{} steps x 3 policies compared in {:.1} s (six labs built in {:.1} s); \
             disagreements: {}",
            steps.len(),
            started.elapsed().as_secs_f64(),
            setup.as_secs_f64(),
            disagree.len()
        ),
    );
    let details: String = labs
        .iter()
        .map(|(name, l)| format!("\n--- {name}\n{}", l.describe()))
        .collect();
    assert!(
        disagree.is_empty(),
        "kernel {kernel}: lagd's ad_select differs from the kernel bond's: {}{details}",
        disagree.join("; ")
    );
    for (_, l) in labs {
        l.stop();
    }
}

fn scenarios(kernel: &str) {
    assert!(
        lagd_lab::topology::in_path("ping"),
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
    kill_and_restart(kernel);
    min_links(kernel);
    priorities_and_keys(kernel);
    kernel_passive(kernel);
    ad_select(kernel);
}

#[test]
#[ignore = "about 3 minutes per kernel: run with --ignored (CI does, beside its kernel matrix)"]
fn kernel_lacp_5_10() {
    in_guest("5.10", "kernel_lacp_5_10", 600, scenarios);
}

#[test]
#[ignore = "about 3 minutes per kernel: run with --ignored (CI does, beside its kernel matrix)"]
fn kernel_lacp_6_1() {
    in_guest("6.1", "kernel_lacp_6_1", 600, scenarios);
}

#[test]
#[ignore = "about 3 minutes per kernel: run with --ignored (CI does, beside its kernel matrix)"]
fn kernel_lacp_6_12() {
    in_guest("6.12", "kernel_lacp_6_12", 600, scenarios);
}
