//! Oracle test: IGMP (v1/v2/v3), MLD (v1/v2) and neighbour-discovery messages emitted by
//! `lagd_proto::wire::{igmp, mld, ndisc}` are decoded by tshark (Wireshark's dissectors) to
//! exactly the values that were emitted, with good checksums and no malformed packet or
//! expert warning or error; and the same frames parse back through the views.
//!
//! tshark must be installed; if it is not, the test fails (it never skips).

use std::collections::HashMap;
use std::fs;
use std::io::ErrorKind;
use std::path::PathBuf;
use std::process::Command;

use lagd_proto::capture::PcapWriter;
use lagd_proto::wire::igmp::{
    GroupRecord, GroupRecordRepr, GroupRecordType, IgmpPacket, IgmpRepr, IgmpVersion, QueryV3,
};
use lagd_proto::wire::ip::{IpProtocol, Ipv4Address, Ipv6Address};
use lagd_proto::wire::ipv4::{Ipv4Packet, Ipv4Repr};
use lagd_proto::wire::ipv6::{Ipv6Packet, Ipv6Repr};
use lagd_proto::wire::mld::{AddressRecord, MldPacket, MldRepr};
use lagd_proto::wire::ndisc::{self, NdiscPacket, NdiscRepr, NeighborFlags};
use lagd_proto::wire::{EtherType, EthernetAddress, EthernetFrame, ethernet::EthernetRepr};

/// pcap link type for Ethernet frames.
const LINKTYPE_ETHERNET: u32 = 1;

/// Expert-info severities from warning up (Wireshark's `PI_WARN`).
const SEVERITY_WARN: u64 = 0x0060_0000;

/// The fields asked of tshark, in output column order.
const FIELDS: &[&str] = &[
    "frame.number",
    "frame.protocols",
    "igmp.type",
    "igmp.version",
    "igmp.max_resp",
    "igmp.maddr",
    "igmp.checksum.status",
    "igmp.s",
    "igmp.qrv",
    "igmp.qqic",
    "igmp.num_src",
    "igmp.saddr",
    "igmp.num_grp_recs",
    "igmp.record_type",
    "icmpv6.type",
    "icmpv6.code",
    "icmpv6.checksum.status",
    "icmpv6.mld.maximum_response_delay",
    "icmpv6.mld.maximum_response_code",
    "icmpv6.mld.multicast_address",
    "icmpv6.mld.flag.s",
    "icmpv6.mld.flag.qrv",
    "icmpv6.mld.qqi",
    "icmpv6.mld.nb_sources",
    "icmpv6.mld.source_address",
    "icmpv6.mldr.nb_mcast_records",
    "icmpv6.mldr.mar.record_type",
    "icmpv6.mldr.mar.nb_sources",
    "icmpv6.mldr.mar.multicast_address",
    "icmpv6.mldr.mar.source_address",
    "icmpv6.nd.ns.target_address",
    "icmpv6.nd.na.target_address",
    "icmpv6.nd.na.flag.r",
    "icmpv6.nd.na.flag.s",
    "icmpv6.nd.na.flag.o",
    "icmpv6.opt.type",
    "icmpv6.opt.length",
    "icmpv6.opt.src_linkaddr",
    "icmpv6.opt.target_linkaddr",
    "_ws.malformed",
    "_ws.expert.severity",
    "_ws.expert",
];

const MAC: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 0x0a]);
const HOST4: Ipv4Address = Ipv4Address([192, 0, 2, 10]);
const LINK_LOCAL: Ipv6Address = Ipv6Address([
    0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xfe, 0, 0, 0x0a,
]);
const GLOBAL: Ipv6Address = Ipv6Address([
    0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x12, 0x34, 0x56,
]);
const MLDV2_ROUTERS: Ipv6Address =
    Ipv6Address([0xff, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x16]);

fn v6(s: &str) -> Ipv6Address {
    s.parse().unwrap()
}

fn v4(s: &str) -> Ipv4Address {
    s.parse().unwrap()
}

