//! Reader and writer tests: hand-built files in both formats and byte orders, every
//! truncation, corrupt lengths and bodies, I/O errors, small reads, and round trips.

use super::pcap::PCAP_HEADER_LEN;
use super::pcapng::{
    BT_EPB, BT_IDB, BT_PB, BT_SPB, BYTE_ORDER_MAGIC, OPT_IF_NAME, OPT_IF_TSOFFSET, OPT_IF_TSRESOL,
};
use super::reader::{BT_SHB, PCAP_MAGIC_MICROS, PCAP_MAGIC_NANOS};
use super::types::NANOS_PER_SEC;
use super::*;
use proptest::prelude::*;
use std::io;

/// A packet copied out of the reader.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Owned {
    ts: u64,
    iface: u32,
    linktype: u32,
    orig_len: u32,
    data: Vec<u8>,
}

/// Reads everything; returns the packets read and the final error, if any.
fn read_all<R: io::Read>(r: R) -> (Vec<Owned>, Option<CaptureError>) {
    let mut out = Vec::new();
    let mut rd = match CaptureReader::new(r) {
        Ok(rd) => rd,
        Err(e) => return (out, Some(e)),
    };
    loop {
        match rd.next_packet() {
            Ok(Some(p)) => out.push(Owned {
                ts: p.ts_nanos,
                iface: p.interface,
                linktype: p.linktype,
                orig_len: p.orig_len,
                data: p.data.to_vec(),
            }),
            Ok(None) => return (out, None),
            Err(e) => {
                // The reader is finished after an error.
                assert!(matches!(rd.next_packet(), Ok(None)));
                return (out, Some(e));
            }
        }
    }
}

fn read_ok(bytes: &[u8]) -> Vec<Owned> {
    let (pkts, err) = read_all(bytes);
    if let Some(e) = err {
        panic!("unexpected error: {e}");
    }
    pkts
}

fn read_err(bytes: &[u8]) -> CaptureError {
    read_all(bytes).1.expect("expected an error")
}

/// Hands out at most `chunk` bytes per `read`, and `Interrupted` every third call.
struct Chunked<'a> {
    data: &'a [u8],
    chunk: usize,
    calls: usize,
}

impl io::Read for Chunked<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.calls += 1;
        if self.calls % 3 == 0 {
            return Err(io::ErrorKind::Interrupted.into());
        }
        let n = self.chunk.min(buf.len()).min(self.data.len());
        buf[..n].copy_from_slice(&self.data[..n]);
        self.data = &self.data[n..];
        Ok(n)
    }
}

fn chunked(data: &[u8], chunk: usize) -> Chunked<'_> {
    Chunked {
        data,
        chunk,
        calls: 0,
    }
}

/// Little byte builder for hand-made files, independent of the writers under test.
struct B {
    be: bool,
    v: Vec<u8>,
}

impl B {
    fn new(be: bool) -> Self {
        Self { be, v: Vec::new() }
    }
    fn u16(&mut self, x: u16) -> &mut Self {
        let b = if self.be {
            x.to_be_bytes()
        } else {
            x.to_le_bytes()
        };
        self.v.extend_from_slice(&b);
        self
    }
    fn u32(&mut self, x: u32) -> &mut Self {
        let b = if self.be {
            x.to_be_bytes()
        } else {
            x.to_le_bytes()
        };
        self.v.extend_from_slice(&b);
        self
    }
    fn bytes(&mut self, b: &[u8]) -> &mut Self {
        self.v.extend_from_slice(b);
        self
    }
    fn pad4(&mut self) -> &mut Self {
        while self.v.len() % 4 != 0 {
            self.v.push(0);
        }
        self
    }
    /// Appends a pcapng block with the given body (padded here).
    fn block(&mut self, block_type: u32, body: &[u8]) -> &mut Self {
        let padded = body.len().div_ceil(4) * 4;
        let total = (12 + padded) as u32;
        self.u32(block_type)
            .u32(total)
            .bytes(body)
            .pad4()
            .u32(total)
    }
    /// Body bytes in this builder's byte order.
    fn body(&self) -> Self {
        Self::new(self.be)
    }
}

fn shb_body(be: bool) -> Vec<u8> {
    let mut b = B::new(be);
    b.u32(BYTE_ORDER_MAGIC)
        .u16(1)
        .u16(0)
        .u32(0xffff_ffff)
        .u32(0xffff_ffff);
    b.v
}

fn idb_body(be: bool, linktype: u16, snaplen: u32, opts: &[(u16, &[u8])]) -> Vec<u8> {
    let mut b = B::new(be);
    b.u16(linktype).u16(0).u32(snaplen);
    for (code, val) in opts {
        b.u16(*code).u16(val.len() as u16).bytes(val).pad4();
    }
    if !opts.is_empty() {
        b.u32(0);
    }
    b.v
}

fn epb_body(be: bool, id: u32, ticks: u64, orig_len: u32, data: &[u8]) -> Vec<u8> {
    let mut b = B::new(be);
    b.u32(id).u32((ticks >> 32) as u32).u32(ticks as u32);
    b.u32(data.len() as u32).u32(orig_len).bytes(data).pad4();
    b.v
}

