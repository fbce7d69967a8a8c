//! `lagctl plan` and `lagctl explain` as a user runs them: the real binary on generated and
//! live captures, golden output, errors with offsets, the HTML report rendered by Chromium.
//!
//! The live-capture and Chromium tests need root (network namespaces) and `chromium`; they fail,
//! never skip, without them (CI runs as root and installs chromium). Run this file's tests one
//! at a time (`--test-threads=1`), as CI does.

use lagd_lab::topology::{is_root, require_program};
use std::collections::HashSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use lagd_proto::capture::{
    CaptureReader, LINKTYPE_ETHERNET, LINKTYPE_RAW, PcapNgWriter, PcapWriter, TsResolution,
};
use lagd_proto::hash::{HashPolicy, member_index, xmit_hash};
use lagd_proto::plan::PlanPolicy;
use lagd_proto::plan::flow::{FlowRecord, parse_flow_spec};
use lagd_proto::wire::EthernetAddress;
use serde_json::Value;

const LAGCTL: &str = env!("CARGO_BIN_EXE_lagctl");

fn lagctl(args: &[&str]) -> Output {
    Command::new(LAGCTL)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run lagctl")
}

fn ok_stdout(out: &Output) -> String {
    assert!(
        out.status.success(),
        "lagctl failed ({:?}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).expect("UTF-8 output")
}

fn data(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/plan")
        .join(name)
}

/// A scratch directory removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> Self {
        let p = std::env::temp_dir().join(format!("lagd-plan-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).expect("create temp dir");
        Self(p)
    }
    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn frame(spec: &str, src_mac: [u8; 6], dst_mac: [u8; 6], pad_to: usize) -> Vec<u8> {
    let rec = FlowRecord {
        src_mac: EthernetAddress(src_mac),
        dst_mac: EthernetAddress(dst_mac),
        ..parse_flow_spec(spec).expect("spec")
    };
    let mut f = Vec::new();
    assert!(rec.write_frame(&mut f));
    if f.len() < pad_to {
        // Grow the IP packet, so the frame stays consistent (OVS checks the IPv4 length).
        let extra = pad_to - f.len();
        f.resize(pad_to, 0);
        if f[12..14] == [0x08, 0x00] {
            let tot = u16::from_be_bytes([f[16], f[17]]) as usize + extra;
            f[16..18].copy_from_slice(&(tot as u16).to_be_bytes());
        }
    }
    f
}

/// A deterministic capture: many flows to one gateway MAC, a big transfer, pings, DNS over
/// IPv6, a VLAN, ARP. Every flow's packets interleave with the others'.
fn mixed_frames() -> Vec<Vec<u8>> {
    let gw = [0x02, 0, 0, 0, 0, 0xfe];
    let host = [0x02, 0, 0, 0, 0, 0x01];
    let mut flows: Vec<(Vec<u8>, usize)> = Vec::new();
    for i in 0..24u16 {
        let spec = format!(
            "tcp 10.0.0.1:{} > 198.51.100.{}:443",
            41000 + i * 37,
            1 + i % 9
        );
        flows.push((
            frame(&spec, host, gw, 200 + usize::from(i) * 40),
            3 + usize::from(i % 5),
        ));
    }
    flows.push((
        frame(
            "tcp 10.0.0.1:50000 > 10.0.0.2:5201",
            host,
            [2, 0, 0, 0, 0, 2],
            1514,
        ),
        60,
    ));
    flows.push((
        frame(
            "icmp 10.0.0.1 > 10.0.0.2 id 7",
            host,
            [2, 0, 0, 0, 0, 2],
            98,
        ),
        5,
    ));
    flows.push((
        frame("udp [2001:db8::1]:5353 > [2001:db8::53]:53", host, gw, 90),
        4,
    ));
    flows.push((
        frame(
            "tcp 192.168.10.5:2049 > 192.168.10.6:900 vlan 10",
            [2, 0, 0, 0, 0, 5],
            [2, 0, 0, 0, 0, 6],
            1000,
        ),
        8,
    ));
    let mut arp = vec![0xff; 6];
    arp.extend_from_slice(&host);
    arp.extend_from_slice(&[0x08, 0x06, 0, 1, 8, 0, 6, 4, 0, 1]);
    arp.extend_from_slice(&host);
    arp.extend_from_slice(&[10, 0, 0, 1, 0, 0, 0, 0, 0, 0, 10, 0, 0, 2]);
    arp.resize(60, 0);
    flows.push((arp, 2));
    // Round-robin over flows until each has sent its packets.
    let mut out = Vec::new();
    let mut left: Vec<usize> = flows.iter().map(|f| f.1).collect();
    while left.iter().any(|&l| l > 0) {
        for (i, (f, _)) in flows.iter().enumerate() {
            if left[i] > 0 {
                left[i] -= 1;
                out.push(f.clone());
            }
        }
    }
    out
}

fn write_pcap(path: &Path, frames: &[Vec<u8>]) {
    let mut w = PcapWriter::new(Vec::new(), LINKTYPE_ETHERNET).unwrap();
    for (i, f) in frames.iter().enumerate() {
        // 10 ms apart: 100 frames span the second the planner wants before it judges.
        w.write_packet(1_700_000_000_000_000_000 + i as u64 * 10_000_000, f)
            .unwrap();
    }
    std::fs::write(path, w.into_inner()).unwrap();
}

fn json_of(out: &Output) -> Value {
    serde_json::from_str(&ok_stdout(out)).expect("valid JSON")
}

/// `lagctl plan --pcap <pcap> <args> --json`, its JSON.
fn plan_json(pcap: &str, args: &[&str]) -> Value {
    let mut all = vec!["plan", "--pcap", pcap];
    all.extend_from_slice(args);
    all.push("--json");
    json_of(&lagctl(&all))
}

fn policy<'a>(v: &'a Value, name: &str) -> &'a Value {
    v["policies"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["policy"] == name)
        .unwrap_or_else(|| panic!("policy {name} in the JSON"))
}

