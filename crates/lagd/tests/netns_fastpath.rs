//! The kernel fast path end to end: two hosts (network namespaces) joined by veth links, lagd
//! at both ends with `fastpath=on`, real TCP both ways. Every test proves the frames took the
//! kernel path: the programs' counters carry the traffic while lagd's own sockets carry only
//! the few frames lagd handles itself (ARP, neighbour discovery, LACPDUs).

use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::PathBuf;
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use lagd::daemon::query_status;
use lagd::lab::topology::{Side, Topology, is_root, require_program};
use lagd::lab::traffic::checked_transfer;
use lagd::status::Status;

mod common;

use common::{address_bonds, start_lagd};

const LAGD: &str = env!("CARGO_BIN_EXE_lagd");

struct Lab {
    topo: Topology,
    controls: [PathBuf; 2],
    addrs: [Ipv4Addr; 2],
}

impl Lab {
    /// `links` veth links, lagd with `opts` at both ends, addresses on the bonds.
    fn new(links: usize, opts: &str) -> Self {
        assert!(
            is_root(),
            "network namespace tests need root (CI runs them as root)"
        );
        let mut topo = Topology::create(links).expect("create topology");
        let mut controls = [PathBuf::new(), PathBuf::new()];
        let mut bonds = [String::new(), String::new()];
        for (i, side) in [Side::A, Side::B].into_iter().enumerate() {
            let bond = format!("{}b{}", topo.tag(), side.letter());
            let (_, control) = start_lagd(&mut topo, side, &bond, opts);
            controls[i] = control;
            bonds[i] = bond;
        }
        let addrs = address_bonds(&topo, &bonds);
        Self {
            topo,
            controls,
            addrs,
        }
    }

    fn status(&self, side: Side) -> Status {
        query_status(&self.controls[idx(side)]).expect("status")
    }

    fn wait_carrier(&self) {
        let t = Instant::now();
        for side in [Side::A, Side::B] {
            while self.status(side).mii_status != "up" {
                assert!(
                    t.elapsed() < Duration::from_secs(15),
                    "no carrier on {side:?}"
                );
                thread::sleep(Duration::from_millis(20));
            }
        }
    }

    /// Whether `from` reaches the other host within 20 s (LACP may take seconds to
    /// distribute on a loaded machine).
    fn ping(&self, from: Side) -> bool {
        require_program("ping", "iputils-ping").unwrap_or_else(|e| panic!("{e:#}"));
        let to = self.addrs[1 - idx(from)].to_string();
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(20) {
            let ok = Command::new("ip")
                .args(["netns", "exec", self.topo.ns(from), "ping", "-q", "-c", "3"])
                .args(["-i", "0.05", "-W", "2", &to])
                .output()
                .expect("ping")
                .status
                .success();
            if ok {
                return true;
            }
        }
        false
    }

    /// `bytes` of TCP from `from` to the other host, checked end to end.
    fn transfer(
        &self,
        from: Side,
        bytes: usize,
        port: u16,
        pace: Duration,
        during: impl FnOnce() + Send,
    ) {
        let to = 1 - idx(from);
        let to_side = if to == 0 { Side::A } else { Side::B };
        let t = checked_transfer(
            self.topo.ns(from),
            self.topo.ns(to_side),
            SocketAddrV4::new(self.addrs[to], port),
            bytes,
            Some(pace),
            during,
        )
        .expect("transfer");
        assert!(t.intact(), "TCP data from {from:?} arrived intact");
    }
}

fn idx(side: Side) -> usize {
    match side {
        Side::A => 0,
        Side::B => 1,
    }
}

fn sum(s: &Status, f: impl Fn(&lagd::status::MemberStatus) -> u64) -> u64 {
    s.members.iter().map(f).sum()
}