#[test]
fn pcap_writer_round_trip() {
    let pkts: [(u64, Vec<u8>); 4] = [
        (0, vec![]),
        (1, vec![0xab]),
        (1_700_000_000_999_999_999, (0..=255).collect()),
        (u64::from(u32::MAX) * NANOS_PER_SEC + 5, vec![7; 1514]),
    ];
    let mut w = PcapWriter::new(Vec::new(), LINKTYPE_ETHERNET).unwrap();
    for (ts, d) in &pkts {
        w.write_packet(*ts, d).unwrap();
    }
    let file = w.into_inner();
    // The header is exactly the classic little-endian nanosecond one.
    assert_eq!(
        file[..24],
        [
            0x4d, 0x3c, 0xb2, 0xa1, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 4, 0, 1, 0, 0, 0
        ]
    );
    let mut r = CaptureReader::new(&file[..]).unwrap();
    assert_eq!(
        r.format(),
        CaptureFormat::Pcap {
            nanos: true,
            big_endian: false
        }
    );
    assert_eq!(r.offset(), 24);
    for (ts, d) in &pkts {
        let p = r.next_packet().unwrap().unwrap();
        assert_eq!(p.ts_nanos, *ts);
        assert_eq!(p.data, &d[..]);
        assert_eq!(p.orig_len as usize, d.len());
        assert_eq!((p.interface, p.linktype), (0, LINKTYPE_ETHERNET));
    }
    assert!(r.next_packet().unwrap().is_none());
    assert_eq!(r.offset(), file.len() as u64);
    let ifs = r.interfaces();
    assert_eq!(ifs.len(), 1);
    assert_eq!(ifs[0].snaplen, WRITER_SNAPLEN);
    assert_eq!(ifs[0].ts_resolution, TsResolution::NANOS);
}

#[test]
fn pcap_writer_rejects_unrepresentable_timestamp() {
    let mut w = PcapWriter::new(Vec::new(), LINKTYPE_ETHERNET).unwrap();
    let e = w
        .write_packet((u64::from(u32::MAX) + 1) * NANOS_PER_SEC, &[1])
        .unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
}

#[test]
fn big_endian_microsecond_pcap_by_hand() {
    #[rustfmt::skip]
    let file: &[u8] = &[
        0xa1, 0xb2, 0xc3, 0xd4, // magic, big-endian microseconds
        0x00, 0x02, 0x00, 0x04, // version 2.4
        0, 0, 0, 0, 0, 0, 0, 0, // thiszone, sigfigs
        0x00, 0x00, 0xff, 0xff, // snaplen 65535
        0x00, 0x00, 0x00, 0x65, // LINKTYPE_RAW
        0x5f, 0x5e, 0x10, 0x00, // 1_600_000_000 s
        0x00, 0x01, 0xe2, 0x40, // 123_456 us
        0x00, 0x00, 0x00, 0x04, // caplen 4
        0x00, 0x00, 0x00, 0x3c, // orig_len 60
        0xde, 0xad, 0xbe, 0xef,
        0x00, 0x00, 0x00, 0x01, // 1 s
        0x00, 0x0f, 0x42, 0x3f, // 999_999 us
        0, 0, 0, 0, 0, 0, 0, 0, // empty packet
    ];
    let mut r = CaptureReader::new(file).unwrap();
    assert_eq!(
        r.format(),
        CaptureFormat::Pcap {
            nanos: false,
            big_endian: true
        }
    );
    assert_eq!(r.interfaces()[0].snaplen, 65535);
    let p = r.next_packet().unwrap().unwrap();
    assert_eq!(p.ts_nanos, 1_600_000_000_123_456_000);
    assert_eq!((p.linktype, p.orig_len), (LINKTYPE_RAW, 60));
    assert_eq!(p.data, [0xde, 0xad, 0xbe, 0xef]);
    let p = r.next_packet().unwrap().unwrap();
    assert_eq!(
        (p.ts_nanos, p.orig_len, p.data.len()),
        (1_999_999_000, 0, 0)
    );
    assert!(r.next_packet().unwrap().is_none());
}

#[test]
fn all_four_pcap_magics() {
    for (be, nanos) in [(false, false), (false, true), (true, false), (true, true)] {
        let magic = if nanos {
            PCAP_MAGIC_NANOS
        } else {
            PCAP_MAGIC_MICROS
        };
        let mut b = B::new(be);
        b.u32(magic)
            .u16(2)
            .u16(4)
            .u32(0)
            .u32(0)
            .u32(1500)
            .u32(0x0400_0001);
        b.u32(3).u32(250).u32(2).u32(2).bytes(&[1, 2]);
        let pkts = read_ok(&b.v);
        let frac = if nanos { 250 } else { 250_000 };
        assert_eq!(
            pkts,
            [Owned {
                ts: 3 * NANOS_PER_SEC + frac,
                iface: 0,
                // The FCS bits above the low 16 are not part of the link type.
                linktype: LINKTYPE_ETHERNET,
                orig_len: 2,
                data: vec![1, 2],
            }],
            "be={be} nanos={nanos}"
        );
        let r = CaptureReader::new(&b.v[..]).unwrap();
        assert_eq!(
            r.format(),
            CaptureFormat::Pcap {
                nanos,
                big_endian: be
            }
        );
    }
}

