//! The modes that need a switch: lagd on host A, its members plugged into a Linux bridge (host
//! B is the switch), and client hosts (namespaces of their own) on the same bridge. balance-tlb
//! and balance-alb, `fail_over_mac` and `resend_igmp`. Needs root; fails (never skips) without it.

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddrV4, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::thread;
use std::time::Duration;

use lagd::control::query_status;
use lagd::status::Status;
use lagd_lab::dataplane::address_bond;
use lagd_lab::topology::{ProcessId, Side, Topology, is_root, require_program, run};
use lagd_lab::traffic::checked_transfer;
use lagd_proto::hash::{HashPolicy, member_index, xmit_hash};

mod common;

use common::{start_lagd, udp_frame};

struct SwitchLab {
    topo: Topology,
    bond: String,
    bridge: String,
    control: PathBuf,
    lagd: ProcessId,
    /// Client namespaces and their addresses.
    clients: Vec<(String, Ipv4Addr)>,
}

impl SwitchLab {
    /// `links` members from lagd (host A, address .1, options `opts`) into a bridge in host B,
    /// and `clients` client namespaces on the bridge (addresses .10, .11, …).
    fn new(links: usize, clients: usize, opts: &str) -> Self {
        assert!(
            is_root(),
            "network namespace tests need root (CI runs them as root)"
        );
        let mut topo = Topology::create(links).expect("topology");
        let bridge = format!("{}sw", topo.tag());
        topo.ip(Side::B, &["link", "add", &bridge, "type", "bridge"])
            .unwrap();
        topo.ip(Side::B, &["link", "set", &bridge, "up"]).unwrap();
        let links: Vec<String> = topo.links().iter().map(|l| l.name.clone()).collect();
        for l in &links {
            topo.ip(Side::B, &["link", "set", l, "master", &bridge])
                .unwrap();
        }
        let mut cl = Vec::new();
        for k in 0..clients {
            let ns = topo.add_namespace(&format!("c{k}")).unwrap();
            let port = format!("{}c{k}", topo.tag());
            let inside = format!("{}p{k}", topo.tag());
            topo.ip(
                Side::B,
                &[
                    "link", "add", &port, "type", "veth", "peer", "name", &inside, "netns", &ns,
                ],
            )
            .unwrap();
            topo.ip(Side::B, &["link", "set", &port, "master", &bridge])
                .unwrap();
            topo.ip(Side::B, &["link", "set", &port, "up"]).unwrap();
            let addr = topo.address(10 + k as u8);
            let cidr = format!("{addr}/24");
            run("ip", &["-n", &ns, "addr", "add", &cidr, "dev", &inside]).unwrap();
            run("ip", &["-n", &ns, "link", "set", &inside, "up"]).unwrap();
            cl.push((ns, addr));
        }
        let bond = format!("{}ba", topo.tag());
        let (lagd, control) = start_lagd(&mut topo, Side::A, &bond, opts);
        address_bond(&topo, Side::A, &bond, 1).unwrap();
        Self {
            topo,
            bond,
            bridge,
            control,
            lagd,
            clients: cl,
        }
    }

    fn status(&self) -> Status {
        query_status(&self.control).expect("status")
    }

    fn a(&self) -> Ipv4Addr {
        self.topo.address(1)
    }

    /// Pings `to` from namespace `ns`.
    fn ping(ns: &str, to: Ipv4Addr) -> bool {
        require_program("ping", "iputils-ping").unwrap_or_else(|e| panic!("{e:#}"));
        Command::new("ip")
            .args(["netns", "exec", ns, "ping", "-q", "-c", "2", "-i", "0.05"])
            .args(["-W", "2", &to.to_string()])
            .output()
            .expect("ping")
            .status
            .success()
    }

