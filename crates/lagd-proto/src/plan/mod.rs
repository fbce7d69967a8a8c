//! The planner: frames -> flows -> per-member load -> report.
//!
//! Given real traffic (a pcap/pcapng capture, or a flow list), the planner predicts how each
//! transmit policy would spread it over the bond's members, and why. It runs **the daemon's own
//! hash code** ([`crate::hash::hasher`] and the kernel's `hash % members`), so a prediction
//! cannot drift from what lagd (or the kernel, whose hashes lagd matches bit for bit) does.
//!
//! # What it computes
//! For each [`PlanPolicy`]: per member the packets, bytes and flows; the imbalance (busiest
//! member's bytes over the mean); the throughput bound (the bond's rate for this traffic mix
//! when the member with the most bytes per unit of speed saturates first); the elephant flows
//! that share a member; flows split over members (round-robin reordering, or fragments under
//! `layer3+4`); the same for other member counts and with each member failed; and the switch's
//! return path under generic switch hashes ([`switch`]). [`report::Plan`] holds the result,
//! ranked, with a recommendation and [`findings`] that name the field behind a pathology.
//!
//! # Model
//! - Members are chosen as the kernel does for `balance-xor` and `802.3ad`: `hash % n`. When a
//!   member fails, the kernel indexes the remaining members with `hash % (n - 1)`, so flows on
//!   healthy members move too; the planner reports them as collateral moves.
//! - `ovs-slb` and `ovs-tcp` use the same `hash % n` (see [`crate::hash`]: lagd's deterministic
//!   starting point, not OVS's live, rebalanced bucket map). On failure OVS moves only the failed
//!   member's buckets; the planner models that as: a flow on the failed member moves to the
//!   survivor `(hash & 0xff) % (n - 1)`, every other flow stays.
//! - Bucket policies (`balance-tcp`, `balance-slb`, `layer3+4+buckets`...: lagd's 256-bucket
//!   table, rebalanced by load and weighted by member speed) run the daemon's own
//!   [`crate::balance::Buckets`] frame by frame at the capture's timestamps; see [`buckets`]
//!   for how captures, flow lists, the sweep and failures are modelled.
//! - `balance-rr` sends packet `i` (in input order) on member `i % n`, as the daemon's and the
//!   kernel's counter does (IGMP excepted: it leaves on the first member without taking a
//!   turn). A packet leaving on another member than the previous packet of its flow may
//!   overtake it or be overtaken: the planner counts those as at risk of reordering. For a
//!   flow list, where packet order is unknown, each flow's packets are taken to be back to
//!   back. When a member fails the counter still runs over all `n` members and a turn that
//!   falls on the failed one goes to the next usable member (the daemon's `rr_choice`, the
//!   kernel's `bond_get_slave_by_id`), so the member after it carries a double share; the
//!   flows that move are those with a packet on the failed member, and none other.
//! - `stripe` (lagd's `mode=stripe`, which needs lagd at both ends) runs the daemon's own
//!   striping sender ([`crate::stripe::StripeTx`]: frames over the members by bytes, weighted
//!   by speed) over the input; the receiving lagd puts frames back in order, so it has no
//!   reordering risk. It ranks with the others but is recommended only when no policy that
//!   works against any peer was evaluated; otherwise the recommendation notes what it would
//!   deliver. See [`stripe`].
//! - Not modelled as such: `balance-tlb`/`balance-alb`. Dynamic `balance-tlb` spreads unicast
//!   IP through the same bucket table as `HASH+buckets` (whose figures then apply to that
//!   traffic) and sends the rest on its active member, which the planner does not model.
//! - Bytes are whole frames as on the wire (a capture's original length, not the captured
//!   part). Frames of other link types are given an Ethernet header first: raw IP gets zero
//!   MACs, Linux cooked captures get their source MAC and a zero destination; the report says
//!   how many frames that concerned, as MAC-based results mean little for them.
//!
//! # Cost and memory
//! Each frame is parsed once into a [`flow::FlowKey`]. A frame that is **simple** (see
//! [`flow`]: TCP or UDP over IPv4/IPv6, at most one VLAN tag, no fragment) hashes, under every
//! policy, as a function of its key alone, so the planner hashes a flow's first simple frame
//! and adds the others to its counters (a run of back-to-back frames of one flow costs a single
//! table lookup); every other frame is hashed on its own. `balance-rr` is kept for all member
//! counts at once in tables indexed by the input position modulo their common multiple.
//! Bucket policies cannot fold a flow's frames together (the member depends on when a frame
//! is sent), so each frame goes through each of their tables; the hash comes from the flow's
//! entry like the others', and nothing is allocated per frame.
//! Flows are kept in a table of at most [`PlanConfig::max_flows`] entries. Frames of flows
//! beyond the cap are still hashed and counted exactly in every per-member figure; they only
//! miss from the flow counts, elephants and flow moves, and the report gives their packets and
//! bytes as "other flows". Nothing else grows with the input.
//!
//! A table slot is 153 bytes (a 56-byte key, a 96-byte entry, a control byte). The table
//! (hashbrown) keeps between 1.14 and 2.3 slots per flow, doubling when it is 7/8 full, and
//! holds the old and the new slots while it doubles; the pathology detectors then sort one
//! 40-byte row per flow. So the peak is 300 to 600 bytes per flow, by where the flow count
//! falls between powers of two: measured (peak RSS of `lagctl plan`, every default policy,
//! `bench/plan.md`) 144 MB for 400,000 flows and 273 MB at the default cap,
//! [`DEFAULT_MAX_FLOWS`] = 917,504 = 7/8 of 2^20, the most a table of 2^20 slots holds (a cap
//! of 1,000,000 doubled the table for the last 8 % of flows: 494 MB).