/// One frame and what tshark must say about it (`field`, value; several occurrences joined
/// with commas).
struct Case {
    name: &'static str,
    frame: Vec<u8>,
    want: Vec<(&'static str, String)>,
}

fn want(pairs: &[(&'static str, &str)]) -> Vec<(&'static str, String)> {
    pairs.iter().map(|(f, v)| (*f, (*v).to_owned())).collect()
}

/// An Ethernet/IPv4 frame carrying `msg` as IGMP, TTL 1, to `dst`.
fn ipv4_frame(dst: Ipv4Address, msg: &[u8]) -> Vec<u8> {
    let d = dst.0;
    let eth = EthernetRepr {
        src_addr: MAC,
        dst_addr: EthernetAddress([0x01, 0x00, 0x5e, d[1] & 0x7f, d[2], d[3]]),
        ethertype: EtherType::Ipv4,
    };
    let ip = Ipv4Repr {
        src_addr: HOST4,
        dst_addr: dst,
        next_header: IpProtocol::Igmp,
        payload_len: msg.len(),
        hop_limit: 1,
        dscp_ecn: 0xc0,
        ident: 0,
        dont_frag: true,
        more_frags: false,
        frag_offset: 0,
    };
    let mut f = vec![0u8; 14 + 20 + msg.len()];
    let mut frame = EthernetFrame::new_unchecked(&mut f[..]);
    eth.emit(&mut frame);
    let mut p = Ipv4Packet::new_unchecked(frame.payload_mut());
    ip.emit(&mut p);
    p.payload_mut().copy_from_slice(msg);
    f
}

/// An Ethernet/IPv6 frame carrying `msg` as ICMPv6 from `src` to `dst`, behind a Hop-by-Hop
/// header with a Router Alert (MLD, hop limit 1) or directly (neighbour discovery, 255).
fn ipv6_frame(src: Ipv6Address, dst: Ipv6Address, router_alert: bool, msg: &[u8]) -> Vec<u8> {
    const HBH_RA: [u8; 8] = [58, 0, 5, 2, 0, 0, 1, 0];
    let ext = if router_alert { HBH_RA.len() } else { 0 };
    let eth = EthernetRepr {
        src_addr: MAC,
        dst_addr: ndisc::multicast_mac(dst),
        ethertype: EtherType::Ipv6,
    };
    let ip = Ipv6Repr {
        src_addr: src,
        dst_addr: dst,
        next_header: if router_alert {
            IpProtocol::HopByHop
        } else {
            IpProtocol::Icmpv6
        },
        payload_len: ext + msg.len(),
        hop_limit: if router_alert { 1 } else { 255 },
        traffic_class: 0,
        flow_label: 0,
    };
    let mut f = vec![0u8; 14 + 40 + ext + msg.len()];
    let mut frame = EthernetFrame::new_unchecked(&mut f[..]);
    eth.emit(&mut frame);
    let mut p = Ipv6Packet::new_unchecked(frame.payload_mut());
    ip.emit(&mut p);
    let payload = p.payload_mut();
    if router_alert {
        payload[..ext].copy_from_slice(&HBH_RA);
    }
    payload[ext..].copy_from_slice(msg);
    f
}

fn igmp(r: IgmpRepr, sources: &[Ipv4Address]) -> Vec<u8> {
    let mut m = vec![0u8; r.buffer_len()];
    let mut p = IgmpPacket::new_unchecked(&mut m[..]);
    r.emit(&mut p);
    for (i, s) in sources.iter().enumerate() {
        p.set_query_source(i, *s);
    }
    p.fill_checksum();
    m
}

/// A report's records: each record's fixed part and its sources.
fn records<A: lagd_proto::wire::igmp::RecordAddress>(
    recs: &[(GroupRecordType, A, Vec<A>)],
) -> Vec<u8> {
    let mut out = Vec::new();
    for (record_type, group_addr, sources) in recs {
        let r = GroupRecordRepr {
            record_type: *record_type,
            aux_data_len: 0,
            num_sources: sources.len() as u16,
            group_addr: *group_addr,
        };
        let mut b = vec![0u8; r.buffer_len()];
        let mut g = GroupRecord::<_, A>::new_unchecked(&mut b[..]);
        r.emit(&mut g);
        for (i, s) in sources.iter().enumerate() {
            g.set_source(i, *s);
        }
        out.extend_from_slice(&b);
    }
    out
}

fn igmp_v3_report(recs: &[(GroupRecordType, Ipv4Address, Vec<Ipv4Address>)]) -> Vec<u8> {
    let r = IgmpRepr::MembershipReportV3 {
        num_records: recs.len() as u16,
    };
    let body = records(recs);
    let mut m = vec![0u8; r.buffer_len() + body.len()];
    let mut p = IgmpPacket::new_unchecked(&mut m[..]);
    r.emit(&mut p);
    p.records_mut().copy_from_slice(&body);
    p.fill_checksum();
    m
}

/// An MLD message: `body` is a v2 report's records or a query's sources.
fn mld(r: MldRepr, body: &[u8], dst: Ipv6Address) -> Vec<u8> {
    let report = matches!(r, MldRepr::ReportV2 { .. });
    let mut m = vec![0u8; r.buffer_len() + if report { body.len() } else { 0 }];
    let mut p = MldPacket::new_unchecked(&mut m[..]);
    r.emit(&mut p);
    if report {
        p.records_mut().copy_from_slice(body);
    } else {
        for (i, s) in body.chunks(16).enumerate() {
            p.set_query_source(i, Ipv6Address::from_bytes(s));
        }
    }
    p.fill_checksum(LINK_LOCAL, dst);
    m
}

fn nd_frame(r: NdiscRepr, src: Ipv6Address, dst: Ipv6Address) -> Vec<u8> {
    let mut f = vec![0u8; r.frame_len()];
    r.emit_frame(MAC, ndisc::multicast_mac(dst), src, dst, &mut f);
    f
}

fn cases() -> Vec<Case> {
    let g1 = v4("239.1.1.1");
    let g6 = v6("ff15::7");
    let mut v = vec![
        Case {
            name: "IGMPv1 report",
            frame: ipv4_frame(
                v4("224.1.2.3"),
                &igmp(
                    IgmpRepr::MembershipReport {
                        version: IgmpVersion::V1,
                        group_addr: v4("224.1.2.3"),
                    },
                    &[],
                ),
            ),
            want: want(&[
                ("igmp.type", "0x12"),
                ("igmp.version", "1"),
                ("igmp.maddr", "224.1.2.3"),
            ]),
        },
        Case {
            name: "IGMPv2 report",
            frame: ipv4_frame(
                g1,
                &igmp(
                    IgmpRepr::MembershipReport {
                        version: IgmpVersion::V2,
                        group_addr: g1,
                    },
                    &[],
                ),
            ),
            want: want(&[
                ("igmp.type", "0x16"),
                ("igmp.version", "2"),
                ("igmp.maddr", "239.1.1.1"),
            ]),
        },
        Case {
            name: "IGMPv2 leave",
            frame: ipv4_frame(
                v4("224.0.0.2"),
                &igmp(IgmpRepr::LeaveGroup { group_addr: g1 }, &[]),
            ),
            want: want(&[
                ("igmp.type", "0x17"),
                ("igmp.version", "2"),
                ("igmp.maddr", "239.1.1.1"),
            ]),
        },
        Case {
            name: "IGMPv2 general query",
            frame: ipv4_frame(
                v4("224.0.0.1"),
                &igmp(
                    IgmpRepr::MembershipQuery {
                        max_resp_code: 100,
                        group_addr: Ipv4Address::UNSPECIFIED,
                        v3: None,
                    },
                    &[],
                ),
            ),
            want: want(&[
                ("igmp.type", "0x11"),
                ("igmp.version", "2"),
                ("igmp.maddr", "0.0.0.0"),
            ]),
        },
        Case {
            name: "IGMPv3 group-and-source query",
            frame: ipv4_frame(
                g1,
                &igmp(
                    IgmpRepr::MembershipQuery {
                        max_resp_code: 20,
                        group_addr: g1,
                        v3: Some(QueryV3 {
                            suppress: true,
                            qrv: 2,
                            qqic: 125,
                            num_sources: 2,
                        }),
                    },
                    &[v4("10.0.0.1"), v4("10.0.0.2")],
                ),
            ),
            want: want(&[
                ("igmp.type", "0x11"),
                ("igmp.version", "3"),
                ("igmp.maddr", "239.1.1.1"),
                ("igmp.s", "1"),
                ("igmp.qrv", "2"),
                ("igmp.qqic", "125"),
                ("igmp.num_src", "2"),
                ("igmp.saddr", "10.0.0.1,10.0.0.2"),
            ]),
        },
        Case {
            name: "IGMPv3 report",
            frame: ipv4_frame(
                v4("224.0.0.22"),
                &igmp_v3_report(&[
                    (GroupRecordType::ChangeToExclude, g1, vec![]),
                    (
                        GroupRecordType::AllowNewSources,
                        v4("232.1.1.1"),
                        vec![v4("10.0.0.9")],
                    ),
                    (GroupRecordType::ChangeToInclude, v4("239.9.9.9"), vec![]),
                ]),
            ),
            want: want(&[
                ("igmp.type", "0x22"),
                ("igmp.version", "3"),
                ("igmp.num_grp_recs", "3"),
                ("igmp.record_type", "4,5,3"),
                ("igmp.maddr", "239.1.1.1,232.1.1.1,239.9.9.9"),
                ("igmp.num_src", "0,1,0"),
                ("igmp.saddr", "10.0.0.9"),
            ]),
        },
        Case {
            name: "MLDv1 report",
            frame: ipv6_frame(
                LINK_LOCAL,
                g6,
                true,
                &mld(MldRepr::Report { mcast_addr: g6 }, &[], g6),
            ),
            want: want(&[
                ("icmpv6.type", "131"),
                ("icmpv6.code", "0"),
                ("icmpv6.mld.multicast_address", "ff15::7"),
            ]),
        },
        Case {
            name: "MLDv1 done",
            frame: ipv6_frame(
                LINK_LOCAL,
                v6("ff02::2"),
                true,
                &mld(MldRepr::Done { mcast_addr: g6 }, &[], v6("ff02::2")),
            ),
            want: want(&[
                ("icmpv6.type", "132"),
                ("icmpv6.mld.multicast_address", "ff15::7"),
            ]),
        },
        Case {
            name: "MLDv1 general query",
            frame: ipv6_frame(
                LINK_LOCAL,
                ndisc::ALL_NODES,
                true,
                &mld(
                    MldRepr::Query {
                        max_resp_code: 10_000,
                        mcast_addr: Ipv6Address::UNSPECIFIED,
                        v2: None,
                    },
                    &[],
                    ndisc::ALL_NODES,
                ),
            ),
            want: want(&[
                ("icmpv6.type", "130"),
                ("icmpv6.mld.maximum_response_delay", "10000"),
                ("icmpv6.mld.multicast_address", "::"),
            ]),
        },
        Case {
            name: "MLDv2 address-and-source query",
            frame: ipv6_frame(
                LINK_LOCAL,
                g6,
                true,
                &mld(
                    MldRepr::Query {
                        max_resp_code: 1000,
                        mcast_addr: g6,
                        v2: Some(QueryV3 {
                            suppress: true,
                            qrv: 2,
                            qqic: 125,
                            num_sources: 1,
                        }),
                    },
                    &GLOBAL.0,
                    g6,
                ),
            ),
            want: want(&[
                ("icmpv6.type", "130"),
                ("icmpv6.mld.maximum_response_code", "1000"),
                ("icmpv6.mld.multicast_address", "ff15::7"),
                ("icmpv6.mld.flag.s", "1"),
                ("icmpv6.mld.flag.qrv", "2"),
                ("icmpv6.mld.qqi", "125"),
                ("icmpv6.mld.nb_sources", "1"),
                ("icmpv6.mld.source_address", "2001:db8::12:3456"),
            ]),
        },
        Case {
            name: "MLDv2 report",
            frame: ipv6_frame(
                LINK_LOCAL,
                MLDV2_ROUTERS,
                true,
                &mld(
                    MldRepr::ReportV2 { num_records: 2 },
                    &records(&[
                        (GroupRecordType::ChangeToExclude, g6, vec![]),
                        (
                            GroupRecordType::ModeIsInclude,
                            v6("ff3e::8000:1"),
                            vec![GLOBAL],
                        ),
                    ]),
                    MLDV2_ROUTERS,
                ),
            ),
            want: want(&[
                ("icmpv6.type", "143"),
                ("icmpv6.mldr.nb_mcast_records", "2"),
                ("icmpv6.mldr.mar.record_type", "4,1"),
                ("icmpv6.mldr.mar.nb_sources", "0,1"),
                ("icmpv6.mldr.mar.multicast_address", "ff15::7,ff3e::8000:1"),
                ("icmpv6.mldr.mar.source_address", "2001:db8::12:3456"),
            ]),
        },
    ];
    let sol = ndisc::solicited_node(GLOBAL);
    v.extend([
        Case {
            name: "neighbour solicitation",
            frame: nd_frame(
                NdiscRepr::NeighborSolicit {
                    target_addr: GLOBAL,
                    lladdr: Some(MAC),
                },
                LINK_LOCAL,
                sol,
            ),
            want: want(&[
                ("icmpv6.type", "135"),
                ("icmpv6.nd.ns.target_address", "2001:db8::12:3456"),
                ("icmpv6.opt.type", "1"),
                ("icmpv6.opt.length", "1"),
                ("icmpv6.opt.src_linkaddr", "02:00:00:00:00:0a"),
            ]),
        },
        Case {
            name: "duplicate address detection",
            frame: nd_frame(
                NdiscRepr::NeighborSolicit {
                    target_addr: GLOBAL,
                    lladdr: None,
                },
                Ipv6Address::UNSPECIFIED,
                sol,
            ),
            want: want(&[
                ("icmpv6.type", "135"),
                ("icmpv6.nd.ns.target_address", "2001:db8::12:3456"),
                ("icmpv6.opt.type", ""),
            ]),
        },
        Case {
            name: "unsolicited advertisement",
            frame: nd_frame(
                NdiscRepr::NeighborAdvert {
                    flags: NeighborFlags::OVERRIDE,
                    target_addr: GLOBAL,
                    lladdr: Some(MAC),
                },
                GLOBAL,
                ndisc::ALL_NODES,
            ),
            want: want(&[
                ("icmpv6.type", "136"),
                ("icmpv6.nd.na.target_address", "2001:db8::12:3456"),
                ("icmpv6.nd.na.flag.r", "0"),
                ("icmpv6.nd.na.flag.s", "0"),
                ("icmpv6.nd.na.flag.o", "1"),
                ("icmpv6.opt.type", "2"),
                ("icmpv6.opt.target_linkaddr", "02:00:00:00:00:0a"),
            ]),
        },
        Case {
            name: "solicited advertisement from a router",
            frame: {
                let r = NdiscRepr::NeighborAdvert {
                    flags: NeighborFlags::ROUTER | NeighborFlags::SOLICITED,
                    target_addr: LINK_LOCAL,
                    lladdr: None,
                };
                let mut f = vec![0u8; r.frame_len()];
                r.emit_frame(MAC, MAC, LINK_LOCAL, GLOBAL, &mut f);
                f
            },
            want: want(&[
                ("icmpv6.type", "136"),
                ("icmpv6.nd.na.target_address", "fe80::ff:fe00:a"),
                ("icmpv6.nd.na.flag.r", "1"),
                ("icmpv6.nd.na.flag.s", "1"),
                ("icmpv6.nd.na.flag.o", "0"),
            ]),
        },
    ]);
    v
}

/// Deletes the file when dropped, so a failing test does not leave it behind.
struct TempFile(PathBuf);

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.0);
    }
}