    /// The MAC client `k` uses for host A (its neighbour entry).
    fn client_sees(&self, k: usize) -> String {
        let out = run(
            "ip",
            &[
                "-n",
                &self.clients[k].0,
                "neigh",
                "show",
                &self.a().to_string(),
            ],
        )
        .unwrap();
        out.split_whitespace()
            .skip_while(|w| *w != "lladdr")
            .nth(1)
            .unwrap_or_default()
            .to_owned()
    }

    /// The bridge ports where the switch has learned `mac`.
    fn switch_ports_of(&self, mac: &str) -> Vec<String> {
        let out = run(
            "bridge",
            &[
                "-n",
                self.topo.ns(Side::B),
                "fdb",
                "show",
                "br",
                &self.bridge,
            ],
        )
        .unwrap();
        out.lines()
            .filter(|l| l.starts_with(mac) && !l.contains("permanent"))
            .filter_map(|l| l.split_whitespace().nth(2).map(str::to_owned))
            .collect()
    }

    /// Bytes host A's lagd received per member (each client's 2 MB arrive whole on one).
    fn delivered_bytes(s: &Status) -> Vec<u64> {
        s.members.iter().map(|m| m.rx_bytes).collect()
    }

    fn member_mac(&self, i: usize) -> String {
        self.status().members[i].perm_hw_addr.clone()
    }
}

/// balance-tlb (static hash): transmit follows the hash over both members, frames off the
/// active member carry that member's MAC (the switch never learns the bond's MAC on two ports),
/// everything comes back on the active member, and TCP survives the active member's failure.
/// Through lagd and through the kernel fast path.
#[test]
fn balance_tlb_balances_transmit_and_receives_on_the_active_member() {
    for (fastpath, path) in [("off", "lagd"), ("on", "kernel")] {
        tlb_behind_a_switch(fastpath, path);
    }
}

fn tlb_behind_a_switch(fastpath: &str, path: &str) {
    let lab = SwitchLab::new(
        2,
        2,
        &format!(
            "mode=balance-tlb tlb_dynamic_lb=0 xmit_hash_policy=layer3+4 miimon=100 \
             fastpath={fastpath}"
        ),
    );
    for (ns, _) in &lab.clients {
        assert!(SwitchLab::ping(ns, lab.a()), "client {ns} reaches A");
    }
    let s = lab.status();
    let bond_mac = s.mac.clone();
    for k in 0..lab.clients.len() {
        assert_eq!(
            lab.client_sees(k),
            bond_mac,
            "TLB clients all use the bond's MAC"
        );
    }
    let before = s.members.iter().map(|m| m.tx_packets).collect::<Vec<_>>();
    let a = lab.a();
    let flows: Vec<u16> = (41_000..41_032).collect();
    let to = lab.clients[0].1;
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
        for _ in 0..5 {
            s.send_to(b"tlb", SocketAddrV4::new(to, 9)).unwrap();
        }
    }
    thread::sleep(Duration::from_millis(300));
    let after = lab.status();
    let sent: Vec<u64> = after
        .members
        .iter()
        .zip(&before)
        .map(|(m, b)| m.tx_packets - b)
        .collect();
    let mut want = [0u64; 2];
    for &p in &flows {
        want[member_index(xmit_hash(HashPolicy::Layer34, &udp_frame(a, to, p, 9)), 2).unwrap()] +=
            5;
    }
    // Learning packets and ARP may add a few frames on top of the prediction.
    for i in 0..2 {
        assert!(
            sent[i] >= want[i] && sent[i] <= want[i] + 6,
            "member {i}: sent {sent:?}, hash predicts {want:?}"
        );
    }
    assert!(
        want[0] > 0 && want[1] > 0,
        "the chosen ports use both members"
    );
    // The switch has the bond's MAC on link 0 only, member 1's own MAC on link 1.
    let links: Vec<String> = lab.topo.links().iter().map(|l| l.name.clone()).collect();
    assert_eq!(lab.switch_ports_of(&bond_mac), [links[0].clone()]);
    let m1 = lab.member_mac(1);
    assert_eq!(lab.switch_ports_of(&m1), [links[1].clone()]);
    // Receive: a transfer from a client arrives on the active member.
    let rx_bytes = |s: &Status| s.members.iter().map(|m| m.rx_bytes).collect::<Vec<_>>();
    let before = rx_bytes(&lab.status());
    let t = checked_transfer(
        &lab.clients[1].0,
        lab.topo.ns(Side::A),
        SocketAddrV4::new(a, 5301),
        4 << 20,
        None,
        || {},
    )
    .unwrap();
    assert!(t.intact());
    let after = rx_bytes(&lab.status());
    let got: Vec<u64> = after.iter().zip(&before).map(|(x, y)| x - y).collect();
    assert!(
        got[0] > 4 << 20 && got[1] < 64 << 10,
        "received bytes per member: {got:?}"
    );
    // The active member fails mid-transfer (A to a client): the data arrives intact.
    let link0 = links[0].clone();
    let ns_a = lab.topo.ns(Side::A).to_owned();
    let t = checked_transfer(
        &ns_a,
        &lab.clients[1].0,
        SocketAddrV4::new(lab.clients[1].1, 5302),
        16 << 20,
        None,
        || {
            thread::sleep(Duration::from_millis(100));
            run("ip", &["-n", &ns_a, "link", "set", &link0, "down"]).unwrap();
        },
    )
    .unwrap();
    assert!(t.intact(), "TCP intact across the failover");
    println!("balance-tlb failover gap: {:?}", t.longest_gap);
    let s = lab.status();
    assert_eq!(s.active.as_deref(), Some(links[1].as_str()));
    assert_eq!(s.dataplane.path, path, "{:?}", s.dataplane);
    if path == "kernel" {
        let (ktx, krx) = s.members.iter().fold((0, 0), |(t, r), m| {
            (t + m.kernel_tx_packets, r + m.kernel_rx_packets)
        });
        assert!(
            ktx > 128 && krx > 128,
            "the programs carried it: {ktx} {krx}"
        );
    }
    assert!(SwitchLab::ping(&lab.clients[0].0, a));
    assert_eq!(
        lab.switch_ports_of(&bond_mac),
        [links[1].clone()],
        "the switch relearned the bond's MAC"
    );
}

