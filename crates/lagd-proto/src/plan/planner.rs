//! The planner's accumulating state ([`Planner`]: frames or flows in, hashed once per flow
//! where it can), the tracked flows' entries, and the readers of whole inputs
//! ([`plan_capture`], [`plan_flows`]).

use std::collections::{HashMap, HashSet};
use std::io;

use super::buckets::{self, BucketAcc};
use super::config::{MAX_FAILURE_MEMBERS, PlanConfig};
use super::control;
use super::csv;
use super::error::PlanError;
use super::flow::{BuildKeyHasher, FlowKey, FlowRecord, Tunnel, extract};
use super::hist::HashAcc;
use super::input::{InputStats, InterfaceNaming};
use super::load::Load;
use super::policy::PlanPolicy;
use super::report;
use super::rr::RrAcc;
use super::stripe::StripeAcc;
use super::switch::SwitchHash;
use crate::balance::bucket;
use crate::capture::{
    CaptureReader, LINKTYPE_ETHERNET, LINKTYPE_LINUX_SLL, LINKTYPE_LINUX_SLL2, LINKTYPE_RAW, Packet,
};
use crate::hash::{HashPolicy, MemberMod, hasher};
use crate::time::Instant;

/// Distinct inner flows counted per tunnel kind, at most.
const MAX_INNER_FLOWS: usize = 1 << 16;

/// A policy's hash function, as [`hasher`] gives it.
type HashFn = fn(&[u8]) -> u32;

/// Most hash policies evaluated at once.
const SLOTS: usize = 8;

/// A tracked flow.
#[derive(Debug, Clone, Copy)]
pub(super) struct Entry {
    /// The hash of the flow's first frame under each evaluated hash policy.
    pub(super) hashes: [u32; SLOTS],
    pub(super) total: Load,
    /// Traffic not yet added to the histograms: it hashes as `hashes`.
    pub(super) deferred: Load,
    /// Input position of the flow's last packet (for `balance-rr`).
    last: u64,
    /// `balance-rr` with the configured member count (at most 64): bit `i` when some packet
    /// of the flow leaves on member `i`.
    pub(super) rr_mask: u64,
    /// The same for `stripe`.
    pub(super) stripe_mask: u64,
    /// Bit `slot` per hash policy: some frame of the flow left on another member than the
    /// first; bit `8 + slot`: some frame fell in another bucket than the first.
    pub(super) split: u16,
    /// Simple frames of this flow hash as `hashes`.
    reuse: bool,
}

/// What the planner knows about one kind of tunnel.
#[derive(Debug, Clone, Default)]
pub(super) struct TunnelAcc {
    pub(super) load: Load,
    pub(super) inner: HashSet<u64, BuildKeyHasher>,
    pub(super) inner_capped: bool,
}

/// The planner's accumulating state: feed it frames or flows, then [`Planner::finish`].
#[derive(Debug)]
pub struct Planner {
    pub(super) config: PlanConfig,
    /// The hash policies evaluated, in `config.policies` order, and their hash functions.
    pub(super) hash_policies: Vec<(HashPolicy, HashFn)>,
    pub(super) hash_accs: Vec<HashAcc>,
    pub(super) switch_accs: Vec<HashAcc>,
    pub(super) rr: Option<RrAcc>,
    pub(super) stripe: Option<StripeAcc>,
    /// The bucket policies evaluated, in `config.policies` order, and their tables.
    pub(super) bucket_accs: Vec<(HashPolicy, BucketAcc)>,
    /// The capture's clock for the bucket tables.
    pub(super) clock: Clock,
    pub(super) table: HashMap<FlowKey, Entry, BuildKeyHasher>,
    main_mod: MemberMod,
    pub(super) tunnels: Vec<(Tunnel, TunnelAcc)>,
    pub(super) stats: InputStats,
    /// Input position of the next packet.
    position: u64,
    /// Consecutive simple frames of one tracked flow, not yet in its entry.
    run: Run,
    /// Recent Linux cooked frames (or frames of a capture of several interfaces), to count a
    /// frame seen on the bond and a member once.
    cooked: CookedRecent,
    /// The capture interface of the first Ethernet packet.
    first_interface: Option<u32>,
    /// Ethernet packets came from more than one capture interface.
    multi_interface: bool,
    scratch: Vec<u8>,
}

