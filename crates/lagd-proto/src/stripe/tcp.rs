//! Stripe for TCP without a header: whole super-frames out, TCP's own sequence numbers back in
//! order.
//!
//! The numbered stripe header ([`super::header`]) hides TCP from the members, so no NIC or
//! kernel can segment or checksum a striped frame: the sender segments 64 KB super-frames in
//! software and every MTU-sized frame crosses userspace at both ends. TCP frames therefore go
//! out *as the host gave them* (a super-frame stays one unit, and the member — TSO on a NIC or
//! veth, or the kernel's software GSO — segments it), and the receiver puts them back in order
//! by the TCP sequence numbers they already carry. The member's GRO hands the receiver whole
//! super-frames again, so lagd handles tens of thousands of units per second, not hundreds of
//! thousands. Frames that are not TCP keep the numbered header.
//!
//! [`TcpOrder`] keeps, per TCP flow (both addresses, both ports), the next sequence number
//! the host expects and the segments that arrived ahead of it. A segment in order goes to the
//! host at once, without a copy, followed by what it unblocks; one ahead of a hole is copied and
//! waits. A hole is given up on (the segments after it delivered) when:
//! - every member the peer stripes over ([`TcpOrder::set_lanes`]) has brought a segment beyond
//!   it: a link is FIFO, so a segment none of them still has in flight was lost;
//! - the first segment held behind it has waited the timeout (a member went silent), which
//!   doubles, up to [`MAX_TIMEOUT`], each time a segment arrives after its hole was given up on
//!   by timeout;
//! - the flow holds [`TcpOrderConfig::max_flow_bytes`] or all flows together
//!   [`TcpOrderConfig::max_bytes`] (*buffer-full* skips).
//!
//! Segments behind the expected sequence number (retransmissions, late segments) are delivered
//! at once: the host's TCP sorts out duplicates. A SYN or a jump of more than 2^30 starts the
//! flow's sequence afresh; a RST delivers what the flow held and forgets it. Segments without
//! payload (pure ACKs) pass at once. Flows are bounded ([`TcpOrderConfig::max_flows`]): the
//! least recently seen is evicted (its held segments delivered first) and counted.
//!
//! The table is keyed through a hash seeded by the caller ([`TcpOrder::new`]): what peers send
//! cannot be chosen to collide.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};

use core::time::Duration;

use crate::time::Instant;
use crate::wire::EtherType;
use crate::wire::ethernet::EthernetFrame;
use crate::wire::ip::IpProtocol;
use crate::wire::ipv4::Ipv4Packet;
use crate::wire::ipv6::{HEADER_LEN as IPV6_HEADER_LEN, Ipv6Packet};
use crate::wire::l4::TcpPacket;

use super::reorder::DEFAULT_TIMEOUT;

/// The longest the hole timeout grows to after late segments.
pub const MAX_TIMEOUT: Duration = Duration::from_millis(64);
/// A segment this far ahead of the expected sequence number starts the flow afresh.
const RESYNC_AHEAD: u32 = 1 << 30;
/// Copies of held segments' buffers kept for reuse.
const POOL: usize = 64;

/// Limits of a [`TcpOrder`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpOrderConfig {
    /// Flows tracked at once; the least recently seen is evicted beyond.
    pub max_flows: usize,
    /// Bytes held by all flows together.
    pub max_bytes: usize,
    /// Bytes one flow may hold.
    pub max_flow_bytes: usize,
    /// How long the first segment behind a hole waits for it (grows after late segments).
    pub timeout: Duration,
}

impl Default for TcpOrderConfig {
    /// 1024 flows, 32 MiB in all, 8 MiB per flow (6.7 ms at 10 Gb/s), the stripe timeout.
    fn default() -> Self {
        Self {
            max_flows: 1024,
            max_bytes: 32 << 20,
            max_flow_bytes: 8 << 20,
            timeout: DEFAULT_TIMEOUT,
        }
    }
}