/// balance-alb: clients are taught different members' MACs by ARP, so traffic from them
/// arrives on both members; when a member fails its clients are moved and keep working.
/// Through lagd and through the kernel fast path (the ARP frames still go through lagd, which
/// crafts the replies per client and learns from the clients' ARP).
#[test]
fn balance_alb_balances_receive_by_arp() {
    for (fastpath, path) in [("off", "lagd"), ("on", "kernel")] {
        alb_behind_a_switch(fastpath, path);
    }
}

fn alb_behind_a_switch(fastpath: &str, path: &str) {
    let lab = SwitchLab::new(
        2,
        4,
        &format!("mode=balance-alb miimon=100 fastpath={fastpath}"),
    );
    // Host A resolves the clients first (its requests teach them the bond's MAC, then lagd
    // teaches each its member); then the clients answer and ask.
    for (ns, addr) in &lab.clients {
        assert!(
            SwitchLab::ping(lab.topo.ns(Side::A), *addr),
            "A reaches {ns}"
        );
        assert!(SwitchLab::ping(ns, lab.a()), "{ns} reaches A");
    }
    // lagd teaches them shortly after their ARP exchange.
    thread::sleep(Duration::from_millis(600));
    let s = lab.status();
    let bond_mac = s.mac.clone();
    let m1 = lab.member_mac(1);
    let mut seen: Vec<String> = (0..4).map(|k| lab.client_sees(k)).collect();
    seen.sort();
    let mut want = vec![bond_mac.clone(), bond_mac.clone(), m1.clone(), m1.clone()];
    want.sort();
    assert_eq!(seen, want, "two clients per member");
    // Each client sends 2 MB to A: both members deliver.
    let before = SwitchLab::delivered_bytes(&lab.status());
    for (k, (ns, _)) in lab.clients.iter().enumerate() {
        let t = checked_transfer(
            ns,
            lab.topo.ns(Side::A),
            SocketAddrV4::new(lab.a(), 5310 + k as u16),
            2 << 20,
            None,
            || {},
        )
        .unwrap();
        assert!(t.intact(), "client {k}");
    }
    let after = SwitchLab::delivered_bytes(&lab.status());
    let got: Vec<u64> = after.iter().zip(&before).map(|(x, y)| x - y).collect();
    assert!(
        got[0] > 3 << 20 && got[1] > 3 << 20,
        "receive balanced over both members: {got:?}"
    );
    // Member 1 fails: its clients are taught the bond's MAC and keep working.
    let link1 = lab.topo.links()[1].name.clone();
    lab.topo
        .ip(Side::A, &["link", "set", &link1, "down"])
        .unwrap();
    thread::sleep(Duration::from_millis(500));
    for k in 0..4 {
        assert_eq!(lab.client_sees(k), bond_mac, "client {k} moved");
        let (ns, _) = &lab.clients[k];
        let t = checked_transfer(
            ns,
            lab.topo.ns(Side::A),
            SocketAddrV4::new(lab.a(), 5320 + k as u16),
            1 << 20,
            None,
            || {},
        )
        .unwrap();
        assert!(t.intact(), "client {k} after the failure");
    }
    // And from host A to a client.
    let (ns, addr) = &lab.clients[2];
    let t = checked_transfer(
        lab.topo.ns(Side::A),
        ns,
        SocketAddrV4::new(*addr, 5329),
        2 << 20,
        None,
        || {},
    )
    .unwrap();
    assert!(t.intact(), "A to client 2");
    let s = lab.status();
    assert_eq!(s.dataplane.path, path, "{:?}", s.dataplane);
    if path == "kernel" {
        let ktx: u64 = s.members.iter().map(|m| m.kernel_tx_packets).sum();
        assert!(ktx > 32, "the programs sent: {ktx}");
        // The data went through the programs: lagd read only ARP from the members.
        let krx: u64 = s.members.iter().map(|m| m.kernel_rx_packets).sum();
        let own_rx: u64 = s
            .members
            .iter()
            .map(|m| m.rx_packets - m.kernel_rx_packets)
            .sum();
        assert!(krx > 128, "the programs delivered: {krx}");
        assert!(own_rx < 100, "lagd read {own_rx} member frames (ARP only)");
    }
}

