use super::*;
use proptest::prelude::*;

/// Bytes of driver header in front of every test frame (what the daemon's vnet header is).
const HDR: usize = 10;

/// A TCP segment of flow `port` with `payload` bytes at `seq`, IPv4 or IPv6, behind a driver
/// header whose first byte marks the frame (so the test can tell delivered buffers apart).
fn seg(v6: bool, port: u16, seq: u32, payload: usize, flags: u8, mark: u8) -> Vec<u8> {
    let mut f = vec![0u8; HDR];
    f[0] = mark;
    f.extend_from_slice(&[0x02, 0xaa, 0, 0, 0, 2, 0x02, 0xbb, 0, 0, 0, 1]);
    let tcp_len = 20 + payload;
    if v6 {
        f.extend_from_slice(&[0x86, 0xdd, 0x60, 0, 0, 0]);
        f.extend_from_slice(&(tcp_len as u16).to_be_bytes());
        f.extend_from_slice(&[6, 64]);
        f.extend_from_slice(&[0xfd; 16]);
        f.extend_from_slice(&[0xfe; 16]);
    } else {
        f.extend_from_slice(&[0x08, 0x00, 0x45, 0]);
        f.extend_from_slice(&((20 + tcp_len) as u16).to_be_bytes());
        f.extend_from_slice(&[0, 1, 0x40, 0, 64, 6, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2]);
    }
    f.extend_from_slice(&port.to_be_bytes());
    f.extend_from_slice(&5201u16.to_be_bytes());
    f.extend_from_slice(&seq.to_be_bytes());
    f.extend_from_slice(&[0, 0, 0, 1, 0x50, flags, 0xff, 0xff, 0, 0, 0, 0]);
    f.resize(f.len() + payload, 0x55);
    f
}

const ACK: u8 = 0x10;
const SYN: u8 = 0x02;
const RST: u8 = 0x04;
const MSS: u32 = 1000;

fn data(port: u16, n: u32) -> Vec<u8> {
    seg(false, port, 1000 + n * MSS, MSS as usize, ACK, n as u8)
}

fn order(config: TcpOrderConfig, lanes: &[u16]) -> TcpOrder {
    let mut o = TcpOrder::new(config, 7);
    o.set_lanes(lanes);
    o
}

/// Pushes `frame` on `lane` at `ms`; returns the marks of what was delivered.
fn push(o: &mut TcpOrder, ms: u64, lane: u16, frame: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let took = o.push(at(ms), lane, frame, HDR, &mut |b: &[u8]| {
        assert_eq!(b.len(), b.len().max(HDR), "the whole buffer is delivered");
        out.push(b[0]);
    });
    assert!(took, "a TCP frame is taken");
    out
}

fn at(ms: u64) -> Instant {
    Instant::from_micros(ms * 1000)
}

fn poll(o: &mut TcpOrder, ms: u64) -> Vec<u8> {
    let mut out = Vec::new();
    o.poll(at(ms), &mut |b: &[u8]| out.push(b[0]));
    out
}