/// What the resequencer has done since it was created.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TcpOrderCounters {
    /// TCP segments (or GRO super-frames) pushed.
    pub segments: u64,
    /// Segments that arrived in order (or carried no payload) and went straight on.
    pub in_order: u64,
    /// Segments that waited for a predecessor and were then delivered in order.
    pub reordered: u64,
    /// Segments behind the expected sequence number (retransmissions), delivered at once.
    pub behind: u64,
    /// Of those, segments whose hole had been given up on by timeout (the timeout grew).
    pub late: u64,
    /// Holes given up on because every member had brought a later segment (lost).
    pub skipped_lost: u64,
    /// Holes given up on after the timeout.
    pub skipped_timeout: u64,
    /// Holes given up on because the flow or the table held too much.
    pub skipped_full: u64,
    /// Flows whose sequence was taken up afresh (SYN, or a jump of 2^30).
    pub resyncs: u64,
    /// Flows evicted to make room for a new one.
    pub flows_evicted: u64,
    /// The timeout in force, µs.
    pub timeout_us: u64,
    /// The most bytes held at once.
    pub max_held_bytes: usize,
    /// Flows taken over from a kernel fast path that delivered them in order until a hole.
    pub taken_over: u64,
    /// Flows handed (back) to a kernel fast path once nothing of theirs was held.
    pub handed_back: u64,
}

/// Why a hole was given up on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Skip {
    Lost,
    Timeout,
    Full,
}

/// A TCP segment's place in its flow, as far as ordering needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpSegment {
    /// The flow (both directions are distinct flows).
    pub key: FlowKey,
    /// Its first sequence number.
    pub seq: u32,
    /// Sequence space it takes: payload bytes, plus one each for SYN and FIN.
    pub len: u32,
    /// SYN set.
    pub syn: bool,
    /// RST set.
    pub rst: bool,
}

/// One direction of a TCP connection: addresses (IPv4 ones mapped into 16 bytes), ports and
/// the VLAN the frame carried (0 untagged).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FlowKey {
    /// Source address.
    pub src: [u8; 16],
    /// Destination address.
    pub dst: [u8; 16],
    /// Source port.
    pub sport: u16,
    /// Destination port.
    pub dport: u16,
    /// The outer VLAN ID, 0 when untagged; IPv6 flag in bit 15.
    pub tag: u16,
}

/// Flow slots of a kernel fast path's receive table ([`FlowKey::kernel_slot`]).
pub const KERNEL_SLOTS: usize = 1024;

impl FlowKey {
    /// The key as the kernel fast path's receive table stores it: the 40 bytes `src`, `dst`,
    /// `sport`, `dport`, `tag` (little-endian), two zero bytes, read as ten little-endian
    /// words.
    pub fn kernel_words(&self) -> [u32; 10] {
        let mut b = [0u8; 40];
        b[..16].copy_from_slice(&self.src);
        b[16..32].copy_from_slice(&self.dst);
        b[32..34].copy_from_slice(&self.sport.to_le_bytes());
        b[34..36].copy_from_slice(&self.dport.to_le_bytes());
        b[36..38].copy_from_slice(&self.tag.to_le_bytes());
        core::array::from_fn(|i| {
            u32::from_le_bytes([b[4 * i], b[4 * i + 1], b[4 * i + 2], b[4 * i + 3]])
        })
    }

    /// The flow's slot in the kernel fast path's receive table (`stripe_rx_slot` in
    /// bpf/fastpath.c: FNV-1a's constants over the words, each step folded).
    pub fn kernel_slot(&self) -> usize {
        let mut h: u32 = 0x811c_9dc5;
        for w in self.kernel_words() {
            h = (h ^ w).wrapping_mul(0x0100_0193);
            h ^= h >> 15;
        }
        h as usize & (KERNEL_SLOTS - 1)
    }
}

/// Where a [`TcpOrder`] puts what it releases, and the other party that may deliver a flow's
/// in-order segments itself (a kernel fast path that hands the resequencer only what follows
/// a hole). A closure taking the buffer is a sink with no such party.
pub trait TcpSink {
    /// Gives the host a buffer as [`TcpOrder::push`] took it.
    fn deliver(&mut self, buf: &[u8]);

    /// The flow is not known here: if the other party delivers it, it stops (everything of
    /// the flow comes here from now on) and the next sequence number the host expects is
    /// returned.
    fn take_over(&mut self, _key: &FlowKey) -> Option<u32> {
        None
    }