/// `fail_over_mac=active`: after a failover the bond interface carries the new active member's
/// MAC and clients follow it (gratuitous ARP); `follow`: the new active member's interface takes
/// the bond's MAC and the old one the new one's, and lagd gives them back when it stops.
#[test]
fn fail_over_mac_active_and_follow() {
    let mut lab = SwitchLab::new(2, 1, "mode=active-backup miimon=100 fail_over_mac=active");
    let (ns, _) = lab.clients[0].clone();
    assert!(SwitchLab::ping(&ns, lab.a()));
    let m1 = lab.member_mac(1);
    let link0 = lab.topo.links()[0].name.clone();
    lab.topo
        .ip(Side::A, &["link", "set", &link0, "down"])
        .unwrap();
    thread::sleep(Duration::from_millis(300));
    let shown = lab.topo.ip(Side::A, &["link", "show", &lab.bond]).unwrap();
    assert!(
        shown.contains(&m1),
        "bond interface has member 1's MAC: {shown}"
    );
    assert_eq!(lab.status().mac, m1);
    assert_eq!(
        lab.client_sees(0),
        m1,
        "the client learned it (gratuitous ARP)"
    );
    assert!(SwitchLab::ping(&ns, lab.a()));
    lab.topo.stop(lab.lagd);
    drop(lab);

    let mut lab = SwitchLab::new(2, 1, "mode=active-backup miimon=100 fail_over_mac=follow");
    let (ns, _) = lab.clients[0].clone();
    assert!(SwitchLab::ping(&ns, lab.a()));
    let bond_mac = lab.status().mac;
    let (m0, m1) = (lab.member_mac(0), lab.member_mac(1));
    assert_eq!(m0, bond_mac, "the bond takes member 0's MAC");
    let links: Vec<String> = lab.topo.links().iter().map(|l| l.name.clone()).collect();
    let iface_mac = |lab: &SwitchLab, l: &str| {
        let out = lab.topo.ip(Side::A, &["-br", "link", "show", l]).unwrap();
        out.split_whitespace().nth(2).unwrap_or_default().to_owned()
    };
    lab.topo
        .ip(Side::A, &["link", "set", &links[0], "down"])
        .unwrap();
    thread::sleep(Duration::from_millis(300));
    assert_eq!(
        iface_mac(&lab, &links[1]),
        bond_mac,
        "new active has the bond's MAC"
    );
    assert_eq!(
        iface_mac(&lab, &links[0]),
        m1,
        "the old active has the new one's"
    );
    assert_eq!(lab.status().mac, bond_mac);
    assert!(SwitchLab::ping(&ns, lab.a()));
    lab.topo.stop(lab.lagd);
    assert_eq!(iface_mac(&lab, &links[0]), m0, "restored when lagd stops");
    assert_eq!(iface_mac(&lab, &links[1]), m1, "restored when lagd stops");
}

