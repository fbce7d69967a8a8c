//! The dataplane for real: two hosts (network namespaces) joined by veth links, `lagd` at both
//! ends, real ICMP and TCP through the bond. Needs root; fails (never skips) without it.
//!
//! Every test builds its own topology with a unique prefix; `Topology` removes the namespaces,
//! links and processes when dropped, also when a test fails.

use std::io::Read;
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use lagd::control::query_status;
use lagd::status::{MemberLacp, MemberStatus, Status};
use lagd_lab::topology::{
    Side, SlowCapture, Topology, check_lacpdus_with_tshark, in_named_ns, is_root, require_program,
    run,
};
use lagd_lab::traffic::checked_transfer;
use lagd_proto::bond::options::ArpValidate;
use lagd_proto::hash::{HashPolicy, member_index, xmit_hash};
use lagd_proto::lacp::{AGGREGATE_WAIT_TIME, FAST_PERIODIC_TIME};
use lagd_proto::wire::EthernetAddress;
use lagd_sys::packet::{PacketOptions, PacketSocket};

mod common;

use common::{
    STATUS_POLL, address_bonds, lacp_doctor, lagctl_ok, leave_bound, leave_floor, rejoin_bound,
    start_lagd, udp_frame, wait_member_distributing,
};

const LAGD: &str = env!("CARGO_BIN_EXE_lagd");

struct Lab {
    topo: Topology,
    controls: [PathBuf; 2],
    addrs: [Ipv4Addr; 2],
}

fn side_index(side: Side) -> usize {
    match side {
        Side::A => 0,
        Side::B => 1,
    }
}

impl Lab {
    /// `links` veth links, lagd with `opts` at both ends, addresses on the bonds, ping works.
    fn new(links: usize, opts: &str) -> Self {
        Self::with_setup(links, opts, |_| {})
    }

    /// Like [`Lab::new`]; `between` runs after host B's lagd is up and before host A's starts
    /// (lagd brings its members up when it starts, as the kernel bond does, so a link taken
    /// down there stays down for A's start).
    fn with_setup(links: usize, opts: &str, between: impl FnOnce(&Topology)) -> Self {
        assert!(
            is_root(),
            "network namespace tests need root (CI runs them as root)"
        );
        let topo = Topology::create(links).expect("create topology");
        Self::start(topo, [opts, opts], between)
    }

    /// Starts lagd with `opts[0]` on host A and `opts[1]` on host B of `topo`, as
    /// [`Lab::with_setup`] does.
    fn start(mut topo: Topology, opts: [&str; 2], between: impl FnOnce(&Topology)) -> Self {
        // `{A}` and `{B}` in the options stand for the hosts' bond addresses.
        let opts = opts.map(|o| common::with_addresses(&topo, o));
        let mut bonds = [String::new(), String::new()];
        let mut controls = [PathBuf::new(), PathBuf::new()];
        let mut between = Some(between);
        for side in [Side::B, Side::A] {
            let i = side_index(side);
            let bond = format!("{}b{}", topo.tag(), side.letter());
            let (_, control) = start_lagd(&mut topo, side, &bond, &opts[i]);
            if side == Side::B {
                (between.take().unwrap())(&topo);
            }
            bonds[i] = bond;
            controls[i] = control;
        }
        let addrs = address_bonds(&topo, &bonds);
        Self {
            topo,
            controls,
            addrs,
        }
    }

    /// `links` veth links and lagd with `opts` at both ends, each host's bond set up and
    /// addressed the moment its TAP appears, as NetworkManager or systemd-networkd do: a thread
    /// per host polls for the interface every millisecond from before lagd starts.
    fn configured_at_once(links: usize, opts: &str) -> Self {
        assert!(
            is_root(),
            "network namespace tests need root (CI runs them as root)"
        );
        let mut topo = Topology::create(links).expect("create topology");
        let sides = [Side::A, Side::B];
        let bonds = sides.map(|side| format!("{}b{}", topo.tag(), side.letter()));
        let addrs = [topo.address(1), topo.address(2)];
        let configurers = sides.map(|side| {
            let i = side_index(side);
            let ns = topo.ns(side).to_owned();
            let bond = bonds[i].clone();
            let addr = addrs[i];
            thread::spawn(move || configure_when_it_appears(&ns, &bond, addr))
        });
        let mut controls = [PathBuf::new(), PathBuf::new()];
        for side in [Side::B, Side::A] {
            controls[side_index(side)] =
                start_lagd(&mut topo, side, &bonds[side_index(side)], opts).1;
        }
        for (side, c) in sides.into_iter().zip(configurers) {
            let after = c
                .join()
                .expect("configuring thread")
                .unwrap_or_else(|e| panic!("host {side:?}: {e:#}"));
            println!("host {side:?}: bond up and addressed {after:?} after its TAP appeared");
        }
        Self {
            topo,
            controls,
            addrs,
        }
    }

    /// Both hosts' links, addresses and neighbours and lagd's status, for a failure message.
    fn describe(&self) -> String {
        let mut out = String::new();
        for side in [Side::A, Side::B] {
            for args in [&["-br", "link"][..], &["-br", "addr"], &["neigh"]] {
                let shown = self
                    .topo
                    .ip(side, args)
                    .unwrap_or_else(|e| format!("{e:#}"));
                out += &format!("host {side:?}: ip {}:\n{shown}", args.join(" "));
            }
            out += &format!("host {side:?}: {}\n", self.status(side).render());
        }
        out
    }

    /// Waits until both bonds have carrier (802.3ad needs LACP to agree first: about 2 s).
    fn wait_carrier(&self, within: Duration) {
        let t = Instant::now();
        for side in [Side::A, Side::B] {
            while self.status(side).mii_status != "up" {
                assert!(
                    t.elapsed() < within,
                    "no carrier on host {side:?} after {within:?}"
                );
                thread::sleep(Duration::from_millis(20));
            }
        }
    }

    fn status(&self, side: Side) -> Status {
        query_status(&self.controls[side_index(side)]).expect("status")
    }

    fn ping(&self, from: Side, count: u32) -> bool {
        let to = self.addrs[1 - side_index(from)].to_string();
        require_program("ping", "iputils-ping").unwrap_or_else(|e| panic!("{e:#}"));
        Command::new("ip")
            .args(["netns", "exec", self.topo.ns(from), "ping", "-q", "-c"])
            .arg(count.to_string())
            .args(["-i", "0.05", "-W", "2", &to])
            .output()
            .expect("ping")
            .status
            .success()
    }

    /// Sends `bytes` of patterned data over TCP from `from` to the other host; returns the
    /// checksums at both ends and the largest pause the receiver saw.
    fn tcp_transfer(
        &self,
        from: Side,
        bytes: usize,
        pace: Option<Duration>,
        during: impl FnOnce() + Send,
    ) -> (u64, u64, Duration) {
        let to = 1 - side_index(from);
        let to_side = if to == 0 { Side::A } else { Side::B };
        let addr = SocketAddrV4::new(self.addrs[to], 5001);
        let t = checked_transfer(
            self.topo.ns(from),
            self.topo.ns(to_side),
            addr,
            bytes,
            pace,
            during,
        )
        .expect("transfer");
        (t.sent.0, t.received.0, t.longest_gap)
    }
}

impl Lab {
    /// [`wait_member_distributing`] at both hosts.
    fn wait_member_distributing(
        &self,
        member: usize,
        want: bool,
        since: Instant,
        within: Duration,
    ) -> ([Duration; 2], Duration) {
        wait_member_distributing(
            [Side::A, Side::B],
            |side| self.status(side),
            member,
            want,
            since,
            within,
        )
    }

    /// Waits until member `member` distributes again at both hosts (as
    /// [`Lab::wait_member_distributing`]), prints when (`what` says after what), and checks that
    /// neither took longer than `bound` of the longest status query.
    fn assert_member_rejoins(
        &self,
        member: usize,
        since: Instant,
        within: Duration,
        bound: impl FnOnce(Duration) -> Duration,
        what: &str,
    ) {
        let ([a, b], longest_query) = self.wait_member_distributing(member, true, since, within);
        println!(
            "{what}: member {member} distributing again {} ms (A) and {} ms (B) later",
            a.as_millis(),
            b.as_millis()
        );
        let bound = bound(longest_query);
        for back in [a, b] {
            assert!(
                back <= bound,
                "{what}: rejoined after {back:?}, bound {bound:?}"
            );
        }
    }
}

/// The latest members whose LACPDUs start to flow at `t` (lagd just started, or sent on
/// link-up) all distribute, counted from `t`: the wait in WAITING ([`AGGREGATE_WAIT_TIME`],
/// 2 s), and the LACPDUs that bring both ends in sync, which the limit of 3 per second may hold
/// back up to [`FAST_PERIODIC_TIME`]; then one poll and one status query.
fn form_bound(longest_query: Duration) -> Duration {
    AGGREGATE_WAIT_TIME + FAST_PERIODIC_TIME + STATUS_POLL + longest_query
}

fn member_tx(s: &Status) -> Vec<u64> {
    s.members.iter().map(|m| m.tx_packets).collect()
}

#[test]
fn every_mode_carries_ping_and_tcp_both_ways() {
    for mode in [
        "balance-rr",
        "active-backup",
        "balance-xor",
        "broadcast",
        // balance-slb is tested behind a switch (netns_switch): like Open vSwitch's, it takes
        // broadcasts on one member only, which a peer bond need not send them on.
        "balance-tcp",
        "stripe",
    ] {
        let lab = Lab::new(
            2,
            &format!("mode={mode} xmit_hash_policy=layer3+4 miimon=100"),
        );
        // balance-tcp negotiates LACP first (about 2 s); stripe waits for its peer's hellos.
        lab.wait_carrier(Duration::from_secs(15));
        if mode == "stripe" {
            wait_striping(&lab);
        }
        assert!(lab.ping(Side::A, 3), "{mode}: ping A->B");
        assert!(lab.ping(Side::B, 3), "{mode}: ping B->A");
        for from in [Side::A, Side::B] {
            let (sent, received, _) = lab.tcp_transfer(from, 4 << 20, None, || {});
            assert_eq!(
                sent, received,
                "{mode}: TCP data from {from:?} arrived intact"
            );
        }
        // A hash mode spreads flows, not frames: a few more connections (each on a new port)
        // until both members carried some, so that three flows landing on one member by
        // chance (one time in four) does not pass for a mode that uses one member.
        if mode == "balance-xor" {
            for _ in 0..8 {
                if member_tx(&lab.status(Side::A)).iter().all(|&n| n > 0) {
                    break;
                }
                let (sent, received, _) = lab.tcp_transfer(Side::A, 256 << 10, None, || {});
                assert_eq!(sent, received, "{mode}: TCP data arrived intact");
            }
        }
        let s = lab.status(Side::A);
        assert_eq!(s.mode, mode);
        assert_eq!(s.mii_status, "up");
        let tx = member_tx(&s);
        match mode {
            "active-backup" => {
                assert!(
                    tx[0] > 0 && tx[1] == 0,
                    "{mode}: one member carries all: {tx:?}"
                );
                assert_eq!(s.active.as_deref(), Some(s.members[0].name.as_str()));
            }
            // Two flows (ICMP and one TCP stream) may share a bucket.
            "balance-tcp" => {
                assert!(tx.iter().sum::<u64>() > 0, "{mode}: {tx:?}");
                let l = s.lacp.as_ref().unwrap();
                assert_eq!(l.active_aggregator.as_ref().unwrap().number_of_ports, 2);
                assert!(s.buckets.is_some(), "{mode}: bucket table shown");
            }
            _ => assert!(
                tx.iter().all(|&n| n > 0),
                "{mode}: both members used: {tx:?}"
            ),
        }
    }
}