/// Asserts that `side` is on the kernel path and that the kernel carried the traffic: at least
/// `min` frames each way through the programs, and lagd's own sockets at most a handful.
fn assert_kernel_carried(lab: &Lab, side: Side, min: u64) {
    let s = lab.status(side);
    assert_eq!(s.dataplane.path, "kernel", "{side:?}: {:?}", s.dataplane);
    let ktx = sum(&s, |m| m.kernel_tx_packets);
    let krx = sum(&s, |m| m.kernel_rx_packets);
    let own_tx = sum(&s, |m| m.tx_packets - m.kernel_tx_packets);
    let own_rx = sum(&s, |m| m.rx_packets - m.kernel_rx_packets);
    assert!(
        ktx >= min && krx >= min,
        "{side:?}: kernel tx {ktx} rx {krx}"
    );
    // lagd itself sends ARP, neighbour discovery, IGMP/MLD and LACPDUs, and receives none
    // of the data frames (its member sockets are send-only).
    assert!(own_tx < 200, "{side:?}: {own_tx} frames went through lagd");
    assert_eq!(own_rx, 0, "{side:?}: lagd read {own_rx} member frames");
}

#[test]
fn kernel_path_carries_tcp_both_ways_in_every_covered_mode() {
    for opts in [
        "mode=balance-xor xmit_hash_policy=layer3+4",
        "mode=balance-xor xmit_hash_policy=layer2+3",
        "mode=balance-xor xmit_hash_policy=layer2",
        "mode=balance-xor xmit_hash_policy=vlan+srcmac",
        "mode=active-backup",
        "mode=802.3ad xmit_hash_policy=layer3+4 lacp_rate=fast lacp_aggregate_wait=100",
        "mode=broadcast",
        "mode=balance-tcp lacp_rate=fast lacp_aggregate_wait=100",
    ] {
        let lab = Lab::new(2, &format!("{opts} miimon=100 fastpath=on"));
        lab.wait_carrier();
        assert!(lab.ping(Side::A), "{opts}: ping A->B");
        assert!(lab.ping(Side::B), "{opts}: ping B->A");
        let pace = Duration::from_micros(100);
        lab.transfer(Side::A, 8 << 20, 5401, pace, || {});
        lab.transfer(Side::B, 8 << 20, 5402, pace, || {});
        for side in [Side::A, Side::B] {
            // 8 MiB each way: at least 128 frames of 64 KiB (GSO) or many more of 1500 bytes.
            assert_kernel_carried(&lab, side, 128);
        }
        let s = lab.status(Side::A);
        if opts.contains("active-backup") {
            assert_eq!(
                s.members[1].kernel_tx_packets, 0,
                "{opts}: the backup sends nothing"
            );
        }
        if opts.contains("broadcast") {
            // Every frame on both members (TCP takes the duplicates at the far end).
            let tx: Vec<u64> = s.members.iter().map(|m| m.kernel_tx_packets).collect();
            assert!(
                tx.iter().all(|&n| n >= 128),
                "{opts}: a copy on each: {tx:?}"
            );
            let (lo, hi) = (tx[0].min(tx[1]), tx[0].max(tx[1]));
            assert!(
                hi - lo <= hi / 100 + 10,
                "{opts}: the same frames on each: {tx:?}"
            );
        }
        let text = s.render();
        assert!(text.contains("Dataplane: kernel"), "{opts}: {text}");
    }
}