#[test]
fn parses_ipv4_ipv6_and_one_vlan_tag_and_refuses_the_rest() {
    let s = parse_segment(&seg(false, 40000, 77, 300, ACK, 0)[HDR..]).unwrap();
    assert_eq!(
        (s.seq, s.len, s.key.sport, s.key.dport),
        (77, 300, 40000, 5201)
    );
    let s6 = parse_segment(&seg(true, 40000, 77, 300, ACK | 0x01, 0)[HDR..]).unwrap();
    assert_eq!(s6.len, 301, "FIN takes one sequence number");
    assert_ne!(s.key, s6.key, "IPv4 and IPv6 flows differ");
    let syn = parse_segment(&seg(false, 1, 5, 0, SYN, 0)[HDR..]).unwrap();
    assert!(syn.syn && syn.len == 1);
    // One 802.1Q tag is looked through, and the VLAN is part of the flow.
    let mut tagged = seg(false, 40000, 77, 300, ACK, 0);
    tagged.splice(HDR + 12..HDR + 12, [0x81, 0x00, 0x00, 0x64]);
    let t = parse_segment(&tagged[HDR..]).unwrap();
    assert_eq!(t.seq, 77);
    assert_ne!(t.key, s.key);
    // UDP, an IPv4 fragment, ARP and cut frames are not TCP segments.
    let mut udp = seg(false, 1, 1, 10, ACK, 0);
    udp[HDR + 23] = 17;
    assert!(parse_segment(&udp[HDR..]).is_none());
    let mut frag = seg(false, 1, 1, 10, ACK, 0);
    frag[HDR + 20] = 0x20; // more fragments
    assert!(parse_segment(&frag[HDR..]).is_none());
    let mut arp = seg(false, 1, 1, 10, ACK, 0);
    arp[HDR + 12..HDR + 14].copy_from_slice(&[0x08, 0x06]);
    assert!(parse_segment(&arp[HDR..]).is_none());
    let whole = seg(false, 1, 1, 10, ACK, 0);
    for cut in HDR..HDR + 54 {
        assert!(parse_segment(&whole[HDR..cut]).is_none(), "cut at {cut}");
    }
}

#[test]
fn not_tcp_is_left_to_the_caller() {
    let mut o = order(TcpOrderConfig::default(), &[0, 1]);
    let mut udp = data(1, 0);
    udp[HDR + 23] = 17;
    let mut called = false;
    assert!(!o.push(at(0), 0, &udp, HDR, &mut |_: &[u8]| called = true));
    assert!(!called);
    assert_eq!(o.counters().segments, 0);
}

#[test]
fn in_order_segments_pass_at_once_and_nothing_is_held() {
    let mut o = order(TcpOrderConfig::default(), &[0, 1]);
    for n in 0..10 {
        assert_eq!(push(&mut o, 0, (n % 2) as u16, &data(1, n)), vec![n as u8]);
    }
    assert_eq!(o.held_bytes(), 0);
    assert_eq!(o.counters().in_order, 10);
    assert_eq!(o.counters().reordered, 0);
    assert_eq!(o.poll_timeout(), None);
}

#[test]
fn a_segment_ahead_waits_for_its_predecessor() {
    let mut o = order(TcpOrderConfig::default(), &[0, 1]);
    assert_eq!(push(&mut o, 0, 0, &data(1, 0)), vec![0]);
    // 2 and 3 on lane 1 overtake 1 on lane 0.
    assert!(push(&mut o, 0, 1, &data(1, 2)).is_empty());
    assert!(push(&mut o, 0, 1, &data(1, 3)).is_empty());
    assert!(o.held_bytes() > 0);
    assert_eq!(o.poll_timeout(), Some(at(0) + DEFAULT_TIMEOUT));
    assert_eq!(push(&mut o, 0, 0, &data(1, 1)), vec![1, 2, 3]);
    assert_eq!(o.held_bytes(), 0);
    assert_eq!(o.counters().reordered, 2);
    assert_eq!(o.poll_timeout(), None);
}

#[test]
fn a_hole_every_lane_has_passed_is_lost_at_once() {
    let mut o = order(TcpOrderConfig::default(), &[0, 1]);
    push(&mut o, 0, 0, &data(1, 0));
    // 1 is lost on lane 0; 2 on lane 1 waits: lane 0 may still bring 1.
    assert!(push(&mut o, 0, 1, &data(1, 2)).is_empty());
    // Lane 0 brings 3: it cannot bring 1 any more (FIFO), so 1 is lost.
    assert_eq!(push(&mut o, 0, 0, &data(1, 3)), vec![2, 3]);
    assert_eq!(o.counters().skipped_lost, 1);
    // The retransmission of 1 goes straight to the host.
    assert_eq!(push(&mut o, 0, 1, &data(1, 1)), vec![1]);
    assert_eq!(o.counters().behind, 1);
    assert_eq!(o.counters().late, 0, "given up as lost, not by timeout");
}

