//! Oracle test: TCP segments cut by `lagd_proto::stripe::segment` from IPv4 and IPv6
//! super-frames (with and without a VLAN tag) are valid for tshark: IPv4 header and TCP
//! checksums verify, lengths, identifications and sequence numbers are the expected ones, no
//! malformed packet, no expert warning. A striped data frame and a hello show EtherType 0x88b5
//! with the expected payload.
//!
//! tshark must be installed; if it is not, the test fails (it never skips).

use std::collections::HashMap;
use std::fs;
use std::io::ErrorKind;
use std::path::PathBuf;
use std::process::Command;

use lagd_proto::capture::PcapWriter;
use lagd_proto::stripe::header::{self, Echo, HelloRepr};
use lagd_proto::stripe::segment::{GsoInfo, GsoKind, segment};
use lagd_proto::wire::EthernetAddress;
use lagd_proto::wire::ip::{IpProtocol, Ipv4Address, Ipv6Address, checksum};

/// pcap link type for Ethernet frames.
const LINKTYPE_ETHERNET: u32 = 1;

/// Expert-info severities of warning level and above (Wireshark's `PI_WARN`).
const SEVERITY_WARN: u64 = 0x0060_0000;

const FIELDS: &[&str] = &[
    "frame.number",
    "frame.len",
    "frame.protocols",
    "eth.type",
    "vlan.id",
    "ip.len",
    "ip.id",
    "ip.checksum.status",
    "ipv6.plen",
    "tcp.seq_raw",
    "tcp.len",
    "tcp.flags",
    "tcp.checksum.status",
    "data.len",
    "data.data",
    "_ws.malformed",
    "_ws.expert.severity",
    "_ws.expert",
];

const SEQ0: u32 = 0xffff_fc00;
const IDENT0: u16 = 0xfffe;

/// Deletes the file when dropped.
struct TempFile(PathBuf);

impl TempFile {
    fn new(test: &str) -> Self {
        let name = format!("lagd-tshark-stripe-{}-{test}.pcap", std::process::id());
        let path = std::env::temp_dir().join(name);
        let _ = fs::remove_file(&path);
        Self(path)
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.0);
    }
}

type Row = HashMap<&'static str, String>;

fn tshark_fields(test: &str, frames: &[Vec<u8>]) -> Vec<Row> {
    let file = TempFile::new(test);
    let out = fs::File::create(&file.0).expect("create temporary pcap file");
    let mut w = PcapWriter::new(out, LINKTYPE_ETHERNET).expect("write pcap header");
    for (i, f) in frames.iter().enumerate() {
        w.write_packet(1_700_000_000_000_000_000 + i as u64 * 1_000, f)
            .expect("write pcap record");
    }
    drop(w.into_inner());

    let mut cmd = Command::new("tshark");
    cmd.arg("-n")
        .arg("-r")
        .arg(&file.0)
        .args([
            "-o",
            "ip.check_checksum:TRUE",
            "-o",
            "tcp.check_checksum:TRUE",
        ])
        .args(["-o", "tcp.analyze_sequence_numbers:FALSE"])
        .args(["-o", "tcp.relative_sequence_numbers:FALSE"])
        .args(["-T", "fields", "-E", "header=n", "-E", "separator=/t"])
        .args(["-E", "occurrence=a", "-E", "aggregator=,", "-E", "quote=n"]);
    for f in FIELDS {
        cmd.args(["-e", f]);
    }
    let output = match cmd.output() {
        Ok(o) => o,
        Err(e) if e.kind() == ErrorKind::NotFound => panic!(
            "tshark is not installed (not found in PATH). This oracle test needs it and does not \
             skip: install it, e.g. `apt-get install tshark`."
        ),
        Err(e) => panic!("could not run tshark: {e}"),
    };
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "tshark failed ({}):\n{stderr}",
        output.status
    );
    let rows: Vec<Row> = stdout
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            let cols: Vec<&str> = line.split('\t').collect();
            assert_eq!(cols.len(), FIELDS.len(), "unexpected tshark line: {line:?}");
            FIELDS
                .iter()
                .copied()
                .zip(cols.into_iter().map(str::to_owned))
                .collect()
        })
        .collect();
    assert_eq!(
        rows.len(),
        frames.len(),
        "tshark printed:\n{stdout}\n{stderr}"
    );
    rows
}

fn num(row: &Row, field: &str) -> u64 {
    let s = row[field].as_str();
    let parsed = match s.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => s.parse(),
    };
    parsed.unwrap_or_else(|_| {
        panic!(
            "field {field}: {s:?} is not a number (frame {})",
            row["frame.number"]
        )
    })
}

/// Whether a `*.checksum.status` field says "good" (1; some versions print the name).
fn good(row: &Row, field: &str) -> bool {
    matches!(row[field].to_ascii_lowercase().as_str(), "1" | "good")
}