    /// Nothing of the flow is held and `next` is expected: true if the other party delivers
    /// it from now on (the resequencer forgets the flow).
    fn hand_back(&mut self, _key: &FlowKey, _next: u32) -> bool {
        false
    }
}

/// A receive path that delivers TCP flows' in-order segments itself and hands the resequencer
/// only what follows a hole (a kernel fast path's receive table): the other party a
/// [`TcpSink`] takes flows from and hands them back to.
pub trait OrderedRx {
    /// Stops delivering the flow `key` (everything of it comes to the resequencer from now on)
    /// and says the next sequence number the host expects, if it delivered the flow.
    fn take_over(&mut self, key: &FlowKey) -> Option<u32>;

    /// Offers the flow `key`, nothing of it held and `next` expected: true if it delivers the
    /// flow from now on.
    fn hand_back(&mut self, key: &FlowKey, next: u32) -> bool;
}

impl<F: FnMut(&[u8])> TcpSink for F {
    fn deliver(&mut self, buf: &[u8]) {
        self(buf)
    }
}

/// The TCP segment `frame` (Ethernet, at most one VLAN tag, IPv4 without fragmentation or IPv6
/// without extension headers) carries; `None` for anything else. An IPv6 super-frame's
/// payload length may be 0 (over 64 KB): the frame's end counts then.
pub fn parse_segment(frame: &[u8]) -> Option<TcpSegment> {
    let eth = EthernetFrame::new_checked(frame).ok()?;
    let (ty, l3) = eth.type_after_one_tag()?;
    let vid = if l3 > crate::wire::ethernet::HEADER_LEN {
        u16::from_be_bytes([frame[14], frame[15]]) & 0x0fff
    } else {
        0
    };
    let ip = frame.get(l3..)?;
    let (src, dst, l4, end, v6) = match ty {
        EtherType::Ipv4 => {
            let p = Ipv4Packet::new_checked(ip).ok()?;
            if p.next_header() != IpProtocol::Tcp || p.is_fragment() {
                return None;
            }
            let end = usize::from(p.total_len());
            (
                mapped(p.src_addr().0),
                mapped(p.dst_addr().0),
                p.header_len(),
                end,
                false,
            )
        }
        EtherType::Ipv6 => {
            let p = Ipv6Packet::new_checked(ip).ok()?;
            if p.next_header() != IpProtocol::Tcp {
                return None;
            }
            let payload = usize::from(p.payload_len());
            let end = if payload == 0 {
                ip.len()
            } else {
                IPV6_HEADER_LEN + payload
            };
            (p.src_addr().0, p.dst_addr().0, IPV6_HEADER_LEN, end, true)
        }
        _ => return None,
    };
    let tcp = TcpPacket::new_checked(ip.get(l4..end.min(ip.len()))?).ok()?;
    let payload = end.min(ip.len()).checked_sub(l4 + tcp.header_len())?;
    let syn = tcp.syn();
    let len = u32::try_from(payload).ok()? + u32::from(syn) + u32::from(tcp.fin());
    Some(TcpSegment {
        key: FlowKey {
            src,
            dst,
            sport: tcp.src_port(),
            dport: tcp.dst_port(),
            tag: vid | if v6 { 0x8000 } else { 0 },
        },
        seq: tcp.seq_number(),
        len,
        syn,
        rst: tcp.rst(),
    })
}

fn mapped(v4: [u8; 4]) -> [u8; 16] {
    let mut a = [0u8; 16];
    a[10] = 0xff;
    a[11] = 0xff;
    a[12..].copy_from_slice(&v4);
    a
}

/// `a` is after `b` in sequence space.
fn after(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) > 0
}

/// A segment waiting for its predecessors: the caller's whole buffer (its driver header
/// included) and where the segment sits in sequence space.
#[derive(Debug, Clone)]
struct Held {
    seq: u32,
    end: u32,
    /// When it arrived: it waits at most the timeout from then.
    at: Instant,
    bytes: Vec<u8>,
}

#[derive(Debug, Clone)]
struct Flow {
    next: u32,
    /// Ahead of `next`, sorted by sequence number.
    held: Vec<Held>,
    held_bytes: usize,
    /// Per lane, the end of the furthest segment it brought, while that is ahead of `next`.
    lanes: Vec<(u16, u32)>,
    /// The last hole given up on by timeout: segments in it arriving later are late.
    timed_out: Option<(u32, u32)>,
    last_seen: Instant,
}