#[test]
fn a_silent_lane_costs_the_timeout_and_a_late_segment_grows_it() {
    let mut o = order(TcpOrderConfig::default(), &[0, 1]);
    push(&mut o, 0, 0, &data(1, 0));
    assert!(push(&mut o, 10, 1, &data(1, 2)).is_empty());
    assert!(poll(&mut o, 12).is_empty(), "before the timeout");
    assert_eq!(poll(&mut o, 13), vec![2]);
    assert_eq!(o.counters().skipped_timeout, 1);
    // 1 arrives after its hole was given up on: delivered, and the timeout doubles.
    assert_eq!(push(&mut o, 14, 0, &data(1, 1)), vec![1]);
    assert_eq!(o.counters().late, 1);
    assert_eq!(
        o.counters().timeout_us,
        2 * DEFAULT_TIMEOUT.as_micros() as u64
    );
    assert!(push(&mut o, 20, 1, &data(1, 4)).is_empty());
    assert!(
        poll(&mut o, 25).is_empty(),
        "the doubled timeout is in force"
    );
    assert_eq!(poll(&mut o, 26), vec![4]);
}

#[test]
fn a_full_flow_gives_up_its_oldest_hole() {
    let frame = data(1, 0).len();
    let config = TcpOrderConfig {
        max_flow_bytes: 3 * frame,
        ..TcpOrderConfig::default()
    };
    let mut o = order(config, &[0, 1, 2]);
    push(&mut o, 0, 0, &data(1, 0));
    for n in [2, 3, 4] {
        assert!(push(&mut o, 0, 1, &data(1, n)).is_empty());
    }
    // A fourth would exceed the flow's bytes: the hole at 1 is given up on.
    assert_eq!(push(&mut o, 0, 1, &data(1, 6)), vec![2, 3, 4]);
    assert_eq!(o.counters().skipped_full, 1);
    assert_eq!(push(&mut o, 0, 2, &data(1, 5)), vec![5, 6]);
    assert!(o.counters().max_held_bytes <= 3 * frame);
}

#[test]
fn flows_are_independent_and_bounded() {
    let config = TcpOrderConfig {
        max_flows: 2,
        ..TcpOrderConfig::default()
    };
    let mut o = order(config, &[0, 1]);
    push(&mut o, 0, 0, &data(1, 0));
    assert!(push(&mut o, 1, 1, &data(1, 2)).is_empty());
    // Flow 2 is not held back by flow 1's hole.
    assert_eq!(push(&mut o, 2, 0, &data(2, 0)), vec![0]);
    assert_eq!(o.flows(), 2);
    // A third flow evicts the least recently seen (flow 1), delivering what it held.
    assert_eq!(push(&mut o, 3, 0, &data(3, 0)), vec![2, 0]);
    assert_eq!(o.flows(), 2);
    assert_eq!(o.counters().flows_evicted, 1);
    assert_eq!(o.held_bytes(), 0);
}

#[test]
fn syn_starts_afresh_rst_forgets_and_pure_acks_pass() {
    let mut o = order(TcpOrderConfig::default(), &[0, 1]);
    push(&mut o, 0, 0, &data(1, 0));
    assert!(push(&mut o, 0, 1, &data(1, 2)).is_empty());
    // A pure ACK is not held behind the hole.
    assert_eq!(
        push(&mut o, 0, 0, &seg(false, 1, 50_000, 0, ACK, 9)),
        vec![9]
    );
    // A new connection on the same ports: the held segment goes first, then the SYN.
    assert_eq!(push(&mut o, 0, 0, &seg(false, 1, 7, 0, SYN, 8)), vec![2, 8]);
    assert_eq!(o.counters().resyncs, 1);
    assert_eq!(push(&mut o, 0, 0, &seg(false, 1, 8, 10, ACK, 7)), vec![7]);
    assert!(push(&mut o, 0, 1, &seg(false, 1, 28, 10, ACK, 6)).is_empty());
    assert_eq!(
        push(&mut o, 0, 0, &seg(false, 1, 18, 0, RST, 5)),
        vec![6, 5]
    );
    assert_eq!(o.flows(), 0);
}

