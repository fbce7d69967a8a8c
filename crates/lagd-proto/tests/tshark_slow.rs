//! Oracle test: LACPDUs and Marker PDUs emitted by `lagd_proto::wire::slow` are decoded by
//! tshark (Wireshark's dissectors) to exactly the values that were emitted, with no malformed
//! packet and no expert warning or error.
//!
//! tshark must be installed; if it is not, the test fails (it never skips).

use std::collections::HashMap;
use std::fs;
use std::io::ErrorKind;
use std::path::PathBuf;
use std::process::Command;

use lagd_proto::capture::PcapWriter;
use lagd_proto::wire::EthernetAddress;
use lagd_proto::wire::slow::{LacpInfo, LacpRepr, MarkerKind, MarkerRepr, PortState};

/// pcap link type for Ethernet frames.
const LINKTYPE_ETHERNET: u32 = 1;

/// Expert-info severities (Wireshark's `PI_WARN` and `PI_ERROR`).
const SEVERITY_WARN: u64 = 0x0060_0000;

/// The fields asked of tshark, in output column order.
const FIELDS: &[&str] = &[
    "frame.number",
    "frame.len",
    "frame.protocols",
    "eth.dst",
    "eth.src",
    "eth.type",
    "slow.subtype",
    "lacp.version",
    "lacp.tlv_type",
    "lacp.tlv_length",
    "lacp.actor.sys_priority",
    "lacp.actor.sysid",
    "lacp.actor.key",
    "lacp.actor.port_priority",
    "lacp.actor.port",
    "lacp.actor.state",
    "lacp.actor.state.activity",
    "lacp.actor.state.timeout",
    "lacp.actor.state.aggregation",
    "lacp.actor.state.synchronization",
    "lacp.actor.state.collecting",
    "lacp.actor.state.distributing",
    "lacp.actor.state.defaulted",
    "lacp.actor.state.expired",
    "lacp.partner.sys_priority",
    "lacp.partner.sysid",
    "lacp.partner.key",
    "lacp.partner.port_priority",
    "lacp.partner.port",
    "lacp.partner.state",
    "lacp.partner.state.activity",
    "lacp.partner.state.timeout",
    "lacp.partner.state.aggregation",
    "lacp.partner.state.synchronization",
    "lacp.partner.state.collecting",
    "lacp.partner.state.distributing",
    "lacp.partner.state.defaulted",
    "lacp.partner.state.expired",
    "lacp.collector.max_delay",
    "marker.version",
    "marker.tlvType",
    "marker.tlvLen",
    "marker.requesterPort",
    "marker.requesterSystem",
    "marker.requesterTransId",
    "_ws.malformed",
    "_ws.expert.severity",
    "_ws.expert",
];

/// The state bit names in the order tshark's `lacp.*.state.*` fields use, lowest bit first.
const STATE_BITS: [(&str, PortState); 8] = [
    ("activity", PortState::ACTIVITY),
    ("timeout", PortState::TIMEOUT),
    ("aggregation", PortState::AGGREGATION),
    ("synchronization", PortState::SYNCHRONIZATION),
    ("collecting", PortState::COLLECTING),
    ("distributing", PortState::DISTRIBUTING),
    ("defaulted", PortState::DEFAULTED),
    ("expired", PortState::EXPIRED),
];

#[derive(Debug, Clone)]
enum Pdu {
    Lacp(LacpRepr),
    Marker(MarkerRepr),
}

/// One frame of the capture: the PDU and the source MAC it was sent from.
#[derive(Debug, Clone)]
struct Case {
    src: EthernetAddress,
    pdu: Pdu,
}

impl Case {
    fn frame(&self) -> Vec<u8> {
        match &self.pdu {
            Pdu::Lacp(r) => {
                let mut f = vec![0xee; r.frame_len()];
                r.emit_frame(self.src, &mut f);
                f
            }
            Pdu::Marker(r) => {
                let mut f = vec![0xee; r.frame_len()];
                r.emit_frame(self.src, &mut f);
                f
            }
        }
    }
}

/// Deletes the file when dropped, so a failing test does not leave it behind.
struct TempFile(PathBuf);