/// `resend_igmp`: the host's IGMP and MLD membership reports go out again on the new active
/// member after a failover, so a snooping switch learns the groups there. lagd replays what it
/// learned from the host's own reports: on the kernel path the TAP's program hands them to lagd
/// (MLD behind its hop-by-hop header too). Through lagd and through the kernel path.
#[test]
fn resend_igmp_after_failover() {
    for (fastpath, path) in [("on", "kernel"), ("off", "lagd")] {
        resend_after_failover(fastpath, path);
    }
}

fn resend_after_failover(fastpath: &str, path: &str) {
    let mut lab = SwitchLab::new(
        2,
        1,
        &format!("mode=active-backup miimon=100 resend_igmp=3 num_grat_arp=0 fastpath={fastpath}"),
    );
    assert_eq!(lab.status().dataplane.path, path);
    let (ns, _) = lab.clients[0].clone();
    assert!(SwitchLab::ping(&ns, lab.a()));
    // IPv6 on the bond alone (the lab turns it off everywhere), for MLD.
    lab.topo
        .sysctl(
            Side::A,
            &format!("net/ipv6/conf/{}/disable_ipv6", lab.bond),
            "0",
        )
        .unwrap();
    let listing = lab
        .topo
        .ip(Side::A, &["-o", "link", "show", "dev", &lab.bond]);
    let bond_index: u32 = listing
        .unwrap()
        .split(':')
        .next()
        .and_then(|i| i.trim().parse().ok())
        .expect("the bond's interface index");
    // Host A joins 239.7.7.7 and ff05::7:7 (its kernel sends the reports through the bond).
    let a = lab.a();
    let group6 = Ipv6Addr::new(0xff05, 0, 0, 0, 0, 0, 7, 7);
    let socks = lab
        .topo
        .in_ns(Side::A, || {
            let s = UdpSocket::bind("0.0.0.0:7777").unwrap();
            s.join_multicast_v4(&Ipv4Addr::new(239, 7, 7, 7), &a)
                .unwrap();
            let s6 = UdpSocket::bind("[::]:7778").unwrap();
            s6.join_multicast_v6(&group6, bond_index).unwrap();
            (s, s6)
        })
        .unwrap();
    thread::sleep(Duration::from_millis(1500));
    let link1 = lab.topo.links()[1].name.clone();
    let pcap = lab.topo.dir().join("igmp.pcap");
    let pcap_s = pcap.to_string_lossy().into_owned();
    let dump = lab
        .topo
        .spawn(
            Side::B,
            "tcpdump",
            Path::new("tcpdump"),
            &["-i", &link1, "-Q", "in", "-U", "-w", &pcap_s],
        )
        .unwrap();
    thread::sleep(Duration::from_millis(500));
    let link0 = lab.topo.links()[0].name.clone();
    lab.topo
        .ip(Side::A, &["link", "set", &link0, "down"])
        .unwrap();
    thread::sleep(Duration::from_millis(1200));
    lab.topo.stop(dump);
    let out = Command::new("tshark")
        .args(["-r", &pcap_s, "-Y", "igmp or icmpv6.type == 143"])
        .args(["-T", "fields", "-e", "igmp.maddr"])
        .args(["-e", "icmpv6.mldr.mar.multicast_address"])
        .output()
        .expect("tshark");
    let text = String::from_utf8_lossy(&out.stdout);
    let reports = |group: &str| text.lines().filter(|l| l.contains(group)).count();
    assert!(
        reports("239.7.7.7") >= 3,
        "{path}: IGMP reports on the new active member: {}\n{text}",
        reports("239.7.7.7")
    );
    assert!(
        reports("ff05::7:7") >= 3,
        "{path}: MLD reports on the new active member: {}\n{text}",
        reports("ff05::7:7")
    );
    drop(socks);
}

