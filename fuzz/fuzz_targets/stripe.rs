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
//!   past the timeout;
//! - a sequence of TCP segments (flow, member, sequence number, length, flags, time step) and
//!   raw frames for a small TCP resequencer: it never panics, never holds more than its
//!   limits, and every segment it takes is delivered exactly once (at the latest once its
//!   timeout passed);
//! - the same with a kernel fast path in front (as the members' program: it delivers a flow's
//!   next segment itself while it holds the flow, hands the rest to the resequencer, which
//!   takes and hands back flows): still every segment exactly once.
#![no_main]

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};

use lagd_proto::stripe::header::{self, StripeFrame};
use lagd_proto::stripe::segment::{self, GsoInfo};
use lagd_proto::stripe::tcp::parse_segment;
use lagd_proto::stripe::{
    Arrival, FlowKey, Reorder, ReorderConfig, TcpOrder, TcpOrderConfig, TcpSink,
};
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

/// A TCP segment behind a 4-byte id (the driver header the resequencer keeps).
fn tcp_segment(id: u32, flow: u8, seq: u32, payload: usize, flags: u8) -> Vec<u8> {
    let mut f = id.to_le_bytes().to_vec();
    f.extend_from_slice(&[2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00, 0x45, 0]);
    f.extend_from_slice(&((40 + payload) as u16).to_be_bytes());
    f.extend_from_slice(&[0, 0, 0, 0, 64, 6, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2]);
    f.extend_from_slice(&[0x9c, flow, 0x14, 0x51]);
    f.extend_from_slice(&seq.to_be_bytes());
    f.extend_from_slice(&[0, 0, 0, 0, 0x50, flags, 1, 0, 0, 0, 0, 0]);
    f.resize(f.len() + payload, 0);
    f
}

/// A resequencer with tables small enough that the fuzzer reaches every limit, on three lanes.
fn small_tcp_order() -> TcpOrder {
    let config = TcpOrderConfig {
        max_flows: 3,
        max_bytes: 4000,
        max_flow_bytes: 2500,
        ..TcpOrderConfig::default()
    };
    let mut o = TcpOrder::new(config, 1);
    o.set_lanes(&[0, 1, 2]);
    o
}

fn tcp_order(data: &[u8]) {
    let mut o = small_tcp_order();
    let mut now = 0u64;
    let mut taken = 0u32;
    let mut seen = HashSet::new();
    let mut deliver = |b: &[u8]| {
        let id = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        assert!(seen.insert(id), "segment {id} delivered twice");
    };
    for op in data.chunks_exact(6) {
        now += u64::from(op[5] & 0x3f) * 100;
        let t = Instant::from_micros(now);
        let lane = u16::from(op[0] & 3);
        if op[0] & 0x80 != 0 {
            // Raw bytes: whatever they are, no panic; if taken, they carry no id we track.
            let mut raw = vec![0xff; 4];
            raw.extend_from_slice(op);
            let _ = o.push(t, lane, &raw, 4, &mut |_: &[u8]| ());
            continue;
        }
        let seq = u32::from(u16::from_le_bytes([op[1], op[2]])) * 100;
        let flags = [0x10, 0x10, 0x10, 0x11, 0x02, 0x04][usize::from(op[4] % 6)];
        let f = tcp_segment(taken, op[0] >> 2 & 3, seq, usize::from(op[3]) * 4, flags);
        assert!(
            o.push(t, lane, &f, 4, &mut deliver),
            "a TCP segment is taken"
        );
        taken += 1;
        if op[4] & 0x80 != 0 {
            o.poll(t, &mut deliver);
        }
        assert!(o.held_bytes() <= 4000 + f.len(), "{} held", o.held_bytes());
        assert!(o.flows() <= 3);
    }
    o.poll(Instant::from_micros(now + 10_000_000), &mut deliver);
    assert_eq!(o.held_bytes(), 0, "nothing held after the timeout");
    assert_eq!(seen.len(), taken as usize, "every segment delivered once");
}