impl Flow {
    /// Whether the first segment held has waited `timeout` at `now`.
    fn waited(&self, now: Instant, timeout: Duration) -> bool {
        self.held.first().is_some_and(|h| h.at + timeout <= now)
    }
}

/// Hashes a [`FlowKey`] with the caller's seed first.
#[derive(Debug, Clone, Copy)]
struct Seeded(u64);

impl BuildHasher for Seeded {
    type Hasher = std::collections::hash_map::DefaultHasher;
    fn build_hasher(&self) -> Self::Hasher {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        h.write_u64(self.0);
        h
    }
}

/// The receiver's TCP resequencer (see the [module](self) documentation).
#[derive(Debug, Clone)]
pub struct TcpOrder {
    config: TcpOrderConfig,
    timeout: Duration,
    flows: HashMap<FlowKey, Flow, Seeded>,
    lanes: Vec<u16>,
    held_bytes: usize,
    /// Flows that hold segments.
    waiting: usize,
    pool: Vec<Vec<u8>>,
    counters: TcpOrderCounters,
}

impl TcpOrder {
    /// A resequencer with `config`, its flow table hashed with `seed` (random per start).
    pub fn new(config: TcpOrderConfig, seed: u64) -> Self {
        Self {
            config,
            timeout: config.timeout,
            flows: HashMap::with_hasher(Seeded(seed)),
            lanes: Vec::new(),
            held_bytes: 0,
            waiting: 0,
            pool: Vec::new(),
            counters: TcpOrderCounters {
                timeout_us: config.timeout.as_micros() as u64,
                ..TcpOrderCounters::default()
            },
        }
    }

    /// The members the peer stripes over (their lane numbers): a hole every one of them has
    /// passed is lost.
    pub fn set_lanes(&mut self, lanes: &[u16]) {
        self.lanes.clear();
        self.lanes.extend_from_slice(lanes);
    }

    /// The counters.
    pub fn counters(&self) -> &TcpOrderCounters {
        &self.counters
    }

    /// Bytes held now.
    pub fn held_bytes(&self) -> usize {
        self.held_bytes
    }

    /// Flows tracked now.
    pub fn flows(&self) -> usize {
        self.flows.len()
    }

    /// Takes the frame at `buf[l2_at..]` received on `lane` at `now`. If it is a TCP segment
    /// the resequencer handles it — `deliver` gets `buf` (the whole of it) when its turn comes,
    /// possibly at once, possibly after held segments it unblocked — and true is returned.
    /// False (and `deliver` not called) if it is not TCP.
    pub fn push<S: TcpSink + ?Sized>(
        &mut self,
        now: Instant,
        lane: u16,
        buf: &[u8],
        l2_at: usize,
        deliver: &mut S,
    ) -> bool {
        let Some(seg) = buf.get(l2_at..).and_then(parse_segment) else {
            return false;
        };
        self.counters.segments += 1;
        if seg.rst {
            if let Some(mut flow) = self.flows.remove(&seg.key) {
                self.flush(&mut flow, deliver);
            } else {
                // The other party stops delivering a flow that ended.
                let _ = deliver.take_over(&seg.key);
            }
            self.counters.in_order += 1;
            deliver.deliver(buf);
            return true;
        }
        // Out of the table while it is worked on (one lookup to take it, one to put it back).
        let mut flow = match self.flows.remove(&seg.key) {
            Some(flow) => flow,
            None => {
                if seg.len == 0 {
                    // A pure ACK of a flow we do not know: nothing to order it against.
                    self.counters.in_order += 1;
                    deliver.deliver(buf);
                    return true;
                }
                if self.flows.len() >= self.config.max_flows.max(1) {
                    self.evict(deliver);
                }
                let next = deliver.take_over(&seg.key);
                if next.is_some() {
                    self.counters.taken_over += 1;
                }
                Flow {
                    next: next.unwrap_or(seg.seq),
                    held: Vec::new(),
                    held_bytes: 0,
                    lanes: Vec::new(),
                    timed_out: None,
                    last_seen: now,
                }
            }
        };
        flow.last_seen = now;
        self.place(now, lane, &seg, buf, &mut flow, deliver);
        self.settle(&mut flow, deliver);
        self.keep_or_hand_back(seg.key, flow, deliver);
        true
    }