pub mod buckets;
pub mod csv;
pub mod findings;
pub mod flow;
pub mod report;
#[cfg(any(test, feature = "sample"))]
pub mod sample;
pub mod stripe;
pub mod switch;

use core::fmt;
use core::str::FromStr;
use std::collections::{HashMap, HashSet};
use std::io;

use crate::balance::{BalanceConfig, bucket};
use crate::capture::{
    CaptureError, CaptureReader, LINKTYPE_ETHERNET, LINKTYPE_LINUX_SLL, LINKTYPE_LINUX_SLL2,
    LINKTYPE_RAW, Packet,
};
use crate::hash::{HashPolicy, MemberMod, hasher};
use crate::time::Instant;
use buckets::BucketAcc;
use flow::{BuildKeyHasher, FlowKey, FlowRecord, Tunnel, extract};
use stripe::StripeAcc;
use switch::SwitchHash;

/// A way to spread frames over members that the planner evaluates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PlanPolicy {
    /// A transmit hash policy (`balance-xor`, `802.3ad`, or an Open vSwitch bond).
    Hash(HashPolicy),
    /// `balance-rr`: packet `i` on member `i % n`.
    RoundRobin,
    /// lagd's `mode=stripe`: every frame over the members by bytes, weighted by speed, put back
    /// in order by the lagd at the other end (so it needs lagd in `mode=stripe` at both ends).
    Stripe,
    /// The transmit hash through lagd's 256-bucket table, rebalanced by load and weighted by
    /// member speed ([`crate::balance`]): `balance-tcp` (ovs-tcp), `balance-slb` (ovs-slb), or
    /// balance-xor and 802.3ad with `distribution=buckets` (any hash).
    Buckets(HashPolicy),
}

