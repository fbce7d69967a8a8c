//! `lagctl plan` and `lagctl explain` on captures taken with tcpdump in network namespaces:
//! two lagds in 802.3ad (a LACP exchange) carrying ping and iperf3, captured on the bond, on a
//! member, with `-i any` (Linux cooked v1 and v2), and the LACP exchange alone. Checks that
//! link control frames are counted apart (against tshark's count of LACPDUs), that a cooked
//! capture counts each frame once (against the bond's own capture) and marks the MAC policies
//! it cannot judge, and that a capture of LACPDUs alone gets no recommendation.
//! `KEEP_CAPTURES=DIR` copies the captures to DIR for a look afterwards.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::thread;
use std::time::{Duration, Instant};

use lagd::control::query_status;
use lagd_lab::topology::{ProcessId, Side, Topology, is_root, require_program};
use lagd_proto::capture::CaptureReader;
use serde_json::Value;

mod common;

use common::{address_bonds, start_lagd};

const LAGCTL: &str = env!("CARGO_BIN_EXE_lagctl");

fn lagctl(args: &[&str]) -> Output {
    Command::new(LAGCTL)
        .args(args)
        .output()
        .expect("run lagctl")
}

fn plan_json(pcap: &Path) -> Value {
    let out = lagctl(&["plan", "--pcap", pcap.to_str().unwrap(), "--json"]);
    assert!(
        out.status.success(),
        "lagctl plan {}: {}",
        pcap.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON")
}

/// Frames in a capture as tshark counts them, optionally those matching a display filter.
fn tshark_count(pcap: &Path, filter: Option<&str>) -> u64 {
    let mut c = Command::new("tshark");
    c.args(["-n", "-r"])
        .arg(pcap)
        .args(["-T", "fields", "-e", "frame.number"]);
    if let Some(f) = filter {
        c.args(["-Y", f]);
    }
    let out = c.output().expect("run tshark");
    assert!(
        out.status.success(),
        "tshark: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).lines().count() as u64
}

/// Starts tcpdump in host A with `args` writing `file`, and waits until it listens.
fn tcpdump(topo: &mut Topology, label: &str, file: &Path, args: &[&str]) -> ProcessId {
    let mut full = vec![
        "-n",
        "--immediate-mode",
        "-U",
        "-B",
        "16384",
        "-w",
        file.to_str().unwrap(),
    ];
    full.extend_from_slice(args);
    let id = topo
        .spawn(Side::A, label, Path::new("tcpdump"), &full)
        .expect("start tcpdump");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !topo.log_tail(id, 5).contains("listening on") {
        assert!(
            topo.try_wait(id).expect("wait").is_none(),
            "tcpdump {label} exited: {}",
            topo.log_tail(id, 5)
        );
        assert!(Instant::now() < deadline, "tcpdump {label} did not listen");
        thread::sleep(Duration::from_millis(20));
    }
    id
}

fn control_packets(v: &Value, kind: &str) -> u64 {
    v["input"]["control"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["kind"] == kind)
        .map_or(0, |c| c["packets"].as_u64().unwrap())
}

#[test]
fn captures_on_a_bond_a_member_and_any() {
    assert!(
        is_root(),
        "network namespace tests need root (CI runs them as root)"
    );
    for (p, pkg) in [
        ("tcpdump", "tcpdump"),
        ("tshark", "tshark"),
        ("iperf3", "iperf3"),
        ("ping", "iputils-ping"),
    ] {
        require_program(p, pkg).unwrap_or_else(|e| panic!("{e:#}"));
    }
    let mut topo = Topology::create(2).expect("create topology");
    let opts = "mode=802.3ad lacp_rate=fast xmit_hash_policy=layer3+4 miimon=100";
    let bonds = [format!("{}ba", topo.tag()), format!("{}bb", topo.tag())];
    let (_, control_b) = start_lagd(&mut topo, Side::B, &bonds[1], opts);
    let (_, control_a) = start_lagd(&mut topo, Side::A, &bonds[0], opts);
    let addrs = address_bonds(&topo, &bonds);
    let deadline = Instant::now() + Duration::from_secs(20);
    for c in [&control_a, &control_b] {
        while query_status(c).map(|s| s.mii_status).ok().as_deref() != Some("up") {
            assert!(Instant::now() < deadline, "LACP did not form");
            thread::sleep(Duration::from_millis(50));
        }
    }
    let dir: PathBuf = topo.dir().to_path_buf();
    let member = topo.links()[0].name.clone();
    let files = [
        "bond.pcap",
        "member.pcap",
        "any.pcap",
        "any2.pcap",
        "lacp.pcap",
    ]
    .map(|f| dir.join(f));
    let ids = [
        tcpdump(&mut topo, "td-bond", &files[0], &["-i", &bonds[0]]),
        tcpdump(&mut topo, "td-member", &files[1], &["-i", &member]),
        tcpdump(&mut topo, "td-any", &files[2], &["-i", "any"]),
        tcpdump(
            &mut topo,
            "td-any2",
            &files[3],
            &["-i", "any", "-y", "LINUX_SLL2"],
        ),
        tcpdump(
            &mut topo,
            "td-lacp",
            &files[4],
            &["-i", &member, "ether", "proto", "0x8809"],
        ),
    ];
    // Traffic: ping, then iperf3 with 8 parallel streams, rate-limited (the machine is small).
    let b = addrs[1].to_string();
    let ping = Command::new("ip")
        .args(["netns", "exec", topo.ns(Side::A), "ping", "-q", "-c", "20"])
        .args(["-i", "0.05", "-W", "2", &b])
        .output()
        .expect("ping");
    assert!(ping.status.success(), "ping over the bond");
    let server = topo
        .spawn(Side::B, "iperf3-server", Path::new("iperf3"), &["-s", "-1"])
        .expect("iperf3 server");
    thread::sleep(Duration::from_millis(300));
    let client = Command::new("ip")
        .args(["netns", "exec", topo.ns(Side::A), "iperf3", "-c", &b])
        .args(["-P", "8", "-t", "2", "-b", "1M", "-l", "1200"])
        .output()
        .expect("iperf3");
    assert!(
        client.status.success(),
        "iperf3: {}",
        String::from_utf8_lossy(&client.stderr)
    );
    // At least two LACPDUs each way at the fast rate.
    thread::sleep(Duration::from_millis(2500));
    for id in ids {
        topo.stop(id);
    }
    topo.stop(server);
    if let Some(keep) = std::env::var_os("KEEP_CAPTURES") {
        for f in &files {
            std::fs::copy(f, Path::new(&keep).join(f.file_name().unwrap())).unwrap();
        }
    }

    // The LACP exchange alone: no data, no recommendation; every LACPDU counted apart.
    let lacp = plan_json(&files[4]);
    let lacpdus = tshark_count(&files[4], Some("lacp"));
    assert!(lacpdus >= 4, "{lacpdus} LACPDUs captured");
    assert_eq!(lacp["input"]["packets"], 0);
    assert_eq!(control_packets(&lacp, "lacp"), lacpdus);
    assert!(lacp["recommendation"].is_null());
    assert!(lacp["elephants"].as_array().unwrap().is_empty());
    let text = lagctl(&["plan", "--pcap", files[4].to_str().unwrap()]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("Recommendation: none (only link control frames"),
        "{text}"
    );
    assert!(text.contains("802.3ad machine of each member"), "{text}");
    // explain on one of them: not hashed.
    let bytes = std::fs::read(&files[4]).unwrap();
    let mut r = CaptureReader::new(&bytes[..]).unwrap();
    let p = r.next_packet().unwrap().expect("a LACPDU");
    let hex: String = p.data.iter().map(|b| format!("{b:02x}")).collect();
    let ex = lagctl(&["explain", "--policy", "layer3+4", &hex]);
    let ex = String::from_utf8_lossy(&ex.stdout);
    assert!(
        ex.contains("An LACPDU") && ex.contains("layer3+4: not hashed"),
        "{ex}"
    );

    // The member: data planned, LACPDUs apart; nothing lost or counted twice.
    let m = plan_json(&files[1]);
    let m_lacp = tshark_count(&files[1], Some("lacp"));
    assert!(m_lacp >= 4);
    assert_eq!(control_packets(&m, "lacp"), m_lacp);
    let total = tshark_count(&files[1], None);
    let control_total: u64 = m["input"]["control"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["packets"].as_u64().unwrap())
        .sum();
    assert_eq!(
        m["input"]["packets"].as_u64().unwrap() + control_total,
        total
    );
    for e in m["elephants"].as_array().unwrap() {
        assert!(!e["flow"].as_str().unwrap().contains("0x8809"), "{e}");
    }

    // The bond: lagd's TAP carries no LACPDU. (With the eBPF fast path, frames the bond sends
    // are redirected to a member before the TAP's capture point, so a capture on the bond
    // holds what it received, and what the slow path sent.)
    let bond = plan_json(&files[0]);
    let bond_packets = bond["input"]["packets"].as_u64().unwrap();
    assert_eq!(control_packets(&bond, "lacp"), 0);
    assert_eq!(bond_packets, tshark_count(&files[0], None));
    assert!(bond_packets > 200, "{bond_packets}");
    assert!(
        bond["recommendation"]["policy"].is_string(),
        "{}",
        bond["sample"]
    );
    // The bond's interface index, as a cooked v2 capture records it.
    let link = topo
        .ip(Side::A, &["-o", "link", "show", &bonds[0]])
        .unwrap();
    let bond_ifindex: u32 = link.split(':').next().unwrap().trim().parse().unwrap();

    // `-i any`, cooked v1 and v2: a frame the bond receives is captured twice, on its member
    // and on the bond, and counted once; a frame it sends (redirected by the fast path, see
    // above) once, on its member. MAC policies cannot be judged.
    for f in &files[2..4] {
        let any = plan_json(f);
        let packets = any["input"]["packets"].as_u64().unwrap();
        let dups = any["input"]["duplicates"].as_u64().unwrap();
        let captured = tshark_count(f, None);
        assert_eq!(packets + dups + control_packets(&any, "lacp"), captured);
        let sll2 = f.ends_with("any2.pcap");
        if sll2 {
            // Exactly the copies on the bond are dropped (a few more kept if the capture
            // lost their twin on the member).
            let on_bond = tshark_count(f, Some(&format!("sll.ifindex == {bond_ifindex}")));
            assert!(
                dups <= on_bond && dups * 20 >= on_bond * 19,
                "{dups} duplicates, {on_bond} frames on the bond"
            );
            // The report says per interface which copies were kept: every frame of each
            // interface (as tshark counts them) kept or dropped, the drops adding up, and
            // the bond's copies the ones dropped.
            let ifs = &any["input"]["interfaces"];
            assert_eq!(ifs["naming"], "ifindex", "{ifs}");
            let seen = ifs["seen"].as_array().unwrap();
            let (mut kept, mut dropped) = (0, 0);
            for i in seen {
                let x = i["interface"].as_u64().unwrap();
                let (k, d) = (i["kept"].as_u64().unwrap(), i["dropped"].as_u64().unwrap());
                assert_eq!(
                    k + d,
                    tshark_count(f, Some(&format!("sll.ifindex == {x}"))),
                    "{i}"
                );
                kept += k;
                dropped += d;
            }
            assert_eq!(dropped, dups);
            assert_eq!(kept + dropped, captured);
            let bond = seen
                .iter()
                .find(|i| i["interface"] == bond_ifindex)
                .expect("the bond's frames");
            assert_eq!(bond["label"], format!("ifindex {bond_ifindex}"));
            let member_ifindex: u32 = topo
                .ip(Side::A, &["-o", "link", "show", &member])
                .unwrap()
                .split(':')
                .next()
                .unwrap()
                .trim()
                .parse()
                .unwrap();
            let m = seen
                .iter()
                .find(|i| i["interface"] == member_ifindex)
                .expect("the member's frames");
            assert!(
                bond["dropped"].as_u64().unwrap() * 20 >= dups * 19
                    && m["kept"].as_u64().unwrap() * 20 >= m["dropped"].as_u64().unwrap() * 19,
                "bond {bond}, member {m}"
            );
            let text = lagctl(&["plan", "--pcap", f.to_str().unwrap()]);
            let text = String::from_utf8_lossy(&text.stdout);
            let line = text
                .lines()
                .find(|l| {
                    l.trim_start()
                        .starts_with(&format!("ifindex {bond_ifindex} "))
                })
                .unwrap_or_else(|| panic!("no line for the bond: {text}"));
            assert!(
                line.contains(&format!("{} copies dropped", bond["dropped"]))
                    && line.contains("second copies")
                    || line.contains("every frame a second copy"),
                "{line}"
            );
            assert!(
                text.contains("Copies kept and dropped, by the interface index"),
                "{text}"
            );
        } else {
            // Received frames: pkttype host (0) or other host (3), twice each.
            let received = tshark_count(f, Some("sll.pkttype == 0 || sll.pkttype == 3"));
            let sent = tshark_count(f, Some("sll.pkttype == 4"));
            assert!(
                dups * 2 * 20 >= received * 19 && dups * 2 <= received + sent,
                "{dups} duplicates, {received} received and {sent} sent frames"
            );
        }
        assert!(dups * 10 >= bond_packets * 5, "{dups} of {bond_packets}");
        assert!(control_packets(&any, "lacp") >= 8, "both members' LACPDUs");
        for p in any["policies"].as_array().unwrap() {
            let mac = matches!(
                p["policy"].as_str().unwrap(),
                "layer2" | "layer2+3" | "encap2+3"
            );
            assert_eq!(p["cannot_judge"].is_string(), mac, "{}", p["policy"]);
        }
        let rec = any["recommendation"]["policy"].as_str().unwrap();
        assert!(!matches!(rec, "layer2" | "layer2+3" | "encap2+3"), "{rec}");
    }
    topo.teardown().expect("teardown");
}