#[test]
fn sequence_numbers_wrap() {
    let mut o = order(TcpOrderConfig::default(), &[0, 1]);
    let base = u32::MAX - 1500;
    let s = |n: u32, m: u8| seg(false, 1, base.wrapping_add(n * MSS), MSS as usize, ACK, m);
    assert_eq!(push(&mut o, 0, 0, &s(0, 0)), vec![0]);
    assert!(push(&mut o, 0, 1, &s(2, 2)).is_empty());
    assert_eq!(push(&mut o, 0, 0, &s(1, 1)), vec![1, 2]);
    // A jump of more than 2^30 starts afresh instead of waiting for a gigabyte.
    let far = seg(false, 1, base.wrapping_add((1 << 30) + 5 * MSS), 10, ACK, 3);
    assert_eq!(push(&mut o, 0, 1, &far), vec![3]);
    assert_eq!(o.counters().resyncs, 1);
}

/// Segments 0.. spread over three FIFO lanes as `lane_of` says, those `lost` left out if
/// `lose`.
fn fifo_lanes(lane_of: &[u16], lost: &[bool], lose: bool) -> Vec<Vec<u32>> {
    let mut lanes: Vec<Vec<u32>> = vec![Vec::new(); 3];
    for (i, &l) in lane_of.iter().enumerate() {
        if !(lose && lost[i]) {
            lanes[l as usize].push(i as u32);
        }
    }
    lanes
}

/// Each of the `sent` segments that arrived was delivered once, and all `n` in order when
/// `in_order`.
fn delivered_once(out: &[u32], sent: usize, in_order: bool, n: usize) -> Result<(), TestCaseError> {
    prop_assert_eq!(
        out.len(),
        sent,
        "each arriving segment delivered once: {:?}",
        out
    );
    let mut sorted = out.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    prop_assert_eq!(sorted.len(), sent);
    if in_order {
        let all: Vec<u32> = (0..n as u32).collect();
        prop_assert_eq!(out, all.as_slice(), "in order");
    }
    Ok(())
}