    /// Puts `flow` back in the table, unless it holds nothing and the sink's other party takes
    /// it.
    fn keep_or_hand_back<S: TcpSink + ?Sized>(
        &mut self,
        key: FlowKey,
        flow: Flow,
        deliver: &mut S,
    ) {
        if flow.held.is_empty() && deliver.hand_back(&key, flow.next) {
            self.counters.handed_back += 1;
            return;
        }
        self.flows.insert(key, flow);
    }

    /// Puts one segment where it belongs in `flow`.
    fn place<S: TcpSink + ?Sized>(
        &mut self,
        now: Instant,
        lane: u16,
        seg: &TcpSegment,
        buf: &[u8],
        flow: &mut Flow,
        deliver: &mut S,
    ) {
        let end = seg.seq.wrapping_add(seg.len);
        if seg.syn || seg.seq.wrapping_sub(flow.next) > RESYNC_AHEAD && after(seg.seq, flow.next) {
            self.flush(flow, deliver);
            flow.next = seg.seq;
            flow.lanes.clear();
            flow.timed_out = None;
            self.counters.resyncs += 1;
        }
        if seg.len == 0 {
            self.counters.in_order += 1;
            deliver.deliver(buf);
            return;
        }
        note_lane(flow, lane, end);
        if !after(seg.seq, flow.next) {
            if seg.seq == flow.next {
                self.counters.in_order += 1;
            } else {
                self.counters.behind += 1;
                if let Some((from, to)) = flow.timed_out
                    && !after(from, seg.seq)
                    && after(to, seg.seq)
                {
                    self.counters.late += 1;
                    self.timeout = (self.timeout * 2).min(MAX_TIMEOUT.max(self.config.timeout));
                    self.counters.timeout_us = self.timeout.as_micros() as u64;
                }
            }
            deliver.deliver(buf);
            if after(end, flow.next) {
                flow.next = end;
            }
            self.release(flow, deliver);
            return;
        }
        // Ahead of a hole: make room, then hold a copy.
        while !flow.held.is_empty()
            && (flow.held_bytes + buf.len() > self.config.max_flow_bytes
                || self.held_bytes + buf.len() > self.config.max_bytes)
        {
            self.skip(flow, Skip::Full, deliver);
            if !after(seg.seq, flow.next) {
                // The skip reached this segment: it is in order now.
                self.counters.in_order += 1;
                deliver.deliver(buf);
                if after(end, flow.next) {
                    flow.next = end;
                }
                self.release(flow, deliver);
                return;
            }
        }
        if self.held_bytes + buf.len() > self.config.max_bytes {
            // Other flows fill the table: this one cannot wait.
            self.counters.skipped_full += 1;
            self.counters.in_order += 1;
            flow.next = end;
            deliver.deliver(buf);
            return;
        }
        let mut bytes = self.pool.pop().unwrap_or_default();
        bytes.clear();
        bytes.extend_from_slice(buf);
        let at = flow
            .held
            .partition_point(|h| after(seg.seq, h.seq) || h.seq == seg.seq);
        if flow.held.is_empty() {
            self.waiting += 1;
        }
        flow.held_bytes += bytes.len();
        self.held_bytes += bytes.len();
        self.counters.max_held_bytes = self.counters.max_held_bytes.max(self.held_bytes);
        flow.held.insert(
            at,
            Held {
                seq: seg.seq,
                end,
                at: now,
                bytes,
            },
        );
    }

    /// Gives up holes every lane has passed.
    fn settle<S: TcpSink + ?Sized>(&mut self, flow: &mut Flow, deliver: &mut S) {
        while !flow.held.is_empty()
            && !self.lanes.is_empty()
            && self.lanes.iter().all(|l| {
                flow.lanes
                    .iter()
                    .any(|&(lane, end)| lane == *l && after(end, flow.next))
            })
        {
            self.skip(flow, Skip::Lost, deliver);
        }
    }