impl PlanPolicy {
    /// The default set (`lagctl plan --policy all`): the eight hash policies, then
    /// `balance-rr` and `stripe` (cheap enough: one run of the daemon's striping sender per
    /// frame with equal members; see [`stripe`]).
    pub const ALL: [Self; 10] = [
        Self::Hash(HashPolicy::Layer2),
        Self::Hash(HashPolicy::Layer23),
        Self::Hash(HashPolicy::Layer34),
        Self::Hash(HashPolicy::Encap23),
        Self::Hash(HashPolicy::Encap34),
        Self::Hash(HashPolicy::VlanSrcMac),
        Self::Hash(HashPolicy::OvsSlb),
        Self::Hash(HashPolicy::OvsTcp),
        Self::RoundRobin,
        Self::Stripe,
    ];

    /// The usual bucket policies: layer3+4 through buckets (balance-xor or 802.3ad with
    /// `distribution=buckets`), `balance-tcp` and `balance-slb`.
    pub const BUCKETED: [Self; 3] = [
        Self::Buckets(HashPolicy::Layer34),
        Self::Buckets(HashPolicy::OvsTcp),
        Self::Buckets(HashPolicy::OvsSlb),
    ];

    /// `lagctl plan --policy all+buckets`: [`PlanPolicy::ALL`], then [`PlanPolicy::BUCKETED`].
    /// Not the default: each bucket policy runs a table per frame for every what-if (member
    /// count, failure), which takes the planner from 16 to about 7 million frames a second.
    pub const ALL_WITH_BUCKETS: [Self; 13] = [
        Self::ALL[0],
        Self::ALL[1],
        Self::ALL[2],
        Self::ALL[3],
        Self::ALL[4],
        Self::ALL[5],
        Self::ALL[6],
        Self::ALL[7],
        Self::ALL[8],
        Self::ALL[9],
        Self::BUCKETED[0],
        Self::BUCKETED[1],
        Self::BUCKETED[2],
    ];

    /// The name users write: a hash policy's name, `balance-rr`, `stripe`, `balance-tcp`,
    /// `balance-slb`, or a hash policy's name followed by `+buckets` (`layer3+4+buckets`).
    pub const fn name(self) -> &'static str {
        match self {
            Self::Hash(p) => p.name(),
            Self::RoundRobin => "balance-rr",
            Self::Stripe => "stripe",
            Self::Buckets(p) => match p {
                HashPolicy::OvsTcp => "balance-tcp",
                HashPolicy::OvsSlb => "balance-slb",
                HashPolicy::Layer2 => "layer2+buckets",
                HashPolicy::Layer23 => "layer2+3+buckets",
                HashPolicy::Layer34 => "layer3+4+buckets",
                HashPolicy::Encap23 => "encap2+3+buckets",
                HashPolicy::Encap34 => "encap3+4+buckets",
                HashPolicy::VlanSrcMac => "vlan+srcmac+buckets",
            },
        }
    }

    /// The transmit hash the policy uses, if any (`None` for `balance-rr` and `stripe`).
    pub const fn hash(self) -> Option<HashPolicy> {
        match self {
            Self::Hash(p) | Self::Buckets(p) => Some(p),
            Self::RoundRobin | Self::Stripe => None,
        }
    }

    /// What the policy needs beyond a bond against any peer (a switch, a kernel bond): for
    /// `stripe`, lagd in `mode=stripe` at both ends.
    pub const fn needs(self) -> Option<&'static str> {
        match self {
            Self::Stripe => Some("needs lagd mode=stripe at both ends"),
            _ => None,
        }
    }
}

impl fmt::Display for PlanPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for PlanPolicy {
    type Err = String;