impl TempFile {
    fn new(test: &str) -> Self {
        let name = format!("lagd-tshark-slow-{}-{test}.pcap", std::process::id());
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

fn mac(last: u8, second: u8) -> EthernetAddress {
    EthernetAddress([0x02, second, 0, 0, 0, last])
}

fn info(
    system_priority: u16,
    system: EthernetAddress,
    key: u16,
    port_priority: u16,
    port: u16,
    state: u8,
) -> LacpInfo {
    LacpInfo {
        system_priority,
        system,
        key,
        port_priority,
        port,
        state: PortState(state),
    }
}

fn lacp(actor: LacpInfo, partner: LacpInfo, collector_max_delay: u16) -> Pdu {
    Pdu::Lacp(LacpRepr {
        actor,
        partner,
        collector_max_delay,
        ..LacpRepr::default()
    })
}

fn cases() -> Vec<Case> {
    let me = mac(1, 0xaa);
    let switch = EthernetAddress([0x00, 0x1b, 0x21, 0x3c, 0x4d, 0x5e]);
    // Linux's partner admin defaults: system zero, priority 65535, key 1, port 1, prio 255.
    let no_partner = info(65535, EthernetAddress::ZERO, 1, 255, 1, 0);
    let mut v = vec![
        // A fresh port, nothing heard yet: active, fast, aggregatable; partner all zero.
        lacp(info(65535, me, 15, 255, 1, 0x07), LacpInfo::default(), 0),
        // Defaulted, individual fallback, slow rate, with the admin-default partner.
        lacp(info(65535, me, 15, 255, 1, 0x4d), no_partner, 0),
        // Collecting and distributing, fast rate, partner a switch at slow rate.
        lacp(
            info(65535, me, 15, 255, 1, 0x3f),
            info(32768, switch, 300, 32768, 261, 0x3d),
            0,
        ),
        // Slow rate on both sides, 1G key 9, second port, other priorities.
        lacp(
            info(100, me, 9, 128, 2, 0x3d),
            info(1, switch, 0x2001, 1, 0x0102, 0x3d),
            0,
        ),
        // Expired: short timeout forced, partner synchronization lost.
        lacp(
            info(65535, me, 21, 255, 3, 0x87),
            info(32768, switch, 300, 32768, 262, 0x45),
            0,
        ),
        // Passive, not aggregatable yet, no partner.
        lacp(info(32768, me, 0, 32768, 4, 0x00), LacpInfo::default(), 0),
        // Passive port answering an active partner.
        lacp(
            info(32768, me, 29, 32768, 5, 0x3c),
            info(32768, switch, 7, 32768, 9, 0x3f),
            0,
        ),
        // Farewell LACPDU: aggregation, sync, collecting, distributing cleared.
        lacp(
            info(65535, me, 15, 255, 1, 0x03),
            info(32768, switch, 300, 32768, 261, 0x3f),
            0,
        ),
        // Every field at its maximum.
        lacp(
            info(
                0xffff,
                EthernetAddress([0xfe, 0xff, 0xff, 0xff, 0xff, 0xff]),
                0xffff,
                0xffff,
                0xffff,
                0xff,
            ),
            info(
                0xffff,
                EthernetAddress([0xfe, 0xff, 0xff, 0xff, 0xff, 0xfe]),
                0xffff,
                0xffff,
                0xffff,
                0xff,
            ),
            0xffff,
        ),
        // Zero priorities and a non-zero collector delay.
        lacp(
            info(0, me, 1, 0, 1, 0x3f),
            info(0, switch, 1, 0, 1, 0x3f),
            50,
        ),
    ];
    // Every state bit alone, in the actor and (reversed) in the partner.
    for i in 0..8u8 {
        v.push(lacp(
            info(65535, me, 15, 255, u16::from(i) + 10, 1 << i),
            info(32768, switch, 300, 32768, 300 + u16::from(i), 0x80 >> i),
            u16::from(i),
        ));
    }
    let mut cases: Vec<Case> = v
        .into_iter()
        .enumerate()
        .map(|(i, pdu)| Case {
            src: mac(i as u8, 0xbb),
            pdu,
        })
        .collect();

    let info_pdu = MarkerRepr {
        kind: MarkerKind::Information,
        requester_port: 7,
        requester_system: switch,
        transaction_id: 0xdead_beef,
    };
    let markers = [
        info_pdu,
        info_pdu.to_response(),
        MarkerRepr {
            kind: MarkerKind::Information,
            requester_port: 0xffff,
            requester_system: me,
            transaction_id: u32::MAX,
        },
        MarkerRepr {
            kind: MarkerKind::Response,
            requester_port: 1,
            requester_system: me,
            transaction_id: 0,
        },
    ];
    cases.extend(markers.into_iter().map(|m| Case {
        src: mac(0x99, 0xcc),
        pdu: Pdu::Marker(m),
    }));
    cases
}

/// Writes `frames` to a pcap file, runs tshark over it and returns one field map per frame.
fn tshark_fields(test: &str, frames: &[Vec<u8>]) -> Vec<HashMap<&'static str, String>> {
    let file = TempFile::new(test);
    let out = fs::File::create(&file.0).expect("create temporary pcap file");
    let mut w = PcapWriter::new(out, LINKTYPE_ETHERNET).expect("write pcap header");
    for (i, f) in frames.iter().enumerate() {
        w.write_packet(1_700_000_000_000_000_000 + i as u64 * 1_000_000, f)
            .expect("write pcap record");
    }
    drop(w.into_inner());

    let mut cmd = Command::new("tshark");
    cmd.arg("-n")
        .arg("-r")
        .arg(&file.0)
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
    let rows: Vec<_> = stdout
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
        "tshark printed {} frames, wrote {}:\n{stdout}\n{stderr}",
        rows.len(),
        frames.len()
    );
    rows
}