#[test]
fn bucket_distribution_runs_on_the_kernel_path_and_feeds_the_rebalancer() {
    let lab = Lab::new(
        2,
        "mode=balance-xor xmit_hash_policy=layer3+4 distribution=buckets \
         rebalance_interval=300 miimon=100 fastpath=on",
    );
    lab.wait_carrier();
    assert!(lab.ping(Side::A));
    // 24 MiB at 64 KiB every 4 ms: about 1.5 s, several rebalancing intervals.
    lab.transfer(Side::A, 24 << 20, 5404, Duration::from_millis(4), || {});
    assert_kernel_carried(&lab, Side::A, 128);
    let s = lab.status(Side::A);
    let b = s.buckets.as_ref().expect("a bucket table");
    assert!(
        b.rebalances >= 2,
        "rebalanced during the transfer: {}",
        b.rebalances
    );
    // Only the kernel saw the data frames: the loads the rebalancer works with are the ones
    // the programs counted and lagd read back.
    let load: u64 = b.members.iter().map(|m| m.load_bytes_per_s).sum();
    assert!(
        load > 1_000_000,
        "the rebalancer sees the load: {:?}",
        b.members
    );
    assert!(
        b.buckets.iter().any(|x| x.load_bytes_per_s > 1_000_000),
        "the stream's bucket carries the load: {:?}",
        b.members
    );
    assert!(s.render().contains("Dataplane: kernel"));
}

#[test]
fn failover_under_tcp_load_moves_the_kernel_path_in_one_update() {
    let lab = Lab::new(2, "mode=active-backup miimon=100 fastpath=on");
    lab.wait_carrier();
    assert!(lab.ping(Side::A));
    // 24 MiB at 64 KiB every 2 ms: about 0.8 s, the member failing 0.3 s in.
    lab.transfer(Side::A, 24 << 20, 5403, Duration::from_millis(2), || {
        thread::sleep(Duration::from_millis(300));
        // Down on B's side: both ends lose carrier on link 0.
        lab.topo.set_link_down(Side::B, 0).unwrap();
    });
    let s = lab.status(Side::A);
    assert_eq!(s.active.as_deref(), Some(s.members[1].name.as_str()));
    assert!(
        s.members[1].kernel_tx_packets > 50,
        "the survivor carried the rest: {s:?}"
    );
    assert!(
        s.members[0].kernel_tx_packets > 50,
        "the first member carried the start: {s:?}"
    );
    assert_kernel_carried(&lab, Side::A, 128);
}

#[test]
fn a_mode_the_kernel_cannot_take_falls_back_or_refuses_as_asked() {
    // auto: the userspace path, with the reason in the status.
    let lab = Lab::new(2, "mode=balance-rr miimon=100");
    lab.wait_carrier();
    assert!(lab.ping(Side::A));
    let s = lab.status(Side::A);
    assert_eq!(s.dataplane.path, "lagd");
    let why = s.dataplane.reason.clone().unwrap_or_default();
    assert!(why.contains("per frame"), "{why}");
    assert!(s.render().contains("Dataplane: lagd ("));
    // on: lagd refuses to start, naming the reason, with exit code 2.
    let topo = Topology::create(1).expect("topology");
    let members = topo.member_list();
    let out = Command::new("ip")
        .args(["netns", "exec", topo.ns(Side::A), LAGD])
        .args(["--bond", &format!("{}x", topo.tag()), "--members", &members])
        .args(["--opts", "mode=balance-rr fastpath=on"])
        .args(["--control", &topo.dir().join("x.sock").to_string_lossy()])
        .output()
        .expect("run lagd");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("fastpath=on") && err.contains("per frame"),
        "{err}"
    );
}