/// Per member (packets, bytes) of `frames` under `h`, computed here with the hash code.
fn by_hash(frames: &[Vec<u8>], h: HashPolicy, n: usize) -> Vec<(u64, u64)> {
    let mut v = vec![(0, 0); n];
    for f in frames {
        let m = member_index(xmit_hash(h, f), n).unwrap();
        v[m].0 += 1;
        v[m].1 += f.len() as u64;
    }
    v
}

fn members_of(p: &Value) -> Vec<(u64, u64)> {
    p["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["packets"].as_u64().unwrap(), m["bytes"].as_u64().unwrap()))
        .collect()
}

fn check_against_hash_code(v: &Value, frames: &[Vec<u8>], n: usize) {
    for h in HashPolicy::ALL {
        let got = members_of(policy(v, h.name()));
        assert_eq!(got, by_hash(frames, h, n), "{h} with {n} members");
    }
}

#[test]
fn generated_capture_with_known_distribution_matches_the_hash_code() {
    // layer2 hashes dst[5] ^ src[5] ^ 0x0800 (as the frames are IPv4): with two members the
    // parity of the MACs' last bytes decides. 30 flows of even parity, 10 of odd: member 0
    // gets exactly 3/4 of the packets.
    let mut frames = Vec::new();
    for i in 0..40u8 {
        let last = if i < 30 { 2 * i } else { 2 * i + 1 };
        let f = frame(
            &format!("udp 10.1.0.{i}:{} > 10.2.0.1:4000", 1000 + u16::from(i)),
            [2, 0, 0, 0, 1, last],
            [2, 0, 0, 0, 0, 0],
            100,
        );
        for _ in 0..5 {
            frames.push(f.clone());
        }
    }
    frames.extend(mixed_frames());
    let dir = TempDir::new("known");
    let path = dir.path("known.pcap");
    write_pcap(&path, &frames);
    for n in [2usize, 3, 4] {
        let v = plan_json(path.to_str().unwrap(), &["--members", &n.to_string()]);
        assert_eq!(v["input"]["packets"].as_u64(), Some(frames.len() as u64));
        assert_eq!(v["members"], n);
        check_against_hash_code(&v, &frames, n);
        // Every policy in the JSON, with the fields the issue asks for.
        assert_eq!(
            v["policies"].as_array().unwrap().len(),
            PlanPolicy::ALL.len()
        );
        for p in v["policies"].as_array().unwrap() {
            assert!(p["imbalance"].as_f64().unwrap() >= 1.0);
            assert!(p["throughput_bound_gbps"].as_f64().unwrap() > 0.0);
            for m in p["members"].as_array().unwrap() {
                for k in ["index", "packets", "bytes", "flows"] {
                    assert!(m[k].is_u64(), "{k} in {m}");
                }
            }
        }
        assert!(v["recommendation"]["policy"].is_string());
        assert!(
            v["recommendation"]["reason"]
                .as_str()
                .unwrap()
                .ends_with('.')
        );
    }
    // The known part alone: 150 of 200 packets on member 0 under layer2.
    let known = &frames[..200];
    let path2 = dir.path("known-only.pcap");
    write_pcap(&path2, known);
    let v = plan_json(
        path2.to_str().unwrap(),
        &["--members", "2", "--policy", "layer2"],
    );
    let l2 = policy(&v, "layer2");
    assert_eq!(members_of(l2), vec![(150, 15000), (50, 5000)]);
    assert_eq!(l2["members"][0]["flows"], 30);
    assert_eq!(l2["members"][1]["flows"], 10);
    assert_eq!(l2["imbalance"].as_f64(), Some(1.5));
    // Busiest member saturates first: 20000 bytes / (15000 / 10G) = 13.33 Gbit/s.
    assert_eq!(l2["throughput_bound_gbps"].as_f64(), Some(13.3333));
}

#[test]
fn pcapng_with_several_interfaces() {
    let frames = mixed_frames();
    let mut w = PcapNgWriter::new(Vec::new()).unwrap();
    let a = w
        .add_interface(LINKTYPE_ETHERNET, 0, Some("eth0"), TsResolution::MICROS)
        .unwrap();
    let b = w
        .add_interface(LINKTYPE_ETHERNET, 128, Some("eth1"), TsResolution::NANOS)
        .unwrap();
    let raw = w
        .add_interface(LINKTYPE_RAW, 0, Some("tun0"), TsResolution::NANOS)
        .unwrap();
    for (i, f) in frames.iter().enumerate() {
        w.write_packet(if i % 3 == 0 { a } else { b }, 1_000_000_000 * i as u64, f)
            .unwrap();
    }
    // A second section with its own interface ids.
    w.new_section(true).unwrap();
    let c = w
        .add_interface(LINKTYPE_ETHERNET, 0, Some("eth2"), TsResolution::MICROS)
        .unwrap();
    w.write_packet(c, 0, &frames[0]).unwrap();
    let ip = frame("udp 10.9.9.1:1 > 10.9.9.2:2", [0; 6], [0; 6], 60);
    w.new_section(false).unwrap();
    let r2 = w
        .add_interface(LINKTYPE_RAW, 0, None, TsResolution::MICROS)
        .unwrap();
    let _ = raw;
    w.write_packet(r2, 0, &ip[14..]).unwrap();
    let dir = TempDir::new("ng");
    let path = dir.path("multi.pcapng");
    std::fs::write(&path, w.into_inner()).unwrap();
    let v = plan_json(path.to_str().unwrap(), &[]);
    let mut all = frames.clone();
    all.push(frames[0].clone());
    let mut rebuilt = vec![0u8; 12];
    rebuilt.extend_from_slice(&ip[12..]);
    all.push(rebuilt);
    assert_eq!(v["input"]["packets"].as_u64(), Some(all.len() as u64));
    assert_eq!(v["input"]["rebuilt_ethernet"], 1);
    check_against_hash_code(&v, &all, 2);
}

/// Two network namespaces joined by a veth pair, removed on drop.
struct Netns {
    a: String,
    b: String,
}

fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("run ip");
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

impl Netns {
    fn new() -> Self {
        let tag = format!("lplan{}", std::process::id());
        let ns = Self {
            a: format!("{tag}a"),
            b: format!("{tag}b"),
        };
        // Leftovers of a crashed run with the same pid.
        let _ = Command::new("ip").args(["netns", "del", &ns.a]).output();
        let _ = Command::new("ip").args(["netns", "del", &ns.b]).output();
        ip(&["netns", "add", &ns.a]);
        ip(&["netns", "add", &ns.b]);
        ip(&[
            "-n", &ns.a, "link", "add", "veth0", "type", "veth", "peer", "name", "veth1", "netns",
            &ns.b,
        ]);
        ip(&["-n", &ns.a, "addr", "add", "10.231.0.1/24", "dev", "veth0"]);
        ip(&["-n", &ns.b, "addr", "add", "10.231.0.2/24", "dev", "veth1"]);
        for (n, dev) in [(&ns.a, "veth0"), (&ns.b, "veth1")] {
            ip(&["-n", n, "link", "set", dev, "up"]);
            ip(&["-n", n, "link", "set", "lo", "up"]);
        }
        ns
    }

    fn exec(&self, ns: &str, cmd: &[&str]) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", ns]).args(cmd);
        c
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.a]).output();
        let _ = Command::new("ip").args(["netns", "del", &self.b]).output();
    }
}

