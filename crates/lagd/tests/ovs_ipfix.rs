//! `lagctl plan --ipfix` and `--ipfix-listen` against a real exporter: Open vSwitch (userspace
//! datapath, in a network namespace) exports IPFIX for the bridge, sampling every packet, to
//! 127.0.0.1:4739 in its namespace, where tcpdump captures the messages and `lagctl plan
//! --ipfix-listen` receives them. Host A sends UDP flows of known counts and sizes through the
//! bridge (static neighbours, IPv6 off: nothing else crosses it), captured on its link too.
//! Checks the planner's figures against the traffic sent, against tshark's dissection of the
//! messages, and, policy by policy and member by member, against the plan of the capture of
//! the traffic itself. Needs root, Open vSwitch, tcpdump, tshark and python3; fails, never
//! skips, without them. `KEEP_CAPTURES=DIR` copies the two captures to DIR.

use std::path::Path;
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use lagd_lab::dataplane::{address_bond, start_ovs};
use lagd_lab::topology::{Side, Topology, is_root, require_program};
use serde_json::Value;

const LAGCTL: &str = env!("CARGO_BIN_EXE_lagctl");

/// The UDP flows host A sends: (source port, destination port, datagrams, payload bytes).
/// Ports chosen so that no policy puts every flow on one member.
const FLOWS: [(u16, u16, u64, u64); 8] = [
    (5000, 7001, 40, 100),
    (5001, 7010, 12, 1400),
    (5002, 7002, 25, 300),
    (5003, 7007, 60, 60),
    (5004, 7013, 8, 900),
    (5005, 7004, 33, 500),
    (5006, 7020, 18, 1200),
    (5007, 7006, 50, 200),
];

/// Ethernet (14) + IPv4 (20) + UDP (8).
const HEADERS: u64 = 42;

fn plan_json(args: &[&str]) -> Value {
    let out = Command::new(LAGCTL)
        .arg("plan")
        .args(args)
        .args(["--json", "--members", "2"])
        .output()
        .expect("run lagctl");
    assert!(
        out.status.success(),
        "lagctl plan {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON")
}

