//! Fuzz target: stripe mode's wire format, software segmentation and reorder buffer.
//!
//! The first byte picks what the rest is fed to:
//! - a stripe frame: parsing never panics, a parsed hello comes back unchanged from emit and
//!   parse, decapsulation in place and into a buffer agree;
//! - a TAP frame with an arbitrary `virtio_net_hdr` request: segmentation and checksum
//!   completion never panic, and segments never exceed the MSS;
//! - a sequence of arrivals (sequence number, poll first or not, time step) for a small reorder
//!   buffer:
//!   no frame is ever delivered twice, in-order deliveries increase, and nothing stays held
//!   past the timeout.
#![no_main]

use std::collections::HashSet;

use lagd_proto::stripe::header::{self, StripeFrame};
use lagd_proto::stripe::segment::{self, GsoInfo};
use lagd_proto::stripe::{Arrival, Reorder, ReorderConfig};
use lagd_proto::time::Instant;
use lagd_proto::wire::EthernetAddress;
use libfuzzer_sys::fuzz_target;

fn frame(data: &[u8]) {
    if let Ok(StripeFrame::Hello(h)) = StripeFrame::parse(data) {
        let mut out = [0u8; header::HELLO_FRAME_LEN];
        h.emit_frame(EthernetAddress::ZERO, &mut out).unwrap();
        assert_eq!(StripeFrame::parse(&out), Ok(StripeFrame::Hello(h)));
    }
    let mut copy = vec![0u8; data.len()];
    let into = header::decapsulate_into(data, &mut copy);
    let mut inplace = data.to_vec();
    match (header::decapsulate(&mut inplace), into) {
        (Ok(a), Ok((b, len))) => {
            assert_eq!(a, b);
            assert_eq!(&inplace[header::HEADER_LEN..], &copy[..len]);
            // And back: encapsulating the host frame gives the stripe frame again.
            let start = header::encapsulate(&mut inplace, 8, len, a.seq, a.epoch_tag).unwrap();
            assert_eq!(start, 0);
            assert_eq!(&inplace[..14], &data[..14]);
            assert_eq!(&inplace[16..], &data[16..]);
        }
        (Err(a), Err(b)) => assert_eq!(a, b),
        (a, b) => panic!("in place {a:?}, into {b:?}"),
    }
}

fn gso(data: &[u8]) {
    if data.len() < 10 {
        return;
    }
    let u16_at = |i: usize| u16::from_le_bytes([data[i], data[i + 1]]);
    let info = GsoInfo::from_virtio(data[0], data[1], u16_at(2), u16_at(4), u16_at(6), u16_at(8));
    let tap = &data[10..];
    let mut buf = vec![0u8; 4096];
    let mss = usize::from(info.gso_size);
    let _ = segment::segment(tap, &info, &mut buf, 8, |seg| assert!(seg.len() >= 8 + 14));
    if let Ok((count, longest)) = segment::segment_count(tap, &info) {
        assert!(count >= 1);
        assert!(longest <= tap.len());
        let _ = mss;
    }
    let _ = segment::complete_checksum(
        &mut tap.to_vec(),
        usize::from(info.csum_start),
        usize::from(info.csum_offset),
    );
}

fn reorder(data: &[u8]) {
    let timeout = 3000u64;
    let mut r = Reorder::new(ReorderConfig {
        slots: 8,
        max_frame_len: 16,
        ..ReorderConfig::default()
    });
    let mut now = 0u64;
    let mut delivered = HashSet::new();
    let mut last_in_order: Option<u32> = None;
    let decode = |b: &[u8]| u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    for op in data.chunks_exact(4) {
        let seq = u32::from(u16::from_le_bytes([op[0], op[1]]));
        now += u64::from(op[3]) * 50;
        let t = Instant::from_micros(now);
        let mut out = Vec::new();
        if op[2] & 1 == 1 {
            r.poll(t, &mut |b: &[u8]| out.push(decode(b)));
        }
        let before = r.counters().resyncs;
        let a = r.push(t, seq, 0, &seq.to_le_bytes(), &mut |b: &[u8]| {
            out.push(decode(b))
        });
        if r.counters().resyncs != before {
            // The sequence was taken up afresh: start checking again from here.
            delivered.clear();
            last_in_order = None;
            out.clear();
        }
        for s in out {
            assert!(delivered.insert(s), "{s} delivered twice");
            if a == Arrival::Late && s == seq {
                continue;
            }
            if let Some(l) = last_in_order {
                assert!(s.wrapping_sub(l) as i32 > 0, "{s} after {l}");
            }
            last_in_order = Some(s);
        }
        if let Some(due) = r.poll_timeout() {
            assert!(due.as_micros() > now);
            // The timeout grows (up to 64 ms) each time a frame turns out late.
            let limit = timeout.max(r.counters().timeout_us);
            assert!(due.as_micros() <= now + limit);
        }
        assert!(r.occupancy() < 8);
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    match which % 3 {
        0 => frame(rest),
        1 => gso(rest),
        _ => reorder(rest),
    }
});