/// A child process killed on drop.
struct Reaper(Child);

impl Drop for Reaper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn live_capture_in_network_namespaces() {
    assert!(
        is_root(),
        "this test builds network namespaces: run it as root (CI does)"
    );
    for (program, package) in [
        ("tcpdump", "tcpdump"),
        ("ping", "iputils-ping"),
        ("python3", "python3"),
    ] {
        require_program(program, package).unwrap_or_else(|e| panic!("{e:#}"));
    }
    let ns = Netns::new();
    let dir = TempDir::new("live");
    let cap = dir.path("live.pcap");
    let mut tcpdump = Reaper(
        ns.exec(
            &ns.a,
            &[
                "tcpdump",
                "-i",
                "veth0",
                "-U",
                "-n",
                "-s",
                "0",
                "-w",
                cap.to_str().unwrap(),
            ],
        )
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start tcpdump (apt-get install tcpdump)"),
    );
    // Wait for tcpdump to listen: it says so on stderr.
    let mut err = tcpdump.0.stderr.take().unwrap();
    let mut seen = Vec::new();
    let start = Instant::now();
    let mut buf = [0u8; 256];
    while !String::from_utf8_lossy(&seen).contains("listening on") {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "tcpdump did not start"
        );
        let n = std::io::Read::read(&mut err, &mut buf).unwrap_or(0);
        assert!(n > 0, "tcpdump exited: {}", String::from_utf8_lossy(&seen));
        seen.extend_from_slice(&buf[..n]);
    }
    // Real traffic: pings, then a TCP transfer by python3 between the namespaces.
    let ping = ns
        .exec(
            &ns.a,
            &["ping", "-c", "5", "-i", "0.05", "-q", "10.231.0.2"],
        )
        .output()
        .unwrap();
    assert!(
        ping.status.success(),
        "{}",
        String::from_utf8_lossy(&ping.stderr)
    );
    let server = "import socket\n\
                  s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n\
                  s.bind(('10.231.0.2', 5201)); s.listen(1); print('ready', flush=True)\n\
                  c,_=s.accept(); n=0\n\
                  while True:\n    d=c.recv(65536)\n    if not d: break\n    n+=len(d)\n\
                  print(n, flush=True)\n";
    let mut srv = Reaper(
        ns.exec(&ns.b, &["python3", "-c", server])
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3"),
    );
    let mut out = srv.0.stdout.take().unwrap();
    let mut line = [0u8; 6];
    std::io::Read::read_exact(&mut out, &mut line).expect("server ready");
    let client = "import socket\n\
                  c=socket.create_connection(('10.231.0.2', 5201)); c.sendall(b'x' * 4000000); c.close()\n";
    let cl = ns.exec(&ns.a, &["python3", "-c", client]).output().unwrap();
    assert!(
        cl.status.success(),
        "{}",
        String::from_utf8_lossy(&cl.stderr)
    );
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut out, &mut rest).unwrap();
    assert!(rest.contains("4000000"), "server got: {rest}");
    thread::sleep(Duration::from_millis(300));
    // Stop tcpdump cleanly (SIGTERM: it finishes the file), then reap it.
    let pid = tcpdump.0.id().to_string();
    let _ = Command::new("kill").args(["-TERM", &pid]).status();
    let start = Instant::now();
    while tcpdump.0.try_wait().ok().flatten().is_none() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "tcpdump did not stop"
        );
        thread::sleep(Duration::from_millis(20));
    }
    drop(tcpdump);
    drop(srv);

    // What the capture holds, read here with the capture reader and the hash code.
    let bytes = std::fs::read(&cap).unwrap();
    let mut r = CaptureReader::new(&bytes[..]).expect("tcpdump wrote a capture");
    let mut frames = Vec::new();
    let mut wire = Vec::new();
    while let Some(p) = r.next_packet().unwrap() {
        frames.push(p.data.to_vec());
        wire.push(u64::from(p.orig_len));
    }
    assert!(frames.len() > 20, "only {} frames captured", frames.len());
    let v = plan_json(cap.to_str().unwrap(), &["--members", "2"]);
    assert_eq!(v["input"]["packets"].as_u64(), Some(frames.len() as u64));
    assert_eq!(v["input"]["bytes"].as_u64(), Some(wire.iter().sum::<u64>()));
    for h in HashPolicy::ALL {
        let mut want = vec![(0u64, 0u64); 2];
        for (f, w) in frames.iter().zip(&wire) {
            let m = member_index(xmit_hash(h, f), 2).unwrap();
            want[m].0 += 1;
            want[m].1 += w;
        }
        assert_eq!(members_of(policy(&v, h.name())), want, "{h}");
    }
    // The TCP transfer is the largest flow; the pings are flows too.
    let top = v["elephants"][0]["flow"].as_str().unwrap();
    assert!(
        top.starts_with("tcp 10.231.0.1:") && top.ends_with("> 10.231.0.2:5201"),
        "{top}"
    );
    let flows: HashSet<String> = v["elephants"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["flow"].as_str().unwrap().to_string())
        .collect();
    assert!(
        flows
            .iter()
            .any(|f| f.starts_with("icmp 10.231.0.1 > 10.231.0.2 type 8")),
        "{flows:?}"
    );
    // One TCP connection: under layer3+4 its data all takes one member.
    let l34 = policy(&v, "layer3+4");
    let shares: Vec<u64> = members_of(l34).iter().map(|m| m.1).collect();
    assert!(shares.iter().max().unwrap() * 10 > shares.iter().sum::<u64>() * 9);
    let finding = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["kind"] == "elephant")
        .expect("the single-connection finding");
    assert!(finding["message"].as_str().unwrap().contains("5201"));
}