proptest! {
    /// Segments striped over 3 FIFO lanes arriving in any interleaving, some lost: every
    /// segment that arrives is delivered exactly once; without losses the host sees them in
    /// order; nothing stays held once every lane has brought a later segment and the timeout
    /// passed.
    #[test]
    fn any_interleaving_of_fifo_lanes(
        lane_of in proptest::collection::vec(0u16..3, 1..120),
        picks in proptest::collection::vec(0usize..3, 0..400),
        lost in proptest::collection::vec(any::<bool>(), 120),
        lose in any::<bool>(),
    ) {
        let n = lane_of.len();
        let lanes = fifo_lanes(&lane_of, &lost, lose);
        let sent: usize = lanes.iter().map(Vec::len).sum();
        let mut o = order(TcpOrderConfig::default(), &[0, 1, 2]);
        let mut out: Vec<u32> = Vec::new();
        let mut heads = [0usize; 3];
        let mut pick = picks.into_iter();
        let mut sink = |b: &[u8]| {
            let s = parse_segment(&b[HDR..]).unwrap();
            out.push((s.seq - 1000) / MSS);
        };
        // The first segment starts the flow: send it first, as a connection does.
        let first = lanes.iter().position(|l| l.first() == Some(&0));
        if let Some(l) = first {
            o.push(at(0), l as u16, &data(1, 0), HDR, &mut sink);
            heads[l] = 1;
        }
        loop {
            let open: Vec<usize> = (0..3).filter(|&l| heads[l] < lanes[l].len()).collect();
            if open.is_empty() {
                break;
            }
            let l = open[pick.next().unwrap_or(0) % open.len()];
            let i = lanes[l][heads[l]];
            heads[l] += 1;
            o.push(at(1), l as u16, &data(1, i), HDR, &mut sink);
        }
        o.poll(at(1000), &mut sink);
        delivered_once(&out, sent, !lose && first.is_some(), n)?;
        prop_assert_eq!(o.held_bytes(), 0);
    }

    /// The same with a kernel fast path in front of the resequencer, as the members' program
    /// does it (bpf/fastpath.c, stripe_rx): it delivers the flow's segments while each is the
    /// next in sequence and the flow is its own, and passes the rest into a queue lagd reads
    /// later (in any interleaving with what arrives next); lagd takes the flow at a hole and
    /// hands it back when it holds nothing. The host still gets each arriving segment once,
    /// and in order without losses.
    #[test]
    fn any_interleaving_with_a_kernel_party(
        lane_of in proptest::collection::vec(0u16..3, 1..120),
        picks in proptest::collection::vec(0usize..4, 0..600),
        lost in proptest::collection::vec(any::<bool>(), 120),
        lose in any::<bool>(),
    ) {
        use std::cell::RefCell;
        use std::collections::VecDeque;
        #[derive(Clone, Copy, PartialEq)]
        enum Owner { Free, Kernel, Lagd }
        struct Party { owner: Owner, next: u32, out: Vec<u32> }
        struct Sink<'a>(&'a RefCell<Party>);
        impl TcpSink for Sink<'_> {
            fn deliver(&mut self, b: &[u8]) {
                let s = parse_segment(&b[HDR..]).unwrap();
                self.0.borrow_mut().out.push((s.seq - 1000) / MSS);
            }
            fn take_over(&mut self, _key: &FlowKey) -> Option<u32> {
                let mut p = self.0.borrow_mut();
                if p.owner == Owner::Free {
                    return None;
                }
                p.owner = Owner::Lagd;
                Some(p.next)
            }
            fn hand_back(&mut self, _key: &FlowKey, next: u32) -> bool {
                let mut p = self.0.borrow_mut();
                p.owner = Owner::Kernel;
                p.next = next;
                true
            }
        }
        let n = lane_of.len();
        let lanes = fifo_lanes(&lane_of, &lost, lose);
        let sent: usize = lanes.iter().map(Vec::len).sum();
        let party = RefCell::new(Party { owner: Owner::Free, next: 0, out: Vec::new() });
        let mut o = order(TcpOrderConfig::default(), &[0, 1, 2]);
        let mut queue: VecDeque<(u16, u32)> = VecDeque::new();
        let mut heads = [0usize; 3];
        let mut pick = picks.into_iter();
        // The program's rule for one arriving segment: delivered, or queued for lagd.
        let program = |l: u16, i: u32, queue: &mut VecDeque<(u16, u32)>| {
            let mut p = party.borrow_mut();
            let seq = 1000 + i * MSS;
            if p.owner == Owner::Kernel {
                let ahead = seq.wrapping_sub(p.next) as i32;
                if ahead <= 0 {
                    if ahead == 0 {
                        p.next = seq + MSS;
                    }
                    p.out.push(i);
                    return;
                }
                p.owner = Owner::Lagd;
            }
            queue.push_back((l, i));
        };
        let first = lanes.iter().position(|l| l.first() == Some(&0));
        if let Some(l) = first {
            program(l as u16, 0, &mut queue);
            heads[l] = 1;
        }
        loop {
            let open: Vec<usize> = (0..3).filter(|&l| heads[l] < lanes[l].len()).collect();
            let choice = pick.next().unwrap_or(0);
            if !queue.is_empty() && (choice == 3 || open.is_empty()) {
                let (l, i) = queue.pop_front().unwrap();
                o.push(at(1), l, &data(1, i), HDR, &mut Sink(&party));
                continue;
            }
            if open.is_empty() {
                break;
            }
            let l = open[choice % open.len()];
            let i = lanes[l][heads[l]];
            heads[l] += 1;
            program(l as u16, i, &mut queue);
        }
        o.poll(at(1000), &mut Sink(&party));
        let out = party.borrow().out.clone();
        delivered_once(&out, sent, !lose && first.is_some(), n)?;
        prop_assert_eq!(o.held_bytes(), 0);
    }
}
