//! `lagctl plan --sflow` on sFlow v5 datagrams built here after the sFlow version 5
//! specification (flow samples and expanded flow samples with raw packet header records, and a
//! counter sample to skip), sent as UDP to port 6343 in a pcap; tshark's dissection of the
//! same file checks the datagrams, and the hash code checks the planner's scaled figures.
//! `--sflow-listen` receives such datagrams on a UDP socket in a network namespace of its own
//! (root) for a given time.

use std::path::PathBuf;
use std::process::Command;

use lagd_lab::topology::require_program;
use lagd_proto::capture::{LINKTYPE_ETHERNET, PcapWriter};
use lagd_proto::hash::{HashPolicy, member_index, xmit_hash};
use lagd_proto::plan::flow::parse_flow_spec;
use serde_json::Value;

const LAGCTL: &str = env!("CARGO_BIN_EXE_lagctl");

/// A scratch directory, removed when the test ends (passed or failed).
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> Self {
        let d = std::env::temp_dir().join(format!("lagd-sflow-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        Self(d)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn word(out: &mut Vec<u8>, w: u32) {
    out.extend_from_slice(&w.to_be_bytes());
}

/// Opaque data, padded with zeros to a multiple of 4 bytes (XDR).
fn opaque(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(b);
    out.resize(out.len().next_multiple_of(4), 0);
}

/// One sampled frame: its first `header` bytes, its length on the wire with the FCS, and the
/// sampling rate of the sample that carries it.
struct Sample {
    frame: Vec<u8>,
    header: usize,
    rate: u32,
    expanded: bool,
}

/// A raw packet header record (enterprise 0, format 1): Ethernet, frame length with the
/// 4-byte FCS, 4 stripped, the header.
fn raw_header_record(s: &Sample) -> Vec<u8> {
    let mut body = Vec::new();
    word(&mut body, 1); // ETHERNET-ISO88023
    word(&mut body, s.frame.len() as u32 + 4);
    word(&mut body, 4);
    let h = &s.frame[..s.header.min(s.frame.len())];
    word(&mut body, h.len() as u32);
    opaque(&mut body, h);
    let mut rec = Vec::new();
    word(&mut rec, 1);
    word(&mut rec, body.len() as u32);
    rec.extend_from_slice(&body);
    rec
}

/// A flow sample (format 1) or an expanded flow sample (format 3) with one raw packet header
/// record and, before it, an extended switch record (format 1001) the planner skips.
fn flow_sample(seq: u32, s: &Sample) -> Vec<u8> {
    let mut body = Vec::new();
    word(&mut body, seq);
    if s.expanded {
        word(&mut body, 0); // source id type
        word(&mut body, 3); // source id index
    } else {
        word(&mut body, 3);
    }
    word(&mut body, s.rate);
    word(&mut body, seq * s.rate); // sample pool
    word(&mut body, 0); // drops
    if s.expanded {
        for w in [0, 3, 0, 4] {
            word(&mut body, w); // input and output: format, value
        }
    } else {
        word(&mut body, 3);
        word(&mut body, 4);
    }
    word(&mut body, 2); // records
    // Extended switch data: in/out VLAN and priority.
    word(&mut body, 1001);
    word(&mut body, 16);
    for w in [10, 0, 10, 0] {
        word(&mut body, w);
    }
    body.extend_from_slice(&raw_header_record(s));
    let mut out = Vec::new();
    word(&mut out, if s.expanded { 3 } else { 1 });
    word(&mut out, body.len() as u32);
    out.extend_from_slice(&body);
    out
}

/// A counter sample (format 2) with a generic interface counters record (format 1, 88 bytes).
fn counter_sample(seq: u32) -> Vec<u8> {
    let mut body = Vec::new();
    word(&mut body, seq);
    word(&mut body, 3);
    word(&mut body, 1); // records
    word(&mut body, 1);
    word(&mut body, 88);
    body.extend_from_slice(&[0; 88]);
    let mut out = Vec::new();
    word(&mut out, 2);
    word(&mut out, body.len() as u32);
    out.extend_from_slice(&body);
    out
}

fn datagram(seq: u32, samples: &[&Sample]) -> Vec<u8> {
    let mut d = Vec::new();
    for w in [5u32, 1] {
        word(&mut d, w);
    }
    d.extend_from_slice(&[192, 0, 2, 1]); // agent
    word(&mut d, 0); // sub-agent
    word(&mut d, seq);
    word(&mut d, 1000 * seq); // uptime
    word(&mut d, samples.len() as u32 + 1);
    for (i, s) in samples.iter().enumerate() {
        d.extend_from_slice(&flow_sample(seq * 100 + i as u32, s));
    }
    d.extend_from_slice(&counter_sample(seq));
    d
}

/// The datagram as an Ethernet/IPv4/UDP frame from the agent to the collector, port 6343.
fn udp_frame(payload: &[u8]) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 0x10, 2, 0, 0, 0, 0, 0x20, 0x08, 0x00];
    let total = 20 + 8 + payload.len();
    f.extend_from_slice(&[
        0x45,
        0,
        (total >> 8) as u8,
        total as u8,
        0,
        1,
        0x40,
        0,
        64,
        17,
        0,
        0,
    ]);
    f.extend_from_slice(&[192, 0, 2, 1, 192, 0, 2, 9]);
    let udp = 8 + payload.len();
    f.extend_from_slice(&[0xc0, 0x01, 0x18, 0xc7, (udp >> 8) as u8, udp as u8, 0, 0]);
    f.extend_from_slice(payload);
    f
}