#[test]
fn truncated_and_corrupt_files_fail_with_the_offset() {
    let dir = TempDir::new("corrupt");
    let frames = mixed_frames();
    let good = dir.path("good.pcap");
    write_pcap(&good, &frames[..10]);
    let bytes = std::fs::read(&good).unwrap();
    // Cut inside the fourth record's data: the error names where that record starts.
    let mut at = 24;
    for f in &frames[..3] {
        at += 16 + f.len();
    }
    let cut = dir.path("cut.pcap");
    std::fs::write(&cut, &bytes[..at + 20]).unwrap();
    let out = lagctl(&["plan", "--pcap", cut.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&format!("at byte {at}")), "{err}");
    assert!(err.contains("cut.pcap"), "{err}");
    assert!(err.contains("truncated"), "{err}");

    // A record length beyond the limit.
    let mut bad = bytes.clone();
    bad[24 + 8..24 + 12].copy_from_slice(&0xffff_fff0u32.to_le_bytes());
    let p = dir.path("huge.pcap");
    std::fs::write(&p, &bad).unwrap();
    let out = lagctl(&["plan", "--pcap", p.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("at byte 24: corrupt packet record"), "{err}");
    // Above the 262144-byte maximum and the file's snaplen (262144 as written): corrupt too,
    // naming the record's own offset (the fourth record here).
    let mut bad = bytes.clone();
    let fourth = at;
    bad[fourth + 8..fourth + 12].copy_from_slice(&262_145u32.to_le_bytes());
    std::fs::write(&p, &bad).unwrap();
    let out = lagctl(&["plan", "--pcap", p.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!(
            "at byte {fourth}: corrupt packet record: captured length 262145"
        )),
        "{err}"
    );

    // Not a capture; empty; a pcapng block whose trailing length disagrees.
    for (name, content, want) in [
        (
            "text.pcap",
            b"hello, world".to_vec(),
            "at byte 0: not a pcap",
        ),
        ("empty.pcap", Vec::new(), "at byte 0: empty"),
    ] {
        let p = dir.path(name);
        std::fs::write(&p, content).unwrap();
        let out = lagctl(&["plan", "--pcap", p.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(2), "{name}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(want), "{name}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
    let mut w = PcapNgWriter::new(Vec::new()).unwrap();
    let i = w
        .add_interface(LINKTYPE_ETHERNET, 0, None, TsResolution::MICROS)
        .unwrap();
    w.write_packet(i, 0, &frames[0]).unwrap();
    let mut ng = w.into_inner();
    let n = ng.len();
    ng[n - 4] ^= 0x40;
    let p = dir.path("bad.pcapng");
    std::fs::write(&p, &ng).unwrap();
    let out = lagctl(&["plan", "--pcap", p.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    // The EPB starts after the 28-byte SHB and the 20-byte IDB.
    assert!(
        err.contains("at byte 48") && err.contains("trailing"),
        "{err}"
    );

    // A missing file is an I/O failure: exit 1.
    let out = lagctl(&["plan", "--pcap", "/nonexistent/x.pcap"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot open /nonexistent/x.pcap"));
    // Bad arguments: exit 2 with a message.
    for args in [
        &["plan", "--pcap", "x", "--speeds", "10G,fast"][..],
        &["plan", "--pcap", "x", "--policy", "layer9"],
        &["plan", "--pcap", "x", "--members", "0"],
        &["plan", "--pcap", "x", "--sweep", "2,zero"],
    ] {
        let out = lagctl(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(!out.stderr.is_empty());
    }
}

/// A flow-list row: the flow, its source and destination MACs, packets, bytes.
type Row = (&'static str, [u8; 6], [u8; 6], u64, u64);

#[test]
fn csv_flow_list() {
    let v = json_of(&lagctl(&[
        "plan",
        "--flows",
        data("flows.csv").to_str().unwrap(),
        "--speeds",
        "10G,25G",
        "--json",
    ]));
    assert_eq!(v["input"]["flow_list_rows"], 6);
    assert_eq!(v["input"]["packets"], 1_000 + 2_000 + 50 + 3 + 4 + 500);
    assert_eq!(v["speeds_gbps"], serde_json::json!([10.0, 25.0]));
    // Recompute every hash policy from the rows' representative frames.
    let rows: [Row; 6] = [
        (
            "tcp 10.0.0.1:40000 > 10.0.0.2:5201",
            [2, 0, 0, 0, 0, 1],
            [2, 0, 0, 0, 0, 2],
            1000,
            1_500_000,
        ),
        (
            "tcp 10.0.0.1:40001 > 10.0.0.2:5201",
            [2, 0, 0, 0, 0, 1],
            [2, 0, 0, 0, 0, 2],
            2000,
            3_000_000,
        ),
        (
            "udp [2001:db8::1]:5353 > [2001:db8::2]:53",
            [2, 0, 0, 0, 0, 1],
            [2, 0, 0, 0, 0, 3],
            50,
            5_000,
        ),
        ("icmp 10.0.0.1 > 10.0.0.9 id 3", [0; 6], [0; 6], 3, 294),
        (
            "tcp 10.0.0.7:2049 > 10.0.0.8:700 vlan 20",
            [2, 0, 0, 0, 0, 7],
            [2, 0, 0, 0, 0, 8],
            4,
            6_000,
        ),
        (
            "udp 10.0.0.1:33000 > 10.0.0.5:4789",
            [2, 0, 0, 0, 0, 1],
            [2, 0, 0, 0, 0, 5],
            500,
            700_000,
        ),
    ];
    for h in HashPolicy::ALL {
        let mut want = vec![(0u64, 0u64); 2];
        for (spec, s, d, p, b) in rows {
            let f = frame(spec, s, d, 0);
            let m = member_index(xmit_hash(h, &f), 2).unwrap();
            want[m].0 += p;
            want[m].1 += b;
        }
        assert_eq!(members_of(policy(&v, h.name())), want, "{h}");
    }
    // A bad row names its line and column, exit 2.
    let dir = TempDir::new("csv");
    let p = dir.path("bad.csv");
    std::fs::write(
        &p,
        "src_ip,dst_ip,proto,bytes\n10.0.0.1,10.0.0.2,tcp,100\n10.0.0.1,10.0.0.300,tcp,1\n",
    )
    .unwrap();
    let out = lagctl(&["plan", "--flows", p.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("line 3, column dst_ip"), "{err}");
}

/// Compares with a golden file; `UPDATE_GOLDEN=1` rewrites it.
fn golden(name: &str, got: &str) {
    let path = data(name);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, got).unwrap();
    }
    let want = std::fs::read_to_string(&path).unwrap_or_else(|_| panic!("golden {name}"));
    assert_eq!(
        got, want,
        "output differs from {name} (UPDATE_GOLDEN=1 to accept)"
    );
}

#[test]
fn golden_table_and_json() {
    let dir = TempDir::new("golden");
    let path = dir.path("mixed.pcap");
    write_pcap(&path, &mixed_frames());
    let p = path.to_str().unwrap();
    let table = ok_stdout(&lagctl(&["plan", "--pcap", p, "--members", "2"]));
    golden("mixed.table.golden", &table);
    let json = ok_stdout(&lagctl(&[
        "plan",
        "--pcap",
        p,
        "--speeds",
        "10G,10G,25G",
        "--json",
    ]));
    golden("mixed.json.golden", &json);
    // The table leads with the ranked policies and ends with the return path.
    assert!(table.starts_with("mixed.pcap: "));
    assert!(table.contains("Recommendation: "));
    assert!(table.contains("Return path"));
}

#[test]
fn progress_bar_on_request() {
    let dir = TempDir::new("progress");
    let path = dir.path("p.pcap");
    write_pcap(&path, &mixed_frames());
    let out = lagctl(&[
        "plan",
        "--pcap",
        path.to_str().unwrap(),
        "--progress",
        "--json",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("100%"), "{err}");
    assert!(err.contains("reading ["), "{err}");
    // Without --progress and with stderr not a terminal: nothing on stderr.
    let out = lagctl(&["plan", "--pcap", path.to_str().unwrap(), "--json"]);
    assert!(out.stderr.is_empty());
    // Stdin works too.
    let mut child = Command::new(LAGCTL)
        .args([
            "plan",
            "--pcap",
            "-",
            "--json",
            "--policy",
            "layer3+4,balance-rr",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(&std::fs::read(&path).unwrap())
        .unwrap();
    let v = json_of(&child.wait_with_output().unwrap());
    assert_eq!(v["policies"].as_array().unwrap().len(), 2);
    assert_eq!(v["input"]["name"], "stdin");
}

fn chromium_screenshot(html: &Path, png: &Path) {
    let profile = TempDir::new("chromium-profile");
    let out = Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            &format!("--user-data-dir={}", profile.0.display()),
            &format!("--screenshot={}", png.display()),
            "--window-size=1200,1600",
            &format!("file://{}", html.display()),
        ])
        .output()
        .expect("run chromium (apt-get install chromium)");
    assert!(
        out.status.success() && png.exists(),
        "chromium failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn html_report_renders_in_chromium() {
    let dir = TempDir::new("html");
    let pcap = dir.path("mixed.pcap");
    write_pcap(&pcap, &mixed_frames());
    let html = dir.path("report.html");
    let out = lagctl(&[
        "plan",
        "--pcap",
        pcap.to_str().unwrap(),
        "--members",
        "3",
        "--html",
        html.to_str().unwrap(),
    ]);
    ok_stdout(&out);
    let text = std::fs::read_to_string(&html).unwrap();
    assert!(!text.contains("http://") && !text.contains("https://") && !text.contains("<script"));
    assert!(text.contains("<svg"));
    let png_path = dir.path("report.png");
    chromium_screenshot(&html, &png_path);
    if let Some(keep) = std::env::var_os("LAGD_PLAN_SCREENSHOT") {
        std::fs::copy(&png_path, keep).unwrap();
    }
    let decoder = png::Decoder::new(std::io::BufReader::new(
        std::fs::File::open(&png_path).unwrap(),
    ));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    assert_eq!((info.width, info.height), (1200, 1600));
    let channels = info.color_type.samples();
    let px = &buf[..info.buffer_size()];
    let mut colours = HashSet::new();
    let mut non_white = 0usize;
    let mut greenish = 0usize;
    for p in px.chunks(channels) {
        let (r, g, b) = (p[0], p[1], p[2]);
        colours.insert((r, g, b));
        if (r, g, b) != (255, 255, 255) {
            non_white += 1;
        }
        // The bars' green (#2f9e6e), within anti-aliasing.
        if r.abs_diff(0x2f) < 12 && g.abs_diff(0x9e) < 12 && b.abs_diff(0x6e) < 12 {
            greenish += 1;
        }
    }
    let total = px.len() / channels;
    assert!(
        colours.len() > 200,
        "only {} colours: blank page?",
        colours.len()
    );
    // The page background is tinted and the cards white: a blank page would be all white.
    assert!(
        non_white * 4 > total,
        "mostly white: {non_white} of {total}"
    );
    assert!(greenish > 2000, "bars not drawn ({greenish} green pixels)");
}

#[test]
fn explain_names_the_member_and_the_fields() {
    let out = ok_stdout(&lagctl(&[
        "explain",
        "--policy",
        "layer3+4",
        "--members",
        "2",
        "--flow",
        "tcp 10.0.0.1:1234 > 10.0.0.2:80",
    ]));
    // Worked by hand in the hash tests: 0x29a9c0c2 is even, member 0.
    assert!(
        out.starts_with("flow: tcp 10.0.0.1:1234 > 10.0.0.2:80\n"),
        "{out}"
    );
    assert!(out.contains("layer3+4: member 0 of 2"), "{out}");
    assert!(out.contains("ports: 1234 > 80"), "{out}");
    assert!(out.contains("hash 0x29a9c0c2 % 2 = 0"), "{out}");
    let hex = "02000000000202000000000108004500002800000000400600000a0000010a00000204d20050";
    let out = ok_stdout(&lagctl(&[
        "explain",
        "--policy",
        "all",
        "--members",
        "3",
        hex,
    ]));
    assert_eq!(out.matches(": member ").count(), 8, "{out}");
    assert!(out.contains("balance-rr: no fixed member"));
    // layer2: 0x02 ^ 0x01 ^ 0x0800 = 0x803 = 2051 = 3 * 683 + 2.
    assert!(out.contains("layer2: member 2 of 3"), "{out}");
    let out = lagctl(&["explain", "--flow", "tcp 10.0.0.1 > nowhere"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("nowhere"));
    let out = lagctl(&["explain", "zz"]);
    assert_eq!(out.status.code(), Some(2));
}

/// Skewed traffic over `secs` seconds: three elephants whose ovs-tcp hashes are even and in
/// three different buckets (with two members all start on member 0 of the bucket table), each
/// sending a 500-byte frame every 2 ms but pausing 100 ms every 2 s, and 30 mice sending
/// 150-byte frames every 97 ms. (time in ns, frame) in capture order.
fn skewed_frames(secs: u64) -> Vec<(u64, Vec<u8>)> {
    let host = [2, 0, 0, 0, 0, 1];
    let peer = [2, 0, 0, 0, 0, 2];
    let mut flows = Vec::new();
    let mut buckets = Vec::new();
    for port in 40_000u16.. {
        let f = frame(
            &format!("tcp 10.0.0.1:{port} > 10.0.0.2:5201"),
            host,
            peer,
            500,
        );
        let h = xmit_hash(HashPolicy::OvsTcp, &f);
        if h % 2 == 0 && !buckets.contains(&(h & 0xff)) {
            buckets.push(h & 0xff);
            flows.push(f);
            if flows.len() == 3 {
                break;
            }
        }
    }
    for j in 0..30u16 {
        flows.push(frame(
            &format!("udp 10.1.0.{j}:{} > 10.2.0.1:53", 5000 + j * 13),
            host,
            peer,
            150,
        ));
    }
    let mut out = Vec::new();
    for tick in 0..secs * 1000 {
        let ms = 1_700_000_000_000_000_000 + tick * 1_000_000;
        for e in 0..3u64 {
            if tick % 2 == 0 && (tick + e * 700) % 2000 >= 100 {
                out.push((ms + e * 10_000, flows[e as usize].clone()));
            }
        }
        for j in 0..30u64 {
            if (tick + 37 * j) % 97 == 0 {
                out.push((ms + 500_000 + j * 100, flows[3 + j as usize].clone()));
            }
        }
    }
    out
}

#[test]
fn bucket_policies_show_rebalancing() {
    let dir = TempDir::new("buckets");
    let path = dir.path("skewed.pcap");
    let mut w = PcapWriter::new(Vec::new(), LINKTYPE_ETHERNET).unwrap();
    for (ts, f) in skewed_frames(12) {
        w.write_packet(ts, &f).unwrap();
    }
    std::fs::write(&path, w.into_inner()).unwrap();
    let p = path.to_str().unwrap();
    let args = [
        "plan",
        "--pcap",
        p,
        "--policy",
        "ovs-tcp,balance-tcp",
        "--rebalance-interval",
        "2000",
    ];
    let table = ok_stdout(&lagctl(&args));
    println!("{table}");
    assert!(
        table.contains("Bucket tables (rebalanced every 2 s; imbalance: busiest member's bytes per unit of speed over the mean):"),
        "{table}"
    );
    let line = table
        .lines()
        .find(|l| l.starts_with("  balance-tcp ") && l.contains("bucket move"))
        .unwrap_or_else(|| panic!("no rebalancing line for balance-tcp:\n{table}"));
    assert!(line.contains("5 rebalances"), "{line}");
    assert!(line.contains("for load"), "{line}");
    assert!(line.contains("in the first interval,"), "{line}");
    assert!(line.contains("in the last"), "{line}");
    // The same in JSON, and the imbalance falls.
    let mut json_args = args.to_vec();
    json_args.push("--json");
    let v = json_of(&lagctl(&json_args));
    let r = &policy(&v, "balance-tcp")["rebalancing"];
    assert_eq!(r["interval_ms"], 2000);
    assert_eq!(r["rebalances"], 5);
    assert!(r["moves"]["load"].as_u64().unwrap() >= 1, "{r}");
    let first = r["first_interval_imbalance"].as_f64().unwrap();
    let last = r["last_interval_imbalance"].as_f64().unwrap();
    assert!(first > 1.8 && last < 1.4, "{first} -> {last}");
    assert!(policy(&v, "ovs-tcp").get("rebalancing").is_none());
    let modulo = policy(&v, "ovs-tcp")["imbalance"].as_f64().unwrap();
    assert!(policy(&v, "balance-tcp")["imbalance"].as_f64().unwrap() < modulo);
    // Rebalancing off: no moves, and the line says so.
    let off = ok_stdout(&lagctl(&[
        "plan",
        "--pcap",
        p,
        "--policy",
        "balance-tcp",
        "--rebalance-interval",
        "0",
    ]));
    assert!(
        off.lines().any(|l| l.starts_with("  balance-tcp ")
            && l.ends_with("rebalancing off: every bucket stays where it was first put")),
        "{off}"
    );
    // A bad interval is a usage error.
    let out = lagctl(&["plan", "--pcap", p, "--rebalance-interval", "soon"]);
    assert_eq!(out.status.code(), Some(2));
    // `explain` names the bucket: the hash's low byte; two equal members take turns.
    let flow = "tcp 10.0.0.1:1234 > 10.0.0.2:80";
    let out = ok_stdout(&lagctl(&[
        "explain",
        "--policy",
        "balance-tcp",
        "--members",
        "2",
        "--flow",
        flow,
    ]));
    let f = frame(flow, [0; 6], [0; 6], 0);
    let b = xmit_hash(HashPolicy::OvsTcp, &f) & 0xff;
    assert!(
        out.contains(&format!(
            "balance-tcp: bucket {b}, on member {} of 2",
            b % 2
        )),
        "{out}"
    );
}

#[test]
fn return_path_with_a_chosen_switch_hash() {
    use lagd_proto::plan::flow::extract;
    use lagd_proto::plan::switch::SwitchHash;
    // A client fetching from 24 servers behind a router, and 8 clients of one server: each
    // flow as captured and as its reply (source and destination swapped).
    let client = [2, 0, 0, 0, 0, 1];
    let router = [2, 0, 0, 0, 0, 0xfe];
    let mut flows: Vec<(Vec<u8>, Vec<u8>, usize)> = Vec::new();
    for i in 0..24u16 {
        let (sp, server) = (40000 + i * 3, 1 + i);
        flows.push((
            frame(
                &format!("tcp 10.0.0.1:{sp} > 198.51.100.{server}:443"),
                client,
                router,
                300,
            ),
            frame(
                &format!("tcp 198.51.100.{server}:443 > 10.0.0.1:{sp}"),
                router,
                client,
                300,
            ),
            2 + usize::from(i % 3),
        ));
    }
    for c in 0..8u8 {
        let mac = [2, 0, 0, 0, 1, c];
        flows.push((
            frame(
                &format!("udp 10.2.0.{c}:5000 > 10.3.0.1:53"),
                mac,
                router,
                120,
            ),
            frame(
                &format!("udp 10.3.0.1:53 > 10.2.0.{c}:5000"),
                router,
                mac,
                120,
            ),
            3,
        ));
    }
    let mut frames = Vec::new();
    let mut replies = Vec::new();
    for round in 0..5 {
        for (f, r, count) in &flows {
            if round < *count {
                frames.push(f.clone());
                replies.push(r.clone());
            }
        }
    }
    let dir = TempDir::new("switch-hash");
    let path = dir.path("fetch.pcap");
    write_pcap(&path, &frames);
    let p = path.to_str().unwrap();
    let v = plan_json(p, &["--members", "3", "--switch-hash", "src-ip"]);
    let rp = &v["return_path"];
    assert_eq!(rp["switch_hash"], "src-ip");
    let hashes = rp["hashes"].as_array().unwrap();
    assert_eq!(hashes.len(), 7);
    assert_eq!(hashes[0]["hash"], "src-ip", "the chosen hash first");
    for h in hashes {
        let sh: SwitchHash = h["hash"].as_str().unwrap().parse().unwrap();
        let mut want = vec![(0u64, 0u64); 3];
        for r in &replies {
            let link = sh.hash(&extract(r).key) as usize % 3;
            want[link].0 += 1;
            want[link].1 += r.len() as u64;
        }
        assert_eq!(members_of(h), want, "{sh}");
    }
    // The replies come from 25 servers' addresses: src-ip spreads them over all three links.
    assert!(members_of(&hashes[0]).iter().all(|m| m.0 > 0), "{rp}");
    // The table marks the chosen hash; a bad name is a usage error.
    let table = ok_stdout(&lagctl(&[
        "plan",
        "--pcap",
        p,
        "--members",
        "3",
        "--switch-hash",
        "dst-mac",
    ]));
    let line = table
        .lines()
        .find(|l| l.contains("<- yours"))
        .unwrap_or_else(|| panic!("no chosen switch hash:\n{table}"));
    assert!(line.trim_start().starts_with("dst-mac "), "{line}");
    let out = lagctl(&["plan", "--pcap", p, "--switch-hash", "src-dst-vlan"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn stripe_policy_and_what_explain_accepts() {
    use lagd_proto::bond::PortId;
    use lagd_proto::stripe::StripeTx;
    let frames = mixed_frames();
    let dir = TempDir::new("stripe");
    let path = dir.path("mixed.pcap");
    write_pcap(&path, &frames);
    let v = plan_json(
        path.to_str().unwrap(),
        &["--speeds", "10G,25G", "--policy", "stripe"],
    );
    // The daemon's striping sender, frame by frame: each frame's length plus the 8-byte
    // stripe header picks the member.
    let mut tx = StripeTx::new(0);
    tx.set_members(&[(PortId(0), 10_000), (PortId(1), 25_000)]);
    let mut want = vec![(0u64, 0u64); 2];
    for f in &frames {
        let m = tx.choose(f.len() + 8).unwrap().index();
        want[m].0 += 1;
        want[m].1 += f.len() as u64;
    }
    let p = policy(&v, "stripe");
    assert_eq!(members_of(p), want);
    assert_eq!(p["needs"], "needs lagd mode=stripe at both ends");
    assert!(p["reorder"].is_null());
    assert_eq!(v["recommendation"]["policy"], "stripe");
    let reason = v["recommendation"]["reason"].as_str().unwrap();
    assert!(
        reason.ends_with("; it needs lagd mode=stripe at both ends."),
        "{reason}"
    );
    // In the default set, ranked, but a hash policy is recommended.
    let v = plan_json(path.to_str().unwrap(), &[]);
    assert!(policy(&v, "stripe")["rank"].as_u64().unwrap() >= 1);
    assert_ne!(v["recommendation"]["policy"], "stripe");
    // `explain --help` lists every policy it takes, bucket policies included.
    let help = ok_stdout(&lagctl(&["explain", "--help"]));
    for name in [
        "layer3+4",
        "ovs-tcp",
        "balance-rr",
        "stripe",
        "balance-tcp",
        "balance-slb",
        "+buckets",
    ] {
        assert!(help.contains(name), "{name} missing from:\n{help}");
    }
    let out = ok_stdout(&lagctl(&[
        "explain",
        "--policy",
        "stripe,layer3+4+buckets",
        "--flow",
        "tcp 10.0.0.1:1234 > 10.0.0.2:80",
    ]));
    assert!(
        out.contains("stripe: no fixed member") && out.contains("lagd mode=stripe at both ends"),
        "{out}"
    );
    assert!(out.contains("layer3+4+buckets: bucket "), "{out}");
}

#[test]
fn unsupported_link_types_are_named_and_fail_unless_skipped() {
    let dir = TempDir::new("linktype");
    // A capture of IPNET (226) frames only: exit 2, the link type named.
    let ipnet = dir.path("ipnet.pcap");
    let mut w = PcapWriter::new(Vec::new(), 226).unwrap();
    for i in 0..5u64 {
        w.write_packet(1_700_000_000_000_000_000 + i, &[1, 2, 0, 0x1c, 0x45, 0])
            .unwrap();
    }
    std::fs::write(&ipnet, w.into_inner()).unwrap();
    let out = lagctl(&["plan", "--pcap", ipnet.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("link type 226 (IPNET) is not readable as Ethernet (5 of 5 frames)"),
        "{err}"
    );
    assert!(err.contains("--skip-unsupported"), "{err}");
    assert!(out.stdout.is_empty());
    // Ethernet and PPP interfaces in one pcapng: skipped on request, named at the top.
    let mixed = dir.path("mixed.pcapng");
    let mut w = PcapNgWriter::new(Vec::new()).unwrap();
    let e = w
        .add_interface(LINKTYPE_ETHERNET, 0, Some("eth0"), TsResolution::MICROS)
        .unwrap();
    let ppp = w
        .add_interface(9, 0, Some("ppp0"), TsResolution::MICROS)
        .unwrap();
    let frames = mixed_frames();
    for (i, f) in frames.iter().enumerate() {
        w.write_packet(e, 1_700_000_000_000_000_000 + i as u64 * 10_000_000, f)
            .unwrap();
    }
    w.write_packet(ppp, 1_700_000_000_000_000_000, &[0xff, 0x03, 0, 0x21, 0x45])
        .unwrap();
    std::fs::write(&mixed, w.into_inner()).unwrap();
    let p = mixed.to_str().unwrap();
    assert_eq!(lagctl(&["plan", "--pcap", p]).status.code(), Some(2));
    let table = ok_stdout(&lagctl(&["plan", "--pcap", p, "--skip-unsupported"]));
    let second = table.lines().nth(1).unwrap();
    assert_eq!(
        second,
        "Link type 9 (PPP) is not readable as Ethernet: 1 frames skipped."
    );
    let v = plan_json(p, &["--skip-unsupported"]);
    assert_eq!(v["input"]["packets"].as_u64(), Some(frames.len() as u64));
    assert_eq!(v["input"]["skipped_linktype"]["name"], "PPP");
}

#[test]
fn a_handful_of_frames_is_too_small_to_judge() {
    // Two ARP frames: no recommendation, and why.
    let dir = TempDir::new("thin");
    let path = dir.path("arp.pcap");
    let mut arp = vec![0xff; 6];
    arp.extend_from_slice(&[2, 0, 0, 0, 0, 9, 0x08, 0x06, 0, 1, 8, 0, 6, 4, 0, 1]);
    arp.resize(64, 0);
    write_pcap(&path, &[arp.clone(), arp]);
    let p = path.to_str().unwrap();
    let table = ok_stdout(&lagctl(&["plan", "--pcap", p]));
    assert!(
        table.contains(
            "Too small to judge: only 2 data packets (at least 100 are needed); only 1 flows"
        ),
        "{table}"
    );
    assert!(table.contains("Recommendation: none: the input is too small to judge"));
    assert!(table.contains("Best on this sample alone: "), "{table}");
    assert!(!table.contains("To apply it"), "{table}");
    let v = plan_json(p, &[]);
    assert!(v["recommendation"].is_null());
    assert_eq!(v["sample"]["judgeable"], false);
    assert_eq!(v["sample"]["too_small"].as_array().unwrap().len(), 3);
    // A policy that is a mode is recommended as that mode, with the settings to apply it.
    let big = dir.path("big.pcap");
    write_pcap(&big, &mixed_frames());
    let v = plan_json(big.to_str().unwrap(), &["--policy", "ovs-tcp"]);
    assert_eq!(v["recommendation"]["apply"], "mode=balance-tcp");
    let reason = v["recommendation"]["reason"].as_str().unwrap();
    assert!(
        reason.contains("mode=balance-tcp (the ovs-tcp hash)")
            && !reason.replace("(the ovs-tcp hash)", "").contains("ovs-tcp"),
        "{reason}"
    );
    let settings = v["recommendation"]["settings"].as_array().unwrap();
    let lagd = settings.iter().find(|s| s["target"] == "lagd").unwrap();
    assert!(
        lagd["value"]
            .as_str()
            .unwrap()
            .contains("--opts \"mode=balance-tcp miimon=100\"")
    );
    let kernel = settings
        .iter()
        .find(|s| s["target"] == "BONDING_OPTS")
        .unwrap();
    assert!(kernel["value"].is_null());
}