/// A two-section pcapng file built by hand, and the offsets at which each block ends.
fn multi_section_pcapng() -> (Vec<u8>, Vec<usize>) {
    let mut ends = Vec::new();
    let mut f = B::new(false);
    f.block(BT_SHB, &shb_body(false));
    ends.push(f.v.len());
    // if 0: Ethernet, named, microseconds (explicit), snaplen 62.
    f.block(
        BT_IDB,
        &idb_body(
            false,
            1,
            62,
            &[(OPT_IF_NAME, b"eth0"), (OPT_IF_TSRESOL, &[6])],
        ),
    );
    ends.push(f.v.len());
    // if 1: raw IP, nanoseconds, and an unknown option before the ones we know.
    f.block(
        BT_IDB,
        &idb_body(false, 101, 0, &[(0x7777, b"xyz"), (OPT_IF_TSRESOL, &[9])]),
    );
    ends.push(f.v.len());
    f.block(BT_EPB, &epb_body(false, 1, 1_000_000_007, 20, &[0x45; 20]));
    ends.push(f.v.len());
    // An unknown block type must be skipped.
    f.block(0x0bad_0bad, &[1, 2, 3, 4, 5]);
    ends.push(f.v.len());
    // EPB on if 0 with trailing options (epb_flags) after padded data.
    let mut body = epb_body(false, 0, 2_000_001, 61, &[0xee; 5]);
    body.extend_from_slice(&[2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    f.block(BT_EPB, &body);
    ends.push(f.v.len());
    // SPB: orig 100, capped at if 0's snaplen 62; the 2 padding bytes are not data.
    let mut spb = f.body();
    spb.u32(100).bytes(&[0x5a; 62]);
    f.block(BT_SPB, &spb.v);
    ends.push(f.v.len());
    // Interface Statistics Block (type 5) — also skipped.
    f.block(5, &[0; 12]);
    ends.push(f.v.len());
    // Section 2, big-endian: if 0 (global 2) is SLL2 with 2^-3 s ticks and an offset.
    let mut g = B::new(true);
    g.block(BT_SHB, &shb_body(true));
    let offset = 1_000i64.to_be_bytes();
    g.block(
        BT_IDB,
        &idb_body(
            true,
            276,
            0,
            &[
                (OPT_IF_TSRESOL, &[0x83]),
                (OPT_IF_TSOFFSET, &offset),
                (OPT_IF_NAME, b"any\0"),
            ],
        ),
    );
    g.block(BT_EPB, &epb_body(true, 0, 12, 3, &[9, 8, 7]));
    let base = f.v.len();
    let mut gends = Vec::new();
    // Block ends in section 2, recomputed by walking the lengths we just wrote.
    let mut at = 0;
    while at < g.v.len() {
        at += u32::from_be_bytes(g.v[at + 4..at + 8].try_into().unwrap()) as usize;
        gends.push(base + at);
    }
    f.bytes(&g.v);
    ends.extend(gends);
    (f.v, ends)
}

#[test]
fn pcapng_two_sections_several_interfaces() {
    let (file, _) = multi_section_pcapng();
    let mut r = CaptureReader::new(&file[..]).unwrap();
    assert_eq!(r.format(), CaptureFormat::PcapNg);
    assert_eq!(r.offset(), 28);
    let mut pkts = Vec::new();
    while let Some(p) = r.next_packet().unwrap() {
        pkts.push((
            p.ts_nanos,
            p.interface,
            p.linktype,
            p.orig_len,
            p.data.to_vec(),
        ));
    }
    assert_eq!(
        pkts,
        [
            (1_000_000_007, 1, LINKTYPE_RAW, 20, vec![0x45; 20]),
            (2_000_001_000, 0, LINKTYPE_ETHERNET, 61, vec![0xee; 5]),
            (0, 0, LINKTYPE_ETHERNET, 100, vec![0x5a; 62]),
            // 12 ticks of 1/8 s = 1.5 s, plus 1000 s offset.
            (1_001_500_000_000, 2, LINKTYPE_LINUX_SLL2, 3, vec![9, 8, 7]),
        ]
    );
    assert_eq!(r.offset(), file.len() as u64);
    let ifs = r.interfaces();
    assert_eq!(ifs.len(), 3);
    assert_eq!(
        ifs[0],
        InterfaceInfo {
            linktype: 1,
            snaplen: 62,
            name: Some("eth0".into()),
            ts_resolution: TsResolution::MICROS,
            ts_offset_secs: 0,
            section: 0
        }
    );
    assert_eq!(
        (
            ifs[1].linktype,
            ifs[1].ts_resolution,
            ifs[1].name.as_deref()
        ),
        (101, TsResolution::NANOS, None)
    );
    assert_eq!(
        ifs[2],
        InterfaceInfo {
            linktype: 276,
            snaplen: 0,
            name: Some("any".into()),
            ts_resolution: TsResolution::Binary(3),
            ts_offset_secs: 1000,
            section: 1
        }
    );
}

#[test]
fn pcapng_big_endian_first_section_and_obsolete_packet_block() {
    let mut f = B::new(true);
    f.block(BT_SHB, &shb_body(true));
    f.block(BT_IDB, &idb_body(true, 1, 0, &[]));
    let mut pb = f.body();
    pb.u16(0)
        .u16(0)
        .u32(0)
        .u32(3_000_000)
        .u32(2)
        .u32(60)
        .bytes(&[1, 2]);
    f.block(BT_PB, &pb.v);
    assert_eq!(
        read_ok(&f.v),
        [Owned {
            ts: 3_000_000_000,
            iface: 0,
            linktype: 1,
            orig_len: 60,
            data: vec![1, 2]
        }]
    );
}

#[test]
fn pcapng_writer_matches_hand_built_bytes() {
    let mut w = PcapNgWriter::new(Vec::new()).unwrap();
    let e = w
        .add_interface(LINKTYPE_ETHERNET, 64, Some("eth0"), TsResolution::MICROS)
        .unwrap();
    let r = w
        .add_interface(LINKTYPE_RAW, 0, None, TsResolution::NANOS)
        .unwrap();
    assert_eq!((e, r), (0, 1));
    w.write_packet(1, 1_000_000_007, &[0x45; 20]).unwrap();
    w.write_packet(0, 2_000_001_999, &[0xee; 5]).unwrap();
    w.write_simple_packet(&[0x5a; 3]).unwrap();
    w.write_block_raw(0x0bad_0bad, &[1, 2, 3, 4, 5]).unwrap();
    w.new_section(true).unwrap();
    w.add_interface(LINKTYPE_LINUX_SLL2, 0, None, TsResolution::Binary(3))
        .unwrap();
    w.write_packet(0, 1_500_000_000, &[9, 8, 7]).unwrap();
    assert!(w.write_packet(1, 0, &[]).is_err());
    let got = w.into_inner();

    let mut f = B::new(false);
    f.block(BT_SHB, &shb_body(false));
    f.block(BT_IDB, &idb_body(false, 1, 64, &[(OPT_IF_NAME, b"eth0")]));
    f.block(BT_IDB, &idb_body(false, 101, 0, &[(OPT_IF_TSRESOL, &[9])]));
    f.block(BT_EPB, &epb_body(false, 1, 1_000_000_007, 20, &[0x45; 20]));
    f.block(BT_EPB, &epb_body(false, 0, 2_000_001, 5, &[0xee; 5]));
    f.block(BT_SPB, &[3, 0, 0, 0, 0x5a, 0x5a, 0x5a]);
    f.block(0x0bad_0bad, &[1, 2, 3, 4, 5]);
    let mut g = B::new(true);
    g.block(BT_SHB, &shb_body(true));
    g.block(
        BT_IDB,
        &idb_body(true, 276, 0, &[(OPT_IF_TSRESOL, &[0x83])]),
    );
    g.block(BT_EPB, &epb_body(true, 0, 12, 3, &[9, 8, 7]));
    f.bytes(&g.v);
    assert_eq!(got, f.v);
    // A literal check of the framing itself: the first SHB, little-endian.
    #[rustfmt::skip]
    let shb = [
        0x0a, 0x0d, 0x0d, 0x0a, 28, 0, 0, 0, 0x4d, 0x3c, 0x2b, 0x1a, 1, 0, 0, 0,
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 28, 0, 0, 0,
    ];
    assert_eq!(got[..28], shb);
}

/// Every prefix of a valid file either ends cleanly at a record boundary, with exactly the
/// records before it, or fails at the offset where the cut record starts.
fn check_every_truncation(file: &[u8], header_end: usize, ends: &[usize]) {
    let (all, err) = read_all(file);
    assert!(err.is_none());
    for len in 0..=file.len() {
        let (pkts, err) = read_all(&file[..len]);
        if len < header_end {
            let e = err.expect("short header must fail");
            assert_eq!(e.offset, 0, "len {len}: {e}");
            if len == 0 {
                assert!(matches!(e.kind, CaptureErrorKind::Empty));
            }
            continue;
        }
        let last = *ends
            .iter()
            .filter(|&&e| e <= len)
            .max()
            .unwrap_or(&header_end);
        assert_eq!(pkts[..], all[..pkts.len()], "len {len}: wrong packets");
        if len == last {
            assert!(err.is_none(), "len {len}: {}", err.unwrap());
        } else {
            let e = err.unwrap_or_else(|| panic!("len {len}: cut record not reported"));
            assert_eq!(e.offset, last as u64, "len {len}: {e}");
            assert!(matches!(
                e.kind,
                CaptureErrorKind::TruncatedHeader { .. }
                    | CaptureErrorKind::TruncatedRecord { .. }
                    | CaptureErrorKind::TruncatedBlock { .. }
            ));
        }
    }
}

#[test]
fn pcap_truncated_at_every_length() {
    let mut w = PcapWriter::new(Vec::new(), LINKTYPE_ETHERNET).unwrap();
    let mut ends = vec![24];
    for n in [0usize, 1, 7, 60] {
        w.write_packet(n as u64 * 1000, &vec![n as u8; n]).unwrap();
        ends.push(ends.last().unwrap() + 16 + n);
    }
    let file = w.into_inner();
    assert_eq!(*ends.last().unwrap(), file.len());
    check_every_truncation(&file, 24, &ends);
}

#[test]
fn pcapng_truncated_at_every_length() {
    let (file, ends) = multi_section_pcapng();
    assert_eq!(*ends.last().unwrap(), file.len());
    check_every_truncation(&file, 28, &ends);
}

#[test]
fn truncated_record_message_names_offset_and_lengths() {
    let mut w = PcapWriter::new(Vec::new(), LINKTYPE_ETHERNET).unwrap();
    w.write_packet(0, &[0; 100]).unwrap();
    w.write_packet(0, &[0; 1514]).unwrap();
    let file = w.into_inner();
    let cut = 24 + 116 + 16 + 200;
    let e = read_err(&file[..cut]);
    assert_eq!(
        e.to_string(),
        "at byte 140: truncated packet record (header says 1514 bytes, 200 left)"
    );
    let e = read_err(&file[..24 + 116 + 5]);
    assert_eq!(
        e.to_string(),
        "at byte 140: truncated packet record header (need 16 bytes, 5 left)"
    );
}

/// A classic pcap file header with `snaplen`, then one good 60-byte record.
fn pcap_with_snaplen(snaplen: u32) -> B {
    let mut b = B::new(false);
    b.u32(PCAP_MAGIC_MICROS)
        .u16(2)
        .u16(4)
        .u32(0)
        .u32(0)
        .u32(snaplen)
        .u32(1);
    b.u32(0).u32(0).u32(60).u32(60).bytes(&[0; 60]);
    b
}

#[test]
fn record_lengths_beyond_snaplen_and_the_maximum_are_corrupt() {
    // The second record starts after the 24-byte header and the first 16 + 60 bytes.
    const AT: u64 = 24 + 16 + 60;
    for (snaplen, limit) in [
        (65_535, MAX_SNAPLEN),
        (0, MAX_SNAPLEN),
        (MAX_SNAPLEN, MAX_SNAPLEN),
        (1_000_000, 1_000_000),
        // A bogus snaplen raises the limit only as far as the pcapng block limit.
        (u32::MAX, MAX_RECORD_LEN),
    ] {
        let mut b = pcap_with_snaplen(snaplen);
        b.u32(0).u32(0).u32(limit + 1).u32(60).bytes(&[0; 100]);
        let (packets, e) = read_all(&b.v[..]);
        assert_eq!(packets.len(), 1, "snaplen {snaplen}: the good record first");
        let e = e.expect("a corrupt record");
        assert_eq!(e.offset, AT, "snaplen {snaplen}");
        assert!(
            matches!(e.kind, CaptureErrorKind::BadRecordLength { len, snaplen: s } if len == limit + 1 && s == snaplen),
            "snaplen {snaplen}: {e}"
        );
        // Up to the limit the record is accepted, and a short file is merely truncated.
        let mut b = pcap_with_snaplen(snaplen);
        b.u32(0).u32(0).u32(limit).u32(60).bytes(&[0; 100]);
        let e = read_err(&b.v);
        assert_eq!(e.offset, AT);
        assert!(
            matches!(e.kind, CaptureErrorKind::TruncatedRecord { len, available: 100 } if len == limit),
            "snaplen {snaplen}: {e}"
        );
    }
    // The message names the offset and both bounds, as libpcap's and Wireshark's do.
    let mut b = pcap_with_snaplen(65_535);
    b.u32(0).u32(0).u32(0xffff_fff0).u32(60);
    assert_eq!(
        read_err(&b.v).to_string(),
        "at byte 100: corrupt packet record: captured length 4294967280 is above the file's snaplen 65535 and the 262144-byte maximum"
    );
    // A record longer than a small snaplen but within the maximum is read (some writers
    // do this).
    let mut b = pcap_with_snaplen(64);
    b.u32(0).u32(0).u32(1514).u32(1514).bytes(&[7; 1514]);
    let (packets, e) = read_all(&b.v[..]);
    assert!(e.is_none(), "{e:?}");
    assert_eq!(packets.len(), 2);
    // The writer cuts a longer packet at its snaplen, so its files always read back.
    let mut w = PcapWriter::new(Vec::new(), LINKTYPE_ETHERNET).unwrap();
    w.write_packet(1, &vec![9; 300_000]).unwrap();
    w.write_packet(2, &[8; 60]).unwrap();
    let (packets, e) = read_all(&w.into_inner()[..]);
    assert!(e.is_none(), "{e:?}");
    assert_eq!(packets[0].data.len(), WRITER_SNAPLEN as usize);
    assert_eq!(packets[0].orig_len, 300_000);
    assert_eq!(packets[1].data, [8; 60]);
}

/// SHB + IDB + one EPB whose length fields a test then corrupts; returns the EPB offset.
fn small_pcapng() -> (Vec<u8>, usize) {
    let mut f = B::new(false);
    f.block(BT_SHB, &shb_body(false));
    f.block(BT_IDB, &idb_body(false, 1, 0, &[]));
    let at = f.v.len();
    f.block(BT_EPB, &epb_body(false, 0, 1, 4, &[1, 2, 3, 4]));
    (f.v, at)
}

#[test]
fn corrupt_block_lengths_name_the_block_offset() {
    let (good, at) = small_pcapng();
    assert_eq!(read_ok(&good).len(), 1);
    let epb_len = good.len() - at;
    let set = |f: &mut Vec<u8>, pos: usize, v: u32| {
        f[pos..pos + 4].copy_from_slice(&v.to_le_bytes());
    };
    let cases = [
        ("unaligned", at + 4, 13),
        ("too short", at + 4, 8),
        ("zero", at + 4, 0),
        ("trailer", at + epb_len - 4, 40),
        ("huge", at + 4, 0xffff_fff0),
        ("past end", at + 4, epb_len as u32 + 400),
    ];
    for (name, pos, value) in cases {
        let mut f = good.clone();
        set(&mut f, pos, value);
        let e = read_err(&f);
        assert_eq!(e.offset, at as u64, "{name}: {e}");
        assert!(e.to_string().starts_with(&format!("at byte {at}: ")), "{e}");
        let ok = match name {
            "unaligned" => matches!(e.kind, CaptureErrorKind::BlockLengthUnaligned { len: 13 }),
            "too short" | "zero" => matches!(e.kind, CaptureErrorKind::BlockTooShort { .. }),
            "trailer" => matches!(
                e.kind,
                CaptureErrorKind::BlockLengthMismatch {
                    header: 36,
                    trailer: 40
                }
            ),
            "huge" => matches!(e.kind, CaptureErrorKind::TooLarge { .. }),
            _ => matches!(e.kind, CaptureErrorKind::TruncatedBlock { .. }),
        };
        assert!(ok, "{name}: {e}");
    }
    // The first SHB: too short, and a bad byte-order magic.
    let mut f = good.clone();
    set(&mut f, 4, 24);
    let e = read_err(&f);
    assert_eq!(e.offset, 0);
    assert!(matches!(
        e.kind,
        CaptureErrorKind::BlockTooShort { len: 24, min: 28 }
    ));
    let mut f = good.clone();
    set(&mut f, 8, 0x1234_5678);
    let e = read_err(&f);
    assert_eq!(e.offset, 8);
    assert!(matches!(e.kind, CaptureErrorKind::BadByteOrderMagic { .. }));
}

#[test]
fn malformed_pcapng_bodies() {
    let (good, at) = small_pcapng();
    // Captured length longer than the block.
    let mut f = good.clone();
    f[at + 20..at + 24].copy_from_slice(&5u32.to_le_bytes());
    let e = read_err(&f);
    assert_eq!(e.offset, at as u64);
    assert!(matches!(
        e.kind,
        CaptureErrorKind::MalformedBlock { block_type: 6, .. }
    ));
    // Packet on an interface the section never described.
    let mut f = good.clone();
    f[at + 8..at + 12].copy_from_slice(&1u32.to_le_bytes());
    let e = read_err(&f);
    assert_eq!(e.offset, at as u64);
    assert!(matches!(
        e.kind,
        CaptureErrorKind::UnknownInterface { id: 1, count: 1 }
    ));
    // Interface ids are per section: after a new SHB, id 0 is unknown again.
    let mut f = B::new(false);
    f.block(BT_SHB, &shb_body(false));
    f.block(BT_IDB, &idb_body(false, 1, 0, &[]));
    let second = f.v.len();
    f.block(BT_SHB, &shb_body(false));
    f.block(BT_EPB, &epb_body(false, 0, 1, 1, &[1]));
    let e = read_err(&f.v);
    assert_eq!(e.offset, second as u64 + 28);
    assert!(matches!(
        e.kind,
        CaptureErrorKind::UnknownInterface { id: 0, count: 0 }
    ));
    // SHB with an unknown major version.
    let mut f = good.clone();
    f[12..14].copy_from_slice(&2u16.to_le_bytes());
    let e = read_err(&f);
    assert!(matches!(
        e.kind,
        CaptureErrorKind::UnsupportedVersion { major: 2, minor: 0 }
    ));
    // A too-short IDB body and SPB body.
    let mut f = B::new(false);
    f.block(BT_SHB, &shb_body(false));
    let at = f.v.len();
    f.block(BT_IDB, &[1, 0, 0, 0]);
    let e = read_err(&f.v);
    assert_eq!(e.offset, at as u64);
    assert!(matches!(
        e.kind,
        CaptureErrorKind::MalformedBlock { block_type: 1, .. }
    ));
    let mut f = B::new(false);
    f.block(BT_SHB, &shb_body(false));
    f.block(BT_IDB, &idb_body(false, 1, 0, &[]));
    f.block(BT_SPB, &[]);
    assert!(matches!(
        read_err(&f.v).kind,
        CaptureErrorKind::MalformedBlock { block_type: 3, .. }
    ));
}

#[test]
fn not_a_capture() {
    let e = read_err(b"");
    assert!(matches!(e.kind, CaptureErrorKind::Empty));
    let e = read_err(b"GET / HTTP/1.1\r\n");
    assert!(matches!(e.kind, CaptureErrorKind::NotACapture { magic } if &magic == b"GET "));
    assert_eq!(
        e.to_string(),
        "at byte 0: not a pcap or pcapng file (first bytes 47 45 54 20)"
    );
    let e = read_err(&[0xd4, 0xc3]);
    assert!(matches!(e.kind, CaptureErrorKind::NotACapture { .. }));
    let e = read_err(&[0x34, 0xcd, 0xb2, 0xa1, 0, 0]);
    assert!(matches!(e.kind, CaptureErrorKind::UnsupportedFormat(_)));
    let mut b = B::new(false);
    b.u32(PCAP_MAGIC_MICROS)
        .u16(1)
        .u16(0)
        .u32(0)
        .u32(0)
        .u32(0)
        .u32(1);
    assert!(matches!(
        read_err(&b.v).kind,
        CaptureErrorKind::UnsupportedVersion { major: 1, minor: 0 }
    ));
}

#[test]
fn io_errors_carry_the_offset() {
    struct Failing(usize);
    impl io::Read for Failing {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            if self.0 == 0 {
                return Err(io::Error::other("disk on fire"));
            }
            let n = self.0.min(buf.len());
            // A valid little-endian pcap header, then zeros.
            let mut h = [0u8; 24];
            h[..4].copy_from_slice(&PCAP_MAGIC_MICROS.to_le_bytes());
            h[4] = 2;
            for (i, b) in buf[..n].iter_mut().enumerate() {
                *b = h.get(i).copied().unwrap_or(0);
            }
            self.0 -= n;
            Ok(n)
        }
    }
    let (pkts, e) = read_all(Failing(24 + 16 + 3));
    assert_eq!(pkts.len(), 1);
    let e = e.unwrap();
    assert_eq!(e.offset, 43);
    assert!(matches!(e.kind, CaptureErrorKind::Io(_)));
    assert!(std::error::Error::source(&e).is_some());
    assert!(e.to_string().contains("disk on fire"));
}

#[test]
fn small_reads_and_buffer_growth_and_compaction() {
    // Enough 64..127-byte packets to refill the 1 MiB buffer several times, with a 3 MiB
    // packet (bigger than the initial buffer) in the middle, in a file whose snaplen admits
    // it (the writer cuts at 256 KiB, so that record is written by hand).
    let mut want = Vec::new();
    let mut file = Vec::new();
    let mut w = PcapWriter::new(Vec::new(), LINKTYPE_ETHERNET).unwrap();
    for i in 0..40_000u64 {
        if i == 20_000 {
            file = w.into_inner();
            file[16..20].copy_from_slice(&(4u32 << 20).to_le_bytes());
            let d = vec![i as u8; 3 << 20];
            for x in [0, i as u32, 3 << 20, 3 << 20] {
                file.extend_from_slice(&x.to_le_bytes());
            }
            file.extend_from_slice(&d);
            want.push((i, d));
            w = PcapWriter::new(Vec::new(), LINKTYPE_ETHERNET).unwrap();
            continue;
        }
        let d = vec![i as u8; 64 + (i % 64) as usize];
        w.write_packet(i, &d).unwrap();
        want.push((i, d));
    }
    file.extend_from_slice(&w.into_inner()[PCAP_HEADER_LEN..]);
    for chunk in [usize::MAX, 4093, 1] {
        if chunk == 1 {
            // Byte-at-a-time on a prefix only, to keep the test fast.
            let cut = 24 + (0..5).map(|i| 16 + 64 + i).sum::<usize>() + 3;
            let (pkts, e) = read_all(chunked(&file[..cut], 1));
            assert_eq!(pkts.len(), 5);
            assert_eq!(e.unwrap().offset, cut as u64 - 3);
            continue;
        }
        let mut r = CaptureReader::new(chunked(&file, chunk)).unwrap();
        for (ts, d) in &want {
            let p = r.next_packet().unwrap().unwrap();
            assert_eq!((p.ts_nanos, p.data), (*ts, &d[..]));
        }
        assert!(r.next_packet().unwrap().is_none());
        assert_eq!(r.offset(), file.len() as u64);
    }
}

#[test]
fn timestamp_resolutions() {
    let r = TsResolution::from_if_tsresol;
    assert_eq!(r(6), TsResolution::MICROS);
    assert_eq!(r(0x8a), TsResolution::Binary(10));
    assert_eq!(TsResolution::Binary(10).to_if_tsresol(), Some(0x8a));
    assert_eq!(TsResolution::Decimal(200).to_if_tsresol(), None);
    assert_eq!(r(0).to_nanos(7), 7_000_000_000);
    assert_eq!(r(3).to_nanos(7), 7_000_000);
    assert_eq!(r(6).to_nanos(7), 7_000);
    assert_eq!(r(9).to_nanos(7), 7);
    assert_eq!(r(12).to_nanos(7_999), 7);
    assert_eq!(r(28).to_nanos(u64::MAX), 1);
    assert_eq!(r(29).to_nanos(u64::MAX), 0);
    assert_eq!(r(127).to_nanos(u64::MAX), 0);
    assert_eq!(r(0).to_nanos(u64::MAX), u64::MAX);
    assert_eq!(r(0x80).to_nanos(3), 3_000_000_000);
    assert_eq!(r(0x81).to_nanos(3), 1_500_000_000);
    assert_eq!(r(0x9e).to_nanos(1 << 30), NANOS_PER_SEC);
    assert_eq!(r(0xff).to_nanos(u64::MAX), 0);
    assert_eq!(TsResolution::Binary(255).to_nanos(u64::MAX), 0);
    assert_eq!(r(6).from_nanos(7_999), 7);
    assert_eq!(r(12).from_nanos(7), 7_000);
    assert_eq!(r(40).from_nanos(1), u64::MAX);
    assert_eq!(r(40).from_nanos(0), 0);
    assert_eq!(r(0x81).from_nanos(1_500_000_000), 3);
    assert_eq!(r(0xff).from_nanos(1), u64::MAX);
    assert_eq!(r(0xff).from_nanos(0), 0);
}

/// The first bytes of a file of each kind, so arbitrary tails exercise the record parsers.
fn prefixes() -> [Vec<u8>; 4] {
    let mut le = B::new(false);
    le.u32(PCAP_MAGIC_NANOS)
        .u16(2)
        .u16(4)
        .u32(0)
        .u32(0)
        .u32(65535)
        .u32(1);
    let mut be = B::new(true);
    be.u32(PCAP_MAGIC_MICROS)
        .u16(2)
        .u16(4)
        .u32(0)
        .u32(0)
        .u32(65535)
        .u32(1);
    let mut ng = B::new(false);
    ng.block(BT_SHB, &shb_body(false))
        .block(BT_IDB, &idb_body(false, 1, 8, &[]));
    let mut ngbe = B::new(true);
    ngbe.block(BT_SHB, &shb_body(true));
    [le.v, be.v, ng.v, ngbe.v]
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(
        which in 0usize..5,
        tail in proptest::collection::vec(any::<u8>(), 0..600),
        chunk in 1usize..64,
    ) {
        let mut file = prefixes().get(which).cloned().unwrap_or_default();
        file.extend_from_slice(&tail);
        let (pkts, err) = read_all(chunked(&file, chunk));
        // Every packet consumed at least 12 bytes, so reading terminated by itself.
        prop_assert!(pkts.len() * 12 <= file.len());
        if let Some(e) = err {
            prop_assert!(e.offset <= file.len() as u64, "{}", e);
        }
    }

    #[test]
    fn pcap_write_read_identity(
        pkts in proptest::collection::vec(
            (0..=u64::from(u32::MAX) * NANOS_PER_SEC, proptest::collection::vec(any::<u8>(), 0..300)),
            0..40,
        ),
        linktype in any::<u16>(),
        chunk in 1usize..200,
    ) {
        let mut w = PcapWriter::new(Vec::new(), u32::from(linktype)).unwrap();
        for (ts, d) in &pkts {
            w.write_packet(*ts, d).unwrap();
        }
        let file = w.into_inner();
        let (got, err) = read_all(chunked(&file, chunk));
        prop_assert!(err.is_none());
        let want: Vec<Owned> = pkts
            .iter()
            .map(|(ts, d)| Owned {
                ts: *ts,
                iface: 0,
                linktype: u32::from(linktype),
                orig_len: d.len() as u32,
                data: d.clone(),
            })
            .collect();
        prop_assert_eq!(got, want);
    }

    #[test]
    fn pcapng_write_read_identity(
        sections in proptest::collection::vec(
            (
                any::<bool>(),
                proptest::collection::vec((any::<u16>(), 0u8..4), 1..4),
                proptest::collection::vec(
                    (any::<u8>(), any::<u64>(), proptest::collection::vec(any::<u8>(), 0..100)),
                    0..20,
                ),
            ),
            1..4,
        ),
    ) {
        let resolutions = [
            TsResolution::MICROS,
            TsResolution::NANOS,
            TsResolution::Decimal(3),
            TsResolution::Binary(20),
        ];
        let mut w: Option<PcapNgWriter<Vec<u8>>> = None;
        let mut want = Vec::new();
        let mut first_global = 0u32;
        for (be, ifaces, pkts) in &sections {
            match &mut w {
                None => w = Some(PcapNgWriter::with_byte_order(Vec::new(), *be).unwrap()),
                Some(w) => w.new_section(*be).unwrap(),
            }
            let w = w.as_mut().unwrap();
            for (lt, res) in ifaces {
                w.add_interface(u32::from(*lt), 0, None, resolutions[*res as usize]).unwrap();
            }
            for (pick, ts, d) in pkts {
                let id = u32::from(*pick) % ifaces.len() as u32;
                let (lt, res) = ifaces[id as usize];
                let res = resolutions[res as usize];
                w.write_packet(id, *ts, d).unwrap();
                want.push(Owned {
                    ts: res.to_nanos(res.from_nanos(*ts)),
                    iface: first_global + id,
                    linktype: u32::from(lt),
                    orig_len: d.len() as u32,
                    data: d.clone(),
                });
            }
            first_global += ifaces.len() as u32;
        }
        let file = w.unwrap().into_inner();
        let (got, err) = read_all(&file[..]);
        prop_assert!(err.is_none(), "{}", err.unwrap());
        prop_assert_eq!(got, want);
    }
}
