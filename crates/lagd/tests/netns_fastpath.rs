//! The kernel fast path end to end: two hosts (network namespaces) joined by veth links, lagd
//! at both ends with `fastpath=on`, real TCP both ways. Every test proves the frames took the
//! kernel path: the programs' counters carry the traffic while lagd's own sockets carry only
//! the few frames lagd handles itself (ARP, neighbour discovery, LACPDUs).

use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::path::PathBuf;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use lagd::control::query_status;
use lagd::status::Status;
use lagd_lab::topology::{ProcessId, Side, Topology, in_named_ns, is_root, require_program};
use lagd_lab::traffic::checked_transfer;

mod common;

use common::{address_bonds, start_lagd};

const LAGD: &str = env!("CARGO_BIN_EXE_lagd");

struct Lab {
    topo: Topology,
    controls: [PathBuf; 2],
    addrs: [Ipv4Addr; 2],
    bonds: [String; 2],
    pids: [ProcessId; 2],
    opts: String,
}

impl Lab {
    /// `links` veth links, lagd with `opts` at both ends, addresses on the bonds.
    fn new(links: usize, opts: &str) -> Self {
        Self::new_with(links, opts, |_| {})
    }

    /// [`Lab::new`], with `setup` run on the topology before lagd starts.
    fn new_with(links: usize, opts: &str, setup: impl FnOnce(&Topology)) -> Self {
        assert!(
            is_root(),
            "network namespace tests need root (CI runs them as root)"
        );
        let mut topo = Topology::create(links).expect("create topology");
        setup(&topo);
        let mut controls = [PathBuf::new(), PathBuf::new()];
        let mut bonds = [String::new(), String::new()];
        let mut pids = Vec::new();
        for (i, side) in [Side::A, Side::B].into_iter().enumerate() {
            let bond = format!("{}b{}", topo.tag(), side.letter());
            let (pid, control) = start_lagd(&mut topo, side, &bond, opts);
            controls[i] = control;
            bonds[i] = bond;
            pids.push(pid);
        }
        let addrs = address_bonds(&topo, &bonds);
        Self {
            topo,
            controls,
            addrs,
            bonds,
            pids: [pids[0], pids[1]],
            opts: opts.to_owned(),
        }
    }

    /// Stops lagd on `side` with signal `sig` (`TERM`, `KILL`) and waits for it to exit.
    fn stop(&mut self, side: Side, sig: &str) {
        let id = self.pids[idx(side)];
        self.topo.signal(id, sig).expect("signal");
        let status = self
            .topo
            .wait_exit(id, Duration::from_secs(20))
            .expect("wait")
            .unwrap_or_else(|| panic!("lagd did not stop on SIG{sig}"));
        if sig != "KILL" {
            assert!(status.success(), "lagd exited with {status} on SIG{sig}");
        }
    }

    /// Starts lagd on `side` again, with the same options, after [`Lab::stop`].
    fn restart(&mut self, side: Side) {
        let opts = self.opts.clone();
        self.restart_with(side, &opts);
    }

    /// Starts lagd on `side` again with options `opts`, after [`Lab::stop`].
    fn restart_with(&mut self, side: Side, opts: &str) {
        let bond = self.bonds[idx(side)].clone();
        let (pid, _) = start_lagd(&mut self.topo, side, &bond, opts);
        self.pids[idx(side)] = pid;
    }