/// Polls namespace `ns` every millisecond (for up to 10 s) until interface `bond` exists, then
/// sets it up and gives it `addr`/24 at once; returns how long that took after it appeared.
fn configure_when_it_appears(ns: &str, bond: &str, addr: Ipv4Addr) -> anyhow::Result<Duration> {
    let bond_s = bond.to_owned();
    let appeared = in_named_ns(ns, move || -> std::io::Result<Instant> {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            match lagd_sys::link::ifindex(&bond_s) {
                Ok(_) => break,
                Err(e) if Instant::now() > deadline => return Err(e),
                Err(_) => thread::sleep(Duration::from_millis(1)),
            }
        }
        let appeared = Instant::now();
        lagd_sys::link::set_up(&bond_s, true)?;
        Ok(appeared)
    })??;
    run(
        "ip",
        &["-n", ns, "addr", "add", &format!("{addr}/24"), "dev", bond],
    )?;
    Ok(appeared.elapsed())
}

/// Bytes each member sent.
fn member_tx_bytes(s: &Status) -> Vec<u64> {
    s.members.iter().map(|m| m.tx_bytes).collect()
}

/// Sends `bytes` over one new TCP connection from `from` to the other host and checks that they
/// arrive intact within 20 s (a flow that the peer drops would stall for minutes otherwise).
fn transfer_within(lab: &Lab, from: Side, bytes: usize, what: &str) {
    let to = match from {
        Side::A => Side::B,
        Side::B => Side::A,
    };
    let (from_ns, to_ns) = (lab.topo.ns(from).to_owned(), lab.topo.ns(to).to_owned());
    let addr = SocketAddrV4::new(lab.addrs[side_index(to)], 5001);
    let (tx, rx) = mpsc::channel();
    // Left behind (blocked) only when the test fails anyway.
    thread::spawn(move || {
        let _ = tx.send(checked_transfer(&from_ns, &to_ns, addr, bytes, None, || {}));
    });
    let t = rx
        .recv_timeout(Duration::from_secs(20))
        .unwrap_or_else(|_| {
            panic!(
                "{what}: TCP from {from:?} did not finish within 20 s\n{}",
                lab.describe()
            )
        })
        .unwrap_or_else(|e| panic!("{what}: TCP from {from:?}: {e:#}\n{}", lab.describe()));
    assert!(t.intact(), "{what}: TCP data from {from:?} arrived intact");
}

/// Every mode, with each bond set up and addressed the moment lagd creates its TAP (as
/// NetworkManager or systemd-networkd configure a new interface), carries ping and TCP both
/// ways. balance-slb is left to netns_switch: it takes broadcasts on one member only, which a
/// peer bond need not send them on.
#[test]
fn every_mode_carries_traffic_when_the_bond_is_configured_the_moment_it_appears() {
    for mode in [
        "balance-rr",
        "active-backup",
        "balance-xor",
        "broadcast",
        "802.3ad",
        "balance-tlb",
        "balance-alb",
        "balance-tcp",
        "stripe",
    ] {
        let lab = Lab::configured_at_once(
            2,
            &format!("mode={mode} xmit_hash_policy=layer3+4 miimon=100 lacp_rate=fast"),
        );
        lab.wait_carrier(Duration::from_secs(15));
        if mode == "stripe" {
            wait_striping(&lab);
        }
        for from in [Side::A, Side::B] {
            assert!(
                lab.ping(from, 3),
                "{mode}: ping from {from:?}\n{}",
                lab.describe()
            );
        }
        // New connections (each on a new port) until every member of the sender carried one:
        // a flow that the peer drops on the member it arrives by must show, not only the
        // flows that happened to hash onto the peer's active member (each one is one in two).
        // The kernel picks each next source port 2 to 16 above the last at random, so each
        // connection lands on either member by chance: CI once saw 12 in a row on one (one
        // in 2,048); 40 in a row would be one in 5*10^11.
        const MAX_CONNECTIONS: usize = 40;
        for from in [Side::A, Side::B] {
            for n in 1.. {
                transfer_within(&lab, from, 256 << 10, mode);
                let tx = member_tx_bytes(&lab.status(from));
                // active-backup uses one member, and balance-alb one per peer host.
                let one_member = matches!(mode, "active-backup" | "balance-alb");
                if one_member || tx.iter().all(|&b| b >= 128 << 10) {
                    break;
                }
                assert!(
                    n < MAX_CONNECTIONS,
                    "{mode}: {n} connections from {from:?} and still not on every member: \
                     {tx:?}\n{}",
                    lab.describe()
                );
            }
        }
        println!("{mode}: ping and TCP both ways");
    }
}

/// For a fixed set of UDP flows the member counters equal what the hash code predicts
/// (balance-xor) or what the mode promises (rr even, active-backup one member, broadcast all).
#[test]
fn distribution_matches_the_hash_and_the_mode() {
    for mode in ["balance-xor", "balance-rr", "active-backup", "broadcast"] {
        let lab = Lab::new(
            2,
            &format!("mode={mode} xmit_hash_policy=layer3+4 miimon=100"),
        );
        assert!(lab.ping(Side::A, 2), "{mode}: neighbours resolved");
        let before = member_tx(&lab.status(Side::A));
        let (a, b) = (lab.addrs[0], lab.addrs[1]);
        let flows: Vec<u16> = (40_000..40_024).collect();
        let per_flow = 10u64;
        let sockets: Vec<UdpSocket> = lab
            .topo
            .in_ns(Side::A, || {
                flows
                    .iter()
                    .map(|&p| UdpSocket::bind(SocketAddrV4::new(a, p)).expect("bind"))
                    .collect()
            })
            .unwrap();
        for s in &sockets {
            for _ in 0..per_flow {
                s.send_to(b"lagd distribution test", SocketAddrV4::new(b, 9))
                    .unwrap();
            }
        }
        thread::sleep(Duration::from_millis(300));
        let after = member_tx(&lab.status(Side::A));
        let sent: Vec<u64> = after.iter().zip(&before).map(|(x, y)| x - y).collect();
        let total = flows.len() as u64 * per_flow;
        match mode {
            "balance-xor" => {
                let mut want = vec![0u64; 2];
                for &p in &flows {
                    let frame = udp_frame(a, b, p, 9);
                    let m = member_index(xmit_hash(HashPolicy::Layer34, &frame), 2).unwrap();
                    want[m] += per_flow;
                }
                assert_eq!(
                    sent, want,
                    "{mode}: per-member frames equal the hash's prediction"
                );
            }
            "balance-rr" => {
                assert_eq!(sent.iter().sum::<u64>(), total);
                assert!(sent[0].abs_diff(sent[1]) <= 1, "{mode}: even: {sent:?}");
            }
            "active-backup" => assert_eq!(sent, [total, 0], "{mode}"),
            "broadcast" => assert_eq!(sent, [total, total], "{mode}"),
            _ => unreachable!(),
        }
    }
}

/// Take the active member down in the middle of a TCP transfer: the data arrives intact, the
/// gap is measured, and the member's return honours updelay.
#[test]
fn failover_mid_transfer_and_updelay() {
    let lab = Lab::new(2, "mode=active-backup miimon=100 updelay=500");
    assert!(lab.ping(Side::A, 2));
    let link0 = lab.topo.links()[0].name.clone();
    let (sent, received, gap) =
        lab.tcp_transfer(Side::A, 24 << 20, Some(Duration::from_millis(4)), || {
            thread::sleep(Duration::from_millis(500));
            // Down on B's side: both ends lose carrier on link 0.
            lab.topo.set_link_down(Side::B, 0).unwrap();
        });
    assert_eq!(sent, received, "data intact across the failover");
    println!(
        "failover gap seen by the TCP receiver: {} ms",
        gap.as_millis()
    );
    let s = lab.status(Side::A);
    assert_eq!(s.active.as_deref(), Some(s.members[1].name.as_str()));
    assert_eq!(s.members[0].mii_status, "down");
    assert_eq!(s.members[0].link_failure_count, 1);
    // Recovery: going back for 500 ms, then up.
    lab.topo
        .ip(Side::B, &["link", "set", &link0, "up"])
        .unwrap();
    let back = Instant::now();
    let mut seen_going_back = false;
    loop {
        let m = &lab.status(Side::A).members[0];
        if m.mii_status == "going back" {
            seen_going_back = true;
        }
        if m.mii_status == "up" {
            break;
        }
        assert!(
            back.elapsed() < Duration::from_secs(5),
            "member never came back"
        );
        thread::sleep(Duration::from_millis(20));
    }
    let took = back.elapsed();
    assert!(seen_going_back, "updelay shows as 'going back'");
    assert!(
        took >= Duration::from_millis(480),
        "updelay honoured: up after {took:?}"
    );
    println!("member back up after {} ms (updelay 500)", took.as_millis());
}

#[test]
fn member_without_carrier_at_start_joins_later() {
    let lab = Lab::with_setup(
        2,
        "mode=balance-xor xmit_hash_policy=layer3+4 miimon=100",
        |t| {
            t.set_link_down(Side::B, 1).unwrap();
        },
    );
    let s = lab.status(Side::A);
    assert_eq!(s.members[1].mii_status, "down");
    assert_eq!(s.mii_status, "up");
    assert!(
        lab.ping(Side::A, 3),
        "traffic flows over the member that has carrier"
    );
    let link1 = lab.topo.links()[1].name.clone();
    lab.topo
        .ip(Side::B, &["link", "set", &link1, "up"])
        .unwrap();
    let t = Instant::now();
    while lab.status(Side::A).members[1].mii_status != "up" {
        assert!(t.elapsed() < Duration::from_secs(3), "member never came up");
        thread::sleep(Duration::from_millis(20));
    }
    let (sent, received, _) = lab.tcp_transfer(Side::A, 2 << 20, None, || {});
    assert_eq!(sent, received);
}

#[test]
fn member_deleted_while_running() {
    let lab = Lab::new(2, "mode=balance-xor xmit_hash_policy=layer3+4 miimon=100");
    assert!(lab.ping(Side::A, 2));
    let link0 = lab.topo.links()[0].name.clone();
    lab.topo.ip(Side::A, &["link", "del", &link0]).unwrap();
    let t = Instant::now();
    while lab.status(Side::A).members[0].mii_status != "down" {
        assert!(
            t.elapsed() < Duration::from_secs(3),
            "deleted member still up"
        );
        thread::sleep(Duration::from_millis(20));
    }
    let (sent, received, _) = lab.tcp_transfer(Side::A, 2 << 20, None, || {});
    assert_eq!(sent, received, "the bond goes on over the remaining member");
    assert_eq!(lab.status(Side::A).mii_status, "up");
}