#[test]
fn without_the_privilege_to_load_programs_auto_falls_back_and_on_refuses() {
    require_program("setpriv", "util-linux").unwrap_or_else(|e| panic!("{e:#}"));
    let mut topo = Topology::create(2).expect("topology");
    let members = topo.member_list();
    let control = topo.dir().join("np.sock");
    let control_s = control.to_string_lossy().into_owned();
    let bond = format!("{}np", topo.tag());
    // Root without CAP_BPF and CAP_SYS_ADMIN: bpf() refuses to load the programs.
    let args = |fastpath: &str| -> Vec<String> {
        [
            "--bounding-set=-bpf,-sys_admin",
            LAGD,
            "--bond",
            &bond,
            "--members",
            &members,
            "--opts",
            &format!("mode=balance-xor xmit_hash_policy=layer3+4 miimon=100 fastpath={fastpath}"),
            "--control",
            &control_s,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    };
    let on: Vec<String> = args("on");
    let out = Command::new("ip")
        .args(["netns", "exec", topo.ns(Side::A), "setpriv"])
        .args(&on)
        .output()
        .expect("run lagd");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("fastpath=on"), "{err}");
    let auto: Vec<String> = args("auto");
    let auto: Vec<&str> = auto.iter().map(String::as_str).collect();
    topo.spawn(Side::A, "lagd-np", std::path::Path::new("setpriv"), &auto)
        .expect("start lagd");
    let deadline = Instant::now() + Duration::from_secs(10);
    let s = loop {
        if let Ok(s) = query_status(&control) {
            break s;
        }
        assert!(Instant::now() < deadline, "lagd did not come up");
        thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(s.dataplane.path, "lagd");
    let why = s.dataplane.reason.unwrap_or_default();
    assert!(why.contains("could not be loaded"), "{why}");
}

/// Waits until member `port` is (or is not) distributing on both hosts.
fn wait_distributing(lab: &Lab, port: usize, want: bool) {
    let t = Instant::now();
    for side in [Side::A, Side::B] {
        loop {
            let s = lab.status(side);
            let d = s.members[port]
                .lacp
                .as_ref()
                .is_some_and(|l| l.distributing);
            if d == want {
                break;
            }
            assert!(
                t.elapsed() < Duration::from_secs(15),
                "{side:?}: member {port} distributing != {want}"
            );
            thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Frames the kernel program refused on member `port` of `side`.
fn not_delivering(lab: &Lab, side: Side, port: usize) -> u64 {
    lab.status(side).members[port]
        .rx_dropped
        .iter()
        .find(|(r, _)| r == "not_delivering")
        .map_or(0, |(_, n)| *n)
}

#[test]
fn a_member_leaving_lacp_distribution_leaves_the_kernel_path_both_ways() {
    let lab = Lab::new(
        2,
        "mode=802.3ad xmit_hash_policy=layer3+4 lacp_rate=fast lacp_aggregate_wait=100 \
         miimon=100 fastpath=on",
    );
    lab.wait_carrier();
    wait_distributing(&lab, 1, true);
    let link1 = lab.topo.links()[1].name.clone();
    // Collecting: frames arriving on member 1 go to the host.
    let (refused, delivered) = (
        not_delivering(&lab, Side::B, 1),
        lab.status(Side::B).members[1].kernel_rx_packets,
    );
    assert_eq!(lab.topo.probe_link(&link1, 20).unwrap(), 20);
    assert_eq!(not_delivering(&lab, Side::B, 1), refused);
    assert!(lab.status(Side::B).members[1].kernel_rx_packets >= delivered + 20);
    // Member 1 loses its LACPDUs and leaves distribution at both ends.
    let _drop = lab.topo.drop_slow_protocols(&link1).unwrap();
    wait_distributing(&lab, 1, false);
    let tx1 = lab.status(Side::A).members[1].kernel_tx_packets;
    for (k, from) in [Side::A, Side::B, Side::A, Side::B].into_iter().enumerate() {
        lab.transfer(
            from,
            2 << 20,
            5410 + k as u16,
            Duration::from_micros(100),
            || {},
        );
    }
    let s = lab.status(Side::A);
    assert_eq!(
        s.members[1].kernel_tx_packets, tx1,
        "egress moved off member 1"
    );
    assert!(s.members[0].kernel_tx_packets > 100);
    // Not collecting: frames still cross link 1 and the program drops them.
    let refused = not_delivering(&lab, Side::B, 1);
    assert_eq!(
        lab.topo.probe_link(&link1, 20).unwrap(),
        20,
        "the link still carries frames"
    );
    assert!(
        not_delivering(&lab, Side::B, 1) >= refused + 20,
        "ingress no longer accepted"
    );
    assert_kernel_carried(&lab, Side::A, 100);
}