/// The kernel party: per flow, whether it delivers it and the next sequence number; what it
/// and the resequencer delivered; whether it takes flows handed back (from the input).
struct Party {
    flows: HashMap<FlowKey, (bool, u32)>,
    seen: HashSet<u32>,
    accept: Vec<bool>,
}

impl Party {
    fn delivered(&mut self, b: &[u8]) {
        let id = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        assert!(self.seen.insert(id), "segment {id} delivered twice");
    }
}

struct Sink<'a>(&'a RefCell<Party>);

impl TcpSink for Sink<'_> {
    fn deliver(&mut self, b: &[u8]) {
        self.0.borrow_mut().delivered(b);
    }
    fn take_over(&mut self, key: &FlowKey) -> Option<u32> {
        let mut p = self.0.borrow_mut();
        let f = p.flows.get_mut(key)?;
        f.0 = false;
        Some(f.1)
    }
    fn hand_back(&mut self, key: &FlowKey, next: u32) -> bool {
        let mut p = self.0.borrow_mut();
        if !p.accept.pop().unwrap_or(true) {
            return false;
        }
        p.flows.insert(*key, (true, next));
        true
    }
}

fn tcp_order_with_kernel(data: &[u8]) {
    let mut o = small_tcp_order();
    let party = RefCell::new(Party {
        flows: HashMap::new(),
        seen: HashSet::new(),
        accept: data.iter().map(|b| b & 1 == 0).collect(),
    });
    let mut now = 0u64;
    let mut taken = 0u32;
    for op in data.chunks_exact(6) {
        now += u64::from(op[5] & 0x3f) * 100;
        let t = Instant::from_micros(now);
        let lane = u16::from(op[0] & 3);
        let seq = u32::from(u16::from_le_bytes([op[1], op[2]])) * 100;
        let flags = [0x10, 0x10, 0x10, 0x11, 0x02, 0x04][usize::from(op[4] % 6)];
        let f = tcp_segment(taken, op[0] >> 2 & 3, seq, usize::from(op[3]) * 4, flags);
        taken += 1;
        // The program: SYN, FIN and RST go to lagd; a pure ACK and what is not ahead of a
        // held flow's next go to the host; a segment ahead makes the flow lagd's.
        let seg = parse_segment(&f[4..]).expect("a TCP segment");
        let payload = seg.len - u32::from(seg.syn) - u32::from(flags & 1 != 0);
        let mut p = party.borrow_mut();
        let kernel = if flags != 0x10 {
            false
        } else if payload == 0 {
            true
        } else {
            match p.flows.get_mut(&seg.key) {
                Some(f) if f.0 => {
                    let ahead = seg.seq.wrapping_sub(f.1) as i32;
                    if ahead == 0 {
                        f.1 = seg.seq.wrapping_add(payload);
                    } else if ahead > 0 {
                        f.0 = false;
                    }
                    ahead <= 0
                }
                _ => false,
            }
        };
        if kernel {
            p.delivered(&f);
            continue;
        }
        drop(p);
        assert!(
            o.push(t, lane, &f, 4, &mut Sink(&party)),
            "a TCP segment is taken"
        );
        if op[4] & 0x80 != 0 {
            o.poll(t, &mut Sink(&party));
        }
        assert!(o.flows() <= 3);
    }
    o.poll(Instant::from_micros(now + 10_000_000), &mut Sink(&party));
    assert_eq!(o.held_bytes(), 0, "nothing held after the timeout");
    assert_eq!(
        party.borrow().seen.len(),
        taken as usize,
        "every segment delivered once"
    );
}

fuzz_target!(|data: &[u8]| {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    match which % 5 {
        0 => frame(rest),
        1 => gso(rest),
        2 => reorder(rest),
        3 => tcp_order(rest),
        _ => tcp_order_with_kernel(rest),
    }
});