/// Bad configurations: a clear message naming the key, exit code 2, and nothing created.
#[test]
fn bad_configs_name_the_key_and_change_nothing() {
    let topo = Topology::create(1).expect("topology");
    let link = topo.links()[0].name.clone();
    let bond = format!("{}bad", topo.tag());
    let dir = topo.dir().to_path_buf();
    // A configuration lagd accepted would make it run: give up (and fail) after 10 s.
    let run = |args: &[&str]| {
        let mut child = Command::new("ip")
            .args(["netns", "exec", topo.ns(Side::A), LAGD])
            .args(args)
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let t = Instant::now();
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s;
            }
            if t.elapsed() > Duration::from_secs(10) {
                let _ = child.kill();
                let _ = child.wait();
                panic!("lagd accepted {args:?} and kept running");
            }
            thread::sleep(Duration::from_millis(20));
        };
        let mut err = String::new();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        (status.code(), err)
    };
    let control = dir.join("bad.sock");
    let control = control.to_str().unwrap();
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec!["--opts".into(), "mode=balance-xor miimonn=100".into()],
            "miimonn",
        ),
        (vec!["--opts".into(), "miimon=fast".into()], "miimon"),
        (
            vec!["--opts".into(), "xmit_hash_policy=layer5".into()],
            "xmit_hash_policy",
        ),
        (
            vec!["--opts".into(), "mode=balance-tlb lp_interval=0".into()],
            "lp_interval",
        ),
        (vec!["--opts".into(), "mode=balance-fast".into()], "mode"),
        (
            vec!["--members".into(), format!("{link},nosuch0")],
            "nosuch0",
        ),
    ];
    for (extra, key) in cases {
        let mut args: Vec<String> = vec![
            "--bond".into(),
            bond.clone(),
            "--control".into(),
            control.into(),
        ];
        if !extra.iter().any(|a| a == "--members") {
            args.extend(["--members".into(), link.clone()]);
        }
        args.extend(extra);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (code, err) = run(&args);
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert!(err.contains(key), "{args:?}: message names '{key}': {err}");
    }
    // A config file: the line is named.
    let file = dir.join("bad.toml");
    std::fs::write(
        &file,
        format!("bond = \"{bond}\"\nmembers = [\"{link}\"]\n[options]\nmode = \"balance-xor\"\nupdelay = \"soon\"\n"),
    )
    .unwrap();
    let (code, err) = run(&["--config", file.to_str().unwrap()]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains(":5:") && err.contains("updelay"), "{err}");
    // Nothing was created.
    let links = Command::new("ip")
        .args(["-n", topo.ns(Side::A), "-o", "link"])
        .output()
        .unwrap();
    assert!(
        !String::from_utf8_lossy(&links.stdout).contains(&bond),
        "no TAP left behind"
    );
}

/// The ARP monitor takes out a member whose carrier is up but whose traffic is dropped (tc
/// `pfifo limit 0` on both ends of the link), and brings it back when traffic flows again:
/// through lagd, and with the kernel fast path (which reports the frames it saw per member and
/// gives lagd the ARP frames), counting any frame and validating ARP replies on the members in
/// use (`arp_validate=active`: a member taken out is a backup, which does not validate then;
/// with `backup` or `all` it would wait for the bond's own probes, see
/// `arp_validate_every_value_in_balance_xor`).
#[test]
fn arp_monitor_takes_out_a_member_that_drops_traffic() {
    for (extra, path) in [
        ("fastpath=off", "lagd"),
        ("fastpath=on", "kernel"),
        ("fastpath=on arp_validate=active", "kernel"),
    ] {
        arp_monitor_case(extra, path);
    }
}

fn arp_monitor_case(extra: &str, path: &str) {
    // A window of 5 missed intervals: a loaded machine must not flap the member by itself.
    let opts = "mode=balance-xor xmit_hash_policy=layer3+4 arp_interval=100 arp_missed_max=5";
    // Host A probes host B's bond address. Host B probes it too, its own address: its probes
    // still cross the links, and without arp_validate any frame heard counts. With validation
    // it would hear nothing, and its replies would reach one of A's members only (by hash): it
    // runs in broadcast mode then, without the ARP monitor, so each reply reaches both.
    let a = format!("{opts} {extra} arp_ip_target={{B}}");
    let b = if extra.contains("arp_validate") {
        "mode=broadcast miimon=100".to_owned()
    } else {
        a.clone()
    };
    let topo = Topology::create(2).expect("create topology");
    let lab = Lab::start(topo, [&a, &b], |_| {});
    assert_eq!(lab.status(Side::A).dataplane.path, path, "{extra}");
    assert!(lab.ping(Side::A, 3));
    thread::sleep(Duration::from_millis(400));
    let s = lab.status(Side::A);
    assert!(
        s.members.iter().all(|m| m.mii_status == "up"),
        "{:?}",
        s.members
    );
    silent_member_out_and_back(&lab, "ARP monitor", || {
        let (sent, received, _) = lab.tcp_transfer(Side::A, 4 << 20, None, || {});
        assert_eq!(sent, received, "traffic avoids the silent member");
    });
}

/// Drops every frame on link 1 while its carrier stays up: host A's monitor (`what`) takes
/// member 1 out; `meanwhile` checks the bond carries on; with traffic back the
/// member returns, with the failure counted.
fn silent_member_out_and_back(lab: &Lab, what: &str, meanwhile: impl FnOnce()) {
    let link1 = lab.topo.links()[1].name.clone();
    // Counted from here: on a machine busy enough to delay probes past the monitor's limit the
    // member may already have failed once, which is the monitor doing its job.
    let failures = lab.status(Side::A).members[1].link_failure_count;
    lab.topo.drop_link_traffic(&link1, true).unwrap();
    let t = Instant::now();
    while lab.status(Side::A).members[1].mii_status != "down" {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "{what}: silent member never taken out"
        );
        thread::sleep(Duration::from_millis(20));
    }
    println!(
        "{what} took the silent member out after {} ms",
        t.elapsed().as_millis()
    );
    let carrier = lab
        .topo
        .ip(Side::A, &["-o", "link", "show", &link1])
        .unwrap();
    assert!(carrier.contains("LOWER_UP"), "carrier stayed up: {carrier}");
    meanwhile();
    lab.topo.drop_link_traffic(&link1, false).unwrap();
    let t = Instant::now();
    while lab.status(Side::A).members[1].mii_status != "up" {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "{what}: member never came back"
        );
        thread::sleep(Duration::from_millis(20));
    }
    let counted = lab.status(Side::A).members[1].link_failure_count - failures;
    assert!(counted >= 1, "{what}: the failure was not counted");
    println!("{what}: {counted} link failure(s) counted");
}

/// The IPv6 half of the ARP monitor (`ns_ip6_target`): host A solicits host B's bond address
/// with neighbour solicitations; a member whose carrier stays up while its traffic is dropped
/// is taken out and comes back when traffic flows again. Through lagd with validation (only
/// B's neighbour advertisements count), with the kernel fast path without it (any frame
/// counts, from the programs' counters) and with it (the members' program passes neighbour
/// solicitations and advertisements to lagd, and forwards the rest).
#[test]
fn ns_monitor_takes_out_a_member_whose_ipv6_path_dies() {
    for (extra, path) in [
        ("fastpath=off arp_validate=all", "lagd"),
        ("fastpath=on", "kernel"),
        ("fastpath=on arp_validate=all", "kernel"),
        ("fastpath=auto arp_validate=active", "kernel"),
    ] {
        ns_monitor_case(extra, path);
    }
}

fn ns_monitor_case(extra: &str, path: &str) {
    // Addresses inside the lab's own namespaces only (a ULA prefix per lab).
    let topo = Topology::create(2).expect("create topology");
    let prefix = format!("fd6c:{}::", &topo.tag()[2..6]);
    let (addr_a, addr_b) = (format!("{prefix}1"), format!("{prefix}2"));
    let a = format!(
        "mode=balance-xor xmit_hash_policy=layer3+4 arp_interval=100 arp_missed_max=5 {extra} \
         ns_ip6_target={addr_b}"
    );
    // Host B sends everything on both links, so each of A's members hears B's answers.
    let lab = Lab::start(topo, [&a, "mode=broadcast miimon=100"], |_| {});
    for (side, addr) in [(Side::A, &addr_a), (Side::B, &addr_b)] {
        let bond = format!("{}b{}", lab.topo.tag(), side.letter());
        lab.topo
            .sysctl(side, &format!("net/ipv6/conf/{bond}/disable_ipv6"), "0")
            .unwrap();
        lab.topo
            .ip(
                side,
                &[
                    "-6",
                    "addr",
                    "add",
                    &format!("{addr}/64"),
                    "dev",
                    &bond,
                    "nodad",
                ],
            )
            .unwrap();
    }
    let s = lab.status(Side::A);
    assert_eq!(s.dataplane.path, path, "{extra}: {:?}", s.dataplane.reason);
    let shown = lagctl_ok(&lab.controls[0], &["show"]);
    assert!(
        // As lagd prints addresses: canonical (the tag's leading zeros dropped).
        shown.contains(&format!(
            "NS IPv6 target/s (xx::xx form): {}",
            addr_b.parse::<std::net::Ipv6Addr>().unwrap()
        )),
        "{shown}"
    );
    // Both members hear B (its advertisements with validation) within the window.
    let t = Instant::now();
    while lab
        .status(Side::A)
        .members
        .iter()
        .any(|m| m.mii_status != "up")
    {
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "members not up: {:?}",
            lab.status(Side::A).members
        );
        thread::sleep(Duration::from_millis(20));
    }
    thread::sleep(Duration::from_millis(1000));
    let s = lab.status(Side::A);
    assert!(
        s.members.iter().all(|m| m.mii_status == "up"),
        "{extra}: a member with a live path went down: {:?}",
        s.members
    );
    silent_member_out_and_back(&lab, &format!("{extra}: NS monitor"), || {
        assert!(lab.ping(Side::A, 3), "the bond carries on over member 0");
    });
    if extra.contains("arp_validate") {
        // With validation B's other traffic does not count: a target nobody owns (set live)
        // takes both members out.
        let bond = format!("{}bA", lab.topo.tag());
        let nobody = format!("ns_ip6_target={prefix}99");
        lagctl_ok(&lab.controls[0], &["set", &bond, &nobody]);
        let t = Instant::now();
        while lab.status(Side::A).mii_status != "down" {
            assert!(
                t.elapsed() < Duration::from_secs(3),
                "{extra}: members kept up by a target nobody owns: {:?}",
                lab.status(Side::A).members
            );
            thread::sleep(Duration::from_millis(20));
        }
    }
}

/// An 802.3ad lab: `links` links, tcpdump of slow-protocol frames on host A's end of every link
/// from before either lagd starts (so it holds every LACPDU both lagds sent across), then lagd
/// with `opts_a` on host A and `opts_b` on host B.
fn lacp_lab(links: usize, opts_a: &str, opts_b: &str) -> (Lab, SlowCapture) {
    assert!(
        is_root(),
        "network namespace tests need root (CI runs them as root)"
    );
    let mut topo = Topology::create(links).expect("create topology");
    let capture = topo
        .capture_slow_protocols(Side::A)
        .expect("tcpdump on every link (CI installs it)");
    let lab = Lab::start(topo, [opts_a, opts_b], |_| {});
    (lab, capture)
}

/// Stops the capture and checks, for both lagds and every member, that every LACPDU it sent
/// decodes in `tshark -V` without a malformed mark or expert information and carries what its
/// status reports (actor identity; for the last one also the actor state and partner
/// identity). Returns the LACPDU counts per host (A, B) and member.
fn check_lacp_capture(lab: &mut Lab, capture: &SlowCapture) -> [Vec<usize>; 2] {
    lab.topo.stop_capture(capture);
    [Side::A, Side::B].map(|side| {
        let s = lab.status(side);
        s.members
            .iter()
            .zip(capture.files())
            .map(|(m, file)| {
                let expect = common::lacpdu_expectation(m);
                check_lacpdus_with_tshark(file, &expect)
                    .unwrap_or_else(|e| panic!("host {side:?} {}'s LACPDUs: {e:#}", m.name))
            })
            .collect()
    })
}