fn frame(spec: &str, len: usize) -> Vec<u8> {
    let mut f = Vec::new();
    assert!(parse_flow_spec(spec).unwrap().write_frame(&mut f));
    f.resize(len, 0x5a);
    f
}

#[test]
fn sflow_samples_are_scaled_by_their_rate_and_match_tshark() {
    require_program("tshark", "tshark").unwrap_or_else(|e| panic!("{e:#}"));
    // 240 samples of 60 flows, at 1 in 100 and 1 in 250, in 30 datagrams of 8, a second apart.
    let samples: Vec<Sample> = (0..240u32)
        .map(|i| Sample {
            frame: frame(
                &format!(
                    "tcp 10.{}.0.{}:{} > 10.9.0.{}:443",
                    i % 3,
                    i % 60,
                    40000 + (i % 60) * 7,
                    i % 5
                ),
                200 + (i as usize % 7) * 190,
            ),
            header: 128,
            rate: if i % 3 == 0 { 250 } else { 100 },
            expanded: i % 2 == 1,
        })
        .collect();
    let guard = TempDir::new();
    let dir = guard.0.clone();
    let pcap = dir.join("sflow.pcap");
    let mut w = PcapWriter::new(Vec::new(), LINKTYPE_ETHERNET).unwrap();
    let t0 = 1_700_000_000_000_000_000u64;
    for (k, chunk) in samples.chunks(8).enumerate() {
        let refs: Vec<&Sample> = chunk.iter().collect();
        let d = datagram(k as u32 + 1, &refs);
        w.write_packet(t0 + k as u64 * 1_000_000_000, &udp_frame(&d))
            .unwrap();
    }
    // Something else on the wire: a DNS query, skipped.
    w.write_packet(t0, &frame("udp 10.0.0.1:5353 > 10.0.0.2:53", 80))
        .unwrap();
    std::fs::write(&pcap, w.into_inner()).unwrap();

    // tshark reads the datagrams as built: 9 samples each, every sampling rate and frame
    // length.
    let out = Command::new("tshark")
        .args(["-n", "-r"])
        .arg(&pcap)
        .args([
            "-Y",
            "sflow",
            "-T",
            "fields",
            "-E",
            "occurrence=a",
            "-E",
            "aggregator=,",
            "-e",
            "sflow_245.version",
            "-e",
            "sflow_245.numsamples",
            "-e",
            "sflow.flow_sample.sampling_rate",
            "-e",
            "sflow_245.header.frame_length",
            "-e",
            "sflow_245.header.sampled_header_length",
        ])
        .output()
        .expect("tshark");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 30, "{text}");
    let mut rates = Vec::new();
    let mut lengths = Vec::new();
    for l in &lines {
        let cols: Vec<&str> = l.split('\t').collect();
        assert_eq!(cols[0], "5", "{l}");
        assert_eq!(cols[1], "9", "{l}");
        rates.extend(cols[2].split(',').map(|x| x.parse::<u32>().unwrap()));
        lengths.extend(cols[3].split(',').map(|x| x.parse::<u32>().unwrap()));
        assert!(cols[4].split(',').all(|x| x == "128"), "{l}");
    }
    let want_rates: Vec<u32> = samples.iter().map(|s| s.rate).collect();
    let want_lengths: Vec<u32> = samples.iter().map(|s| s.frame.len() as u32 + 4).collect();
    assert_eq!(rates, want_rates, "tshark's sampling rates");
    assert_eq!(lengths, want_lengths, "tshark's frame lengths");

    // The planner: each sample counts as `rate` frames of its length without the FCS, on the
    // member its header hashes to.
    let out = Command::new(LAGCTL)
        .args(["plan", "--json", "--policy", "layer3+4,layer2", "--sflow"])
        .arg(&pcap)
        .output()
        .expect("lagctl");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let packets: u64 = samples.iter().map(|s| u64::from(s.rate)).sum();
    let bytes: u64 = samples
        .iter()
        .map(|s| u64::from(s.rate) * s.frame.len() as u64)
        .sum();
    assert_eq!(v["input"]["packets"].as_u64(), Some(packets));
    assert_eq!(v["input"]["bytes"].as_u64(), Some(bytes));
    let sf = &v["input"]["sflow"];
    assert_eq!(sf["datagrams"], 30);
    assert_eq!(sf["samples"], 240);
    assert_eq!(sf["skipped_samples"], 30);
    assert_eq!(sf["other_packets"], 1);
    assert_eq!(sf["sampling_rate_min"], 100);
    assert_eq!(sf["sampling_rate_max"], 250);
    assert_eq!(sf["share_error_95"].as_f64(), Some(0.1265));
    let mut want = [(0u64, 0u64); 2];
    for s in &samples {
        let m = member_index(xmit_hash(HashPolicy::Layer34, &s.frame[..s.header]), 2).unwrap();
        want[m].0 += u64::from(s.rate);
        want[m].1 += u64::from(s.rate) * s.frame.len() as u64;
    }
    let l34 = v["policies"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["policy"] == "layer3+4")
        .unwrap();
    let got: Vec<(u64, u64)> = l34["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["packets"].as_u64().unwrap(), m["bytes"].as_u64().unwrap()))
        .collect();
    assert_eq!(got, want.to_vec());
    assert_eq!(v["sample"]["judgeable"], true, "{}", v["sample"]);

    // The table states the widened error.
    let out = Command::new(LAGCTL)
        .args(["plan", "--sflow"])
        .arg(&pcap)
        .output()
        .expect("lagctl");
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table.contains("sFlow: 30 datagrams, 240 flow samples (1 in 100 to 1 in 250)"),
        "{table}"
    );
    assert!(table.contains("Sampling widens the error"), "{table}");

    // A datagram cut short is an error naming the packet and the byte.
    let bad = dir.join("bad.pcap");
    let mut w = PcapWriter::new(Vec::new(), LINKTYPE_ETHERNET).unwrap();
    let refs: Vec<&Sample> = samples[..2].iter().collect();
    let mut d = datagram(1, &refs);
    d.truncate(100);
    w.write_packet(t0, &udp_frame(&d)).unwrap();
    std::fs::write(&bad, w.into_inner()).unwrap();
    let out = Command::new(LAGCTL)
        .args(["plan", "--sflow"])
        .arg(&bad)
        .output()
        .expect("lagctl");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("packet 1: sFlow datagram, byte 36"), "{err}");
}