fn members_of(v: &Value, policy: &str) -> Vec<(u64, u64)> {
    let p = v["policies"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["policy"] == policy)
        .unwrap_or_else(|| panic!("no {policy}"));
    p["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["packets"].as_u64().unwrap(), m["bytes"].as_u64().unwrap()))
        .collect()
}

/// The mac of `dev` in `side`.
fn mac_of(topo: &Topology, side: Side, dev: &str) -> String {
    let out = topo.ip(side, &["-o", "link", "show", dev]).unwrap();
    let at = out.find("link/ether ").expect("an Ethernet device") + 11;
    out[at..at + 17].to_string()
}

/// Sums of tshark's decoded IPFIX fields over the ingress records of UDP flows: (records,
/// packets, layer-2 octets), and the egress records of UDP flows.
fn tshark_sums(pcap: &Path) -> ((u64, u64, u64), u64) {
    let out = Command::new("tshark")
        .args(["-n", "-r"])
        .arg(pcap)
        .args([
            "-d",
            "udp.port==4739,cflow",
            "-T",
            "fields",
            "-E",
            "occurrence=a",
        ])
        .args([
            "-E",
            "aggregator=/",
            "-e",
            "cflow.protocol",
            "-e",
            "cflow.packets",
        ])
        .args([
            "-e",
            "cflow.layer2_octet_delta_count",
            "-e",
            "cflow.direction",
        ])
        .output()
        .expect("run tshark");
    assert!(
        out.status.success(),
        "tshark: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (mut records, mut packets, mut octets, mut egress) = (0, 0, 0, 0);
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let cols: Vec<Vec<&str>> = line
            .split('\t')
            .map(|c| c.split('/').filter(|s| !s.is_empty()).collect())
            .collect();
        if cols.len() < 4 {
            continue;
        }
        for (i, proto) in cols[0].iter().enumerate() {
            if *proto == "17" && cols[3][i] != "0" {
                egress += 1;
            } else if *proto == "17" {
                records += 1;
                packets += cols[1][i].parse::<u64>().unwrap();
                octets += cols[2][i].parse::<u64>().unwrap();
            }
        }
    }
    ((records, packets, octets), egress)
}

#[test]
fn open_vswitch_ipfix_records_planned_as_the_traffic_sent() {
    assert!(
        is_root(),
        "the Open vSwitch IPFIX test needs root (CI runs it as root)"
    );
    for (p, pkg) in [
        ("tcpdump", "tcpdump"),
        ("tshark", "tshark"),
        ("python3", "python3"),
        ("ovs-vswitchd", "openvswitch-switch"),
    ] {
        require_program(p, pkg).unwrap_or_else(|e| panic!("{e:#}"));
    }
    let mut topo = Topology::create(1).expect("topology");
    let link = topo.links()[0].name.clone();
    let bridge = format!("{}br", topo.tag());
    let ovs = start_ovs(&mut topo, Side::B, &bridge).expect("start Open vSwitch");
    ovs.vsctl(&["add-port", &bridge, &link]).expect("add-port");
    let a = address_bond(&topo, Side::A, &link, 1).unwrap();
    let b = address_bond(&topo, Side::B, &bridge, 2).unwrap();
    // No ARP through the bridge: only the flows below cross it.
    let (mac_a, mac_b) = (
        mac_of(&topo, Side::A, &link),
        mac_of(&topo, Side::B, &bridge),
    );
    for (side, addr, mac, dev) in [(Side::A, b, &mac_b, &link), (Side::B, a, &mac_a, &bridge)] {
        let addr = addr.to_string();
        topo.ip(
            side,
            &[
                "neigh",
                "replace",
                &addr,
                "lladdr",
                mac,
                "dev",
                dev,
                "nud",
                "permanent",
            ],
        )
        .unwrap();
    }

    let dir = topo.dir().to_path_buf();
    let (msgs, traffic) = (dir.join("ipfix.pcap"), dir.join("traffic.pcap"));
    let mut captures = Vec::new();
    for (side, label, file, iface, filter) in [
        (Side::B, "td-ipfix", &msgs, "lo", "udp port 4739"),
        (Side::A, "td-traffic", &traffic, link.as_str(), ""),
    ] {
        let mut args = vec![
            "-n",
            "-U",
            "-s",
            "0",
            "-i",
            iface,
            "-w",
            file.to_str().unwrap(),
        ];
        if !filter.is_empty() {
            args.push(filter);
        }
        let id = topo
            .spawn(side, label, Path::new("tcpdump"), &args)
            .expect("start tcpdump");
        let deadline = Instant::now() + Duration::from_secs(10);
        while !topo.log_tail(id, 5).contains("listening on") {
            assert!(
                topo.try_wait(id).unwrap().is_none(),
                "{}",
                topo.log_tail(id, 5)
            );
            assert!(Instant::now() < deadline, "tcpdump {label} did not listen");
            thread::sleep(Duration::from_millis(20));
        }
        captures.push(id);
    }
    // The socket reader, started before the exporter sends its templates.
    let listen_secs = 40;
    let listener = topo
        .spawn(
            Side::B,
            "lagctl-listen",
            Path::new(LAGCTL),
            &[
                "plan",
                "--ipfix-listen",
                "127.0.0.1:4739",
                "--listen-seconds",
                &listen_secs.to_string(),
                "--json",
                "--members",
                "2",
            ],
        )
        .expect("start lagctl");
    let started = Instant::now();
    thread::sleep(Duration::from_millis(500));
    // Every packet sampled (sampling=1); records leave the cache within a second.
    ovs.vsctl(&[
        "--",
        "set",
        "Bridge",
        &bridge,
        "ipfix=@i",
        "--",
        "--id=@i",
        "create",
        "IPFIX",
        "targets=\"127.0.0.1:4739\"",
        "sampling=1",
        "cache_active_timeout=1",
    ])
    .expect("configure IPFIX");
    thread::sleep(Duration::from_millis(500));

    // The traffic: a receiver in B (no ICMP port unreachable), the senders in A.
    let ports: Vec<String> = FLOWS.iter().map(|f| f.1.to_string()).collect();
    let receiver = format!(
        "import socket,select\n\
         ss=[socket.socket(socket.AF_INET,socket.SOCK_DGRAM) for _ in range({})]\n\
         for s,p in zip(ss,[{}]): s.bind(('{b}',p))\n\
         while True:\n    r,_,_=select.select(ss,[],[])\n    [s.recv(2000) for s in r]\n",
        FLOWS.len(),
        ports.join(",")
    );
    let recv_id = topo
        .spawn(
            Side::B,
            "udp-sink",
            Path::new("python3"),
            &["-c", &receiver],
        )
        .expect("python3");
    thread::sleep(Duration::from_millis(300));
    let flows: Vec<String> = FLOWS
        .iter()
        .map(|(sp, dp, n, len)| format!("({sp},{dp},{n},{len})"))
        .collect();
    let sender = format!(
        "import socket,time\n\
         for sp,dp,n,l in [{}]:\n    s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM); s.bind(('{a}',sp))\n\
         \x20   for _ in range(n):\n        s.sendto(b'x'*l,('{b}',dp)); time.sleep(0.002)\n",
        flows.join(",")
    );
    let sent = Command::new("ip")
        .args(["netns", "exec", topo.ns(Side::A), "python3", "-c", &sender])
        .output()
        .expect("python3");
    assert!(
        sent.status.success(),
        "sender: {}",
        String::from_utf8_lossy(&sent.stderr)
    );
    let want_packets: u64 = FLOWS.iter().map(|f| f.2).sum();
    let want_bytes: u64 = FLOWS.iter().map(|f| f.2 * (f.3 + HEADERS)).sum();

    // Wait until the exported records count every packet (generous: the machine is slow).
    let deadline = started + Duration::from_secs(listen_secs - 5);
    let mut last = Value::Null;
    loop {
        let out = Command::new(LAGCTL)
            .args(["plan", "--json", "--ipfix"])
            .arg(&msgs)
            .output()
            .expect("lagctl");
        if out.status.success() {
            last = serde_json::from_slice(&out.stdout).unwrap();
            if last["input"]["packets"].as_u64() >= Some(want_packets) {
                break;
            }
        }
        assert!(
            Instant::now() < deadline,
            "the records did not count {want_packets} packets in time: {}",
            last["input"]
        );
        thread::sleep(Duration::from_millis(500));
    }
    thread::sleep(Duration::from_millis(1500));
    for id in captures {
        topo.stop(id);
    }
    topo.stop(recv_id);

    if let Some(keep) = std::env::var_os("KEEP_CAPTURES") {
        for f in [&msgs, &traffic] {
            std::fs::copy(f, Path::new(&keep).join(f.file_name().unwrap())).unwrap();
        }
    }

    // The capture of the messages: exactly the traffic sent.
    let v = plan_json(&["--ipfix", msgs.to_str().unwrap()]);
    let x = &v["input"]["ipfix"];
    assert_eq!(v["input"]["packets"].as_u64(), Some(want_packets), "{x}");
    assert_eq!(v["input"]["bytes"].as_u64(), Some(want_bytes), "{x}");
    assert_eq!(
        v["input"]["flows"].as_u64(),
        Some(FLOWS.len() as u64),
        "{x}"
    );
    assert!(x["templates"].as_u64().unwrap() > 0, "{x}");
    assert_eq!(x["malformed_messages"], 0);
    assert_eq!(x["no_template"], 0, "{x}");
    assert_eq!(x["bytes_from_ip_octets"], 0);
    // OVS does not export its sampling rate: the report says the counts are taken as is.
    assert_eq!(x["sampling_unknown"], x["planned_records"]);
    // tshark decodes the same records; Open vSwitch samples on output too, so each packet is
    // also in an egress record, which is not planned (and said so).
    let ((records, packets, octets), egress) = tshark_sums(&msgs);
    assert_eq!(records, x["planned_records"].as_u64().unwrap());
    assert_eq!(egress, x["other_direction"].as_u64().unwrap());
    assert!(egress > 0);
    assert_eq!((packets, octets), (want_packets, want_bytes));

    // The capture of the traffic itself gives every policy the same figures, member by member
    // (frames as on the wire, the flows' MACs, addresses and ports as the records give them).
    let t = plan_json(&["--pcap", traffic.to_str().unwrap()]);
    assert_eq!(
        t["input"]["packets"].as_u64(),
        Some(want_packets),
        "{}",
        t["input"]
    );
    assert_eq!(t["input"]["bytes"].as_u64(), Some(want_bytes));
    for policy in [
        "layer2",
        "layer2+3",
        "layer3+4",
        "encap3+4",
        "vlan+srcmac",
        "ovs-slb",
        "ovs-tcp",
    ] {
        assert_eq!(members_of(&v, policy), members_of(&t, policy), "{policy}");
    }
    let l34 = members_of(&v, "layer3+4");
    assert!(
        l34.iter().all(|m| m.0 > 0),
        "layer3+4 uses both members: {l34:?}"
    );
    // The flows are all elephants or not, alike.
    let elephants = |v: &Value| -> Vec<String> {
        let mut e: Vec<String> = v["elephants"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["flow"].as_str().unwrap().to_string())
            .collect();
        e.sort();
        e
    };
    assert_eq!(elephants(&v), elephants(&t));

    // The text says what flow records cannot tell.
    let text = Command::new(LAGCTL)
        .args(["plan", "--members", "2", "--ipfix"])
        .arg(&msgs)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("records came with no sampling rate"),
        "{text}"
    );
    assert!(
        text.contains("records of the other flow direction not planned"),
        "{text}"
    );
    assert!(
        text.contains("packet sizes, order and timing are not known"),
        "{text}"
    );

    // The socket: the same messages, the same plan.
    let status = topo
        .wait_exit(listener, Duration::from_secs(listen_secs + 30))
        .unwrap()
        .expect("lagctl --ipfix-listen ends after --listen-seconds");
    assert!(status.success(), "{}", topo.log_tail(listener, 5));
    let l: Value =
        serde_json::from_slice(&std::fs::read(topo.out_path(listener)).unwrap()).expect("JSON");
    assert_eq!(
        l["input"]["packets"].as_u64(),
        Some(want_packets),
        "{}",
        l["input"]
    );
    assert_eq!(l["input"]["bytes"].as_u64(), Some(want_bytes));
    for policy in ["layer2", "layer2+3", "layer3+4"] {
        assert_eq!(members_of(&l, policy), members_of(&v, policy), "{policy}");
    }
    topo.teardown().expect("teardown");
}
