//! The dataplane for real: two hosts (network namespaces) joined by veth links, `lagd` at both
//! ends, real ICMP and TCP through the bond. Needs root; fails (never skips) without it.
//!
//! Every test builds its own topology with a unique prefix; `Topology` removes the namespaces,
//! links and processes when dropped, also when a test fails.

use std::io::Read;
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use lagd::daemon::query_status;
use lagd::lab::topology::{Side, Topology, check_lacpdus_with_tshark, is_root};
use lagd::lab::traffic::checked_transfer;
use lagd::status::Status;
use lagd_proto::hash::{HashPolicy, member_index, xmit_hash};

mod common;

use common::udp_frame;

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
        let mut topo = Topology::create(links).expect("create topology");
        // `{A}` and `{B}` in the options stand for the hosts' bond addresses.
        let opts = opts
            .replace("{A}", &topo.address(1).to_string())
            .replace("{B}", &topo.address(2).to_string());
        let opts = opts.as_str();
        let members: Vec<String> = topo.links().iter().map(|l| l.name.clone()).collect();
        let members = members.join(",");
        let mut bonds = [String::new(), String::new()];
        let mut controls = [PathBuf::new(), PathBuf::new()];
        let mut between = Some(between);
        for side in [Side::B, Side::A] {
            let i = side_index(side);
            let bond = format!("{}b{}", topo.tag(), side.letter());
            let control = topo.dir().join(format!("{bond}.sock"));
            let control_s = control.to_string_lossy().into_owned();
            topo.spawn(
                side,
                &format!("lagd-{}", side.letter()),
                Path::new(LAGD),
                &[
                    "--bond",
                    &bond,
                    "--members",
                    &members,
                    "--opts",
                    opts,
                    "--control",
                    &control_s,
                    "--log-level",
                    "debug",
                ],
            )
            .expect("start lagd");
            let deadline = Instant::now() + Duration::from_secs(10);
            while query_status(&control).is_err() {
                assert!(
                    Instant::now() < deadline,
                    "lagd did not come up on {}",
                    control.display()
                );
                thread::sleep(Duration::from_millis(50));
            }
            if side == Side::B {
                (between.take().unwrap())(&topo);
            }
            bonds[i] = bond;
            controls[i] = control;
        }
        let addrs = [topo.address(1), topo.address(2)];
        for (i, side) in [Side::A, Side::B].into_iter().enumerate() {
            let cidr = format!("{}/24", addrs[i]);
            topo.ip(side, &["addr", "add", &cidr, "dev", &bonds[i]])
                .unwrap();
            topo.ip(side, &["link", "set", &bonds[i], "up"]).unwrap();
        }
        Self {
            topo,
            controls,
            addrs,
        }
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
/// `pfifo limit 0` on both ends of the link), and brings it back when traffic flows again.
#[test]
fn arp_monitor_takes_out_a_member_that_drops_traffic() {
    let opts = "mode=balance-xor xmit_hash_policy=layer3+4 arp_interval=100 arp_missed_max=2";
    // Each end probes the other's bond address (its own is learned from the host's ARP).
    let lab = Lab::new(2, &format!("{opts} arp_ip_target={{B}}"));
    // (Host B's lagd got the same target, its own address: its probes still cross the links,
    // and without arp_validate any frame heard counts.)
    assert!(lab.ping(Side::A, 3));
    thread::sleep(Duration::from_millis(400));
    let s = lab.status(Side::A);
    assert!(
        s.members.iter().all(|m| m.mii_status == "up"),
        "{:?}",
        s.members
    );
    let link1 = lab.topo.links()[1].name.clone();
    lab.topo.drop_link_traffic(&link1, true).unwrap();
    let t = Instant::now();
    while lab.status(Side::A).members[1].mii_status != "down" {
        assert!(
            t.elapsed() < Duration::from_secs(3),
            "silent member never taken out"
        );
        thread::sleep(Duration::from_millis(20));
    }
    println!(
        "ARP monitor took the silent member out after {} ms",
        t.elapsed().as_millis()
    );
    let carrier = lab
        .topo
        .ip(Side::A, &["-o", "link", "show", &link1])
        .unwrap();
    assert!(carrier.contains("LOWER_UP"), "carrier stayed up: {carrier}");
    let (sent, received, _) = lab.tcp_transfer(Side::A, 4 << 20, None, || {});
    assert_eq!(sent, received, "traffic avoids the silent member");
    lab.topo.drop_link_traffic(&link1, false).unwrap();
    let t = Instant::now();
    while lab.status(Side::A).members[1].mii_status != "up" {
        assert!(
            t.elapsed() < Duration::from_secs(3),
            "member never came back"
        );
        thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(lab.status(Side::A).members[1].link_failure_count, 1);
}

/// lagd against lagd in 802.3ad: both ends aggregate every member, and losing the LACPDUs of
/// one link (tc drops everything on it, carrier stays up) takes just that member out within
/// 3 s at the fast rate; it rejoins once the drop is lifted.
#[test]
fn lacp_between_two_lagds_and_a_silent_link() {
    // Capture host A's LACPDUs from the start, for the dissector check at the end.
    let mut capture = None;
    let mut lab = Lab::with_setup(
        2,
        "mode=802.3ad lacp_rate=fast xmit_hash_policy=layer3+4",
        |t| {
            let file = t.dir().join("a-lacp.pcap");
            let out = Command::new("ip")
                .args(["netns", "exec", t.ns(Side::A), "tcpdump", "-i"])
                .arg(&t.links()[0].name)
                .args(["-U", "-w"])
                .arg(&file)
                .args(["ether", "proto", "0x8809"])
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .expect("tcpdump");
            capture = Some((file, out));
            thread::sleep(Duration::from_millis(300));
        },
    );
    let t = Instant::now();
    lab.wait_carrier(Duration::from_secs(5));
    println!("802.3ad carrier after {} ms", t.elapsed().as_millis());
    for side in [Side::A, Side::B] {
        let s = lab.status(side);
        let l = s.lacp.as_ref().expect("lacp status");
        let agg = l.active_aggregator.as_ref().expect("active aggregator");
        assert_eq!(agg.number_of_ports, 2, "{side:?}");
        for m in &s.members {
            let ml = m.lacp.as_ref().unwrap();
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
    lab.topo.drop_link_traffic(&link1, true).unwrap();
    let t = Instant::now();
    while lab.status(Side::A).members[1]
        .lacp
        .as_ref()
        .unwrap()
        .distributing
    {
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "silent member kept distributing"
        );
        thread::sleep(Duration::from_millis(20));
    }
    let out_after = t.elapsed();
    println!(
        "member without LACPDUs left distribution after {} ms",
        out_after.as_millis()
    );
    assert!(out_after <= Duration::from_millis(3500), "{out_after:?}");
    let s = lab.status(Side::A);
    assert!(
        s.members[0].lacp.as_ref().unwrap().distributing,
        "the other member stays"
    );
    assert_eq!(s.members[1].mii_status, "up", "carrier is still up");
    let (sent, received, _) = lab.tcp_transfer(Side::A, 2 << 20, None, || {});
    assert_eq!(sent, received, "traffic continues on the remaining member");
    lab.topo.drop_link_traffic(&link1, false).unwrap();
    let t = Instant::now();
    while !lab.status(Side::A).members[1]
        .lacp
        .as_ref()
        .unwrap()
        .distributing
    {
        assert!(
            t.elapsed() < Duration::from_secs(40),
            "member never rejoined"
        );
        thread::sleep(Duration::from_millis(50));
    }
    println!(
        "member rejoined {} ms after the drop was lifted",
        t.elapsed().as_millis()
    );
    let (file, mut tcpdump) = capture.take().expect("capture started");
    let _ = tcpdump.kill();
    let _ = tcpdump.wait();
    let mac = lab.status(Side::A).members[0].perm_hw_addr.clone();
    let n = check_lacpdus_with_tshark(&file, &mac).expect("lagd's LACPDUs decode cleanly");
    assert!(n >= 5, "{n} LACPDUs captured");
    lab.topo.remove_at_end(file);
}

/// LACP keeps its timing while the dataplane is saturated (8 TCP streams through the bond):
/// no member ever leaves distribution and LACPDUs keep arriving at the fast rate, because
/// slow-protocol frames have their own socket, served first.
#[test]
fn lacp_keeps_time_under_a_saturated_dataplane() {
    let mut lab = Lab::new(2, "mode=802.3ad lacp_rate=fast xmit_hash_policy=layer3+4");
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

/// Stripe mode over 2 and 4 members: one TCP stream is spread over every member and reaches
/// the other host intact and in order (the reorder buffer delivered nothing late), also when a
/// member fails in the middle of the transfer.
#[test]
fn stripe_delivers_one_stream_in_order_over_2_and_4_members() {
    for links in [2, 4] {
        let lab = Lab::new(links, "mode=stripe miimon=100");
        wait_striping(&lab);
        assert!(lab.ping(Side::A, 2));
        let tx_before = member_tx(&lab.status(Side::A));
        let ofo_before = tcp_ofo(&lab, Side::B);
        let (sent, received, _) = lab.tcp_transfer(Side::A, 64 << 20, None, || {});
        assert_eq!(sent, received, "{links} members: data intact");
        let a = lab.status(Side::A);
        let used: Vec<u64> = member_tx(&a)
            .iter()
            .zip(&tx_before)
            .map(|(x, y)| x - y)
            .collect();
        assert!(
            used.iter().all(|&n| n > 1000),
            "{links} members: the stream uses every member: {used:?}"
        );
        let b = lab.status(Side::B).stripe.unwrap();
        println!(
            "stripe over {links}: frames per member {used:?}, receiver: {b:?}, TCP out-of-order \
             queue +{}",
            tcp_ofo(&lab, Side::B) - ofo_before
        );
        // Frames delivered out of order: only those the receiver gave up on too early, before
        // its timeout adapted to this machine's scheduling noise.
        assert!(b.late * 100 <= b.delivered, "{links} members: {b:?}");
        assert!(b.delivered > 40_000, "{b:?}");
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
            "stripe over {links}, member 1 failed: longest receive gap {} ms, receiver: {b:?}",
            gap.as_millis()
        );
        assert!(b.late * 100 <= b.delivered, "{links} members: {b:?}");
        assert!(lab.status(Side::A).stripe.unwrap().striping);
    }
}

/// A peer that does not run stripe mode: lagd says so and still carries traffic, unstriped.
#[test]
fn stripe_without_a_stripe_peer_names_the_problem_and_still_works() {
    let mut lab = Lab::new(2, "mode=stripe miimon=100");
    // Host B's lagd is replaced by one in balance-rr.
    let ctl_b = lab.controls[1].clone();
    let members: Vec<String> = lab.topo.links().iter().map(|l| l.name.clone()).collect();
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
                &members.join(","),
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
    assert!(bk.moves_forced >= 1, "{bk:?}");
    let moved: Vec<String> = buckets.iter().map(|&k| bucket_member(&s, k)).collect();
    assert_ne!(moved[0], moved[1], "one elephant per member: {moved:?}");
    assert!(
        s.render().contains("Recent Bucket Moves:"),
        "lagctl show lists the moves"
    );
}