/// The time the bucket tables see: microseconds since the first timestamp, never going back.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Clock {
    base: Option<u64>,
    pub(super) now: Instant,
}

/// How many recent Linux cooked frames [`CookedRecent`] remembers.
const COOKED_RECENT: usize = 64;
/// Two identical cooked frames this close in time (ns) are one frame seen twice.
const COOKED_WINDOW_NS: u64 = 20_000_000;

/// The last [`COOKED_RECENT`] frames of a Linux cooked capture (`tcpdump -i any`), which sees
/// every frame a bond sends or receives twice: on the bond and on the member that carries it
/// (in either order). A frame whose bytes and length equal a recent one's, within
/// [`COOKED_WINDOW_NS`], and (SLL2, which records the interface) captured on another
/// interface, is that frame's second copy. Real repeats of a frame are rare that close
/// (TCP sequence numbers, IP identifiers, ICMP sequence numbers and DNS identifiers differ).
#[derive(Debug, Clone)]
struct CookedRecent {
    /// (content hash, wire length, time, interface index or `u32::MAX`).
    ring: [(u64, u32, u64, u32); COOKED_RECENT],
    next: usize,
}

impl Default for CookedRecent {
    fn default() -> Self {
        Self {
            ring: [(0, 0, 0, 0); COOKED_RECENT],
            next: 0,
        }
    }
}

impl CookedRecent {
    /// Whether the frame is the second copy of a recent one (which is then forgotten, so a
    /// third copy counts again); remembers it otherwise.
    fn is_second_copy(&mut self, data: &[u8], len: u32, ts: u64, ifindex: Option<u32>) -> bool {
        use core::hash::BuildHasher as _;
        let h = BuildKeyHasher::default().hash_one(data) | 1;
        let ifx = ifindex.unwrap_or(u32::MAX);
        for e in &mut self.ring {
            if e.0 == h
                && e.1 == len
                && ts.abs_diff(e.2) <= COOKED_WINDOW_NS
                && (ifindex.is_none() || e.3 != ifx)
            {
                *e = (0, 0, 0, 0);
                return true;
            }
        }
        self.ring[self.next] = (h, len, ts, ifx);
        self.next = (self.next + 1) % COOKED_RECENT;
        false
    }
}

/// Frames of one flow that arrived back to back: added to the flow's entry in one go, so a
/// burst costs one table lookup.
#[derive(Debug, Clone, Copy, Default)]
struct Run {
    active: bool,
    key: FlowKey,
    /// The flow's hashes (for the bucket policies, which see every frame).
    hashes: [u32; SLOTS],
    /// Input position of the frame that started the run (already in the entry).
    position: u64,
    /// The frames after it.
    load: Load,
    /// Their `balance-rr` members, as [`Entry::rr_mask`].
    rr_mask: u64,
    /// Their `stripe` members, as [`Entry::stripe_mask`].
    stripe_mask: u64,
}