    /// A hash policy name, `balance-rr` (also `rr`, `round-robin`), `stripe`, `balance-tcp`,
    /// `balance-slb`, or a hash policy name followed by `+buckets` (`ovs-tcp+buckets` is
    /// `balance-tcp`).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bucketed = s.strip_suffix("+buckets").map(str::parse::<HashPolicy>);
        match s {
            "balance-rr" | "rr" | "round-robin" => Ok(Self::RoundRobin),
            "stripe" => Ok(Self::Stripe),
            "balance-tcp" => Ok(Self::Buckets(HashPolicy::OvsTcp)),
            "balance-slb" => Ok(Self::Buckets(HashPolicy::OvsSlb)),
            _ => match bucketed {
                Some(Ok(h)) => Ok(Self::Buckets(h)),
                _ => s.parse::<HashPolicy>().map(Self::Hash).map_err(|_| {
                    let names: Vec<&str> = Self::ALL_WITH_BUCKETS.iter().map(|p| p.name()).collect();
                    format!(
                        "unknown policy '{s}' (expected all or one of: {}; or a hash policy followed by +buckets)",
                        names.join(" ")
                    )
                }),
            },
        }
    }
}

/// What to plan for.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanConfig {
    /// The policies to evaluate, at least one.
    pub policies: Vec<PlanPolicy>,
    /// Each member's speed in Gbit/s; the member count is the length (1 to [`MAX_MEMBERS`]).
    pub speeds_gbps: Vec<f64>,
    /// Other member counts to evaluate (each 1 to [`MAX_MEMBERS`]); by default 2, 3, 4, 8.
    pub sweep: Vec<usize>,
    /// The switch hash whose return path the report details (all are computed).
    pub switch_hash: SwitchHash,
    /// The most flows tracked individually (at least 1).
    pub max_flows: usize,
    /// How many of the largest flows to report as elephants.
    pub elephants: usize,
    /// Hash a flow's simple frames once (the default); `false` hashes every frame, which gives
    /// the same figures more slowly (tests use it to check the shortcut).
    pub reuse_hashes: bool,
    /// The bucket table's configuration for bucket policies; by default
    /// [`BalanceConfig::default`], which the daemon's defaults match (a rebalance every 10 s,
    /// hash seed 0, 50 ms idle gap, 16 moves per interval...). A zero `rebalance_interval`
    /// turns load rebalancing off.
    pub balance: BalanceConfig,
}

/// The most members the planner handles.
pub const MAX_MEMBERS: usize = 1024;
/// The most members for which each member's failure is evaluated.
pub const MAX_FAILURE_MEMBERS: usize = 64;
/// The default cap on tracked flows: 7/8 of 2^20, the most a 2^20-slot table holds (160 MB of
/// table; a peak of about 275 MB while it grows and at the end, see the module documentation).
pub const DEFAULT_MAX_FLOWS: usize = 917_504;
/// Distinct inner flows counted per tunnel kind, at most.
const MAX_INNER_FLOWS: usize = 1 << 16;

impl PlanConfig {
    /// Every hash policy, balance-rr and stripe ([`PlanPolicy::ALL`]), `members` members of 10 Gbit/s, the
    /// default sweep, caps and bucket table.
    pub fn new(members: usize) -> Self {
        Self {
            policies: PlanPolicy::ALL.to_vec(),
            speeds_gbps: vec![10.0; members],
            sweep: vec![2, 3, 4, 8],
            switch_hash: SwitchHash::SrcDstIp,
            max_flows: DEFAULT_MAX_FLOWS,
            elephants: 10,
            reuse_hashes: true,
            balance: BalanceConfig::default(),
        }
    }

    /// The member count.
    pub fn members(&self) -> usize {
        self.speeds_gbps.len()
    }

    fn check(&self) -> Result<(), PlanError> {
        let bad = |m: String| Err(PlanError::Config(m));
        let n = self.members();
        if n == 0 || n > MAX_MEMBERS {
            return bad(format!(
                "the bond needs 1 to {MAX_MEMBERS} members, not {n}"
            ));
        }
        if let Some(s) = self
            .speeds_gbps
            .iter()
            .find(|s| !(s.is_finite() && **s > 0.0))
        {
            return bad(format!("member speed {s} Gbit/s is not a positive number"));
        }
        if let Some(&s) = self.sweep.iter().find(|&&s| s == 0 || s > MAX_MEMBERS) {
            return bad(format!("sweep member count {s} is not 1 to {MAX_MEMBERS}"));
        }
        if self.policies.is_empty() {
            return bad("no policy to evaluate".into());
        }
        if self.max_flows == 0 {
            return bad("the flow cap must be at least 1".into());
        }
        Ok(())
    }
}