fn lacp(m: &MemberStatus) -> &MemberLacp {
    m.lacp.as_ref().expect("member LACP status")
}

/// Whether every member of both bonds is distributing.
fn all_distributing(lab: &Lab) -> bool {
    [Side::A, Side::B].iter().all(|&side| {
        lab.status(side)
            .members
            .iter()
            .all(|m| lacp(m).distributing)
    })
}

/// LACPDU counts per member of one host: (received, sent).
fn lacpdu_counts(s: &Status) -> Vec<(u64, u64)> {
    s.members
        .iter()
        .map(|m| (lacp(m).lacpdu_rx, lacp(m).lacpdu_tx))
        .collect()
}

/// lagd against lagd in 802.3ad at the fast rate: both ends aggregate every member; dropping
/// only the LACPDUs of one link (an eBPF drop of EtherType 0x8809 at tcx egress on both ends;
/// carrier up, every other frame still crosses) takes just that member out of both ends within
/// 3 s, while the other member keeps distributing and a TCP transfer running through it all
/// arrives intact; it rejoins once the drop is lifted. Every LACPDU either lagd sent decodes
/// cleanly in tshark and matches its status.
#[test]
fn lacp_between_two_lagds_and_a_link_losing_lacpdus() {
    let opts = "mode=802.3ad lacp_rate=fast xmit_hash_policy=layer3+4";
    let (mut lab, capture) = lacp_lab(2, opts, opts);
    let t = Instant::now();
    lab.wait_carrier(Duration::from_secs(5));
    println!("802.3ad carrier after {} ms", t.elapsed().as_millis());
    for side in [Side::A, Side::B] {
        let s = lab.status(side);
        let l = s.lacp.as_ref().expect("lacp status");
        let agg = l.active_aggregator.as_ref().expect("active aggregator");
        assert_eq!(agg.number_of_ports, 2, "{side:?}");
        for m in &s.members {
            let ml = lacp(m);
            assert!(ml.collecting && ml.distributing, "{side:?} {}", m.name);
            assert_eq!(
                ml.actor.state & 0x3f,
                0x3f,
                "activity timeout aggregation sync coll dist"
            );
        }
        let peer = lab.status(if side == Side::A { Side::B } else { Side::A });
        assert_eq!(agg.partner_mac, peer.lacp.unwrap().system_mac);
    }
    let (sent, received, _) = lab.tcp_transfer(Side::A, 4 << 20, None, || {});
    assert_eq!(sent, received);

    let link1 = lab.topo.links()[1].name.clone();
    let t0 = Instant::now();
    let lacp_drop = lab.topo.drop_slow_protocols(&link1).unwrap();
    let t = Instant::now();
    let attach = t - t0;
    // Data still crosses the link while its LACPDUs are dropped.
    assert_eq!(
        lab.topo.probe_link(&link1, 20).unwrap(),
        20,
        "data frames cross {link1}"
    );
    let at_drop = [Side::A, Side::B].map(|side| lacpdu_counts(&lab.status(side)));
    // A paced TCP transfer (8 MB in about 3.3 s) runs while the member leaves. Not longer:
    // the drop is lifted while the member is EXPIRED (it is DEFAULTED 3 s after it left, and
    // from there both ends would wait up to a slow periodic time, 30 s, to speak again).
    let mut left = None;
    let (sent, received, gap) =
        lab.tcp_transfer(Side::A, 8 << 20, Some(Duration::from_millis(25)), || {
            left = Some(lab.wait_member_distributing(1, false, t, Duration::from_secs(10)));
        });
    assert_eq!(
        sent, received,
        "TCP through the bond while the member leaves"
    );
    let ([out_a, out_b], longest_query) = left.unwrap();
    println!(
        "member without LACPDUs left distribution {} ms (A) and {} ms (B) after the drop \
         began (drop attached in {} ms, longest status query {} ms); TCP's longest pause {} ms",
        out_a.as_millis(),
        out_b.as_millis(),
        attach.as_millis(),
        longest_query.as_millis(),
        gap.as_millis()
    );
    let bound = leave_bound(longest_query);
    let floor = leave_floor(attach);
    for out in [out_a, out_b] {
        assert!(out <= bound, "left after {out:?}, bound {bound:?}");
        assert!(
            out >= floor,
            "left after {out:?}, before current_while could run out"
        );
    }
    for side in [Side::A, Side::B] {
        let s = lab.status(side);
        assert_eq!(s.mii_status, "up", "{side:?}: the bond keeps carrier");
        assert_eq!(
            s.members[1].mii_status, "up",
            "{side:?}: carrier is still up"
        );
        assert_eq!(lacp(&s.members[1]).rx_state, "EXPIRED", "{}", s.render());
    }
    // LACP alone took it out: the link still carries data.
    assert_eq!(
        lab.topo.probe_link(&link1, 20).unwrap(),
        20,
        "data frames cross {link1}"
    );
    // Not one LACPDU crossed the link during the drop; the other link kept carrying them.
    for side in [Side::A, Side::B] {
        let now = lacpdu_counts(&lab.status(side));
        let before = &at_drop[side_index(side)];
        assert_eq!(now[1].0, before[1].0, "{side:?}: LACPDUs crossed {link1}");
        assert!(
            now[0].0 >= before[0].0 + 2,
            "{side:?}: {before:?} -> {now:?}"
        );
    }
    drop(lacp_drop);
    let lifted = Instant::now();
    // Lifted while EXPIRED (see `rejoin_bound`).
    lab.assert_member_rejoins(
        1,
        lifted,
        Duration::from_secs(15),
        |longest_query| rejoin_bound(false, longest_query),
        "after the drop was lifted",
    );
    let counts = check_lacp_capture(&mut lab, &capture);
    assert!(
        counts.iter().flatten().all(|&n| n >= 5),
        "LACPDUs captured per host and member: {counts:?}"
    );
}

/// `lagctl lacp doctor --json` for one host: the causes it names.
fn doctor_causes(lab: &Lab, side: Side) -> Vec<String> {
    lacp_doctor(&lab.controls[side_index(side)])
        .into_iter()
        .map(|(cause, _)| cause)
        .collect()
}

/// lagd against lagd with a passive end (`lacp_active=off`) and at the slow rate: each pair
/// forms within the aggregate wait and a second of LACPDU exchange after host A's lagd starts,
/// each end's state bits say what it was told (Activity, Timeout), each sees the other as its
/// partner, TCP crosses, LACPDUs keep the configured rate afterwards (none at the slow rate in
/// a 2 s window, at least one per member at the fast rate), and every LACPDU either lagd sent
/// decodes cleanly in tshark and matches its status. At the slow rate a member whose link
/// comes back up rejoins just as fast: lagd sends on link-up rather than waiting 30 s for its
/// periodic LACPDU.
#[test]
fn lacp_between_two_lagds_passive_and_slow() {
    for (opts_a, opts_b) in [
        ("lacp_rate=slow", "lacp_rate=slow"),
        ("lacp_rate=fast", "lacp_rate=fast lacp_active=off"),
        ("lacp_rate=slow", "lacp_rate=slow lacp_active=off"),
    ] {
        let base = "mode=802.3ad xmit_hash_policy=layer3+4";
        let opts = [opts_a, opts_b];
        let (mut lab, capture) =
            lacp_lab(2, &format!("{base} {opts_a}"), &format!("{base} {opts_b}"));
        let case = format!("A {opts_a:?}, B {opts_b:?}");
        // Host A's lagd is up (and sending) when `lacp_lab` returns.
        let t = Instant::now();
        let mut longest_query = Duration::ZERO;
        // When the poll that saw every member distributing started, counted from `t`.
        let formed = loop {
            let asked = t.elapsed();
            let q = Instant::now();
            let all = all_distributing(&lab);
            longest_query = longest_query.max(q.elapsed());
            if all {
                break asked;
            }
            assert!(
                asked < Duration::from_secs(10),
                "{case}: no aggregation:\n{}\n{}",
                lab.status(Side::A).render(),
                lab.status(Side::B).render()
            );
            thread::sleep(STATUS_POLL);
        };
        println!(
            "{case}: every member distributing at both ends {} ms after A started",
            formed.as_millis()
        );
        let bound = form_bound(longest_query);
        assert!(
            formed <= bound,
            "{case}: formed after {formed:?}, bound {bound:?}"
        );
        // Each end's view of the other catches up with the other's last state change once the
        // LACPDU carrying it is sent: right away, or after up to a second when the transmit
        // limit (3 per second) held it back during forming.
        let views_agree = |st: &[Status; 2]| {
            (0..2).all(|i| {
                st[i]
                    .members
                    .iter()
                    .zip(&st[1 - i].members)
                    .all(|(m, pm)| lacp(m).partner.state == lacp(pm).actor.state)
            })
        };
        let waited = Instant::now();
        let statuses = loop {
            let st = [Side::A, Side::B].map(|side| lab.status(side));
            if views_agree(&st) || waited.elapsed() > FAST_PERIODIC_TIME * 2 {
                break st;
            }
            thread::sleep(STATUS_POLL);
        };
        for side in [Side::A, Side::B] {
            let i = side_index(side);
            let (s, peer) = (&statuses[i], &statuses[1 - i]);
            let l = s.lacp.as_ref().unwrap();
            let active = !opts[i].contains("lacp_active=off");
            let fast = opts[i].contains("lacp_rate=fast");
            assert_eq!(l.lacp_active, active, "{case} {side:?}");
            assert_eq!(
                l.lacp_rate,
                if fast { "fast" } else { "slow" },
                "{case} {side:?}"
            );
            assert_eq!(l.active_aggregator.as_ref().unwrap().number_of_ports, 2);
            for (m, pm) in s.members.iter().zip(&peer.members) {
                let (ml, pl) = (lacp(m), lacp(pm));
                assert_eq!(
                    ml.actor.state & 0x01 != 0,
                    active,
                    "{case} {side:?} Activity"
                );
                assert_eq!(ml.actor.state & 0x02 != 0, fast, "{case} {side:?} Timeout");
                assert_eq!(
                    ml.actor.state & 0x38,
                    0x38,
                    "{case} {side:?} sync coll dist"
                );
                // Each end's partner view is the other end's actor.
                assert_eq!(ml.partner.system_mac, pl.actor.system_mac, "{case}");
                assert_eq!(ml.partner.key, pl.actor.key, "{case}");
                assert_eq!(ml.partner.port, pl.actor.port, "{case}");
                assert_eq!(
                    ml.partner.state, pl.actor.state,
                    "{case} {side:?} {}",
                    m.name
                );
            }
        }
        let (sent, received, _) = lab.tcp_transfer(Side::A, 2 << 20, None, || {});
        assert_eq!(sent, received, "{case}: TCP through the bond");
        // The rate, kept afterwards: a LACPDU may still be held back by the transmit limit for
        // up to a second after forming, so the window starts after that.
        thread::sleep(FAST_PERIODIC_TIME + Duration::from_millis(100));
        let before = [Side::A, Side::B].map(|side| lacpdu_counts(&lab.status(side)));
        thread::sleep(Duration::from_secs(2));
        for side in [Side::A, Side::B] {
            let i = side_index(side);
            let now = lacpdu_counts(&lab.status(side));
            // A end sends at the rate its partner asks for (the partner's Timeout bit).
            let partner_fast = opts[1 - i].contains("lacp_rate=fast");
            for (k, (b, n)) in before[i].iter().zip(&now).enumerate() {
                let sent = n.1 - b.1;
                if partner_fast {
                    assert!(
                        sent >= 1,
                        "{case} {side:?} member {k}: {sent} LACPDUs in 2 s"
                    );
                } else {
                    assert_eq!(
                        sent, 0,
                        "{case} {side:?} member {k}: LACPDUs at the slow rate"
                    );
                }
            }
        }
        if opts_b == "lacp_rate=slow" {
            // A member whose link comes back: lagd sends on link-up, so it rejoins within
            // the aggregate wait, not a slow periodic time (30 s).
            let link1 = lab.topo.links()[1].name.clone();
            lab.topo
                .ip(Side::B, &["link", "set", &link1, "down"])
                .unwrap();
            lab.wait_member_distributing(1, false, Instant::now(), Duration::from_secs(5));
            let up = Instant::now();
            lab.topo
                .ip(Side::B, &["link", "set", &link1, "up"])
                .unwrap();
            lab.assert_member_rejoins(
                1,
                up,
                Duration::from_secs(15),
                form_bound,
                &format!("{case}: after link-up"),
            );
        }
        let counts = check_lacp_capture(&mut lab, &capture);
        assert!(
            counts.iter().flatten().all(|&n| n >= 2),
            "{case}: LACPDUs captured per host and member: {counts:?}"
        );
        println!("{case}: LACPDUs checked with tshark per host and member: {counts:?}");
    }
}