fn problems(row: &Row) -> Vec<String> {
    let mut out = Vec::new();
    if !row["_ws.malformed"].is_empty() {
        out.push(format!("malformed: {}", row["_ws.malformed"]));
    }
    for sev in row["_ws.expert.severity"]
        .split(',')
        .filter(|s| !s.is_empty())
    {
        let bad = match sev.parse::<u64>() {
            Ok(v) => v >= SEVERITY_WARN,
            Err(_) => {
                let s = sev.to_ascii_lowercase();
                s.contains("warn") || s.contains("error")
            }
        };
        if bad {
            out.push(format!("expert severity {sev}: {}", row["_ws.expert"]));
        }
    }
    out
}

/// A TCP super-frame as the host hands it to the TAP: checksum field holding the pseudo-header
/// sum (`NEEDS_CSUM`), total length covering everything.
struct Super {
    v4: bool,
    vlan: Option<u16>,
    frame: Vec<u8>,
    gso: GsoInfo,
    payload_len: usize,
}

fn super_frame(v4: bool, vlan: Option<u16>, payload_len: usize, mss: u16) -> Super {
    let mut f = vec![0x02, 0xaa, 0, 0, 0, 2, 0x02, 0xbb, 0, 0, 0, 1];
    if let Some(vid) = vlan {
        f.extend_from_slice(&[0x81, 0x00]);
        f.extend_from_slice(&vid.to_be_bytes());
    }
    f.extend_from_slice(if v4 { &[0x08, 0x00] } else { &[0x86, 0xdd] });
    let tcp_hl = 32; // with the timestamp option
    let (src4, dst4) = (Ipv4Address([192, 0, 2, 1]), Ipv4Address([192, 0, 2, 2]));
    let mut src6 = [0u8; 16];
    src6[..2].copy_from_slice(&[0x20, 0x01]);
    src6[2..4].copy_from_slice(&[0x0d, 0xb8]);
    let mut dst6 = src6;
    src6[15] = 1;
    dst6[15] = 2;
    if v4 {
        let total = 20 + tcp_hl + payload_len;
        f.extend_from_slice(&[0x45, 0x00]);
        f.extend_from_slice(&(total as u16).to_be_bytes());
        f.extend_from_slice(&IDENT0.to_be_bytes());
        f.extend_from_slice(&[0x40, 0x00, 64, 6, 0, 0]);
        f.extend_from_slice(&src4.0);
        f.extend_from_slice(&dst4.0);
    } else {
        f.extend_from_slice(&[0x60, 0, 0, 0]);
        f.extend_from_slice(&((tcp_hl + payload_len) as u16).to_be_bytes());
        f.extend_from_slice(&[6, 64]);
        f.extend_from_slice(&src6);
        f.extend_from_slice(&dst6);
    }
    let l4 = f.len();
    f.extend_from_slice(&[0xa0, 0x00, 0x14, 0x51]);
    f.extend_from_slice(&SEQ0.to_be_bytes());
    f.extend_from_slice(&0x1122_3344u32.to_be_bytes());
    // PSH|ACK|CWR, window, checksum (below), urgent 0.
    f.extend_from_slice(&[0x80, 0x98, 0x01, 0xf5, 0, 0, 0, 0]);
    f.extend_from_slice(&[1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2]);
    f.extend((0..payload_len).map(|i| (i % 251) as u8));
    let tcp_len = f.len() - l4;
    let pseudo = if v4 {
        checksum::pseudo_ipv4(src4, dst4, IpProtocol::Tcp, tcp_len as u16)
    } else {
        checksum::pseudo_ipv6(
            Ipv6Address(src6),
            Ipv6Address(dst6),
            IpProtocol::Tcp,
            tcp_len as u32,
        )
    };
    let partial = checksum::fold(pseudo);
    f[l4 + 16..l4 + 18].copy_from_slice(&partial.to_be_bytes());
    let gso = GsoInfo {
        kind: if v4 { GsoKind::TcpV4 } else { GsoKind::TcpV6 },
        ecn: true,
        gso_size: mss,
        hdr_len: (l4 + tcp_hl) as u16,
        needs_csum: true,
        csum_start: l4 as u16,
        csum_offset: 16,
    };
    Super {
        v4,
        vlan,
        frame: f,
        gso,
        payload_len,
    }
}

fn segments(s: &Super) -> Vec<Vec<u8>> {
    let mut buf = vec![0u8; 70_000];
    let mut out = Vec::new();
    segment(&s.frame, &s.gso, &mut buf, 8, |seg| {
        out.push(seg[8..].to_vec())
    })
    .expect("segmentation");
    out
}