/// Parses a tshark number, shown either in decimal or as `0x…`.
fn num(row: &HashMap<&str, String>, field: &str) -> u64 {
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

/// Parses a tshark boolean (`1`/`0` in older versions, `True`/`False` in newer ones).
fn flag(row: &HashMap<&str, String>, field: &str) -> bool {
    match row[field].to_ascii_lowercase().as_str() {
        "1" | "true" => true,
        "0" | "false" => false,
        other => panic!(
            "field {field}: {other:?} is not a boolean (frame {})",
            row["frame.number"]
        ),
    }
}

/// Expert infos of warning level or worse, and malformed-packet markers, found in a row.
fn problems(row: &HashMap<&str, String>) -> Vec<String> {
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
            // Some versions print the severity's name instead of its value.
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

fn check_info(row: &HashMap<&str, String>, side: &str, want: &LacpInfo) {
    let f = |name: &str| format!("lacp.{side}.{name}");
    let frame = &row["frame.number"];
    assert_eq!(
        num(row, &f("sys_priority")),
        u64::from(want.system_priority),
        "frame {frame} {side} system priority"
    );
    assert_eq!(
        row[f("sysid").as_str()],
        want.system.to_string(),
        "frame {frame} {side} system"
    );
    assert_eq!(
        num(row, &f("key")),
        u64::from(want.key),
        "frame {frame} {side} key"
    );
    assert_eq!(
        num(row, &f("port_priority")),
        u64::from(want.port_priority),
        "frame {frame} {side} port priority"
    );
    assert_eq!(
        num(row, &f("port")),
        u64::from(want.port),
        "frame {frame} {side} port"
    );
    assert_eq!(
        num(row, &f("state")),
        u64::from(want.state.bits()),
        "frame {frame} {side} state"
    );
    for (name, bit) in STATE_BITS {
        assert_eq!(
            flag(row, &f(&format!("state.{name}"))),
            want.state.contains(bit),
            "frame {frame} {side} state bit {name} (state {:?})",
            want.state
        );
    }
}

#[test]
fn tshark_decodes_emitted_slow_pdus() {
    let cases = cases();
    let frames: Vec<Vec<u8>> = cases.iter().map(Case::frame).collect();
    let rows = tshark_fields("decode", &frames);

    let mut lacp_seen = 0;
    let mut marker_seen = 0;
    for (i, (case, row)) in cases.iter().zip(&rows).enumerate() {
        let frame = &row["frame.number"];
        assert_eq!(num(row, "frame.number"), i as u64 + 1);
        assert_eq!(num(row, "frame.len"), 124, "frame {frame} length");
        assert_eq!(row["eth.dst"], "01:80:c2:00:00:02", "frame {frame}");
        assert_eq!(row["eth.src"], case.src.to_string(), "frame {frame}");
        assert_eq!(num(row, "eth.type"), 0x8809, "frame {frame}");
        let problems = problems(row);
        assert!(
            problems.is_empty(),
            "frame {frame} ({case:?}): {problems:?}"
        );
        match &case.pdu {
            Pdu::Lacp(r) => {
                lacp_seen += 1;
                assert!(
                    row["frame.protocols"].ends_with("slow:lacp"),
                    "frame {frame}: {}",
                    row["frame.protocols"]
                );
                assert_eq!(num(row, "slow.subtype"), 1, "frame {frame}");
                assert_eq!(
                    num(row, "lacp.version"),
                    u64::from(r.version),
                    "frame {frame}"
                );
                assert_eq!(
                    row["lacp.tlv_type"], "0x01,0x02,0x03,0x00",
                    "frame {frame} TLV types"
                );
                assert_eq!(
                    row["lacp.tlv_length"], "0x14,0x14,0x10,0x00",
                    "frame {frame} TLV lengths"
                );
                check_info(row, "actor", &r.actor);
                check_info(row, "partner", &r.partner);
                assert_eq!(
                    num(row, "lacp.collector.max_delay"),
                    u64::from(r.collector_max_delay),
                    "frame {frame}"
                );
                assert!(row["marker.requesterPort"].is_empty(), "frame {frame}");
            }
            Pdu::Marker(r) => {
                marker_seen += 1;
                assert!(
                    row["frame.protocols"].ends_with("slow:marker"),
                    "frame {frame}: {}",
                    row["frame.protocols"]
                );
                assert_eq!(num(row, "slow.subtype"), 2, "frame {frame}");
                assert_eq!(num(row, "marker.version"), 1, "frame {frame}");
                let kind = match r.kind {
                    MarkerKind::Information => "0x01",
                    MarkerKind::Response => "0x02",
                    MarkerKind::Unknown(_) => unreachable!("not emitted here"),
                };
                assert_eq!(
                    row["marker.tlvType"],
                    format!("{kind},0x00"),
                    "frame {frame} TLV types"
                );
                assert_eq!(
                    row["marker.tlvLen"], "0x10,0x00",
                    "frame {frame} TLV lengths"
                );
                assert_eq!(
                    num(row, "marker.requesterPort"),
                    u64::from(r.requester_port),
                    "frame {frame}"
                );
                assert_eq!(
                    row["marker.requesterSystem"],
                    r.requester_system.to_string(),
                    "frame {frame}"
                );
                assert_eq!(
                    num(row, "marker.requesterTransId"),
                    u64::from(r.transaction_id),
                    "frame {frame}"
                );
                assert!(row["lacp.version"].is_empty(), "frame {frame}");
            }
        }
    }
    assert_eq!((lacp_seen, marker_seen), (18, 4));
}

/// The oracle must be able to fail: hand-damaged PDUs are reported by tshark.
#[test]
fn tshark_flags_damaged_pdus() {
    let src = mac(1, 0xaa);
    let mut marker = vec![0; 124];
    MarkerRepr {
        kind: MarkerKind::Information,
        requester_port: 7,
        requester_system: src,
        transaction_id: 1,
    }
    .emit_frame(src, &mut marker);
    marker[14 + 3] = 0x16; // the Marker TLV length from the Linux header comment
    let r = LacpRepr::default();
    let mut lacp = vec![0; r.frame_len()];
    r.emit_frame(src, &mut lacp);
    lacp[14 + 3] = 19; // wrong Actor Information length
    let mut cut = vec![0; r.frame_len()];
    r.emit_frame(src, &mut cut);
    cut.truncate(14 + 50);

    let rows = tshark_fields("damaged", &[marker, lacp, cut]);
    for row in &rows {
        assert!(
            !problems(row).is_empty(),
            "tshark found nothing wrong with frame {}: {row:?}",
            row["frame.number"]
        );
    }
}