/// Why planning failed.
#[derive(Debug)]
pub enum PlanError {
    /// The configuration is not usable.
    Config(String),
    /// The capture could not be read (the error names the byte offset).
    Capture(CaptureError),
    /// The flow list could not be read (the error names the line).
    Csv(csv::CsvError),
}

impl fmt::Display for PlanError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Config(m) => f.write_str(m),
            Self::Capture(e) => write!(f, "capture {e}"),
            Self::Csv(e) => write!(f, "flow list {e}"),
        }
    }
}

impl std::error::Error for PlanError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Config(_) => None,
            Self::Capture(e) => Some(e),
            Self::Csv(e) => Some(e),
        }
    }
}

/// Packets and bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Load {
    /// Packets.
    pub packets: u64,
    /// Bytes.
    pub bytes: u64,
}

impl Load {
    /// Adds, saturating (a flow list may claim any counts).
    #[inline(always)]
    fn add(&mut self, packets: u64, bytes: u64) {
        self.packets = self.packets.saturating_add(packets);
        self.bytes = self.bytes.saturating_add(bytes);
    }
}

/// Per-member load for one member count, indexed by `hash % n`.
#[derive(Debug, Clone)]
struct Hist {
    n: usize,
    m: MemberMod,
    cells: Vec<Load>,
}

/// Load by (member before, index among survivors after a failure) for the configured count.
#[derive(Debug, Clone)]
struct FailHist {
    n: usize,
    m: MemberMod,
    m1: MemberMod,
    ovs: bool,
    cells: Vec<Load>,
}

impl FailHist {
    #[inline(always)]
    fn cell(&self, h: u32) -> usize {
        let a = self.m.index(h);
        let b = self.m1.index(if self.ovs { h & 0xff } else { h });
        a * (self.n - 1) + b
    }
}

/// The histograms of one hash-based distributor (a hash policy or a switch hash).
#[derive(Debug, Clone)]
struct HashAcc {
    hists: Vec<Hist>,
    fail: Option<FailHist>,
}

impl HashAcc {
    fn new(counts: &[usize], fail: Option<(usize, bool)>) -> Self {
        let mm = |n: usize| MemberMod::new(n).expect("member counts are checked to be >= 1");
        Self {
            hists: counts
                .iter()
                .map(|&n| Hist {
                    n,
                    m: mm(n),
                    cells: vec![Load::default(); n],
                })
                .collect(),
            fail: fail.map(|(n, ovs)| FailHist {
                n,
                m: mm(n),
                m1: mm(n - 1),
                ovs,
                cells: vec![Load::default(); n * (n - 1)],
            }),
        }
    }

    #[inline(always)]
    fn account(&mut self, h: u32, packets: u64, bytes: u64) {
        for hist in &mut self.hists {
            hist.cells[hist.m.index(h)].add(packets, bytes);
        }
        if let Some(f) = &mut self.fail {
            let c = f.cell(h);
            f.cells[c].add(packets, bytes);
        }
    }

    fn hist(&self, n: usize) -> &Hist {
        self.hists
            .iter()
            .find(|h| h.n == n)
            .expect("histograms exist for every member count asked for")
    }
}

/// `balance-rr`'s state. Packet `i` leaves on member `i % n`, so for member counts whose
/// least common multiple `l` is small, one table indexed by `i % l` (and one of the gaps
/// between a flow's packets, by `gap % l`) serves them all at one update per packet; the
/// counts are folded out of it at the end. Counts are grouped so each group's `l` stays at
/// most [`RR_MAX_PERIOD`] (one group in practice).
#[derive(Debug, Clone)]
struct RrAcc {
    groups: Vec<RrGroup>,
    /// Flow-list rows (bursts of known size): per member count, loads and reordering.
    bursts: Vec<(usize, Vec<Load>, (u64, u64))>,
    /// IGMP frames: they leave on the first usable member and do not advance the counter.
    igmp: Load,
    /// The configured member count when it is at most 64, so a flow's members fit in a `u64`
    /// ([`Entry::rr_mask`]); 0 otherwise (no masks kept).
    mask_n: usize,
    /// The next packet's position modulo `mask_n`.
    mask_pos: usize,
}