impl Planner {
    /// A planner for `config`.
    pub fn new(config: PlanConfig) -> Result<Self, PlanError> {
        config.check()?;
        let n = config.members();
        let mut counts = vec![n];
        for &s in &config.sweep {
            if !counts.contains(&s) {
                counts.push(s);
            }
        }
        let mut hash_policies: Vec<(HashPolicy, HashFn)> = Vec::new();
        let mut rr = false;
        let mut striped = false;
        let mut bucketed = Vec::new();
        for p in &config.policies {
            match *p {
                PlanPolicy::Hash(h) => {
                    if !hash_policies.iter().any(|(x, _)| *x == h) {
                        hash_policies.push((h, hasher(h)));
                    }
                }
                PlanPolicy::RoundRobin => rr = true,
                PlanPolicy::Stripe => striped = true,
                PlanPolicy::Buckets(h) => {
                    if !bucketed.contains(&h) {
                        bucketed.push(h);
                    }
                }
            }
        }
        // Bucket policies need their hash: after the hash policies' slots, so those keep theirs.
        for &h in &bucketed {
            if !hash_policies.iter().any(|(x, _)| *x == h) {
                hash_policies.push((h, hasher(h)));
            }
        }
        let bucket_failures = (2..=buckets::MAX_BUCKET_FAILURE_MEMBERS).contains(&n);
        let bucket_accs = bucketed
            .iter()
            .map(|&h| {
                let slot = hash_policies
                    .iter()
                    .position(|(x, _)| *x == h)
                    .expect("every bucket policy's hash has a slot");
                let acc = BucketAcc::new(
                    config.balance,
                    slot,
                    &counts,
                    &config.speeds_gbps,
                    bucket_failures,
                );
                (h, acc)
            })
            .collect();
        let fail = |ovs: bool| (2..=MAX_FAILURE_MEMBERS).contains(&n).then_some((n, ovs));
        let hash_accs = hash_policies
            .iter()
            .map(|(h, _)| {
                let ovs = matches!(h, HashPolicy::OvsSlb | HashPolicy::OvsTcp);
                HashAcc::new(&counts, fail(ovs))
            })
            .collect();
        let switch_accs = SwitchHash::ALL
            .iter()
            .map(|_| HashAcc::new(&[n], None))
            .collect();
        let rr = rr.then(|| RrAcc::new(&counts, n));
        let stripe = striped.then(|| {
            let failures = (2..=MAX_FAILURE_MEMBERS).contains(&n);
            StripeAcc::new(&config.speeds_gbps, failures)
        });
        Ok(Self {
            main_mod: MemberMod::new(n).expect("checked"),
            hash_policies,
            hash_accs,
            switch_accs,
            rr,
            stripe,
            bucket_accs,
            clock: Clock::default(),
            table: HashMap::default(),
            tunnels: Vec::new(),
            stats: InputStats::default(),
            position: 0,
            run: Run::default(),
            cooked: CookedRecent::default(),
            first_interface: None,
            multi_interface: false,
            scratch: Vec::with_capacity(2048),
            config,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &PlanConfig {
        &self.config
    }

    /// Input counters so far.
    pub fn stats(&self) -> &InputStats {
        &self.stats
    }

    /// Sets the capture time (nanoseconds since the epoch) of the frames that follow, for the
    /// bucket policies' tables: their clock counts from the first time set, and a time earlier
    /// than one set before counts as that one. [`Planner::add_packet`] calls it with each
    /// packet's timestamp; frames added without a time share the last one (0 at first).
    pub fn set_time(&mut self, ts_nanos: u64) {
        let base = *self.clock.base.get_or_insert(ts_nanos);
        let now = Instant::from_micros(ts_nanos.saturating_sub(base) / 1000);
        self.clock.now = self.clock.now.max(now);
    }

    /// Tells the planner the capture has `count` interfaces (pcapng): with more than one, an
    /// Ethernet frame seen on two of them (the bond and a member) within 20 ms is counted once.
    /// [`plan_capture`] calls it with each packet; [`Planner::add_packet`] alone notices a
    /// second interface from its first packet on.
    pub fn expect_interfaces(&mut self, count: usize) {
        if count > 1 {
            self.multi_interface = true;
        }
    }

    /// Sets the time ([`Planner::set_time`]) and widens the input's time span
    /// ([`InputStats::time_span`]) to it: for input that arrives without a capture's packets
    /// (sFlow datagrams from a socket).
    pub fn note_time(&mut self, ts_nanos: u64) {
        self.set_time(ts_nanos);
        if let Some((a, b)) = &mut self.stats.time_span {
            *a = (*a).min(ts_nanos);
            *b = (*b).max(ts_nanos);
        } else if ts_nanos != 0 {
            self.stats.time_span = Some((ts_nanos, ts_nanos));
        }
    }

    /// Sends a frame through the bucket policies' tables.
    #[inline(always)]
    fn route(&mut self, h: &[u32; SLOTS], bytes: u64, new_flow: bool) {
        let now = self.clock.now;
        for (_, acc) in &mut self.bucket_accs {
            acc.frame(now, h[acc.slot], bytes, new_flow);
        }
    }

    #[inline(always)]
    fn hash_all(&self, frame: &[u8]) -> [u32; SLOTS] {
        let mut h = [0u32; SLOTS];
        for (slot, (_, f)) in self.hash_policies.iter().enumerate() {
            h[slot] = f(frame);
        }
        h
    }

    #[inline(always)]
    pub(super) fn account_hashes(&mut self, h: &[u32; SLOTS], packets: u64, bytes: u64) {
        for (slot, acc) in self.hash_accs.iter_mut().enumerate() {
            acc.account(h[slot], packets, bytes);
        }
    }

    /// The switch's return path: the flow's replies, hashed by each switch hash.
    pub(super) fn account_switch(&mut self, key: &FlowKey, packets: u64, bytes: u64) {
        let back = key.reversed();
        for (acc, sh) in self.switch_accs.iter_mut().zip(SwitchHash::ALL) {
            acc.account(sh.hash(&back), packets, bytes);
        }
    }

    fn tunnel(&mut self, t: Tunnel, inner: u64, bytes: u64) {
        let i = match self.tunnels.iter().position(|(x, _)| *x == t) {
            Some(i) => i,
            None => {
                self.tunnels.push((t, TunnelAcc::default()));
                self.tunnels.len() - 1
            }
        };
        let acc = &mut self.tunnels[i].1;
        acc.load.add(1, bytes);
        if inner != 0 {
            if acc.inner.len() < MAX_INNER_FLOWS {
                acc.inner.insert(inner);
            } else if !acc.inner.contains(&inner) {
                acc.inner_capped = true;
            }
        }
    }

    /// Adds one Ethernet frame (starting at the destination MAC, no FCS) that was `wire_len`
    /// bytes long on the wire (`frame.len()` if not cut short). A link control frame (see
    /// [`control`]) is counted in [`InputStats::control`] and nothing else.
    #[inline]
    pub fn add_frame(&mut self, frame: &[u8], wire_len: u32) {
        let bytes = u64::from(wire_len.max(frame.len() as u32));
        // Link control frames are not bond traffic: counted apart, never hashed.
        if let Some(kind) = control::classify(frame) {
            self.stats.control.add(kind, bytes);
            return;
        }
        self.stats.packets += 1;
        self.stats.bytes += bytes;
        let ex = extract(frame);
        if let (Some(inner), Some(t)) = (ex.inner, ex.key.tunnel()) {
            self.tunnel(t, inner, bytes);
        }
        let tcp = ex.key.protocol() == 6;
        // balance-rr: IGMP leaves on the first member without taking a turn.
        let mut igmp = false;
        let mut rr_bit = 0;
        if let Some(rr) = &mut self.rr {
            igmp = crate::wire::ipv4::is_igmp(frame);
            rr_bit = if igmp {
                rr.igmp(1, bytes)
            } else {
                rr.packet(bytes)
            };
        }
        let stripe_bit = self.stripe.as_mut().map_or(0, |s| s.frame(bytes));
        let position = self.position;
        self.position += u64::from(!igmp);
        let reuse_ok = self.config.reuse_hashes && ex.simple;
        // A frame of the flow the previous frame belonged to: add it to the run.
        if reuse_ok && self.run.active && self.run.key == ex.key {
            self.run.load.add(1, bytes);
            self.run.rr_mask |= rr_bit;
            self.run.stripe_mask |= stripe_bit;
            if let Some(rr) = &mut self.rr {
                rr.gap(1, tcp);
            }
            if !self.bucket_accs.is_empty() {
                let h = self.run.hashes;
                self.route(&h, bytes, false);
            }
            return;
        }
        self.flush_run();
        if reuse_ok {
            self.run.key = ex.key;
        }
        if let Some(e) = self.table.get_mut(&ex.key) {
            e.total.add(1, bytes);
            e.rr_mask |= rr_bit;
            e.stripe_mask |= stripe_bit;
            if !igmp {
                if let Some(rr) = &mut self.rr {
                    rr.gap(position - e.last, tcp);
                }
                e.last = position;
            }
            if reuse_ok && e.reuse {
                e.deferred.add(1, bytes);
                let h = e.hashes;
                self.run.active = true;
                self.run.position = position;
                self.run.hashes = h;
                if !self.bucket_accs.is_empty() {
                    self.route(&h, bytes, false);
                }
                return;
            }
            let first = e.hashes;
            let h = self.hash_all(frame);
            let mut split = 0u16;
            for slot in 0..self.hash_policies.len() {
                if self.main_mod.index(h[slot]) != self.main_mod.index(first[slot]) {
                    split |= 1 << slot;
                }
            }
            for (_, acc) in &self.bucket_accs {
                let s = acc.slot;
                if bucket(acc.seed, h[s]) != bucket(acc.seed, first[s]) {
                    split |= 1 << (8 + s);
                }
            }
            if let Some(e) = self.table.get_mut(&ex.key) {
                e.split |= split;
                if reuse_ok && h == first {
                    e.reuse = true;
                }
            }
            self.account_hashes(&h, 1, bytes);
            if !self.bucket_accs.is_empty() {
                self.route(&h, bytes, false);
            }
            return;
        }
        let h = self.hash_all(frame);
        if !self.bucket_accs.is_empty() {
            let tracked = self.table.len() < self.config.max_flows;
            self.route(&h, bytes, tracked);
        }
        if self.table.len() < self.config.max_flows {
            let mut e = Entry {
                hashes: h,
                total: Load { packets: 1, bytes },
                deferred: Load::default(),
                last: position,
                rr_mask: rr_bit,
                stripe_mask: stripe_bit,
                split: 0,
                reuse: reuse_ok,
            };
            if reuse_ok {
                e.deferred.add(1, bytes);
                self.run.active = true;
                self.run.position = position;
                self.run.hashes = h;
            } else {
                self.account_hashes(&h, 1, bytes);
            }
            self.table.insert(ex.key, e);
        } else {
            self.stats.untracked.add(1, bytes);
            self.account_hashes(&h, 1, bytes);
            self.account_switch(&ex.key, 1, bytes);
        }
    }

    /// Moves the current run of frames of one flow into its table entry.
    #[inline]
    pub(super) fn flush_run(&mut self) {
        if !self.run.active {
            return;
        }
        self.run.active = false;
        let load = core::mem::take(&mut self.run.load);
        let rr_mask = core::mem::take(&mut self.run.rr_mask);
        let stripe_mask = core::mem::take(&mut self.run.stripe_mask);
        if load.packets == 0 {
            return;
        }
        if let Some(e) = self.table.get_mut(&self.run.key) {
            e.total.add(load.packets, load.bytes);
            e.deferred.add(load.packets, load.bytes);
            e.last = self.run.position + load.packets;
            e.rr_mask |= rr_mask;
            e.stripe_mask |= stripe_mask;
        }
    }

    /// Adds one captured packet, giving frames of other link types an Ethernet header (raw IP,
    /// Linux cooked v1/v2); packets of other link types are counted as skipped.
    pub fn add_packet(&mut self, p: &Packet<'_>) {
        self.note_time(p.ts_nanos);
        if p.linktype == LINKTYPE_ETHERNET {
            // A capture of several interfaces (pcapng: the bond and a member) may hold a frame
            // twice; checked from the second interface seen on.
            match self.first_interface {
                None => self.first_interface = Some(p.interface),
                Some(i) if i != p.interface => self.multi_interface = true,
                Some(_) => {}
            }
            if self.multi_interface {
                let second =
                    self.cooked
                        .is_second_copy(p.data, p.orig_len, p.ts_nanos, Some(p.interface));
                self.stats
                    .interfaces
                    .count(InterfaceNaming::CaptureInterface, p.interface, second);
                if second {
                    self.stats.duplicates += 1;
                    return;
                }
            }
            self.add_frame(p.data, p.orig_len);
            return;
        }
        let d = p.data;
        // (header length to drop, source MAC if known, EtherType)
        let conv: Option<(usize, [u8; 6], u16)> = match p.linktype {
            LINKTYPE_RAW | 228 | 229 => d.first().and_then(|v| match v >> 4 {
                4 => Some((0, [0; 6], 0x0800)),
                6 => Some((0, [0; 6], 0x86dd)),
                _ => None,
            }),
            LINKTYPE_LINUX_SLL if d.len() >= 16 => {
                let mut mac = [0u8; 6];
                if u16::from_be_bytes([d[4], d[5]]) >= 6 {
                    mac.copy_from_slice(&d[6..12]);
                }
                Some((16, mac, u16::from_be_bytes([d[14], d[15]])))
            }
            LINKTYPE_LINUX_SLL2 if d.len() >= 20 => {
                let mut mac = [0u8; 6];
                if d[11] >= 6 {
                    mac.copy_from_slice(&d[12..18]);
                }
                Some((20, mac, u16::from_be_bytes([d[0], d[1]])))
            }
            _ => None,
        };
        let Some((drop, src, ethertype)) = conv else {
            self.stats.skipped += 1;
            self.stats.skipped_linktype.get_or_insert(p.linktype);
            return;
        };
        if matches!(p.linktype, LINKTYPE_LINUX_SLL | LINKTYPE_LINUX_SLL2) {
            // SLL2 names the interface (its index); SLL does not.
            let ifindex = (p.linktype == LINKTYPE_LINUX_SLL2)
                .then(|| u32::from_be_bytes([d[4], d[5], d[6], d[7]]));
            let second = self
                .cooked
                .is_second_copy(&d[drop..], p.orig_len, p.ts_nanos, ifindex);
            if let Some(i) = ifindex {
                self.stats
                    .interfaces
                    .count(InterfaceNaming::Ifindex, i, second);
            }
            if second {
                self.stats.duplicates += 1;
                return;
            }
        }
        self.stats.rebuilt_ethernet += 1;
        if src == [0; 6] {
            self.stats.rebuilt_without_src_mac += 1;
        }
        let mut buf = core::mem::take(&mut self.scratch);
        buf.clear();
        buf.extend_from_slice(&[0; 6]);
        buf.extend_from_slice(&src);
        buf.extend_from_slice(&ethertype.to_be_bytes());
        buf.extend_from_slice(&d[drop..]);
        let wire = (p.orig_len as usize).saturating_sub(drop) + 14;
        self.add_frame(&buf, u32::try_from(wire).unwrap_or(u32::MAX));
        self.scratch = buf;
    }

    /// Adds one flow of a flow list: its representative frame (see
    /// [`FlowRecord::write_frame`]) is hashed and weighted by the flow's packets and bytes.
    pub fn add_flow(&mut self, rec: &FlowRecord) {
        self.flush_run();
        let mut buf = core::mem::take(&mut self.scratch);
        if !rec.write_frame(&mut buf) {
            // Mixed address families cannot come from the parsers; count, don't guess.
            self.stats.skipped += rec.packets;
            self.scratch = buf;
            return;
        }
        self.stats.rows += 1;
        if rec.src_mac.is_zero() && rec.dst_mac.is_zero() {
            self.stats.rows_without_macs += 1;
        }
        let (packets, bytes) = (rec.packets, rec.bytes);
        self.stats.packets = self.stats.packets.saturating_add(packets);
        self.stats.bytes = self.stats.bytes.saturating_add(bytes);
        let ex = extract(&buf);
        let h = self.hash_all(&buf);
        self.scratch = buf;
        let tcp = rec.protocol == 6;
        let mut rr_mask = 0;
        let mut igmp = false;
        if let Some(rr) = &mut self.rr {
            igmp = crate::wire::ipv4::is_igmp(&self.scratch);
            if igmp {
                rr_mask = rr.igmp(packets, bytes);
            } else {
                rr.burst(self.position, packets, bytes, tcp);
                rr_mask = rr.burst_mask(packets);
            }
        }
        let stripe_mask = self.stripe.as_mut().map_or(0, |s| s.row(packets, bytes));
        let position = self.position;
        if !igmp {
            self.position = self.position.saturating_add(packets);
        }
        // One table lookup per row; the bucket tables learn whether the row starts a tracked flow.
        let rows = |accs: &mut Vec<(HashPolicy, BucketAcc)>, new_flow: bool| {
            for (_, acc) in accs {
                acc.row(h[acc.slot], packets, bytes, new_flow);
            }
        };
        if let Some(e) = self.table.get_mut(&ex.key) {
            rows(&mut self.bucket_accs, false);
            e.total.add(packets, bytes);
            e.last = position;
            e.rr_mask |= rr_mask;
            e.stripe_mask |= stripe_mask;
            // The frame is built from the key, so it hashes as the entry's first row did.
            e.deferred.add(packets, bytes);
        } else if self.table.len() < self.config.max_flows {
            rows(&mut self.bucket_accs, true);
            self.table.insert(
                ex.key,
                Entry {
                    hashes: h,
                    total: Load { packets, bytes },
                    deferred: Load { packets, bytes },
                    last: position,
                    rr_mask,
                    stripe_mask,
                    split: 0,
                    reuse: true,
                },
            );
        } else {
            rows(&mut self.bucket_accs, false);
            self.stats.untracked.add(packets, bytes);
            self.account_hashes(&h, packets, bytes);
            self.account_switch(&ex.key, packets, bytes);
        }
    }
}

/// Reads a whole capture into a plan. `progress` is called now and then (every 64 Ki packets
/// and at the end) with the bytes of the file consumed and the packets read so far.
pub fn plan_capture<R: io::Read>(
    reader: R,
    config: PlanConfig,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<report::Plan, PlanError> {
    let mut planner = Planner::new(config)?;
    let mut cap = CaptureReader::new(reader).map_err(PlanError::Capture)?;
    let mut n = 0u64;
    while let Some((p, interfaces)) = cap.next_packet_counted().map_err(PlanError::Capture)? {
        // pcapng interfaces are described before their packets.
        planner.expect_interfaces(interfaces);
        planner.add_packet(&p);
        n += 1;
        if n & 0xffff == 0 {
            progress(cap.offset(), n);
        }
    }
    progress(cap.offset(), n);
    let mut plan = planner.finish();
    plan.interface_names = cap
        .interfaces()
        .iter()
        .enumerate()
        .filter_map(|(i, f)| Some((u32::try_from(i).ok()?, f.name.clone()?)))
        .collect();
    Ok(plan)
}

/// Reads a whole CSV flow list (see [`csv`]) into a plan.
pub fn plan_flows<R: io::BufRead>(
    reader: R,
    config: PlanConfig,
) -> Result<report::Plan, PlanError> {
    let mut planner = Planner::new(config)?;
    let mut rows = csv::FlowListReader::new(reader).map_err(PlanError::Csv)?;
    while let Some(rec) = rows.next_flow().map_err(PlanError::Csv)? {
        planner.add_flow(&rec);
    }
    Ok(planner.finish())
}