/// A network namespace of the test's own, removed at the end.
struct Netns(String);

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).output();
    }
}

#[test]
fn sflow_from_a_socket_for_a_time() {
    use lagd_lab::topology::{in_named_ns, is_root};
    assert!(
        is_root(),
        "this test needs root for its network namespace (CI runs as root)"
    );
    require_program("ss", "iproute2").unwrap_or_else(|e| panic!("{e:#}"));
    let ns = Netns(format!("lagdsflow-{}", std::process::id()));
    let _ = Command::new("ip").args(["netns", "del", &ns.0]).output();
    assert!(
        Command::new("ip")
            .args(["netns", "add", &ns.0])
            .status()
            .unwrap()
            .success()
    );
    assert!(
        Command::new("ip")
            .args(["-n", &ns.0, "link", "set", "lo", "up"])
            .status()
            .unwrap()
            .success()
    );
    let child = Command::new("ip")
        .args([
            "netns", "exec", &ns.0, LAGCTL, "plan", "--json", "--policy", "layer3+4",
        ])
        .args(["--sflow-listen", "127.0.0.1:6343", "--listen-seconds", "4"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("lagctl");
    // Wait until it listens.
    let t = std::time::Instant::now();
    loop {
        let out = Command::new("ip")
            .args(["netns", "exec", &ns.0, "ss", "-Huln", "sport", "=", ":6343"])
            .output()
            .unwrap();
        if !out.stdout.is_empty() {
            break;
        }
        assert!(
            t.elapsed() < std::time::Duration::from_secs(3),
            "lagctl did not listen"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let samples: Vec<Sample> = (0..40u32)
        .map(|i| Sample {
            frame: frame(
                &format!("udp 10.1.0.{i}:{} > 10.2.0.1:53", 1000 + i * 3),
                300,
            ),
            header: 128,
            rate: 64,
            expanded: false,
        })
        .collect();
    in_named_ns(&ns.0, || {
        let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        for (k, chunk) in samples.chunks(4).enumerate() {
            let refs: Vec<&Sample> = chunk.iter().collect();
            s.send_to(&datagram(k as u32 + 1, &refs), "127.0.0.1:6343")
                .unwrap();
        }
        // And one that is not sFlow v5.
        s.send_to(&[0, 0, 0, 4, 1, 2], "127.0.0.1:6343").unwrap();
    })
    .expect("enter the namespace");
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let sf = &v["input"]["sflow"];
    assert_eq!(sf["datagrams"], 10);
    assert_eq!(sf["samples"], 40);
    assert_eq!(sf["unreadable_datagrams"], 1);
    assert_eq!(v["input"]["packets"], 40 * 64);
    assert_eq!(v["input"]["bytes"], 40 * 64 * 300);
    assert_eq!(v["input"]["name"], "sFlow on 127.0.0.1:6343");
    // 40 samples are too few to judge.
    assert!(v["recommendation"].is_null());
    let why = v["sample"]["too_small"].as_array().unwrap();
    assert!(
        why.iter()
            .any(|w| w.as_str().unwrap().contains("only 40 sFlow samples")),
        "{why:?}"
    );
}