/// The largest period of one round-robin group.
const RR_MAX_PERIOD: usize = 1 << 16;

#[derive(Debug, Clone)]
struct RrGroup {
    counts: Vec<usize>,
    l: usize,
    m: MemberMod,
    /// The next packet's position modulo `l`.
    pos: usize,
    cells: Vec<Load>,
    /// Packets (all, TCP) whose flow's previous packet was `gap` earlier, by `gap % l`.
    gaps: Vec<(u64, u64)>,
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 { a } else { gcd(b, a % b) }
}

impl RrAcc {
    /// Round-robin over each of `counts` members; `n` is the configured count.
    fn new(counts: &[usize], n: usize) -> Self {
        let mut sorted = counts.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        let mut groups: Vec<(Vec<usize>, usize)> = Vec::new();
        for n in sorted {
            match groups.last_mut() {
                Some((c, l)) if *l / gcd(*l, n) * n <= RR_MAX_PERIOD => {
                    *l = *l / gcd(*l, n) * n;
                    c.push(n);
                }
                _ => groups.push((vec![n], n)),
            }
        }
        Self {
            groups: groups
                .into_iter()
                .map(|(counts, l)| RrGroup {
                    counts,
                    l,
                    m: MemberMod::new(l).expect("period >= 1"),
                    pos: 0,
                    cells: vec![Load::default(); l],
                    gaps: vec![(0, 0); l],
                })
                .collect(),
            bursts: counts
                .iter()
                .map(|&n| (n, vec![Load::default(); n], (0, 0)))
                .collect(),
            igmp: Load::default(),
            mask_n: if n <= 64 { n } else { 0 },
            mask_pos: 0,
        }
    }

    /// The next packet (not IGMP): counted at its position. Returns its member's bit for
    /// [`Entry::rr_mask`] (0 when no masks are kept).
    #[inline(always)]
    fn packet(&mut self, bytes: u64) -> u64 {
        for g in &mut self.groups {
            g.cells[g.pos].add(1, bytes);
            g.pos += 1;
            if g.pos == g.l {
                g.pos = 0;
            }
        }
        if self.mask_n == 0 {
            return 0;
        }
        let bit = 1u64 << self.mask_pos;
        self.mask_pos += 1;
        if self.mask_pos == self.mask_n {
            self.mask_pos = 0;
        }
        bit
    }

    /// `packets` IGMP packets of `bytes` in all: on member 0 (the first usable), the counter
    /// left alone, as the daemon and the kernel do. Returns member 0's bit.
    fn igmp(&mut self, packets: u64, bytes: u64) -> u64 {
        self.igmp.add(packets, bytes);
        u64::from(self.mask_n != 0)
    }

    /// The members (as [`Entry::rr_mask`] bits) of `packets` packets back to back from the
    /// current position, which it advances past them.
    fn burst_mask(&mut self, packets: u64) -> u64 {
        let n = self.mask_n;
        if n == 0 || packets == 0 {
            return 0;
        }
        let k = packets.min(n as u64) as usize;
        let mut mask = 0u64;
        for j in 0..k {
            mask |= 1 << ((self.mask_pos + j) % n);
        }
        self.mask_pos = ((self.mask_pos as u64 + packets % n as u64) % n as u64) as usize;
        mask
    }