/// Two passive ends (`lacp_active=off` on both) never form: neither lagd sends a single LACPDU
/// (none in the capture either), no member ever distributes, the bonds have no carrier, and
/// `lagctl lacp doctor` names passive-passive on both. Watched for 5 s, where an active pair
/// forms in about 2 s (the aggregate wait).
#[test]
fn lacp_passive_at_both_ends_never_forms() {
    let opts = "mode=802.3ad lacp_rate=fast lacp_active=off xmit_hash_policy=layer3+4";
    let (mut lab, capture) = lacp_lab(2, opts, opts);
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(5) {
        for side in [Side::A, Side::B] {
            let s = lab.status(side);
            assert_eq!(s.mii_status, "down", "{side:?}:\n{}", s.render());
            for m in &s.members {
                let l = lacp(m);
                assert!(
                    !l.distributing && !l.collecting,
                    "{side:?}:\n{}",
                    s.render()
                );
                assert_eq!((l.lacpdu_tx, l.lacpdu_rx), (0, 0), "{side:?}: {}", m.name);
                assert_eq!(l.actor.state & 0x01, 0, "passive");
            }
        }
        thread::sleep(Duration::from_millis(100));
    }
    for side in [Side::A, Side::B] {
        let causes = doctor_causes(&lab, side);
        assert!(
            causes.iter().any(|c| c == "passive-passive"),
            "{side:?}: {causes:?}"
        );
    }
    let counts = check_lacp_capture(&mut lab, &capture);
    assert!(
        counts.iter().flatten().all(|&n| n == 0),
        "passive ends sent LACPDUs: {counts:?}"
    );
}

/// LACP keeps its timing while the dataplane is saturated (8 TCP streams through the bond):
/// no member ever leaves distribution and LACPDUs keep arriving at the fast rate, because
/// slow-protocol frames have their own socket, served first.
#[test]
fn lacp_keeps_time_under_a_saturated_dataplane() {
    let opts = "mode=802.3ad lacp_rate=fast xmit_hash_policy=layer3+4";
    let (mut lab, capture) = lacp_lab(2, opts, opts);
    lab.wait_carrier(Duration::from_secs(5));
    let lacpdus = |s: &Status| -> Vec<u64> {
        s.members
            .iter()
            .map(|m| m.lacp.as_ref().unwrap().lacpdu_rx)
            .collect()
    };
    let before = lacpdus(&lab.status(Side::A));
    let server = lab.addrs[1].to_string();
    lab.topo
        .spawn(Side::B, "iperf3-server", Path::new("iperf3"), &["-s", "-1"])
        .expect("iperf3 (CI installs it)");
    thread::sleep(Duration::from_millis(300));
    let client = lab
        .topo
        .spawn(
            Side::A,
            "iperf3-client",
            Path::new("iperf3"),
            &["-c", &server, "-P", "8", "-t", "8"],
        )
        .expect("iperf3");
    let t = Instant::now();
    let mut polls = 0;
    while t.elapsed() < Duration::from_secs(8) {
        let s = lab.status(Side::A);
        for m in &s.members {
            let l = m.lacp.as_ref().unwrap();
            assert!(
                l.distributing,
                "{} left distribution under load: {:?}",
                m.name, l.rx_state
            );
        }
        polls += 1;
        thread::sleep(Duration::from_millis(200));
    }
    let s = lab.status(Side::A);
    let after = lacpdus(&s);
    for (i, m) in s.members.iter().enumerate() {
        let got = after[i] - before[i];
        assert!(
            got >= 6,
            "{}: {got} LACPDUs in 8 s at the fast rate",
            m.name
        );
        assert_eq!(m.lacp.as_ref().unwrap().partner_churned_count, 0);
    }
    let tx: u64 = s.members.iter().map(|m| m.tx_bytes).sum();
    assert!(tx > 1 << 30, "the dataplane was loaded: {tx} bytes");
    assert!(lab.topo.try_wait(client).is_ok());
    println!(
        "{polls} polls, every member distributing throughout; LACPDUs {before:?} -> {after:?}"
    );
    let counts = check_lacp_capture(&mut lab, &capture);
    assert!(counts.iter().flatten().all(|&n| n >= 8), "{counts:?}");
}

/// The receiving host's TCP out-of-order queue count (TcpExt TCPOFOQueue).
fn tcp_ofo(lab: &Lab, side: Side) -> u64 {
    let text = lab
        .topo
        .in_ns(side, || std::fs::read_to_string("/proc/net/netstat"))
        .unwrap()
        .unwrap();
    let mut lines = text.lines().filter(|l| l.starts_with("TcpExt:"));
    let (names, values) = (lines.next().unwrap(), lines.next().unwrap());
    names
        .split_whitespace()
        .zip(values.split_whitespace())
        .find(|(n, _)| *n == "TCPOFOQueue")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap()
}