    /// `tc filter show dev DEV HOOK` in `side`'s namespace, one line per filter (the lines
    /// naming only a priority's classifier left out).
    fn filters(&self, side: Side, dev: &str, hook: &str) -> Vec<String> {
        require_program("tc", "iproute2").unwrap_or_else(|e| panic!("{e:#}"));
        let out = Command::new("ip")
            .args(["netns", "exec", self.topo.ns(side), "tc", "filter", "show"])
            .args(["dev", dev, hook])
            .output()
            .expect("tc");
        assert!(
            out.status.success(),
            "tc filter show dev {dev} {hook}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| l.contains("handle"))
            .map(str::to_owned)
            .collect()
    }

    /// `tc ARGS` in `side`'s namespace, which must succeed.
    fn tc(&self, side: Side, args: &[&str]) -> String {
        require_program("tc", "iproute2").unwrap_or_else(|e| panic!("{e:#}"));
        let out = Command::new("ip")
            .args(["netns", "exec", self.topo.ns(side), "tc"])
            .args(args)
            .output()
            .expect("tc");
        assert!(
            out.status.success(),
            "tc {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
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

/// What `fastpath_attach=auto` picks on the running kernel: tcx from Linux 6.6 on, clsact
/// filters before.
fn auto_attach() -> &'static str {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").expect("osrelease");
    let mut parts = release
        .trim()
        .split(['.', '-'])
        .map(|p| p.parse::<u32>().unwrap_or(0));
    let version = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    if version >= (6, 6) { "tcx" } else { "tc" }
}

/// Asserts that `side`'s programs are attached as `attach` (`tcx` or `tc`) says, in the status
/// and on the interfaces: as clsact filters exactly one lagd filter per hook (the members'
/// ingress, the TAP's egress), with tcx none.
fn assert_attached(lab: &Lab, side: Side, attach: &str) {
    let s = lab.status(side);
    assert_eq!(
        s.dataplane.attach.as_deref(),
        Some(attach),
        "{side:?}: {:?}",
        s.dataplane
    );
    let text = s.render();
    let shown = if attach == "tc" { "tc (clsact)" } else { "tcx" };
    assert!(
        text.contains(&format!("Kernel path attachment: {shown} (")),
        "{text}"
    );
    let want = usize::from(attach == "tc");
    for l in lab.topo.links() {
        let f = lab.filters(side, &l.name, "ingress");
        let lagd = f
            .iter()
            .filter(|l| l.contains("lagd_member_ingress"))
            .count();
        assert_eq!(lagd, want, "{side:?} {} ingress: {f:?}", l.name);
    }
    let f = lab.filters(side, &lab.bonds[idx(side)], "egress");
    let lagd = f.iter().filter(|l| l.contains("lagd_tap_egress")).count();
    assert_eq!(lagd, want, "{side:?} TAP egress: {f:?}");
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
    assert_kernel_carried_reading(lab, side, min, 0);
}

/// [`assert_kernel_carried`], lagd reading at most `own_max` member frames (balance-alb's ARP).
fn assert_kernel_carried_reading(lab: &Lab, side: Side, min: u64, own_max: u64) {
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
    assert!(
        own_rx <= own_max,
        "{side:?}: lagd read {own_rx} member frames"
    );
}

#[test]
fn kernel_path_carries_tcp_both_ways_in_every_covered_mode() {
    for opts in [
        "mode=balance-xor xmit_hash_policy=layer3+4",
        "mode=balance-xor xmit_hash_policy=layer2+3",
        "mode=balance-xor xmit_hash_policy=layer2",
        "mode=balance-xor xmit_hash_policy=vlan+srcmac",
        "mode=balance-xor xmit_hash_policy=encap3+4",
        "mode=balance-xor xmit_hash_policy=encap2+3",
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
        assert_attached(&lab, Side::A, auto_attach());
    }
}

/// The CPUs this machine may run the programs on (the online ones).
fn online_cpus() -> u64 {
    let text = std::fs::read_to_string("/sys/devices/system/cpu/online").expect("online CPUs");
    text.trim()
        .split(',')
        .map(|r| match r.split_once('-') {
            Some((a, b)) => b.parse::<u64>().unwrap() - a.parse::<u64>().unwrap() + 1,
            None => 1,
        })
        .sum()
}

/// balance-rr on the kernel path with `packets_per_slave` 1 and 3: TCP both ways through the
/// programs, lagd's sockets reading nothing, and the members taking turns: each CPU's count
/// gives each member `packets_per_slave` frames in turn, so the two members' frame counts differ
/// by at most that many per CPU; then a member fails under load and the other carries the
/// rest.
#[test]
fn balance_rr_runs_on_the_kernel_path_taking_turns_per_cpu() {
    let cpus = online_cpus();
    for pps in [1u64, 3] {
        let opts = format!("mode=balance-rr packets_per_slave={pps} miimon=100 fastpath=on");
        let lab = Lab::new(2, &opts);
        lab.wait_carrier();
        assert!(lab.ping(Side::A), "{opts}: ping A->B");
        assert!(lab.ping(Side::B), "{opts}: ping B->A");
        let pace = Duration::from_micros(100);
        lab.transfer(Side::A, 8 << 20, 5411, pace, || {});
        lab.transfer(Side::B, 8 << 20, 5412, pace, || {});
        for side in [Side::A, Side::B] {
            assert_kernel_carried(&lab, side, 128);
            let s = lab.status(side);
            let tx: Vec<u64> = s.members.iter().map(|m| m.kernel_tx_packets).collect();
            assert!(
                tx[0].abs_diff(tx[1]) <= pps * cpus,
                "{opts} {side:?}: {pps} frames per member in turn on each of {cpus} CPUs: {tx:?}"
            );
            let text = s.render();
            assert!(text.contains("Dataplane: kernel"), "{opts}: {text}");
            assert!(!text.contains("per frame"), "{opts}: {text}");
        }
        assert_attached(&lab, Side::A, auto_attach());
    }
    // A member fails under load: its turns go to the other one (the kernel's walk).
    let lab = Lab::new(2, "mode=balance-rr miimon=100 fastpath=on");
    lab.wait_carrier();
    assert!(lab.ping(Side::A));
    let before = lab.status(Side::A);
    lab.transfer(Side::A, 24 << 20, 5413, Duration::from_millis(2), || {
        thread::sleep(Duration::from_millis(300));
        lab.topo.set_link_down(Side::B, 0).unwrap();
    });
    let s = lab.status(Side::A);
    let gained = |i: usize| s.members[i].kernel_tx_packets - before.members[i].kernel_tx_packets;
    assert!(
        gained(1) > gained(0) + 50,
        "the survivor carried the rest: {} against {}",
        gained(1),
        gained(0)
    );
    assert!(gained(0) > 20, "member 0 took turns before it failed");
    assert_kernel_carried(&lab, Side::A, 128);
}

/// balance-tlb on the kernel path (`tlb_dynamic_lb` as `dynamic` gives it): TCP flows both
/// ways until each host has sent on both members, all through the programs with lagd's member
/// sockets reading nothing; what host A sends on its second member (not the active one) carries
/// that member's MAC as source, never the bond's; a frame addressed to a member's MAC reaches
/// the host; with `tlb_dynamic_lb=1` the rebalancer sees the load the programs counted.
fn tlb_on_the_kernel_path(dynamic: bool) {
    let opts = format!(
        "mode=balance-tlb xmit_hash_policy=layer3+4 tlb_dynamic_lb={} rebalance_interval=300 \
         miimon=100 fastpath=on",
        u8::from(dynamic)
    );
    let mut lab = Lab::new(2, &opts);
    lab.wait_carrier();
    assert!(lab.ping(Side::A), "{opts}: ping A->B");
    assert!(lab.ping(Side::B), "{opts}: ping B->A");
    require_program("tcpdump", "tcpdump").unwrap_or_else(|e| panic!("{e:#}"));
    // What arrives on host B's end of link 1: what host A's second member sent.
    let link1 = lab.topo.links()[1].name.clone();
    let cap = lab
        .topo
        .spawn(
            Side::B,
            "tcpdump-tlb",
            std::path::Path::new("tcpdump"),
            &["-i", &link1, "-e", "-nn", "-l", "--immediate-mode", "tcp"],
        )
        .expect("tcpdump");
    let t = Instant::now();
    while !lab.topo.log_tail(cap, 5).contains("listening on") {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "tcpdump: {}",
            lab.topo.log_tail(cap, 5)
        );
        thread::sleep(Duration::from_millis(20));
    }
    // One flow takes one member: flows on new ports until both members of both hosts sent
    // (16 flows each way all on one member: 1 in 2^15).
    let pace = Duration::from_micros(100);
    let both_sent = |lab: &Lab, side: Side| {
        let s = lab.status(side);
        s.members.iter().all(|m| m.kernel_tx_packets >= 20)
    };
    for port in 5420..5436u16 {
        lab.transfer(Side::A, 4 << 20, port, pace, || {});
        lab.transfer(Side::B, 4 << 20, port + 100, pace, || {});
        if both_sent(&lab, Side::A) && both_sent(&lab, Side::B) {
            break;
        }
    }
    for side in [Side::A, Side::B] {
        let s = lab.status(side);
        let tx: Vec<u64> = s.members.iter().map(|m| m.kernel_tx_packets).collect();
        assert!(tx.iter().all(|&n| n >= 20), "{opts} {side:?}: {tx:?}");
        // 4 MiB each way at least: 64 frames of 64 KiB (GSO) or many more of 1500 bytes.
        assert_kernel_carried(&lab, side, 64);
        let text = s.render();
        assert!(text.contains("Dataplane: kernel"), "{opts}: {text}");
        assert_eq!(s.dataplane.reason, None, "{opts}");
        assert_eq!(s.buckets.is_some(), dynamic, "{opts}");
    }
    if dynamic {
        // 24 MiB at 64 KiB every 4 ms: about 1.5 s, several rebalancing intervals; only the
        // programs saw the frames, so the load the rebalancer works with is what they counted.
        lab.transfer(Side::A, 24 << 20, 5450, Duration::from_millis(4), || {});
        let s = lab.status(Side::A);
        let b = s.buckets.as_ref().expect("a bucket table");
        assert!(b.rebalances >= 2, "{opts}: rebalanced: {}", b.rebalances);
        let load: u64 = b.members.iter().map(|m| m.load_bytes_per_s).sum();
        assert!(
            load > 1_000_000,
            "{opts}: the rebalancer sees the load: {:?}",
            b.members
        );
    }
    lab.topo.signal(cap, "TERM").expect("stop tcpdump");
    lab.topo
        .wait_exit(cap, Duration::from_secs(10))
        .expect("tcpdump exits");
    let text = std::fs::read_to_string(lab.topo.dir().join("tcpdump-tlb.out")).unwrap();
    let a_mac = mac_of(&lab, Side::A, &link1);
    let bond_mac = mac_of(&lab, Side::A, &lab.bonds[0]);
    assert_ne!(a_mac, bond_mac);
    // `-e`: time, source MAC, '>', destination MAC, ... ': IP src.port > dst.port'.
    let from_a: Vec<&str> = text
        .lines()
        .filter(|l| l.contains(&format!(": {}.", lab.addrs[0])))
        .map(|l| l.split_whitespace().nth(1).unwrap_or(""))
        .collect();
    assert!(
        !from_a.is_empty(),
        "{opts}: host A sent TCP on member 1: {text}"
    );
    assert!(
        from_a.iter().all(|&m| m == a_mac),
        "{opts}: off the active member, the member's MAC {a_mac} (bond {bond_mac}): {} of {} \
         frames carried another, the first {:?}",
        from_a.iter().filter(|&&m| m != a_mac).count(),
        from_a.len(),
        from_a.iter().find(|&&m| m != a_mac)
    );
    // Host B addresses host A at A's second member's MAC: the program gives the frames to
    // A's host with the bond's MAC, or the ping would go unanswered.
    lab.topo
        .ip(
            Side::B,
            &[
                "neigh",
                "replace",
                &lab.addrs[0].to_string(),
                "lladdr",
                &a_mac,
                "dev",
                &lab.bonds[1],
                "nud",
                "permanent",
            ],
        )
        .expect("neighbour entry");
    let before = lab.status(Side::A);
    assert!(lab.ping(Side::B), "{opts}: ping to a member's MAC");
    let s = lab.status(Side::A);
    assert!(
        sum(&s, |m| m.kernel_rx_packets) > sum(&before, |m| m.kernel_rx_packets),
        "{opts}: through the programs"
    );
    assert_kernel_carried(&lab, Side::A, 128);
}

#[test]
fn balance_tlb_runs_on_the_kernel_path_with_the_load_assignment() {
    tlb_on_the_kernel_path(true);
}

#[test]
fn balance_tlb_runs_on_the_kernel_path_hashing_without_dynamic_lb() {
    tlb_on_the_kernel_path(false);
}

/// balance-tlb (`tlb_dynamic_lb` 1 and 0) and balance-alb on the kernel path lose their active
/// member under TCP load: the other member takes over in the programs' table and the stream
/// arrives intact.
#[test]
fn balance_tlb_and_alb_fail_over_under_tcp_load_on_the_kernel_path() {
    for mode in [
        "mode=balance-tlb xmit_hash_policy=layer3+4 tlb_dynamic_lb=1",
        "mode=balance-tlb xmit_hash_policy=layer3+4 tlb_dynamic_lb=0",
        "mode=balance-alb",
    ] {
        let opts = format!("{mode} miimon=100 fastpath=on");
        let lab = Lab::new(2, &opts);
        lab.wait_carrier();
        assert!(lab.ping(Side::A), "{opts}");
        let before = lab.status(Side::A);
        assert_eq!(
            before.active.as_deref(),
            Some(before.members[0].name.as_str())
        );
        // 24 MiB at 64 KiB every 2 ms: about 0.8 s, the active member failing 0.3 s in.
        lab.transfer(Side::A, 24 << 20, 5440, Duration::from_millis(2), || {
            thread::sleep(Duration::from_millis(300));
            lab.topo.set_link_down(Side::B, 0).unwrap();
        });
        let s = lab.status(Side::A);
        assert_eq!(
            s.active.as_deref(),
            Some(s.members[1].name.as_str()),
            "{opts}"
        );
        let gained =
            |i: usize| s.members[i].kernel_tx_packets - before.members[i].kernel_tx_packets;
        assert!(
            gained(1) > 50,
            "{opts}: the survivor carried the rest: {}",
            gained(1)
        );
        // balance-alb: lagd reads the members' ARP (it learns the clients from it).
        let arp = if mode.contains("alb") { 50 } else { 0 };
        assert_kernel_carried_reading(&lab, Side::A, 128, arp);
        assert_kernel_carried_reading(&lab, Side::B, 128, arp);
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

fn failover_under_tcp_load(attach: &str) {
    let lab = Lab::new(
        2,
        &format!("mode=active-backup miimon=100 fastpath=on fastpath_attach={attach}"),
    );
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
    assert_attached(&lab, Side::A, attach);
}

#[test]
fn failover_under_tcp_load_moves_the_kernel_path_in_one_update() {
    failover_under_tcp_load(auto_attach());
}

#[test]
fn failover_under_tcp_load_moves_the_kernel_path_in_one_update_tc() {
    failover_under_tcp_load("tc");
}

#[test]
fn a_mode_the_kernel_cannot_take_falls_back_or_refuses_as_asked() {
    // auto: the userspace path, with the reason in the status. More members than the
    // programs' table holds (17 against MAX_MEMBERS 16) is the refusal no planned kernel-path
    // work removes: balance-tlb/alb, the encap hashes and ns_ip6_target with arp_validate
    // went into the programs one after the other, each taking a fallback test with it.
    let lab = Lab::new(17, "mode=balance-xor xmit_hash_policy=layer3+4 miimon=100");
    lab.wait_carrier();
    assert!(lab.ping(Side::A));
    let s = lab.status(Side::A);
    assert_eq!(s.dataplane.path, "lagd");
    let why = s.dataplane.reason.clone().unwrap_or_default();
    assert!(why.contains("16 members"), "{why}");
    assert!(s.render().contains("Dataplane: lagd ("));
    // on: lagd refuses to start, naming the reason, with exit code 2.
    let topo = Topology::create(17).expect("topology");
    let members = topo.member_list();
    let out = Command::new("ip")
        .args(["netns", "exec", topo.ns(Side::A), LAGD])
        .args(["--bond", &format!("{}x", topo.tag()), "--members", &members])
        .args(["--opts", "mode=balance-xor fastpath=on"])
        .args(["--control", &topo.dir().join("x.sock").to_string_lossy()])
        .output()
        .expect("run lagd");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("fastpath=on") && err.contains("16 members"),
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

/// Datagrams of one flow from A to B, one every `every` (on a schedule), `count` of them,
/// while `during` runs: returns how many of them B never received (each carries its number).
fn probe_losses(
    lab: &Lab,
    port: u16,
    count: u64,
    every: Duration,
    during: impl FnOnce() + Send,
) -> u64 {
    let to = SocketAddrV4::new(lab.addrs[1], port);
    let rx = in_named_ns(lab.topo.ns(Side::B), || UdpSocket::bind(to))
        .unwrap()
        .expect("bind the receiver");
    rx.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let tx = in_named_ns(lab.topo.ns(Side::A), || {
        let s = UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0))?;
        s.connect(to)?;
        Ok::<_, std::io::Error>(s)
    })
    .unwrap()
    .expect("the sender's socket");
    let receiver = thread::spawn(move || {
        let mut seen = vec![false; count as usize];
        let mut buf = [0u8; 64];
        // Until 2 s pass without a datagram: the sender has finished.
        while let Ok(n) = rx.recv(&mut buf) {
            if n == 8 {
                let i = u64::from_be_bytes(buf[..8].try_into().unwrap());
                if let Some(s) = seen.get_mut(i as usize) {
                    *s = true;
                }
            }
        }
        seen.iter().filter(|&&s| s).count() as u64
    });
    thread::scope(|scope| {
        scope.spawn(|| {
            // On a schedule, not a sleep after each: a sender that was held up catches up, so
            // what is lost is about how long the flow went to a dead link, not how often the
            // sender ran meanwhile (one CPU in a guest).
            let start = Instant::now();
            for i in 0..count {
                tx.send(&i.to_be_bytes()).expect("send");
                let next = start + every * (i as u32 + 1);
                if let Some(wait) = next.checked_duration_since(Instant::now()) {
                    thread::sleep(wait);
                }
            }
        });
        during();
    });
    count - receiver.join().expect("the receiver")
}

/// 802.3ad on the kernel path with `attach`: the link that carries a flow of a datagram every
/// ms is cut (its far end set down) 0.8 s in; returns how many of the 2000 were lost.
/// One cut (see the test below): the datagrams lost, or `None` when the cut came too late to
/// measure anything (fewer than 100 of the 2000 left to send: a guest that stalled the cutting
/// thread while the sender, which keeps to its schedule, caught up).
fn lacp_cut_once(attach: &str) -> Option<u64> {
    let lab = Lab::new(
        2,
        &format!(
            "mode=802.3ad xmit_hash_policy=layer3+4 lacp_rate=fast lacp_aggregate_wait=100 \
             miimon=100 fastpath=on fastpath_attach={attach}"
        ),
    );
    lab.wait_carrier();
    wait_distributing(&lab, 0, true);
    wait_distributing(&lab, 1, true);
    assert!(lab.ping(Side::A), "{attach}: ping A->B");
    let before = lab.status(Side::A);
    let veth_dropped = |link: usize| -> u64 {
        let name = &lab.topo.links()[link].name;
        let out = Command::new("ip")
            .args(["netns", "exec", lab.topo.ns(Side::A), "cat"])
            .arg(format!("/sys/class/net/{name}/statistics/tx_dropped"))
            .output()
            .expect("cat");
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .unwrap_or(0)
    };
    let dropped_before = [veth_dropped(0), veth_dropped(1)];
    let mut cut = None;
    let mut sent_at_cut = 0;
    // 2000 datagrams, about 2 s; the cut 0.8 s in, on the member that carries them.
    let lost = probe_losses(&lab, 5450, 2000, Duration::from_millis(1), || {
        thread::sleep(Duration::from_millis(800));
        let s = lab.status(Side::A);
        let gained =
            |i: usize| s.members[i].kernel_tx_packets - before.members[i].kernel_tx_packets;
        let link = usize::from(gained(1) > gained(0));
        assert!(
            gained(link) > 50,
            "{attach}: the flow runs on the kernel path before the cut: {} and {}",
            gained(0),
            gained(1)
        );
        lab.topo.set_link_down(Side::B, link).unwrap();
        cut = Some(link);
        // Counted once the link is down: a guest can stall between the reading above and
        // the cut for longer than the flow has left to run.
        let s = lab.status(Side::A);
        sent_at_cut = s.members[link].kernel_tx_packets - before.members[link].kernel_tx_packets;
    });
    let cut = cut.expect("the link was cut");
    if sent_at_cut + 100 > 2000 {
        eprintln!(
            "{attach}: the cut was done after {sent_at_cut} of 2000 datagrams had left on \
             its member: not a measurement"
        );
        return None;
    }
    let s = lab.status(Side::A);
    let survivor = 1 - cut;
    let gain = |i: usize| {
        let (m, b) = (&s.members[i], &before.members[i]);
        (
            m.kernel_tx_packets - b.kernel_tx_packets,
            m.tx_packets - b.tx_packets,
        )
    };
    eprintln!(
        "{attach}: {lost} of 2000 lost, member {cut} cut ({} of them dropped by the veth: \
         sent before its carrier went); (kernel, all) sent since the start: cut {:?}, \
         survivor {:?}; distributing {:?}",
        veth_dropped(cut) - dropped_before[cut],
        gain(cut),
        gain(survivor),
        s.members
            .iter()
            .map(|m| m.lacp.as_ref().map(|l| l.distributing))
            .collect::<Vec<_>>()
    );
    // The flow ran on the cut member alone before the cut, and the programs put every
    // datagram on one member or the other: the survivor carried all the cut member did not
    // (about 1100 of the 2000 when the guest keeps time; once as few as 100, when a guest
    // stalled the cut until about 1700 had left and lagd while 165 more went to the dead link).
    assert!(
        gain(survivor).0 > 0 && gain(survivor).0 + gain(cut).0 >= 2000,
        "{attach}: the other member carried the rest: (kernel, all) sent since the start: \
         survivor {:?}, cut {:?}",
        gain(survivor),
        gain(cut)
    );
    assert_attached(&lab, Side::A, attach);
    Some(lost)
}

/// 802.3ad on the kernel path: the link that carries a flow of a datagram every ms is cut, and
/// the programs stop sending on it once lagd sees the carrier go. On this host a cut loses 0-1.
/// In the guests (one CPU, this test's debug build) a cut lost 0-41 on 5.10 and 0-21 on 6.1,
/// of two kinds: frames the veth dropped while its far end was closing and it still had its
/// carrier (nothing lagd at the sending end can see; up to 41 on 5.10), and frames sent to
/// the member after its carrier went (mostly 0-22, but now and then 46-195 on 5.10: lagd not
/// run for that long after the carrier went, in a guest with one CPU and a kernel that does
/// not preempt; CI's 5.10 guest, beside two others on two CPUs, once lost 0, 113 and 120 in its
/// three cuts). So the bound is on the best of three cuts, and loose: 100. A table that never
/// follows the carrier loses every datagram sent after the cut (about 1,200) in every cut, and
/// one that follows it a tenth of a second late in every cut loses 100 or more in each; both
/// fail. One that is late only now and then is the guest's scheduling as much as lagd, and
/// this test cannot tell the two apart. Nor does it tell the order lagd had before (the table
/// written after the partner sockets' filters, 4-19 ms each on 5.10) from today's in that
/// guest: bench/kernels.sh does, in release builds (44-71 lost per cut before, 0 after).
#[test]
fn lacp_cut_under_a_datagram_every_ms_loses_next_to_nothing() {
    let mut attaches = vec![auto_attach()];
    if attaches[0] != "tc" {
        attaches.push("tc");
    }
    for attach in attaches {
        // Three cuts that came in time, in at most six tries.
        let mut lost: Vec<u64> = (0..6)
            .filter_map(|_| lacp_cut_once(attach))
            .take(3)
            .collect();
        assert!(
            lost.len() == 3,
            "{attach}: only {} of 6 cuts came before the datagrams had all left (a guest that \
             stalls for seconds at a time)",
            lost.len()
        );
        lost.sort_unstable();
        assert!(
            lost[0] <= 100,
            "{attach}: datagrams lost per cut (of 2000): {lost:?}, none of them 100 or fewer"
        );
    }
}

#[test]
fn tc_attachment_carries_tcp_both_ways() {
    for opts in [
        "mode=balance-xor xmit_hash_policy=layer3+4",
        "mode=802.3ad xmit_hash_policy=layer3+4 lacp_rate=fast lacp_aggregate_wait=100",
    ] {
        let lab = Lab::new(
            2,
            &format!("{opts} miimon=100 fastpath=on fastpath_attach=tc"),
        );
        lab.wait_carrier();
        assert!(lab.ping(Side::A), "{opts}: ping A->B");
        assert!(lab.ping(Side::B), "{opts}: ping B->A");
        let pace = Duration::from_micros(100);
        lab.transfer(Side::A, 8 << 20, 5421, pace, || {});
        lab.transfer(Side::B, 8 << 20, 5422, pace, || {});
        for side in [Side::A, Side::B] {
            assert_kernel_carried(&lab, side, 128);
            assert_attached(&lab, side, "tc");
            let s = lab.status(side);
            assert_eq!(
                s.dataplane.attach_reason.as_deref(),
                Some("fastpath_attach=tc")
            );
        }
        let json = common::lagctl_ok(&lab.controls[0], &["show", "--json"]);
        let v: serde_json::Value = serde_json::from_str(&json).expect("JSON");
        assert_eq!(v["dataplane"]["attach"], "tc", "{json}");
        assert_eq!(v["dataplane"]["attach_reason"], "fastpath_attach=tc");
        // A clean stop: lagd's filters take the qdiscs lagd added along, and the log claims no
        // filters of others on them.
        let mut lab = lab;
        lab.stop(Side::A, "TERM");
        let log = lab.topo.log_tail(lab.pids[idx(Side::A)], 200);
        assert!(
            !log.lines()
                .any(|l| l.contains("qdisc") && l.contains("kept")),
            "{opts}:\n{log}"
        );
        for dev in lab
            .topo
            .links()
            .iter()
            .map(|l| &l.name)
            .chain([&lab.bonds[0]])
        {
            let q = lab.tc(Side::A, &["qdisc", "show", "dev", dev]);
            assert!(!q.contains("clsact"), "{opts}: {dev}: {q}");
        }
    }
}

/// A classic-BPF filter that matches nothing and lets the next filter decide (`ret #-1`, the
/// "unspecified" action in direct-action mode): someone else's filter that lagd must leave be.
const FOREIGN: &str = "1,6 0 0 4294967295,";

/// The `id N` of the lagd program named `name` in `tc filter show` lines.
fn program_id(lines: &[String], name: &str) -> Option<String> {
    let line = lines.iter().find(|l| l.contains(name))?;
    let mut words = line.split_whitespace();
    words.find(|&w| w == "id")?;
    words.next().map(str::to_owned)
}

#[test]
fn tc_filters_of_others_stay_and_lagds_leftovers_go_after_kill_9() {
    // Host A's first member has a clsact qdisc with filters of someone else's before lagd
    // starts: one at lagd's own priority (1), one after it, one on egress.
    let setup = |topo: &Topology| {
        let m0 = topo.links()[0].name.clone();
        let tc = |args: &[&str]| {
            let out = Command::new("ip")
                .args(["netns", "exec", topo.ns(Side::A), "tc"])
                .args(args)
                .output()
                .expect("tc");
            assert!(
                out.status.success(),
                "tc {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        };
        require_program("tc", "iproute2").unwrap_or_else(|e| panic!("{e:#}"));
        tc(&["qdisc", "add", "dev", &m0, "clsact"]);
        for (hook, prio, handle) in [
            ("ingress", "1", "7"),
            ("ingress", "5", "1"),
            ("egress", "3", "1"),
        ] {
            tc(&[
                "filter", "add", "dev", &m0, hook, "prio", prio, "handle", handle, "bpf", "da",
                "bytecode", FOREIGN,
            ]);
        }
    };
    let mut lab = Lab::new_with(
        2,
        "mode=balance-xor xmit_hash_policy=layer3+4 miimon=100 fastpath=on fastpath_attach=tc",
        setup,
    );
    let m0 = lab.topo.links()[0].name.clone();
    let m1 = lab.topo.links()[1].name.clone();
    let tap = lab.bonds[0].clone();
    let foreign = |lab: &Lab| {
        let mut f: Vec<String> = lab
            .filters(Side::A, &m0, "ingress")
            .into_iter()
            .chain(lab.filters(Side::A, &m0, "egress"))
            .filter(|l| !l.contains("lagd"))
            .collect();
        f.sort();
        f
    };
    let before = foreign(&lab);
    assert_eq!(before.len(), 3, "{before:?}");
    lab.wait_carrier();
    assert!(lab.ping(Side::A));
    assert_attached(&lab, Side::A, "tc");
    assert_eq!(foreign(&lab), before, "lagd's start kept the other filters");
    let hooks = [(&m0, "ingress"), (&m1, "ingress"), (&tap, "egress")];
    let ids = |lab: &Lab| -> Vec<Option<String>> {
        hooks
            .iter()
            .map(|(dev, hook)| program_id(&lab.filters(Side::A, dev, hook), "lagd_"))
            .collect()
    };
    let first = ids(&lab);
    assert!(first.iter().all(Option::is_some), "{first:?}");

    // kill -9: nothing deletes the filters, they stay with the killed lagd's programs.
    lab.stop(Side::A, "KILL");
    assert_eq!(ids(&lab), first, "the filters outlive a killed lagd");
    // The next lagd replaces them: one lagd filter per hook, with its own programs.
    lab.restart(Side::A);
    lab.wait_carrier();
    assert!(lab.ping(Side::A));
    assert_attached(&lab, Side::A, "tc");
    let second = ids(&lab);
    for (a, b) in first.iter().zip(&second) {
        assert!(b.is_some() && a != b, "replaced: {first:?} -> {second:?}");
    }
    lab.transfer(Side::A, 4 << 20, 5431, Duration::from_micros(100), || {});
    lab.transfer(Side::B, 4 << 20, 5432, Duration::from_micros(100), || {});
    // The new programs carry the traffic: their counters are the ones the status reads.
    assert_kernel_carried(&lab, Side::A, 64);
    assert_eq!(foreign(&lab), before, "the restart kept the other filters");

    // A clean stop deletes lagd's filters and nobody else's.
    lab.stop(Side::A, "TERM");
    for (dev, hook) in hooks {
        let f = lab.filters(Side::A, dev, hook);
        assert!(
            f.iter().all(|l| !l.contains("lagd")),
            "{dev} {hook} after the stop: {f:?}"
        );
    }
    assert_eq!(foreign(&lab), before, "the stop kept the other filters");
    let qdisc = lab.tc(Side::A, &["qdisc", "show", "dev", &m0]);
    assert!(qdisc.contains("clsact"), "not lagd's qdisc: {qdisc}");
    // The qdiscs the killed lagd added (its state file says so) went with the second's stop.
    for dev in [&m1, &tap] {
        let q = lab.tc(Side::A, &["qdisc", "show", "dev", dev]);
        assert!(!q.contains("clsact"), "{dev}: {q}");
    }
    // And the log says so, naming each qdisc the killed lagd added as removed (m0's was not
    // lagd's: nothing said of it), none as kept.
    let log = lab.topo.log_tail(lab.pids[idx(Side::A)], 200);
    let said: Vec<&str> = log.lines().filter(|l| l.contains("clsact qdisc")).collect();
    assert_eq!(said.len(), 2, "what the stop said of the qdiscs:\n{log}");
    for dev in [&m1, &tap] {
        assert!(
            said.iter().any(|l| l.contains("removed the clsact qdisc")
                && l.ends_with(&format!("interface={dev}"))),
            "{dev}: what the stop said of the qdiscs:\n{log}"
        );
    }
}

/// A lagd with tcx after a killed one with clsact filters: the filters go at its start (they
/// would otherwise run after its tcx programs), the qdiscs the killed one added at its stop.
#[test]
fn a_tcx_lagd_cleans_up_after_a_killed_tc_lagd() {
    if auto_attach() != "tcx" {
        // Without tcx the restart attaches with tc too (the kill -9 test covers that): check
        // the fallback instead.
        eprintln!("this kernel has no tcx: checking that auto attaches with tc instead");
        let lab = Lab::new(1, "mode=balance-xor miimon=100 fastpath=on");
        assert_attached(&lab, Side::A, "tc");
        return;
    }
    let opts = "mode=balance-xor xmit_hash_policy=layer3+4 miimon=100 fastpath=on";
    let mut lab = Lab::new(2, &format!("{opts} fastpath_attach=tc"));
    lab.wait_carrier();
    assert_attached(&lab, Side::A, "tc");
    lab.stop(Side::A, "KILL");
    lab.restart_with(Side::A, opts);
    lab.wait_carrier();
    assert!(lab.ping(Side::A));
    // tcx, and no lagd filter left on any hook.
    assert_attached(&lab, Side::A, "tcx");
    // 16 MB: the 64 frames asserted each way must hold for the returning ACKs too, which
    // GRO at the receiver thins out (4 MB once brought back only 55 in the 6.12 guest).
    lab.transfer(Side::A, 16 << 20, 5451, Duration::from_micros(100), || {});
    assert_kernel_carried(&lab, Side::A, 64);
    lab.stop(Side::A, "TERM");
    let tap = lab.bonds[0].clone();
    let mut devs: Vec<String> = lab.topo.links().iter().map(|l| l.name.clone()).collect();
    devs.push(tap);
    for dev in &devs {
        let q = lab.tc(Side::A, &["qdisc", "show", "dev", dev]);
        assert!(!q.contains("clsact"), "{dev}: {q}");
    }
}

#[test]
fn a_clean_stop_removes_the_clsact_qdisc_only_where_lagd_added_it() {
    let setup = |topo: &Topology| {
        let out = Command::new("ip")
            .args([
                "netns",
                "exec",
                topo.ns(Side::A),
                "tc",
                "qdisc",
                "add",
                "dev",
            ])
            .args([&topo.links()[0].name, "clsact"])
            .output()
            .expect("tc");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let mut lab = Lab::new_with(
        2,
        "mode=balance-xor miimon=100 fastpath=on fastpath_attach=tc",
        setup,
    );
    lab.wait_carrier();
    assert_attached(&lab, Side::A, "tc");
    lab.stop(Side::A, "TERM");
    let m0 = lab.topo.links()[0].name.clone();
    let m1 = lab.topo.links()[1].name.clone();
    let tap = lab.bonds[0].clone();
    assert!(
        lab.tc(Side::A, &["qdisc", "show", "dev", &m0])
            .contains("clsact")
    );
    for dev in [&m1, &tap] {
        let q = lab.tc(Side::A, &["qdisc", "show", "dev", dev]);
        assert!(!q.contains("clsact"), "{dev}: {q}");
    }
}

/// The MAC address of `dev` in `side`'s namespace.
fn mac_of(lab: &Lab, side: Side, dev: &str) -> String {
    let out = lab
        .topo
        .ip(side, &["-o", "link", "show", "dev", dev])
        .expect("ip link");
    let mut words = out.split_whitespace();
    words.find(|&w| w == "link/ether");
    words.next().expect("a MAC").to_owned()
}

/// `ping -c 200 -i 0.005` from `from` to the other host: its output.
fn ping_train(lab: &Lab, from: Side) -> String {
    let to = lab.addrs[1 - idx(from)].to_string();
    let out = Command::new("ip")
        .args(["netns", "exec", lab.topo.ns(from), "ping", "-c", "200"])
        .args(["-i", "0.005", "-W", "2", &to])
        .output()
        .expect("ping");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Sends `sent` numbered datagrams from host B to host A's `port`, one every 0.5 ms, reading
/// them at A meanwhile (the socket's buffer would not hold them all) until a second passes
/// without one: the datagrams received, those received more than once, those never received.
fn udp_count_b_to_a(lab: &Lab, port: u16, sent: u32) -> (u32, usize, usize) {
    let addr_a = lab.addrs[0];
    let rx = lab
        .topo
        .in_ns(Side::A, move || UdpSocket::bind((addr_a, port)))
        .expect("namespace")
        .expect("bind");
    rx.set_read_timeout(Some(Duration::from_millis(200)))
        .expect("timeout");
    // The reader stops 2 s after the sender finished, or 0.5 s after it once every datagram
    // came (time for a late copy): a quiet second in the middle of the train is a guest
    // stalled (CI runs three one-CPU guests on two cores), not the end of it.
    let done = Arc::new(Mutex::new(None::<Instant>));
    let sender_done = Arc::clone(&done);
    let reader = thread::spawn(move || {
        let mut seen = vec![0u32; sent as usize];
        let mut distinct = 0;
        let mut buf = [0u8; 64];
        loop {
            let got = rx.recv(&mut buf);
            if let Ok(n) = got {
                assert_eq!(n, 4);
                let k = u32::from_be_bytes(buf[..4].try_into().unwrap());
                if seen[k as usize] == 0 {
                    distinct += 1;
                }
                seen[k as usize] += 1;
                // Only a read that waited and found nothing may end it: a reader the guest did
                // not run for a while takes in what queued meanwhile first.
                continue;
            }
            if let Some(at) = *done.lock().unwrap() {
                let grace = if distinct == sent { 500 } else { 2000 };
                if at.elapsed() > Duration::from_millis(grace) {
                    break;
                }
            }
        }
        seen
    });
    let sent_ok = lab.topo.in_ns(Side::B, move || -> std::io::Result<()> {
        let tx = UdpSocket::bind("0.0.0.0:0")?;
        for n in 0..sent {
            tx.send_to(&n.to_be_bytes(), (addr_a, port))?;
            thread::sleep(Duration::from_micros(500));
        }
        Ok(())
    });
    *sender_done.lock().unwrap() = Some(Instant::now());
    sent_ok.expect("namespace").expect("send");
    let seen = reader.join().expect("reader");
    let missing: Vec<usize> = (0..seen.len()).filter(|&k| seen[k] == 0).collect();
    if !missing.is_empty() {
        eprintln!(
            "UDP count: {} of {sent} missing, first {:?}, last {:?}; A's drops: {:?}",
            missing.len(),
            missing.first(),
            missing.last(),
            lab.status(Side::A)
                .members
                .iter()
                .map(|m| m.rx_dropped.clone())
                .collect::<Vec<_>>()
        );
    }
    (
        seen.iter().sum(),
        seen.iter().filter(|&&c| c > 1).count(),
        missing.len(),
    )
}

/// Frames addressed to the bond's MAC arriving on the member that carries it (the bond took
/// the first member's MAC) reach the host's stack once: through the bond (the kernel path or
/// lagd), never also through the member's own stack (the ingress program or drop keeps it
/// off). In active-backup both ends send every frame through their active member, the first
/// one, so every frame arrives on a member carrying its bond's MAC. A ping train each way
/// shows no duplicate, a UDP count receives exactly what was sent.
fn delivered_once(opts: &str) {
    let lab = Lab::new(2, &format!("mode=active-backup miimon=100 {opts}"));
    lab.wait_carrier();
    assert!(lab.ping(Side::B), "{opts}");
    let m0 = lab.topo.links()[0].name.clone();
    for (i, side) in [Side::A, Side::B].into_iter().enumerate() {
        let s = lab.status(side);
        assert_eq!(s.active.as_deref(), Some(m0.as_str()), "{opts}: {side:?}");
        let bond_mac = mac_of(&lab, side, &lab.bonds[i]);
        assert_eq!(mac_of(&lab, side, &m0), bond_mac, "{opts}: {side:?} {m0}");
    }
    let rx_before = lab.status(Side::A).members[0].rx_packets;
    if opts.contains("fastpath=off") {
        // The members' isolation drop, attached as asked.
        let want = if opts.contains("fastpath_attach=tc") {
            "tc"
        } else {
            auto_attach()
        };
        let shown = if want == "tc" {
            "tc (clsact) ingress drop"
        } else {
            "tcx ingress drop"
        };
        let s = lab.status(Side::A);
        let iso = s.dataplane.isolation.clone().unwrap_or_default();
        assert!(iso.starts_with(shown), "{opts}: {iso}");
        assert!(s.render().contains(&format!("Member isolation: {shown}")));
        for l in lab.topo.links() {
            let f = lab.filters(Side::A, &l.name, "ingress");
            let n = f.iter().filter(|l| l.contains("lagd_ingr_drop")).count();
            assert_eq!(n, usize::from(want == "tc"), "{opts}: {f:?}");
        }
    }
    // A ping train each way.
    for from in [Side::A, Side::B] {
        let text = ping_train(&lab, from);
        assert!(
            !text.contains("DUP!"),
            "{opts}: duplicates from {from:?}:\n{text}"
        );
        assert!(
            text.contains("200 packets transmitted, 200 received"),
            "{opts}: {from:?}:\n{text}"
        );
    }
    // A UDP count from B to A: every datagram once.
    const SENT: u32 = 500;
    let (received, twice, missing) = udp_count_b_to_a(&lab, 5441, SENT);
    let rx = lab.status(Side::A).members[0].rx_packets - rx_before;
    assert!(
        rx >= u64::from(SENT) + 200,
        "{opts}: the frames came in on {m0}: {rx}"
    );
    assert_eq!(
        (received, twice, missing),
        (SENT, 0, 0),
        "{opts}: received, delivered more than once, missing"
    );
}

#[test]
fn frames_reach_the_host_once_on_the_kernel_path_tc() {
    delivered_once("fastpath=on fastpath_attach=tc");
}

#[test]
fn frames_reach_the_host_once_on_the_kernel_path_auto() {
    delivered_once("fastpath=on");
}

#[test]
fn frames_reach_the_host_once_on_lagds_path_with_the_tc_drop() {
    delivered_once("fastpath=off fastpath_attach=tc");
}

#[test]
fn frames_reach_the_host_once_on_lagds_path_auto() {
    delivered_once("fastpath=off");
}

/// Duplicates the dedup tests below let through, of 200 pings each way (and 2.5 times as
/// many of 500 datagrams): copies more than the window (10 ms) apart are two frames to the
/// receiver. Here they leave together, but a guest on a loaded machine can stall that long
/// between them (CI's 5.10 guest, on lagd's path: one reply of 200 with its copy 13 ms later).
/// Without the dedup every frame comes twice.
const DUPLICATES_TOLERATED: usize = 10;

/// Broadcast at both ends: each frame crosses both links, and the receiving lagd hands the
/// host one copy (`broadcast_dedup`, on by default), on the kernel path (`fastpath=on`) and on
/// lagd's (`fastpath=off`): a ping train each way and a UDP count show no duplicate (but
/// [`DUPLICATES_TOLERATED`]), every datagram arrives, and the receiver counts the copies it
/// kept from the host. With `broadcast_dedup=off` (the control, and the kernel bond's way)
/// most replies are duplicated.
fn broadcast_delivers_once(opts: &str) {
    let dedup = !opts.contains("broadcast_dedup=off");
    let lab = Lab::new(2, &format!("mode=broadcast miimon=100 {opts}"));
    lab.wait_carrier();
    assert!(lab.ping(Side::B), "{opts}");
    let dups = |lab: &Lab| -> u64 {
        let s = lab.status(Side::A);
        s.members
            .iter()
            .flat_map(|m| m.rx_dropped.iter())
            .filter(|(why, _)| why == "duplicate")
            .map(|(_, n)| n)
            .sum()
    };
    let before = dups(&lab);
    for from in [Side::A, Side::B] {
        let text = ping_train(&lab, from);
        let dups = text.matches("DUP!").count();
        if dedup {
            assert!(
                dups <= DUPLICATES_TOLERATED,
                "{opts}: {dups} duplicates from {from:?}:\n{text}"
            );
        } else {
            assert!(
                dups >= 100,
                "{opts}: {dups} duplicates from {from:?}:\n{text}"
            );
        }
        assert!(
            text.contains("200 packets transmitted, 200 received"),
            "{opts}: {from:?}:\n{text}"
        );
    }
    if !dedup {
        assert_eq!(dups(&lab), before, "{opts}: nothing counted as a copy");
        return;
    }
    const SENT: u32 = 500;
    let (received, twice, missing) = udp_count_b_to_a(&lab, 5443, SENT);
    assert!(
        missing == 0 && twice <= DUPLICATES_TOLERATED * 5 / 2,
        "{opts}: {received} received, {twice} more than once, {missing} missing"
    );
    // The ping trains' 200 requests or replies, and each datagram's second copy, but those
    // that came too late to count as copies.
    let kept = dups(&lab) - before;
    let late = (4 * DUPLICATES_TOLERATED) as u64;
    assert!(
        kept + late >= u64::from(SENT) + 200,
        "{opts}: {kept} copies counted"
    );
    if opts.contains("fastpath=on") {
        assert_kernel_carried(&lab, Side::A, 300);
    }
}

#[test]
fn broadcast_delivers_each_frame_once_on_the_kernel_path() {
    broadcast_delivers_once("fastpath=on");
}

#[test]
fn broadcast_delivers_each_frame_once_on_lagds_path() {
    broadcast_delivers_once("fastpath=off");
}

#[test]
fn broadcast_without_dedup_delivers_every_copy_as_the_kernel_bond_does() {
    broadcast_delivers_once("fastpath=on broadcast_dedup=off");
}

/// The control for the tests above: with lagd's drop filter deleted behind its back, the
/// member carrying the bond's MAC hands the frames to the host's stack as well, and the ping
/// train shows it (so the check can fail).
#[test]
fn without_the_drop_the_member_delivers_twice_and_the_ping_train_shows_it() {
    let lab = Lab::new(
        2,
        "mode=active-backup miimon=100 fastpath=off fastpath_attach=tc",
    );
    lab.wait_carrier();
    assert!(lab.ping(Side::B));
    let m0 = lab.topo.links()[0].name.clone();
    assert_eq!(lab.status(Side::A).active.as_deref(), Some(m0.as_str()));
    let f = lab.filters(Side::A, &m0, "ingress");
    let handle = f
        .iter()
        .find(|l| l.contains("lagd_ingr_drop"))
        .and_then(|l| {
            let mut w = l.split_whitespace();
            w.find(|&x| x == "handle")?;
            w.next().map(str::to_owned)
        })
        .unwrap_or_else(|| panic!("no drop filter: {f:?}"));
    lab.tc(
        Side::A,
        &[
            "filter", "del", "dev", &m0, "ingress", "prio", "1", "handle", &handle, "bpf",
        ],
    );
    let text = ping_train(&lab, Side::B);
    assert!(
        text.contains("DUP!"),
        "no duplicates without the drop:\n{text}"
    );
}