    /// `packets` packets of `bytes` in all, back to back from input position `position`.
    fn burst(&mut self, position: u64, packets: u64, bytes: u64, tcp: bool) {
        if packets == 0 {
            return;
        }
        for (n, cells, reorder) in &mut self.bursts {
            let n64 = *n as u64;
            let start = (position % n64) as usize;
            let (q, r) = (packets / n64, (packets % n64) as usize);
            let mut given = 0u64;
            for k in 0..*n {
                let cnt = q + u64::from(k < r);
                let b = (u128::from(bytes) * u128::from(cnt) / u128::from(packets)) as u64;
                cells[(start + k) % *n].add(cnt, b);
                given += b;
            }
            cells[start].bytes = cells[start].bytes.saturating_add(bytes - given);
            if *n > 1 {
                reorder.0 = reorder.0.saturating_add(packets - 1);
                if tcp {
                    reorder.1 = reorder.1.saturating_add(packets - 1);
                }
            }
        }
        for g in &mut self.groups {
            g.pos = ((g.pos as u64 + packets % g.l as u64) % g.l as u64) as usize;
        }
    }

    #[inline(always)]
    fn gap(&mut self, gap: u64, tcp: bool) {
        // A gap beyond 2^32 packets carries no reordering risk: count it as 0.
        let g = u32::try_from(gap).unwrap_or(0);
        for grp in &mut self.groups {
            let c = &mut grp.gaps[grp.m.index(g)];
            c.0 += 1;
            c.1 += u64::from(tcp);
        }
    }

    /// Per-member loads and reordering (all, TCP) for `n` members.
    fn for_count(&self, n: usize) -> (Vec<Load>, (u64, u64)) {
        let (_, burst, re) = self
            .bursts
            .iter()
            .find(|b| b.0 == n)
            .expect("round-robin is kept for every count asked for");
        let mut loads = burst.clone();
        loads[0].add(self.igmp.packets, self.igmp.bytes);
        let mut reorder = *re;
        if let Some(g) = self.groups.iter().find(|g| g.counts.contains(&n)) {
            for (i, c) in g.cells.iter().enumerate() {
                loads[i % n].add(c.packets, c.bytes);
            }
            for (gap, c) in g.gaps.iter().enumerate() {
                if gap % n != 0 {
                    reorder.0 += c.0;
                    reorder.1 += c.1;
                }
            }
        }
        (loads, reorder)
    }
}

/// Member `i`'s speed in Gbit/s: its configured speed, or the first member's for members beyond
/// the configured ones (the member-count sweep).
fn speed_for(speeds: &[f64], i: usize) -> f64 {
    speeds.get(i).copied().unwrap_or(speeds[0])
}

/// A policy's hash function, as [`hasher`] gives it.
type HashFn = fn(&[u8]) -> u32;

/// Most hash policies evaluated at once.
const SLOTS: usize = 8;

/// A tracked flow.
#[derive(Debug, Clone, Copy)]
struct Entry {
    /// The hash of the flow's first frame under each evaluated hash policy.
    hashes: [u32; SLOTS],
    total: Load,
    /// Traffic not yet added to the histograms: it hashes as `hashes`.
    deferred: Load,
    /// Input position of the flow's last packet (for `balance-rr`).
    last: u64,
    /// `balance-rr` with the configured member count (at most 64): bit `i` when some packet
    /// of the flow leaves on member `i`.
    rr_mask: u64,
    /// The same for `stripe`.
    stripe_mask: u64,
    /// Bit `slot` per hash policy: some frame of the flow left on another member than the
    /// first; bit `8 + slot`: some frame fell in another bucket than the first.
    split: u16,
    /// Simple frames of this flow hash as `hashes`.
    reuse: bool,
}

/// What the planner knows about one kind of tunnel.
#[derive(Debug, Clone, Default)]
struct TunnelAcc {
    load: Load,
    inner: HashSet<u64, BuildKeyHasher>,
    inner_capped: bool,
}