    /// Delivers the held segments that are no longer ahead of `next`, in order, and forgets
    /// lanes' progress that `next` has passed.
    fn release<S: TcpSink + ?Sized>(&mut self, flow: &mut Flow, deliver: &mut S) {
        let mut n = 0;
        while n < flow.held.len() && !after(flow.held[n].seq, flow.next) {
            let h = &flow.held[n];
            deliver.deliver(&h.bytes);
            self.counters.reordered += 1;
            if after(h.end, flow.next) {
                flow.next = h.end;
            }
            n += 1;
        }
        let next = flow.next;
        flow.lanes.retain(|&(_, end)| after(end, next));
        if n == 0 {
            return;
        }
        for h in flow.held.drain(..n) {
            flow.held_bytes -= h.bytes.len();
            self.held_bytes -= h.bytes.len();
            if self.pool.len() < POOL {
                self.pool.push(h.bytes);
            }
        }
        if flow.held.is_empty() {
            self.waiting -= 1;
        }
    }

    /// Gives up the hole before the first held segment.
    fn skip<S: TcpSink + ?Sized>(&mut self, flow: &mut Flow, why: Skip, deliver: &mut S) {
        let Some(first) = flow.held.first() else {
            return;
        };
        let (from, to) = (flow.next, first.seq);
        match why {
            Skip::Lost => self.counters.skipped_lost += 1,
            Skip::Timeout => {
                self.counters.skipped_timeout += 1;
                flow.timed_out = Some((from, to));
            }
            Skip::Full => self.counters.skipped_full += 1,
        }
        flow.next = to;
        self.release(flow, deliver);
    }

    /// Delivers everything `flow` holds, in order, skipping its holes.
    fn flush<S: TcpSink + ?Sized>(&mut self, flow: &mut Flow, deliver: &mut S) {
        while !flow.held.is_empty() {
            self.skip(flow, Skip::Full, deliver);
        }
    }

    /// Evicts the least recently seen flow, delivering what it held.
    fn evict<S: TcpSink + ?Sized>(&mut self, deliver: &mut S) {
        let Some(key) = self
            .flows
            .iter()
            .min_by_key(|(_, f)| f.last_seen)
            .map(|(k, _)| *k)
        else {
            return;
        };
        if let Some(mut flow) = self.flows.remove(&key) {
            self.flush(&mut flow, deliver);
            if deliver.hand_back(&key, flow.next) {
                self.counters.handed_back += 1;
            }
        }
        self.counters.flows_evicted += 1;
    }

    /// When [`poll`](Self::poll) next has a hole to give up on.
    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.waiting == 0 {
            return None;
        }
        self.flows
            .values()
            .filter_map(|f| f.held.first().map(|h| h.at))
            .min()
            .map(|t| t + self.timeout)
    }

    /// Gives up the holes that held segments back for the timeout at `now`.
    pub fn poll<S: TcpSink + ?Sized>(&mut self, now: Instant, deliver: &mut S) {
        if self.waiting == 0 {
            return;
        }
        let due: Vec<FlowKey> = self
            .flows
            .iter()
            .filter(|(_, f)| f.waited(now, self.timeout))
            .map(|(k, _)| *k)
            .collect();
        for key in due {
            let Some(mut flow) = self.flows.remove(&key) else {
                continue;
            };
            while flow.waited(now, self.timeout) {
                self.skip(&mut flow, Skip::Timeout, deliver);
            }
            self.keep_or_hand_back(key, flow, deliver);
        }
    }

    /// Delivers everything held, in order per flow, and forgets every flow (the peer went
    /// away, or the mode changed).
    pub fn clear<S: TcpSink + ?Sized>(&mut self, deliver: &mut S) {
        let keys: Vec<FlowKey> = self.flows.keys().copied().collect();
        for key in keys {
            if let Some(mut flow) = self.flows.remove(&key) {
                self.flush(&mut flow, deliver);
                if deliver.hand_back(&key, flow.next) {
                    self.counters.handed_back += 1;
                }
            }
        }
    }
}

/// Records that `lane` brought sequence space up to `end`.
fn note_lane(flow: &mut Flow, lane: u16, end: u32) {
    match flow.lanes.iter_mut().find(|(l, _)| *l == lane) {
        Some((_, e)) => {
            if after(end, *e) {
                *e = end;
            }
        }
        None => {
            if after(end, flow.next) {
                flow.lanes.push((lane, end));
            }
        }
    }
}

#[cfg(test)]
mod test;