#[test]
fn tshark_verifies_segments_and_shows_stripe_frames() {
    let cases = [
        super_frame(true, None, 5000, 1448),
        super_frame(true, Some(100), 3000, 1000),
        super_frame(false, None, 4000, 1428),
        super_frame(false, Some(4094), 2000, 1220),
    ];
    let mut frames = Vec::new();
    // (case, segment index, payload length)
    let mut expect = Vec::new();
    for (c, s) in cases.iter().enumerate() {
        let segs = segments(s);
        let mss = usize::from(s.gso.gso_size);
        assert_eq!(segs.len(), s.payload_len.div_ceil(mss));
        for (i, seg) in segs.into_iter().enumerate() {
            let len = (s.payload_len - i * mss).min(mss);
            expect.push((c, i, len));
            frames.push(seg);
        }
    }
    let n_tcp = frames.len();

    // A striped data frame: the first segment of the first case, encapsulated in place.
    let first = frames[0].clone();
    let mut buf = vec![0u8; 8 + first.len()];
    buf[8..].copy_from_slice(&first);
    let start = header::encapsulate(&mut buf, 8, first.len(), 0x0102_0304, 0xab).unwrap();
    let data_frame = buf[start..].to_vec();
    frames.push(data_frame.clone());
    // A hello.
    let hello = HelloRepr {
        epoch: 0xdead_beef,
        bond: EthernetAddress([0x02, 0xbb, 0, 0, 0, 1]),
        member: 1,
        speed_mbps: 25_000,
        interval_ms: 100,
        echo: Some(Echo {
            bond: EthernetAddress([0x02, 0xaa, 0, 0, 0, 2]),
            epoch: 7,
            member: 0,
        }),
    };
    let mut hello_frame = vec![0u8; header::HELLO_FRAME_LEN];
    hello
        .emit_frame(EthernetAddress([0x02, 0xbb, 0, 0, 0, 1]), &mut hello_frame)
        .unwrap();
    frames.push(hello_frame.clone());

    let rows = tshark_fields("segments", &frames);
    for (row, &(c, i, len)) in rows.iter().zip(&expect) {
        let s = &cases[c];
        let frame = &row["frame.number"];
        let p = problems(row);
        assert!(p.is_empty(), "frame {frame}: {p:?}");
        let stack = if s.v4 { ":ip:tcp" } else { ":ipv6:tcp" };
        assert!(
            row["frame.protocols"].contains(stack),
            "frame {frame}: {}",
            row["frame.protocols"]
        );
        match s.vlan {
            Some(vid) => assert_eq!(num(row, "vlan.id"), u64::from(vid), "frame {frame}"),
            None => assert!(row["vlan.id"].is_empty(), "frame {frame}"),
        }
        let mss = usize::from(s.gso.gso_size);
        assert_eq!(num(row, "tcp.len"), len as u64, "frame {frame}");
        assert_eq!(
            num(row, "tcp.seq_raw"),
            u64::from(SEQ0.wrapping_add((i * mss) as u32)),
            "frame {frame}"
        );
        assert!(good(row, "tcp.checksum.status"), "frame {frame}: {row:?}");
        let last = (i + 1) * mss >= s.payload_len;
        let mut flags = 0x18u64;
        if i == 0 {
            flags |= 0x80;
        }
        if !last {
            flags &= !0x08;
        }
        assert_eq!(num(row, "tcp.flags"), flags, "frame {frame}");
        if s.v4 {
            assert!(good(row, "ip.checksum.status"), "frame {frame}: {row:?}");
            assert_eq!(num(row, "ip.len"), (20 + 32 + len) as u64, "frame {frame}");
            assert_eq!(
                num(row, "ip.id"),
                u64::from(IDENT0.wrapping_add(i as u16)),
                "frame {frame}"
            );
        } else {
            assert_eq!(num(row, "ipv6.plen"), (32 + len) as u64, "frame {frame}");
        }
    }

    let data = &rows[n_tcp];
    assert_eq!(num(data, "eth.type"), 0x88b5);
    assert_eq!(data["frame.protocols"], "eth:ethertype:data");
    assert_eq!(num(data, "data.len"), (data_frame.len() - 14) as u64);
    assert_eq!(num(data, "data.len"), (first.len() + 8 - 14) as u64);
    assert!(
        data["data.data"].starts_with("10ab080001020304"),
        "{}",
        data["data.data"]
    );

    let h = &rows[n_tcp + 1];
    assert_eq!(num(h, "eth.type"), 0x88b5);
    assert_eq!(h["frame.protocols"], "eth:ethertype:data");
    assert_eq!(num(h, "frame.len"), 60);
    assert_eq!(num(h, "data.len"), 46);
    assert!(
        h["data.data"]
            .starts_with("1101001adeadbeef02bb000000010001000061a8006402aa000000020000000"),
        "{}",
        h["data.data"]
    );
}

/// The oracle must be able to fail: damaged checksums are reported bad.
#[test]
fn tshark_flags_bad_checksums() {
    let s = super_frame(true, None, 3000, 1448);
    let mut segs = segments(&s);
    // TCP checksum of the first segment, IPv4 header checksum of the second.
    let l4 = 14 + 20;
    segs[0][l4 + 16] ^= 0x01;
    segs[1][14 + 10] ^= 0x01;
    let rows = tshark_fields("damaged", &segs[..2]);
    assert!(!good(&rows[0], "tcp.checksum.status"), "{:?}", rows[0]);
    assert!(good(&rows[0], "ip.checksum.status"));
    assert!(!good(&rows[1], "ip.checksum.status"), "{:?}", rows[1]);
}