/// Waits until both ends stripe (their hellos are two-way on some member).
fn wait_striping(lab: &Lab) {
    let t = Instant::now();
    for side in [Side::A, Side::B] {
        while !lab.status(side).stripe.is_some_and(|s| s.striping) {
            assert!(
                t.elapsed() < Duration::from_secs(5),
                "host {side:?} does not stripe: {:?}",
                lab.status(side).stripe
            );
            thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Stripe mode over 2 and 4 members: one TCP stream is spread over every member (bytes in
/// proportion, whole super-frames: no software segmentation) and reaches the other host intact
/// and in order (the receiver's TCP resequencer put it back together; the host's TCP queued
/// next to nothing out of order), also when a member fails in the middle of the transfer.
#[test]
fn stripe_delivers_one_stream_in_order_over_2_and_4_members() {
    // With the kernel fast path the TAP's program sends TCP through lagd-proto's slots; on
    // lagd's path lagd sends it. Either way lagd orders what members receive.
    for (links, fastpath) in [(2, "on"), (4, "off"), (4, "on")] {
        let lab = Lab::new(
            links,
            &format!("mode=stripe miimon=100 fastpath={fastpath}"),
        );
        wait_striping(&lab);
        let a = lab.status(Side::A);
        assert_eq!(
            a.dataplane.path,
            if fastpath == "on" { "kernel" } else { "lagd" }
        );
        assert!(lab.ping(Side::A, 2));
        let bytes = |s: &Status| -> Vec<(u64, u64)> {
            s.members
                .iter()
                .map(|m| (m.tx_bytes, m.tx_packets))
                .collect()
        };
        let before = bytes(&lab.status(Side::A));
        let ofo_before = tcp_ofo(&lab, Side::B);
        let (sent, received, _) = lab.tcp_transfer(Side::A, 64 << 20, None, || {});
        assert_eq!(sent, received, "{links} members: data intact");
        let used: Vec<(u64, u64)> = bytes(&lab.status(Side::A))
            .iter()
            .zip(&before)
            .map(|(x, y)| (x.0 - y.0, x.1 - y.1))
            .collect();
        let total: u64 = used.iter().map(|u| u.0).sum();
        assert!(total >= 64 << 20, "{links} members: {used:?}");
        // Speeds are equal: every member carries its share, within a super-frame or two
        // per hundred.
        for &(b, _) in &used {
            assert!(
                b * links as u64 * 10 >= total * 8,
                "{links} members: the stream is spread by bytes: {used:?}"
            );
        }
        // Super-frames cross whole: far fewer frames than MTU-sized segments.
        let frames: u64 = used.iter().map(|u| u.1).sum();
        assert!(
            frames * 1448 * 4 < total,
            "{links} members: {frames} frames for {total} bytes: not sent whole"
        );
        let kernel_tx: u64 = lab
            .status(Side::A)
            .members
            .iter()
            .map(|m| m.kernel_tx_packets)
            .sum();
        if fastpath == "on" {
            assert!(
                kernel_tx * 10 >= frames * 9,
                "{kernel_tx} of {frames} by the kernel"
            );
        } else {
            assert_eq!(kernel_tx, 0);
        }
        let b = lab.status(Side::B).stripe.unwrap();
        let ofo = tcp_ofo(&lab, Side::B) - ofo_before;
        println!(
            "stripe over {links} (fastpath={fastpath}): bytes/frames per member {used:?}, \
             receiver: {:?}, TCP out-of-order queue +{ofo}",
            b.tcp
        );
        let t = &b.tcp;
        // With the kernel path the members' program delivers what arrives in order itself
        // and lagd sees what follows a hole.
        let all = t.segments + t.kernel_segments;
        assert!(all >= frames / 2, "{links} members: {t:?}");
        if fastpath == "on" {
            assert!(
                t.kernel_segments * 2 >= all,
                "{links} members: most segments should be in order and delivered by the \
                 kernel: {t:?}"
            );
        } else {
            assert_eq!(t.kernel_segments, 0);
        }
        // Out of order at the host: only what the resequencer gave up on too early, before
        // its timeout adapted to this machine's scheduling noise.
        assert!(t.late * 100 <= all, "{links} members: {t:?}");
        assert!(
            ofo * 50 <= all,
            "{links} members: TCPOFOQueue +{ofo}, {t:?}"
        );
        // A member fails mid-transfer: the stream carries on over the others, intact.
        let (sent, received, gap) = lab.tcp_transfer(Side::A, 64 << 20, None, || {
            thread::sleep(Duration::from_millis(150));
            lab.topo.set_link_down(Side::A, 1).unwrap();
        });
        assert_eq!(
            sent, received,
            "{links} members: intact across a member failure"
        );
        let b = lab.status(Side::B).stripe.unwrap();
        println!(
            "stripe over {links}, member 1 failed: longest receive gap {} ms, receiver: {:?}",
            gap.as_millis(),
            b.tcp
        );
        assert!(
            b.tcp.late * 100 <= b.tcp.segments + b.tcp.kernel_segments,
            "{links} members: {b:?}"
        );
        assert!(lab.status(Side::A).stripe.unwrap().striping);
    }
}

/// A TCP segment of 100 bytes from `src` to `dst` (Ethernet and IPv4 addresses), port `sport`
/// to 9, sequence number `seq`, with `flags` (0x10 ACK, 0x02 SYN; a SYN carries no payload).
fn tcp_frame(
    src: ([u8; 6], Ipv4Addr),
    dst: ([u8; 6], Ipv4Addr),
    sport: u16,
    seq: u32,
    flags: u8,
) -> Vec<u8> {
    let payload = if flags & 0x02 != 0 { 0 } else { 100 };
    let mut f = Vec::with_capacity(54 + payload);
    f.extend_from_slice(&dst.0);
    f.extend_from_slice(&src.0);
    f.extend_from_slice(&[0x08, 0x00]);
    let mut ip = vec![0x45, 0];
    ip.extend_from_slice(&((40 + payload) as u16).to_be_bytes());
    ip.extend_from_slice(&[0, 1, 0x40, 0, 64, 6, 0, 0]);
    ip.extend_from_slice(&src.1.octets());
    ip.extend_from_slice(&dst.1.octets());
    let sum = lagd_proto::wire::ip::checksum::of(&ip);
    ip[10..12].copy_from_slice(&sum.to_be_bytes());
    f.extend_from_slice(&ip);
    f.extend_from_slice(&sport.to_be_bytes());
    f.extend_from_slice(&9u16.to_be_bytes());
    f.extend_from_slice(&seq.to_be_bytes());
    f.extend_from_slice(&[0, 0, 0, 0, 0x50, flags, 0xff, 0xff, 0, 0, 0, 0]);
    f.resize(54 + payload, 0x5a);
    f
}

/// Stripe's receive in the kernel, end to end: host A's members carry a SYN (lagd's: it hands
/// the flow to the members' program), the first segment (the program delivers it), then the
/// third before the second, on the other member. The program sees the third again and again
/// (it redirects it to its member's own ingress: the rounds are counted) until the hold runs
/// out, then lagd, which takes the flow, gets it; the second follows. The host behind host B's
/// bond receives the three in order.
#[test]
fn stripe_kernel_holds_a_segment_that_overtook_another_and_the_host_sees_order() {
    let lab = Lab::new(2, "mode=stripe miimon=100 fastpath=on");
    wait_striping(&lab);
    let (sa, sb) = (lab.status(Side::A), lab.status(Side::B));
    assert_eq!(sb.dataplane.path, "kernel");
    let mac = |s: &Status| s.mac.parse::<EthernetAddress>().expect("the bond's MAC").0;
    let a = (mac(&sa), lab.addrs[0]);
    let b = (mac(&sb), lab.addrs[1]);
    let capture = lab
        .topo
        .in_ns(Side::B, || {
            PacketSocket::bind_name(
                &sb.bond,
                PacketOptions {
                    ignore_outgoing: true,
                    ..PacketOptions::default()
                },
            )
        })
        .unwrap()
        .expect("packet socket on host B's bond");
    let members: Vec<PacketSocket> = lab
        .topo
        .links()
        .iter()
        .map(|l| {
            lab.topo
                .in_ns(Side::A, || {
                    PacketSocket::bind_name(
                        &l.name,
                        PacketOptions {
                            protocol: 0,
                            ..PacketOptions::default()
                        },
                    )
                })
                .unwrap()
                .expect("packet socket on a member of host A")
        })
        .collect();
    let tcp = |s: &Status| s.stripe.as_ref().unwrap().tcp.clone();
    // The hold lasts STRIPE_HOLD_NS (100 us) from the first segment's delivery: a thread preempted between two
    // sends misses it (the third then goes to lagd at once), so a few flows are tried. Every
    // one must reach the host in order.
    let mut rounds = Vec::new();
    for sport in 40000..40005u16 {
        let before = tcp(&lab.status(Side::B));
        let seq = 0x1000_0000 + (u32::from(sport) << 12);
        members[0].send(&tcp_frame(a, b, sport, seq, 0x02)).unwrap();
        let t = Instant::now();
        while tcp(&lab.status(Side::B)).handed_back <= before.handed_back {
            assert!(
                t.elapsed() < Duration::from_secs(5),
                "host B's lagd did not hand the flow to the members' program after its SYN: \
                 {:?}",
                tcp(&lab.status(Side::B))
            );
            thread::sleep(Duration::from_millis(10));
        }
        let first = seq.wrapping_add(1);
        members[0]
            .send(&tcp_frame(a, b, sport, first, 0x10))
            .unwrap();
        members[1]
            .send(&tcp_frame(a, b, sport, first.wrapping_add(200), 0x10))
            .unwrap();
        members[0]
            .send(&tcp_frame(a, b, sport, first.wrapping_add(100), 0x10))
            .unwrap();
        // What of this flow reached host B's stack, in the order it got there.
        let mut seen = Vec::new();
        let mut buf = vec![0u8; 2048];
        let t = Instant::now();
        while seen.len() < 4 && t.elapsed() < Duration::from_secs(3) {
            match capture.recv(&mut buf) {
                Ok(n) if n >= 54 && buf[12..14] == [0x08, 0x00] && buf[23] == 6 => {
                    if buf[34..36] == sport.to_be_bytes() {
                        seen.push(u32::from_be_bytes(buf[38..42].try_into().unwrap()));
                    }
                }
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    thread::sleep(Duration::from_millis(1));
                }
                Err(e) => panic!("capture on host B's bond: {e}"),
            }
        }
        let after = tcp(&lab.status(Side::B));
        println!("port {sport}: host B saw {seen:x?}; before {before:?}, after {after:?}");
        assert_eq!(
            seen,
            [seq, first, first.wrapping_add(100), first.wrapping_add(200)],
            "port {sport}: the SYN and the three segments in order"
        );
        assert!(
            after.kernel_segments > before.kernel_segments,
            "port {sport}: the program delivered the first: {after:?}"
        );
        rounds.push(after.kernel_held - before.kernel_held);
        if after.kernel_held > before.kernel_held {
            break;
        }
    }
    assert!(
        rounds.last().is_some_and(|&r| r > 0),
        "the third segment went round its member's queue (rounds per try: {rounds:?})"
    );
}

/// A peer that does not run stripe mode: lagd says so and still carries traffic, unstriped.
#[test]
fn stripe_without_a_stripe_peer_names_the_problem_and_still_works() {
    let mut lab = Lab::new(2, "mode=stripe miimon=100");
    // Host B's lagd is replaced by one in balance-rr.
    let ctl_b = lab.controls[1].clone();
    let members = lab.topo.member_list();
    let bond_b = format!("{}bb", lab.topo.tag());
    let pid = Command::new("ip")
        .args(["netns", "pids", lab.topo.ns(Side::B)])
        .output()
        .unwrap();
    for p in String::from_utf8_lossy(&pid.stdout).split_whitespace() {
        let _ = Command::new("kill").arg(p).status();
    }
    thread::sleep(Duration::from_millis(300));
    let ctl_s = ctl_b.to_string_lossy().into_owned();
    let _ = std::fs::remove_file(&ctl_b);
    lab.topo
        .spawn(
            Side::B,
            "lagd-b-rr",
            Path::new(LAGD),
            &[
                "--bond",
                &bond_b,
                "--members",
                &members,
                "--opts",
                "mode=balance-rr miimon=100",
                "--control",
                &ctl_s,
            ],
        )
        .unwrap();
    let t = Instant::now();
    while query_status(&ctl_b).is_err() {
        assert!(t.elapsed() < Duration::from_secs(10));
        thread::sleep(Duration::from_millis(50));
    }
    lab.topo
        .ip(Side::B, &["link", "set", &bond_b, "up"])
        .unwrap();
    thread::sleep(Duration::from_millis(1000));
    let s = lab.status(Side::A).stripe.unwrap();
    assert!(!s.striping);
    let err = s.error.unwrap_or_default();
    assert!(err.contains("no stripe peer"), "{err}");
    assert!(lab.ping(Side::A, 3), "traffic still flows, unstriped");
}

/// Rebalancing: two UDP elephants whose hashes start on the same member (different buckets)
/// and never pause; with `distribution=buckets` the rebalancer moves one of them (forced after
/// two stuck passes) and the members end up even. `lagctl show` tells why.
#[test]
fn rebalancing_evens_out_two_elephants_on_one_member() {
    let lab = Lab::new(
        2,
        "mode=balance-xor xmit_hash_policy=layer3+4 miimon=100 distribution=buckets \
         rebalance_interval=1000 rebalance_force_after=2",
    );
    assert!(lab.ping(Side::A, 2));
    let (a, b) = (lab.addrs[0], lab.addrs[1]);
    let s = lab.status(Side::A);
    let bucket_member = |s: &Status, k: u32| {
        s.buckets
            .as_ref()
            .unwrap()
            .buckets
            .iter()
            .find(|x| u32::from(x.bucket) == k)
            .unwrap()
            .member
            .clone()
    };
    // Two source ports whose buckets (hash & 0xff) differ but start on the same member.
    let mut ports = Vec::new();
    let mut buckets = Vec::new();
    let mut member = None;
    for p in 42_000u16..42_400 {
        let k = xmit_hash(HashPolicy::Layer34, &udp_frame(a, b, p, 9)) & 0xff;
        let m = bucket_member(&s, k);
        if member.get_or_insert_with(|| m.clone()) == &m && !buckets.contains(&k) {
            ports.push(p);
            buckets.push(k);
            if ports.len() == 2 {
                break;
            }
        }
    }
    assert_eq!(ports.len(), 2);
    let sockets: Vec<UdpSocket> = lab
        .topo
        .in_ns(Side::A, || {
            ports
                .iter()
                .map(|&p| UdpSocket::bind(SocketAddrV4::new(a, p)).expect("bind"))
                .collect()
        })
        .unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let senders: Vec<_> = sockets
        .into_iter()
        .map(|s| {
            let stop = stop.clone();
            thread::spawn(move || {
                let payload = [0u8; 1400];
                // About 90 Mbit/s each, a burst of 8 datagrams every millisecond.
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    for _ in 0..8 {
                        let _ = s.send_to(&payload, SocketAddrV4::new(b, 9));
                    }
                    thread::sleep(Duration::from_millis(1));
                }
            })
        })
        .collect();
    let tx = |lab: &Lab| -> Vec<u64> {
        lab.status(Side::A)
            .members
            .iter()
            .map(|m| m.tx_bytes)
            .collect()
    };
    thread::sleep(Duration::from_millis(500));
    let t0 = tx(&lab);
    thread::sleep(Duration::from_millis(1000));
    let t1 = tx(&lab);
    thread::sleep(Duration::from_millis(4500));
    let t2 = tx(&lab);
    thread::sleep(Duration::from_millis(2000));
    let t3 = tx(&lab);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for s in senders {
        s.join().unwrap();
    }
    let delta =
        |x: &[u64], y: &[u64]| -> Vec<u64> { y.iter().zip(x).map(|(b, a)| b - a).collect() };
    let before = delta(&t0, &t1);
    let after = delta(&t2, &t3);
    let imbalance =
        |d: &[u64]| *d.iter().max().unwrap() as f64 * 2.0 / d.iter().sum::<u64>() as f64;
    let s = lab.status(Side::A);
    let bk = s.buckets.as_ref().unwrap();
    println!(
        "bytes per member before {before:?} (busiest/mean {:.2}), after {after:?} ({:.2}); \
         moves: {:?}",
        imbalance(&before),
        imbalance(&after),
        bk.recent_moves
    );
    assert!(
        imbalance(&before) > 1.8,
        "both elephants start on one member: {before:?}"
    );
    assert!(imbalance(&after) < 1.25, "rebalanced: {after:?}");
    // Without a pause in the elephants' traffic the move has to be forced; a machine busy
    // enough to pause a sender for the idle gap lets the ordinary rule move it first.
    assert!(bk.moves_forced + bk.moved_elephant >= 1, "{bk:?}");
    let moved: Vec<String> = buckets.iter().map(|&k| bucket_member(&s, k)).collect();
    assert_ne!(moved[0], moved[1], "one elephant per member: {moved:?}");
    assert!(
        s.render().contains("Recent Bucket Moves:"),
        "lagctl show lists the moves"
    );
}

/// Per member: (frames the kernel sent, frames the kernel delivered, frames lagd read).
fn kernel_and_lagd(s: &Status) -> Vec<(u64, u64, u64)> {
    s.members
        .iter()
        .map(|m| {
            (
                m.kernel_tx_packets,
                m.kernel_rx_packets,
                m.rx_packets - m.kernel_rx_packets,
            )
        })
        .collect()
}

/// What each member's counters grew by from `before` to `after`.
fn grown(after: &[(u64, u64, u64)], before: &[(u64, u64, u64)]) -> Vec<(u64, u64, u64)> {
    after
        .iter()
        .zip(before)
        .map(|(a, b)| (a.0 - b.0, a.1 - b.1, a.2 - b.2))
        .collect()
}

/// Stripe on the kernel path carries what is not TCP too, one member per flow: pings both ways
/// and eight UDP flows (one after the other) leave host A by the TAP's program, each flow
/// wholly on the member lagd-proto's `flow_member` names, and reach host B's host through the
/// members' program, in the order sent (sequence numbers in the datagrams), while lagd's member
/// sockets at B read nothing but stripe's hellos (and the odd ARP).
#[test]
fn stripe_kernel_carries_udp_and_icmp_one_member_per_flow_in_order() {
    use lagd_proto::port::PortId;
    use lagd_proto::stripe::tx::{flow_member, slot_table};
    let lab = Lab::new(2, "mode=stripe miimon=100 fastpath=on");
    wait_striping(&lab);
    for side in [Side::A, Side::B] {
        assert_eq!(lab.status(side).dataplane.path, "kernel");
    }
    // At most what stripe's hellos (every 100 ms per member) and ARP make lagd read in `t`.
    let lagd_bound = |t: Duration| 2 * (t.as_millis() as u64 / 100 + 3) + 4;
    // Pings both ways: the kernel sends and delivers them.
    for (from, to) in [(Side::A, Side::B), (Side::B, Side::A)] {
        let (f0, t0) = (
            kernel_and_lagd(&lab.status(from)),
            kernel_and_lagd(&lab.status(to)),
        );
        let start = Instant::now();
        assert!(lab.ping(from, 20), "ping from {from:?}");
        let (f1, t1) = (
            kernel_and_lagd(&lab.status(from)),
            kernel_and_lagd(&lab.status(to)),
        );
        let (sent, got) = (grown(&f1, &f0), grown(&t1, &t0));
        let bound = lagd_bound(start.elapsed());
        println!("ping from {from:?}: sender {sent:?}, receiver {got:?} (kernel tx, rx, lagd rx)");
        // Requests one way, replies the other: 20 each way through the programs, requests on
        // one member (one flow).
        assert!(
            sent.iter().any(|m| m.0 >= 20),
            "{from:?}'s program sent the requests on one member: {sent:?}"
        );
        assert!(got.iter().map(|m| m.1).sum::<u64>() >= 20, "{got:?}");
        assert!(
            sent.iter().map(|m| m.1).sum::<u64>() >= 20,
            "replies: {sent:?}"
        );
        let lagd: u64 = got.iter().map(|m| m.2).sum();
        assert!(
            lagd <= bound,
            "{to:?}'s lagd read {lagd} frames (hellos: {bound})"
        );
    }
    // Eight UDP flows of 300 numbered datagrams each, one flow at a time.
    let (a, b) = (lab.addrs[0], lab.addrs[1]);
    let receiver = lab
        .topo
        .in_ns(Side::B, || {
            UdpSocket::bind(SocketAddrV4::new(b, 5600)).expect("bind")
        })
        .unwrap();
    receiver
        .set_read_timeout(Some(Duration::from_secs(3)))
        .unwrap();
    let (tx, rx) = mpsc::channel::<(u16, u32)>();
    let reader = thread::spawn(move || {
        let mut buf = [0u8; 2048];
        while let Ok((n, from)) = receiver.recv_from(&mut buf) {
            if n >= 4 {
                let seq = u32::from_be_bytes(buf[..4].try_into().unwrap());
                if tx.send((from.port(), seq)).is_err() {
                    break;
                }
            }
        }
    });
    let mut arrived = Arrivals {
        rx,
        last: Default::default(),
        received: 0,
    };
    let slots = slot_table(&[(PortId(0), 1), (PortId(1), 1)]);
    let per_flow = 300u32;
    let mut used = [0usize; 2];
    for sport in 41_000..41_008u16 {
        let socket = lab
            .topo
            .in_ns(Side::A, || {
                UdpSocket::bind(SocketAddrV4::new(a, sport)).expect("bind")
            })
            .unwrap();
        let want = flow_member(&slots, &udp_frame(a, b, sport, 5600)).expect("a member");
        used[usize::from(want.0)] += 1;
        let (a0, b0) = (
            kernel_and_lagd(&lab.status(Side::A)),
            kernel_and_lagd(&lab.status(Side::B)),
        );
        let start = Instant::now();
        let mut payload = [0x5au8; 200];
        for seq in 0..per_flow {
            payload[..4].copy_from_slice(&seq.to_be_bytes());
            socket
                .send_to(&payload, SocketAddrV4::new(b, 5600))
                .unwrap();
            if seq % 50 == 49 {
                // Room for the receiver: its socket buffer, not the bond, would drop when the
                // reader is not scheduled (a loaded machine); wait until it has read this batch.
                arrived.read_until(sport, seq, Duration::from_secs(2));
            }
        }
        arrived.read_until(sport, per_flow - 1, Duration::from_secs(2));
        let (a1, b1) = (
            kernel_and_lagd(&lab.status(Side::A)),
            kernel_and_lagd(&lab.status(Side::B)),
        );
        let (sent, got) = (grown(&a1, &a0), grown(&b1, &b0));
        let w = usize::from(want.0);
        println!("UDP flow {sport}: lagd-proto {want:?}, sender {sent:?}, receiver {got:?}");
        assert!(
            sent[w].0 >= u64::from(per_flow) && sent[1 - w].0 <= 3,
            "flow {sport}: every datagram on member {w} by the kernel: {sent:?}"
        );
        assert!(
            got.iter().map(|m| m.1).sum::<u64>() >= u64::from(per_flow),
            "flow {sport}: the kernel delivered them: {got:?}"
        );
        let lagd: u64 = got.iter().map(|m| m.2).sum();
        let bound = lagd_bound(start.elapsed());
        assert!(
            lagd <= bound,
            "flow {sport}: lagd read {lagd} frames (hellos: {bound})"
        );
    }
    assert!(
        used.iter().all(|&n| n > 0),
        "the flows were spread over both members: {used:?}"
    );
    let received = arrived.received;
    drop(arrived);
    let reader_done = reader.join();
    assert!(reader_done.is_ok(), "reader thread");
    println!("{received} datagrams received of {}", 8 * per_flow);
    assert!(
        received * 100 >= 8 * per_flow * 99,
        "{received} of {} datagrams",
        8 * per_flow
    );
}

/// Numbered datagrams as a reader thread hands them over (source port, number): checks each
/// flow's order as they are read and counts them.
struct Arrivals {
    rx: mpsc::Receiver<(u16, u32)>,
    last: std::collections::HashMap<u16, u32>,
    received: u32,
}

impl Arrivals {
    /// Reads until datagram `seq` of flow `port` (or a later one) has arrived or `wait` has
    /// passed (a lost datagram is counted at the end, not here).
    fn read_until(&mut self, port: u16, seq: u32, wait: Duration) {
        let deadline = Instant::now() + wait;
        while self.last.get(&port).is_none_or(|&l| l < seq) {
            let left = deadline.saturating_duration_since(Instant::now());
            let Ok((p, n)) = self.rx.recv_timeout(left) else {
                return;
            };
            if let Some(&prev) = self.last.get(&p) {
                assert!(n > prev, "flow {p}: datagram {n} after {prev}: reordered");
            }
            self.last.insert(p, n);
            self.received += 1;
        }
    }
}

/// Sends `count` numbered datagrams from `from` (port `sport`) to port 5700 of the other host
/// and returns how many arrived, asserting that they arrived in the order sent.
fn udp_in_order(lab: &Lab, from: Side, sport: u16, count: u32) -> u32 {
    let (to, i) = match from {
        Side::A => (Side::B, 0),
        Side::B => (Side::A, 1),
    };
    let (src, dst) = (lab.addrs[i], lab.addrs[1 - i]);
    let receiver = lab
        .topo
        .in_ns(to, || {
            UdpSocket::bind(SocketAddrV4::new(dst, 5700)).expect("bind")
        })
        .unwrap();
    receiver
        .set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let sender = lab
        .topo
        .in_ns(from, || {
            UdpSocket::bind(SocketAddrV4::new(src, sport)).expect("bind")
        })
        .unwrap();
    let reader = thread::spawn(move || {
        let mut buf = [0u8; 2048];
        let mut got = Vec::new();
        while let Ok(n) = receiver.recv(&mut buf) {
            if n >= 4 {
                got.push(u32::from_be_bytes(buf[..4].try_into().unwrap()));
            }
        }
        got
    });
    let mut payload = [0xa5u8; 300];
    for seq in 0..count {
        payload[..4].copy_from_slice(&seq.to_be_bytes());
        sender
            .send_to(&payload, SocketAddrV4::new(dst, 5700))
            .unwrap();
        if seq % 50 == 49 {
            thread::sleep(Duration::from_millis(2));
        }
    }
    let got = reader.join().expect("reader thread");
    for w in got.windows(2) {
        assert!(
            w[1] > w[0],
            "from {from:?}: datagram {} after {}: reordered",
            w[1],
            w[0]
        );
    }
    got.len() as u32
}

/// A stripe end on the kernel path and one on lagd's path understand each other's frames that
/// are not TCP: the kernel end sends them unnumbered, one member per flow, the lagd end
/// numbered and striped; pings and numbered UDP cross both ways, in order.
#[test]
fn stripe_kernel_end_and_lagd_end_carry_udp_and_icmp_both_ways() {
    assert!(is_root(), "network namespace tests need root");
    let topo = Topology::create(2).expect("create topology");
    let lab = Lab::start(
        topo,
        [
            "mode=stripe miimon=100 fastpath=on",
            "mode=stripe miimon=100 fastpath=off",
        ],
        |_| {},
    );
    wait_striping(&lab);
    assert_eq!(lab.status(Side::A).dataplane.path, "kernel");
    assert_eq!(lab.status(Side::B).dataplane.path, "lagd");
    assert!(lab.ping(Side::A, 10), "ping from the kernel end");
    assert!(lab.ping(Side::B, 10), "ping from lagd's end");
    for (from, sport) in [(Side::A, 42_000), (Side::B, 42_001)] {
        let got = udp_in_order(&lab, from, sport, 1000);
        println!("from {from:?}: {got} of 1000 datagrams, in order");
        assert!(got >= 990, "from {from:?}: {got} of 1000 datagrams");
    }
    let b = lab.status(Side::B).stripe.unwrap();
    let a = lab.status(Side::A).stripe.unwrap();
    println!("kernel end's reorder buffer: {a:?}\nlagd end's: {b:?}");
    // The lagd end numbered what it sent: the kernel end's lagd put it in order.
    assert!(
        a.delivered >= 990,
        "kernel end's numbered deliveries: {a:?}"
    );
    // The kernel end numbered only lagd's own frames (ARP, neighbour discovery, MLD): the
    // 1010 datagrams and pings it sent crossed unnumbered.
    assert!(b.delivered < 100, "lagd end's numbered deliveries: {b:?}");
}

/// Pins each host's neighbour entry for the other bond (`nud permanent`), after a ping taught
/// host A's lagd the bond's address: from then on the only ARP frames on the links are host A's
/// probes and host B's replies to them.
fn pin_neighbours(lab: &Lab) {
    assert!(lab.ping(Side::A, 3), "{}", lab.describe());
    let bond = |side: Side| format!("{}b{}", lab.topo.tag(), side.letter());
    for (side, other) in [(Side::A, Side::B), (Side::B, Side::A)] {
        let shown = lab
            .topo
            .ip(other, &["-o", "link", "show", "dev", &bond(other)])
            .unwrap();
        let mac = shown
            .split_whitespace()
            .skip_while(|w| *w != "link/ether")
            .nth(1)
            .unwrap_or_else(|| panic!("no MAC in {shown}"))
            .to_owned();
        let addr = lab.addrs[side_index(other)].to_string();
        lab.topo
            .ip(
                side,
                &[
                    "neigh",
                    "replace",
                    &addr,
                    "lladdr",
                    &mac,
                    "dev",
                    &bond(side),
                    "nud",
                    "permanent",
                ],
            )
            .unwrap();
    }
}

/// Host A's members' MII status, read 8 times 100 ms apart after `settle`; panics unless every
/// reading is `want` (`None`: not checked).
fn members_stay(lab: &Lab, settle: Duration, want: [Option<&str>; 2], what: &str) {
    thread::sleep(settle);
    for _ in 0..8 {
        let s = lab.status(Side::A);
        for (m, want) in s.members.iter().zip(want) {
            if let Some(want) = want {
                assert_eq!(
                    m.mii_status,
                    want,
                    "{what}: member {} {:?}\n{}",
                    m.name,
                    s.members,
                    lab.describe()
                );
            }
        }
        thread::sleep(Duration::from_millis(100));
    }
}

/// Host B sends UDP datagrams (no ARP: the neighbours are pinned) to host A every 10 ms for
/// `d`, while `during` runs.
fn udp_only_from_b<T: Send>(lab: &Lab, d: Duration, during: impl FnOnce() -> T + Send) -> T {
    let to = SocketAddrV4::new(lab.addrs[0], 9);
    thread::scope(|scope| {
        let sender = scope.spawn(|| {
            lab.topo
                .in_ns(Side::B, || {
                    let sock = UdpSocket::bind("0.0.0.0:0").expect("udp socket");
                    let t = Instant::now();
                    while t.elapsed() < d {
                        let _ = sock.send_to(b"not arp", to);
                        thread::sleep(Duration::from_millis(10));
                    }
                })
                .expect("host B's namespace")
        });
        let out = during();
        sender.join().expect("UDP sender");
        out
    })
}

/// `arp_validate` in active-backup, every value, on the kernel path and (for some) on lagd's:
/// host A probes host B's bond, which runs in broadcast mode, so A's backup hears every frame B
/// sends, B's replies to the active member's probes included.
///
/// First with B answering: the active member stays up whatever the value; the backup, which
/// hears the replies but never the bond's own probes, goes down exactly where it validates
/// (`backup`, `all`, `filter_backup`), as with the kernel bond: replies meant for the active
/// member prove nothing about the backup's path. Then with a target nobody owns, while B sends
/// A only UDP: any frame keeps a member up where nothing validates it and `filter` is off
/// (`none`: both; `backup`: the active one); with `filter*` or validation, non-ARP traffic
/// keeps no member up.
#[test]
fn arp_validate_every_value_in_active_backup() {
    let mut cases: Vec<(&str, &str, &str)> = ArpValidate::ALL
        .iter()
        .map(|v| (v.name(), "fastpath=on", "kernel"))
        .collect();
    for v in ["none", "backup", "filter", "filter_active"] {
        cases.push((v, "fastpath=off", "lagd"));
    }
    for (v, fastpath, path) in cases {
        let what = format!("active-backup arp_validate={v} {fastpath}");
        let a = format!(
            "mode=active-backup arp_interval=100 arp_missed_max=5 arp_ip_target={{B}} \
             arp_validate={v} {fastpath}"
        );
        let topo = Topology::create(2).expect("create topology");
        let lab = Lab::start(topo, [&a, "mode=broadcast miimon=100"], |_| {});
        assert_eq!(lab.status(Side::A).dataplane.path, path, "{what}");
        pin_neighbours(&lab);
        let backup_validates = matches!(v, "backup" | "all" | "filter_backup");
        let backup = if backup_validates { "down" } else { "up" };
        members_stay(
            &lab,
            Duration::from_millis(2000),
            [Some("up"), Some(backup)],
            &format!("{what}, B answering"),
        );
        assert_eq!(
            lab.status(Side::A).active.as_deref(),
            Some(lab.topo.links()[0].name.as_str()),
            "{what}"
        );
        let failures = lab.status(Side::A).members[0].link_failure_count;
        let bond = format!("{}bA", lab.topo.tag());
        let nobody = format!("arp_ip_target={}", lab.topo.address(99));
        lagctl_ok(&lab.controls[0], &["set", &bond, &nobody]);
        udp_only_from_b(&lab, Duration::from_millis(4000), || {
            let want = match v {
                "none" => [Some("up"), Some("up")],
                "backup" => [Some("up"), Some("down")],
                // The active member validates and goes; the other, now a backup that does
                // not validate, comes back on any frame and becomes active: it may flap.
                "active" => [None, None],
                _ => [Some("down"), Some("down")],
            };
            members_stay(
                &lab,
                Duration::from_millis(2000),
                want,
                &format!("{what}, only UDP"),
            );
        });
        let taken_out = lab.status(Side::A).members[0].link_failure_count > failures;
        assert_eq!(
            taken_out,
            !matches!(v, "none" | "backup"),
            "{what}: member 0 taken out by non-ARP traffic only"
        );
        println!("{what}: as the kernel bond");
    }
}

/// Waits up to `within` for host A's member `member` to read `want`.
fn wait_member_status(lab: &Lab, member: usize, want: &str, within: Duration, what: &str) {
    let t = Instant::now();
    while lab.status(Side::A).members[member].mii_status != want {
        assert!(
            t.elapsed() < within,
            "{what}: member {member} not {want} after {within:?}\n{}",
            lab.describe()
        );
        thread::sleep(Duration::from_millis(20));
    }
}

/// `arp_validate` in balance-xor, every value, on the kernel path and (for some) on lagd's:
/// every member probes host B's bond, which runs in broadcast mode, so each of A's members
/// hears B's replies to every probe. The members in use are all active: every value keeps
/// them up. A member that a silence takes out becomes a backup, as in the kernel bond: where
/// backups validate (`backup`, `all`, `filter_backup`) B's replies do not bring it back (they
/// answer probes sent on the other member), only the bond's own probes heard through the
/// switch do (host B's end of link 1 sends member 1 the bond's probe, as a switch floods it
/// from member 0). Where backups do not validate, the replies bring it back at once.
#[test]
fn arp_validate_every_value_in_balance_xor() {
    let mut cases: Vec<(&str, &str, &str)> = ArpValidate::ALL
        .iter()
        .map(|v| (v.name(), "fastpath=on", "kernel"))
        .collect();
    for v in ["none", "all", "filter_backup"] {
        cases.push((v, "fastpath=off", "lagd"));
    }
    for (v, fastpath, path) in cases {
        let what = format!("balance-xor arp_validate={v} {fastpath}");
        let a = format!(
            "mode=balance-xor xmit_hash_policy=layer3+4 arp_interval=100 arp_missed_max=5 \
             arp_ip_target={{B}} arp_validate={v} {fastpath}"
        );
        let topo = Topology::create(2).expect("create topology");
        let lab = Lab::start(topo, [&a, "mode=broadcast miimon=100"], |_| {});
        assert_eq!(lab.status(Side::A).dataplane.path, path, "{what}");
        pin_neighbours(&lab);
        members_stay(
            &lab,
            Duration::from_millis(1000),
            [Some("up"), Some("up")],
            &format!("{what}, B answering"),
        );
        let links: Vec<String> = lab.topo.links().iter().map(|l| l.name.clone()).collect();
        lab.topo.drop_link_traffic(&links[1], true).unwrap();
        wait_member_status(&lab, 1, "down", Duration::from_secs(10), &what);
        lab.topo.drop_link_traffic(&links[1], false).unwrap();
        if matches!(v, "backup" | "all" | "filter_backup") {
            members_stay(
                &lab,
                Duration::from_millis(1000),
                [Some("up"), Some("down")],
                &format!("{what}, B's replies only"),
            );
            // Where host A's members hang from one switch, it floods the bond's probe from
            // member 0 to member 1: host B's end of link 1 sends member 1 that frame.
            let probe = own_probe_of(&lab);
            let stop = std::sync::atomic::AtomicBool::new(false);
            thread::scope(|scope| {
                scope.spawn(|| flood_to_link1(&lab, &links[1], &probe, &stop));
                // Stops the sender also when the wait fails.
                let _stop = StopOnDrop(&stop);
                wait_member_status(&lab, 1, "up", Duration::from_secs(5), &what);
            });
        } else {
            wait_member_status(&lab, 1, "up", Duration::from_secs(5), &what);
        }
        println!("{what}: as the kernel bond");
    }
}

/// Host A's ARP probe of host B's bond, as host A's lagd sends it: broadcast from A's bond MAC,
/// sender A's bond address, target B's.
fn own_probe_of(lab: &Lab) -> Vec<u8> {
    let mac = lab
        .status(Side::A)
        .mac
        .parse::<EthernetAddress>()
        .expect("the bond's MAC")
        .0;
    let mut f = vec![0xff; 6];
    f.extend_from_slice(&mac);
    f.extend_from_slice(&[0x08, 0x06, 0, 1, 8, 0, 6, 4, 0, 1]);
    f.extend_from_slice(&mac);
    f.extend_from_slice(&lab.addrs[0].octets());
    f.extend_from_slice(&[0; 6]);
    f.extend_from_slice(&lab.addrs[1].octets());
    f
}

/// Sends `frame` from host B's end of `link` every 100 ms until `stop`.
fn flood_to_link1(lab: &Lab, link: &str, frame: &[u8], stop: &std::sync::atomic::AtomicBool) {
    lab.topo
        .in_ns(Side::B, || {
            let sock = PacketSocket::bind_name(link, PacketOptions::default())
                .expect("packet socket on host B's end of link 1");
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                sock.send(frame).expect("send the flooded probe");
                thread::sleep(Duration::from_millis(100));
            }
        })
        .expect("host B's namespace");
}

/// Sets its flag when dropped (also while a failed assertion unwinds).
struct StopOnDrop<'a>(&'a std::sync::atomic::AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}