/// Counters about the input itself.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct InputStats {
    /// Frames (or flow-list packets) seen.
    pub packets: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Frames and bytes of flows beyond the flow cap ("other flows").
    pub untracked: Load,
    /// Frames given an Ethernet header by the planner (raw IP, Linux cooked captures).
    pub rebuilt_ethernet: u64,
    /// Frames of link types the planner cannot use, skipped.
    pub skipped: u64,
    /// Flow-list rows with no MACs.
    pub rows_without_macs: u64,
    /// Flow-list rows (0 for a capture).
    pub rows: u64,
    /// Earliest and latest capture timestamp (ns since the epoch), if any.
    pub time_span: Option<(u64, u64)>,
}

/// The planner's accumulating state: feed it frames or flows, then [`Planner::finish`].
#[derive(Debug)]
pub struct Planner {
    config: PlanConfig,
    /// The hash policies evaluated, in `config.policies` order, and their hash functions.
    hash_policies: Vec<(HashPolicy, HashFn)>,
    hash_accs: Vec<HashAcc>,
    switch_accs: Vec<HashAcc>,
    rr: Option<RrAcc>,
    stripe: Option<StripeAcc>,
    /// The bucket policies evaluated, in `config.policies` order, and their tables.
    bucket_accs: Vec<(HashPolicy, BucketAcc)>,
    /// The capture's clock for the bucket tables.
    clock: Clock,
    table: HashMap<FlowKey, Entry, BuildKeyHasher>,
    main_mod: MemberMod,
    tunnels: Vec<(Tunnel, TunnelAcc)>,
    stats: InputStats,
    /// Input position of the next packet.
    position: u64,
    /// Consecutive simple frames of one tracked flow, not yet in its entry.
    run: Run,
    scratch: Vec<u8>,
}

/// The time the bucket tables see: microseconds since the first timestamp, never going back.
#[derive(Debug, Clone, Copy, Default)]
struct Clock {
    base: Option<u64>,
    now: Instant,
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
    fn account_hashes(&mut self, h: &[u32; SLOTS], packets: u64, bytes: u64) {
        for (slot, acc) in self.hash_accs.iter_mut().enumerate() {
            acc.account(h[slot], packets, bytes);
        }
    }

    /// The switch's return path: the flow's replies, hashed by each switch hash.
    fn account_switch(&mut self, key: &FlowKey, packets: u64, bytes: u64) {
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
    /// bytes long on the wire (`frame.len()` if not cut short).
    #[inline]
    pub fn add_frame(&mut self, frame: &[u8], wire_len: u32) {
        let bytes = u64::from(wire_len.max(frame.len() as u32));
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
    fn flush_run(&mut self) {
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
        self.set_time(p.ts_nanos);
        if let Some((a, b)) = &mut self.stats.time_span {
            *a = (*a).min(p.ts_nanos);
            *b = (*b).max(p.ts_nanos);
        } else if p.ts_nanos != 0 {
            self.stats.time_span = Some((p.ts_nanos, p.ts_nanos));
        }
        if p.linktype == LINKTYPE_ETHERNET {
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
            return;
        };
        self.stats.rebuilt_ethernet += 1;
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

    /// Ends the input and computes the report.
    pub fn finish(mut self) -> report::Plan {
        self.flush_run();
        let now = self.clock.now;
        for (_, acc) in &mut self.bucket_accs {
            acc.finish(now);
        }
        let table = core::mem::take(&mut self.table);
        for (key, e) in &table {
            let h = e.hashes;
            let d = e.deferred;
            self.account_hashes(&h, d.packets, d.bytes);
            self.account_switch(key, e.total.packets, e.total.bytes);
        }
        report::build(&self, &table)
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
    while let Some(p) = cap.next_packet().map_err(PlanError::Capture)? {
        planner.add_packet(&p);
        n += 1;
        if n & 0xffff == 0 {
            progress(cap.offset(), n);
        }
    }
    progress(cap.offset(), n);
    Ok(planner.finish())
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

#[cfg(test)]
mod tests;