/// Writes `frames` to a pcap file, runs tshark over it and returns one field map per frame.
fn tshark_fields(frames: &[Vec<u8>]) -> Vec<HashMap<&'static str, String>> {
    let name = format!("lagd-tshark-igmp-nd-{}.pcap", std::process::id());
    let file = TempFile(std::env::temp_dir().join(name));
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
        .args(["-o", "ip.check_checksum:TRUE"])
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
    let rows: Vec<HashMap<&'static str, String>> = stdout
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

/// One value as tshark prints it, normalised: numbers (decimal or `0x…`) to decimal,
/// booleans to 1/0, the rest lower-case.
fn norm(v: &str) -> String {
    let v = v.trim().to_ascii_lowercase();
    let n = match v.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None if !v.contains(':') && !v.contains('.') => v.parse().ok(),
        None => None,
    };
    match (n, v.as_str()) {
        (Some(n), _) => n.to_string(),
        (_, "true") => "1".into(),
        (_, "false") => "0".into(),
        _ => v,
    }
}

fn same(got: &str, want: &str) -> bool {
    let g: Vec<String> = got.split(',').map(norm).collect();
    let w: Vec<String> = want.split(',').map(norm).collect();
    g == w
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

/// What the views read back from a frame: the message type and the addresses in it, so a
/// frame tshark accepts is also one lagd parses.
fn parse_back(frame: &[u8]) -> String {
    let eth = EthernetFrame::new_checked(frame).expect("ethernet");
    match eth.ethertype() {
        EtherType::Ipv4 => {
            let ip = Ipv4Packet::new_checked(eth.payload()).expect("ipv4");
            assert!(ip.verify_checksum());
            let p = IgmpPacket::new_checked(ip.payload()).expect("igmp");
            assert!(p.verify_checksum(), "igmp checksum");
            let r = IgmpRepr::parse(&p).expect("igmp repr");
            let groups: Vec<String> = p
                .records()
                .map(|r| GroupRecordRepr::parse(&r).unwrap().group_addr.to_string())
                .collect();
            format!("{r:?} {groups:?}")
        }
        EtherType::Ipv6 => {
            let ip = Ipv6Packet::new_checked(eth.payload()).expect("ipv6");
            let up = ip.upper_layer().expect("upper layer");
            assert_eq!(up.next_header, IpProtocol::Icmpv6);
            let msg = &eth.payload()[up.offset..];
            let (src, dst) = (ip.src_addr(), ip.dst_addr());
            if let Ok(nd) = NdiscPacket::new_checked(msg) {
                if let Ok(r) = NdiscRepr::parse(&nd) {
                    assert!(nd.verify_checksum(src, dst), "neighbour discovery checksum");
                    return format!("{r:?}");
                }
            }
            let p = MldPacket::new_checked(msg).expect("mld");
            assert!(p.verify_checksum(src, dst), "mld checksum");
            let r = MldRepr::parse(&p).expect("mld repr");
            let groups: Vec<String> = p
                .records()
                .map(|r: AddressRecord<&[u8]>| r.group_addr().to_string())
                .collect();
            format!("{r:?} {groups:?}")
        }
        other => panic!("unexpected ethertype {other}"),
    }
}

#[test]
fn tshark_decodes_igmp_mld_and_neighbour_discovery_as_emitted() {
    let cases = cases();
    let frames: Vec<Vec<u8>> = cases.iter().map(|c| c.frame.clone()).collect();
    let rows = tshark_fields(&frames);
    let mut failures = Vec::new();
    for (case, row) in cases.iter().zip(&rows) {
        let igmp = case.frame[12..14] == [0x08, 0x00];
        let proto = if igmp { "igmp" } else { "icmpv6" };
        if !row["frame.protocols"].split(':').any(|p| p == proto) {
            failures.push(format!(
                "{}: protocols {:?}, no {proto}",
                case.name, row["frame.protocols"]
            ));
        }
        let status = if igmp {
            "igmp.checksum.status"
        } else {
            "icmpv6.checksum.status"
        };
        if !same(&row[status], "1") && !row[status].eq_ignore_ascii_case("good") {
            failures.push(format!(
                "{}: {status} is {:?}, not good",
                case.name, row[status]
            ));
        }
        for (field, want) in &case.want {
            if !same(&row[field], want) {
                failures.push(format!(
                    "{}: {field} is {:?}, emitted {want:?}",
                    case.name, row[field]
                ));
            }
        }
        for p in problems(row) {
            failures.push(format!("{}: {p}", case.name));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // And lagd's own views read every frame back, checksums included.
    for case in &cases {
        let back = parse_back(&case.frame);
        assert!(!back.is_empty(), "{}", case.name);
    }
}