/// balance-slb behind a switch without a LAG (what it is for): everything from host A's one
/// MAC leaves on one member, so the switch learns that MAC on one port only; broadcasts the
/// switch floods to both members reach the host once; ping and TCP work both ways. Through lagd
/// and through the kernel fast path (which computes Open vSwitch's source-MAC hash).
#[test]
fn balance_slb_keeps_each_mac_on_one_member() {
    for (fastpath, path) in [("off", "lagd"), ("on", "kernel")] {
        slb_behind_a_switch(fastpath, path);
    }
}

fn slb_behind_a_switch(fastpath: &str, path: &str) {
    let lab = SwitchLab::new(
        2,
        2,
        &format!("mode=balance-slb miimon=100 fastpath={fastpath}"),
    );
    for (ns, addr) in &lab.clients {
        assert!(SwitchLab::ping(ns, lab.a()), "client {ns} reaches A");
        assert!(
            SwitchLab::ping(lab.topo.ns(Side::A), *addr),
            "A reaches {ns}"
        );
    }
    let a = lab.a();
    for (k, (ns, addr)) in lab.clients.iter().enumerate() {
        let to_a = checked_transfer(
            ns,
            lab.topo.ns(Side::A),
            SocketAddrV4::new(a, 5330 + k as u16),
            2 << 20,
            None,
            || {},
        )
        .unwrap();
        assert!(to_a.intact(), "client {k} to A");
        let from_a = checked_transfer(
            lab.topo.ns(Side::A),
            ns,
            SocketAddrV4::new(*addr, 5340 + k as u16),
            2 << 20,
            None,
            || {},
        )
        .unwrap();
        assert!(from_a.intact(), "A to client {k}");
    }
    let s = lab.status();
    assert_eq!(s.dataplane.path, path, "{:?}", s.dataplane);
    let sent: Vec<u64> = s.members.iter().map(|m| m.tx_packets).collect();
    assert_eq!(
        sent.iter().filter(|&&n| n > 0).count(),
        1,
        "one source MAC, one bucket, one member: {sent:?}"
    );
    let links: Vec<String> = lab.topo.links().iter().map(|l| l.name.clone()).collect();
    let ports = lab.switch_ports_of(&s.mac);
    assert_eq!(ports.len(), 1, "{ports:?}");
    assert!(links.contains(&ports[0]));
    // The switch floods broadcasts to both members: one is dropped, as inactive (the kernel
    // path counts it as a frame its member may not deliver).
    let dropped: u64 = s
        .members
        .iter()
        .flat_map(|m| m.rx_dropped.iter())
        .filter(|(r, _)| r == "inactive_member" || r == "not_delivering")
        .map(|(_, n)| n)
        .sum();
    assert!(dropped > 0, "{:?}", s.members);
}
