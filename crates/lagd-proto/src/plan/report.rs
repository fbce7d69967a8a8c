//! The planner's result as plain data ([`Plan`]) and how it is computed from the accumulated
//! counters. Rendering it (the terminal table, JSON, the HTML report) is `lagctl plan`'s job,
//! in the `lagd` crate.

use core::fmt::Write as _;
use core::time::Duration;
use std::collections::HashMap;

use super::buckets::{BucketAcc, Run};
use super::findings::{self, Finding};
use super::flow::{BuildKeyHasher, FlowKey, Tunnel};
use super::stripe::StripeAcc;
use super::switch::SwitchHash;
use super::{Entry, InputStats, Load, PlanPolicy, Planner, speed_for};
use crate::balance::BalanceCounters;
use crate::hash::HashPolicy;

/// One member's share of the traffic.
#[derive(Debug, Clone, PartialEq)]
pub struct MemberLoad {
    /// Member index (as the bond numbers its members; after a failure the survivors keep theirs).
    pub index: usize,
    /// Packets.
    pub packets: u64,
    /// Bytes.
    pub bytes: u64,
    /// Tracked flows whose first frame uses this member (`balance-rr` and `stripe`: flows with
    /// a packet on it; 0 for `stripe`'s survivors of a failure, whose flows are not kept).
    pub flows: u64,
    /// The member's speed.
    pub speed_gbps: f64,
}

/// Traffic spread over some members.
#[derive(Debug, Clone, PartialEq)]
pub struct Distribution {
    /// Per member.
    pub members: Vec<MemberLoad>,
    /// The busiest member's bytes over the mean (1.0 is perfect; 1.0 as well with no traffic).
    pub imbalance: f64,
    /// The bond's rate for this mix when the member with the most bytes per unit of speed
    /// saturates first: total bytes / max(member bytes / member speed). With no traffic, the
    /// sum of the speeds.
    pub throughput_bound_gbps: f64,
}

impl Distribution {
    fn new(members: Vec<MemberLoad>) -> Self {
        let total: u64 = members.iter().fold(0, |a, m| a.saturating_add(m.bytes));
        let speed: f64 = members.iter().map(|m| m.speed_gbps).sum();
        if total == 0 || members.is_empty() {
            return Self {
                members,
                imbalance: 1.0,
                throughput_bound_gbps: speed,
            };
        }
        let max = members.iter().map(|m| m.bytes).max().unwrap_or(0) as f64;
        let mean = total as f64 / members.len() as f64;
        let worst = members
            .iter()
            .map(|m| m.bytes as f64 / m.speed_gbps)
            .fold(0.0, f64::max);
        Self {
            imbalance: max / mean,
            throughput_bound_gbps: total as f64 / worst,
            members,
        }
    }

    /// The index (in `members`) of the member with the most bytes (the first of equals).
    pub fn busiest(&self) -> usize {
        let mut best = 0;
        for (i, m) in self.members.iter().enumerate() {
            if m.bytes > self.members[best].bytes {
                best = i;
            }
        }
        best
    }

    /// Total bytes.
    pub fn bytes(&self) -> u64 {
        self.members
            .iter()
            .fold(0, |a, m| a.saturating_add(m.bytes))
    }

    /// Total speed of the members.
    pub fn speed_gbps(&self) -> f64 {
        self.members.iter().map(|m| m.speed_gbps).sum()
    }
}

/// A policy with another member count.
#[derive(Debug, Clone, PartialEq)]
pub struct SweepPoint {
    /// Member count.
    pub members: usize,
    /// As [`Distribution::imbalance`].
    pub imbalance: f64,
    /// As [`Distribution::throughput_bound_gbps`].
    pub throughput_bound_gbps: f64,
}

/// What happens when one member fails.
#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
    /// The failed member.
    pub failed: usize,
    /// The survivors' load.
    pub dist: Distribution,
    /// Tracked flows that change member (those of the failed member included).
    pub flows_moved: u64,
    /// Bytes (all traffic) that change member.
    pub bytes_moved: u64,
    /// Tracked flows that move although their member did not fail.
    pub collateral_flows: u64,
    /// Bytes that move although their member did not fail.
    pub collateral_bytes: u64,
    /// Indices into [`Plan::elephants`] of the largest flows that change member.
    pub elephants_moved: Vec<usize>,
}

/// Packets that may arrive out of order.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Reorder {
    /// Packets leaving on another member than the previous packet of their flow.
    pub packets: u64,
    /// Of those, TCP packets (which a reordering costs fast retransmits).
    pub tcp_packets: u64,
    /// `packets` over all packets.
    pub share: f64,
}

/// Elephants sharing a member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Collision {
    /// The member.
    pub member: usize,
    /// Indices into [`Plan::elephants`].
    pub elephants: Vec<usize>,
}

/// What a bucket policy's table did over the input (see [`super::buckets`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Rebalancing {
    /// The rebalance interval (zero: load rebalancing off).
    pub interval: Duration,
    /// The configured table's counters at the end: rebalances run, moves by reason (load,
    /// elephants), moves that waited for their bucket's idle gap, busy buckets moved at once
    /// after a persistent overload (`forced`: a stream in them may be reordered once), plans
    /// dropped.
    pub counters: BalanceCounters,
    /// Buckets each member holds at the end, by member index.
    pub buckets: Vec<u16>,
    /// Complete rebalance intervals that carried traffic (flow lists: intervals replayed).
    pub intervals: u64,
    /// The busiest member's bytes per unit of speed over the bond's (total bytes over total
    /// speed) in the first complete interval with traffic: the table as first assigned. With
    /// equal speeds, the busiest member's bytes over the mean.
    pub first_interval_imbalance: Option<f64>,
    /// The same in the last complete interval with traffic: after the rebalancer acted.
    pub last_interval_imbalance: Option<f64>,
    /// The input was a flow list, replayed as a steady mix once per interval.
    pub replayed: bool,
}

impl Rebalancing {
    /// Buckets moved for load, elephant handling included.
    pub fn load_moves(&self) -> u64 {
        self.counters.moved_rebalance + self.counters.moved_elephant
    }
}

/// One policy's prediction.
#[derive(Debug, Clone, PartialEq)]
pub struct PolicyPlan {
    /// The policy.
    pub policy: PlanPolicy,
    /// 1 for the best.
    pub rank: usize,
    /// With the configured members.
    pub dist: Distribution,
    /// Round-robin's reordering risk (`None` for hash policies).
    pub reorder: Option<Reorder>,
    /// Hash policies: tracked flows whose frames do not all leave on one member (fragments
    /// under `layer3+4`, for instance) and their bytes. Bucket policies: tracked flows whose
    /// frames do not all fall in one bucket (a bucket moved whole is not a split).
    pub split_flows: u64,
    /// Bytes of the split flows.
    pub split_bytes: u64,
    /// Members carrying two or more elephants (flows of at least a quarter of a member's fair
    /// share) while another member carries none. Bucket policies: as the table ends.
    pub collisions: Vec<Collision>,
    /// Other member counts.
    pub sweep: Vec<SweepPoint>,
    /// Each member failing in turn (empty for one member or more than
    /// [`super::MAX_FAILURE_MEMBERS`]; for bucket policies, more than
    /// [`super::buckets::MAX_BUCKET_FAILURE_MEMBERS`]).
    pub failures: Vec<Failure>,
    /// Bucket policies: what the table did (`None` for the others).
    pub rebalancing: Option<Rebalancing>,
}

impl PolicyPlan {
    /// Whether some traffic may be reordered under this policy.
    pub fn has_reorder_risk(&self) -> bool {
        self.reorder.is_some_and(|r| r.packets > 0) || self.split_flows > 0
    }
}

/// A flow, for the report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowSummary {
    /// Its key.
    pub key: FlowKey,
    /// Packets.
    pub packets: u64,
    /// Bytes.
    pub bytes: u64,
}

/// The switch's return path under one switch hash.
#[derive(Debug, Clone, PartialEq)]
pub struct ReturnPath {
    /// The switch hash (a generic XOR fold: see [`super::switch`]).
    pub hash: SwitchHash,
    /// The spread over the links.
    pub dist: Distribution,
}

/// Tunnelled traffic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TunnelSummary {
    /// The tunnel kind.
    pub tunnel: Tunnel,
    /// Packets.
    pub packets: u64,
    /// Bytes.
    pub bytes: u64,
    /// Tracked outer flows.
    pub outer_flows: u64,
    /// Distinct inner flows seen (a lower bound when `inner_capped`).
    pub inner_flows: u64,
    /// More inner flows than were counted.
    pub inner_capped: bool,
}

/// The policy to use, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recommendation {
    /// The policy.
    pub policy: PlanPolicy,
    /// The reason, one plain sentence.
    pub reason: String,
    /// A caveat worth knowing (e.g. what round-robin would give, at what cost).
    pub note: Option<String>,
}

/// The planner's report.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// About the input.
    pub input: InputStats,
    /// Tracked flows.
    pub flows: u64,
    /// The flow cap in force.
    pub max_flows: usize,
    /// Configured member speeds (their count is the member count).
    pub speeds_gbps: Vec<f64>,
    /// Every evaluated policy, best first.
    pub policies: Vec<PolicyPlan>,
    /// The recommended policy (`None` only with no traffic at all).
    pub recommendation: Option<Recommendation>,
    /// Pathologies, each naming the field behind it.
    pub findings: Vec<Finding>,
    /// The largest flows, largest first.
    pub elephants: Vec<FlowSummary>,
    /// The switch hash the user asked about.
    pub switch_hash: SwitchHash,
    /// The return path under every switch hash (the asked-for one first).
    pub return_path: Vec<ReturnPath>,
    /// Tunnelled traffic, by kind.
    pub tunnels: Vec<TunnelSummary>,
}

impl Plan {
    /// The member count.
    pub fn members(&self) -> usize {
        self.speeds_gbps.len()
    }

    /// The plan of `policy`, if evaluated.
    pub fn policy(&self, policy: PlanPolicy) -> Option<&PolicyPlan> {
        self.policies.iter().find(|p| p.policy == policy)
    }
}

/// A flow is an elephant when it carries at least this fraction of one member's fair share of
/// the bytes (with `n` members: `1 / (4 n)` of all bytes).
pub const ELEPHANT_FRACTION_OF_FAIR_SHARE: f64 = 0.25;

/// Member `index`'s row: its load, its flows and its speed.
fn member_load(index: usize, l: &Load, flows: u64, speeds: &[f64]) -> MemberLoad {
    MemberLoad {
        index,
        packets: l.packets,
        bytes: l.bytes,
        flows,
        speed_gbps: speed_for(speeds, index),
    }
}

fn loads_to_members(loads: &[Load], flows: &[u64], speeds: &[f64]) -> Vec<MemberLoad> {
    loads
        .iter()
        .enumerate()
        .map(|(i, l)| member_load(i, l, flows.get(i).copied().unwrap_or(0), speeds))
        .collect()
}

/// The sweep's row for `members` members carrying `loads`.
fn sweep_point(members: usize, loads: &[Load], speeds: &[f64]) -> SweepPoint {
    let d = Distribution::new(loads_to_members(loads, &[], speeds));
    SweepPoint {
        members,
        imbalance: d.imbalance,
        throughput_bound_gbps: d.throughput_bound_gbps,
    }
}

/// The indices of the `elephants` whose tracked entry `moves` says moves.
fn elephants_moved(
    elephants: &[FlowSummary],
    table: &HashMap<FlowKey, Entry, BuildKeyHasher>,
    moves: impl Fn(&Entry) -> bool,
) -> Vec<usize> {
    elephants
        .iter()
        .enumerate()
        .filter(|(_, el)| table.get(&el.key).is_some_and(&moves))
        .map(|(i, _)| i)
        .collect()
}

/// `policy`'s plan before ranking: no reordering, no split flows, no collisions, no
/// rebalancing (the callers set what their policy has).
fn unranked(
    policy: PlanPolicy,
    dist: Distribution,
    sweep: Vec<SweepPoint>,
    failures: Vec<Failure>,
) -> PolicyPlan {
    PolicyPlan {
        policy,
        rank: 0,
        dist,
        reorder: None,
        split_flows: 0,
        split_bytes: 0,
        collisions: Vec::new(),
        sweep,
        failures,
        rebalancing: None,
    }
}

/// Member `failed` out when only its own traffic moves (no collateral): the survivors carry
/// `members`.
fn own_failure(
    failed: usize,
    members: Vec<MemberLoad>,
    flows_moved: u64,
    bytes_moved: u64,
    elephants_moved: Vec<usize>,
) -> Failure {
    Failure {
        failed,
        dist: Distribution::new(members),
        flows_moved,
        bytes_moved,
        collateral_flows: 0,
        collateral_bytes: 0,
        elephants_moved,
    }
}

/// The members set in a member mask ([`Entry::rr_mask`], [`Entry::stripe_mask`]), lowest
/// first.
fn mask_members(mut bits: u64) -> impl Iterator<Item = usize> {
    core::iter::from_fn(move || {
        (bits != 0).then(|| {
            let i = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            i
        })
    })
}

/// A figure as shown (two decimals), so ties the reader sees are ties in the ranking.
fn hundredths(x: f64) -> i64 {
    (x * 100.0).round() as i64
}

/// Order used to break ties: the simpler, more widely available policy first (a bucket policy
/// after every hash policy: with no traffic to rebalance it places flows as a hash does).
fn preference(p: PlanPolicy) -> usize {
    match p {
        PlanPolicy::Hash(HashPolicy::Layer23) => 0,
        PlanPolicy::Hash(HashPolicy::Layer34) => 1,
        PlanPolicy::Hash(HashPolicy::Layer2) => 2,
        PlanPolicy::Hash(HashPolicy::Encap23) => 3,
        PlanPolicy::Hash(HashPolicy::Encap34) => 4,
        PlanPolicy::Hash(HashPolicy::VlanSrcMac) => 5,
        PlanPolicy::Hash(HashPolicy::OvsTcp) => 6,
        PlanPolicy::Hash(HashPolicy::OvsSlb) => 7,
        PlanPolicy::Buckets(HashPolicy::Layer34) => 8,
        PlanPolicy::Buckets(HashPolicy::OvsTcp) => 9,
        PlanPolicy::Buckets(HashPolicy::OvsSlb) => 10,
        PlanPolicy::Buckets(HashPolicy::Layer23) => 11,
        PlanPolicy::Buckets(HashPolicy::Layer2) => 12,
        PlanPolicy::Buckets(HashPolicy::Encap23) => 13,
        PlanPolicy::Buckets(HashPolicy::Encap34) => 14,
        PlanPolicy::Buckets(HashPolicy::VlanSrcMac) => 15,
        PlanPolicy::Stripe => 16,
        PlanPolicy::RoundRobin => 17,
    }
}

pub(super) fn build(pl: &Planner, table: &HashMap<FlowKey, Entry, BuildKeyHasher>) -> Plan {
    let cfg = &pl.config;
    let n = cfg.members();
    let speeds = &cfg.speeds_gbps;
    let total = pl.stats.bytes;

    // Elephants: the largest tracked flows.
    let mut big: Vec<(&FlowKey, &Entry)> = table.iter().collect();
    let k = cfg.elephants.min(big.len());
    if k > 0 {
        big.select_nth_unstable_by(k - 1, |a, b| {
            b.1.total.bytes.cmp(&a.1.total.bytes).then(a.0.cmp(b.0))
        });
    }
    big.truncate(k);
    big.sort_by(|a, b| b.1.total.bytes.cmp(&a.1.total.bytes).then(a.0.cmp(b.0)));
    let elephants: Vec<FlowSummary> = big
        .iter()
        .map(|(key, e)| FlowSummary {
            key: **key,
            packets: e.total.packets,
            bytes: e.total.bytes,
        })
        .collect();
    let is_elephant = |e: &FlowSummary| {
        total > 0 && e.bytes as f64 >= ELEPHANT_FRACTION_OF_FAIR_SHARE * total as f64 / n as f64
    };

    let mut policies = Vec::new();
    for &policy in &cfg.policies {
        if policies.iter().any(|p: &PolicyPlan| p.policy == policy) {
            continue;
        }
        let plan = match policy {
            PlanPolicy::Hash(h) => {
                let slot = pl
                    .hash_policies
                    .iter()
                    .position(|(x, _)| *x == h)
                    .expect("every hash policy has a slot");
                hash_plan(pl, table, policy, slot, &elephants, &is_elephant)
            }
            PlanPolicy::RoundRobin => rr_plan(pl, table, &elephants),
            PlanPolicy::Stripe => stripe_plan(pl, table, &elephants),
            PlanPolicy::Buckets(h) => {
                let acc = &pl
                    .bucket_accs
                    .iter()
                    .find(|(x, _)| *x == h)
                    .expect("every bucket policy has tables")
                    .1;
                bucket_plan(pl, table, policy, acc, &elephants, &is_elephant)
            }
        };
        policies.push(plan);
    }

    // Rank: bound (to 0.5% of the bond's speed), then no reordering risk, then evenness, then
    // the simpler policy.
    let bond_speed: f64 = speeds.iter().sum();
    let bucket =
        |p: &PolicyPlan| (p.dist.throughput_bound_gbps / bond_speed * 200.0).round() as i64;
    policies.sort_by(|a, b| {
        bucket(b)
            .cmp(&bucket(a))
            .then(a.has_reorder_risk().cmp(&b.has_reorder_risk()))
            .then(hundredths(a.dist.imbalance).cmp(&hundredths(b.dist.imbalance)))
            .then(preference(a.policy).cmp(&preference(b.policy)))
    });
    for (i, p) in policies.iter_mut().enumerate() {
        p.rank = i + 1;
    }

    let recommendation = recommend(&policies, &elephants, total, n);

    let mut return_path: Vec<ReturnPath> = SwitchHash::ALL
        .iter()
        .zip(&pl.switch_accs)
        .map(|(&hash, acc)| {
            let hist = acc.hist(n);
            let mut flows = vec![0u64; n];
            for key in table.keys() {
                flows[hist.m.index(hash.hash_return(key))] += 1;
            }
            ReturnPath {
                hash,
                dist: Distribution::new(loads_to_members(&hist.cells, &flows, speeds)),
            }
        })
        .collect();
    if let Some(i) = return_path.iter().position(|r| r.hash == cfg.switch_hash) {
        let chosen = return_path.remove(i);
        return_path.insert(0, chosen);
    }

    let mut tunnels: Vec<TunnelSummary> = pl
        .tunnels
        .iter()
        .map(|(t, acc)| TunnelSummary {
            tunnel: *t,
            packets: acc.load.packets,
            bytes: acc.load.bytes,
            outer_flows: table.keys().filter(|k| k.tunnel() == Some(*t)).count() as u64,
            inner_flows: acc.inner.len() as u64,
            inner_capped: acc.inner_capped,
        })
        .collect();
    tunnels.sort_by(|a, b| b.bytes.cmp(&a.bytes).then(a.tunnel.cmp(&b.tunnel)));

    let mut plan = Plan {
        input: pl.stats,
        flows: table.len() as u64,
        max_flows: cfg.max_flows,
        speeds_gbps: speeds.clone(),
        policies,
        recommendation,
        findings: Vec::new(),
        elephants,
        switch_hash: cfg.switch_hash,
        return_path,
        tunnels,
    };
    plan.findings = findings::find(&plan, pl, table);
    plan
}

fn hash_plan(
    pl: &Planner,
    table: &HashMap<FlowKey, Entry, BuildKeyHasher>,
    policy: PlanPolicy,
    slot: usize,
    elephants: &[FlowSummary],
    is_elephant: &dyn Fn(&FlowSummary) -> bool,
) -> PolicyPlan {
    let cfg = &pl.config;
    let n = cfg.members();
    let speeds = &cfg.speeds_gbps;
    let acc = &pl.hash_accs[slot];
    let flows_for = |hist: &super::Hist| {
        let mut flows = vec![0u64; hist.n];
        for e in table.values() {
            flows[hist.m.index(e.hashes[slot])] += 1;
        }
        flows
    };
    let main = acc.hist(n);
    let dist = Distribution::new(loads_to_members(&main.cells, &flows_for(main), speeds));
    let sweep = cfg
        .sweep
        .iter()
        .map(|&c| sweep_point(c, &acc.hist(c).cells, speeds))
        .collect();
    let (mut split_flows, mut split_bytes) = (0, 0);
    for e in table.values() {
        if e.split & (1 << slot) != 0 {
            split_flows += 1;
            split_bytes += e.total.bytes;
        }
    }
    // Elephants by member.
    let mut by_member: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (i, el) in elephants.iter().enumerate() {
        if !is_elephant(el) {
            continue;
        }
        if let Some(e) = table.get(&el.key) {
            by_member[main.m.index(e.hashes[slot])].push(i);
        }
    }
    // A collision matters when another member carries no elephant at all.
    let idle = by_member.iter().any(|v| v.is_empty());
    let collisions = by_member
        .into_iter()
        .enumerate()
        .filter(|(_, v)| idle && v.len() >= 2)
        .map(|(member, elephants)| Collision { member, elephants })
        .collect();
    let elephant_hashes: Vec<Option<u32>> = elephants
        .iter()
        .map(|el| table.get(&el.key).map(|e| e.hashes[slot]))
        .collect();
    let failures = match &acc.fail {
        Some(f) => failures(f, table, slot, speeds, &elephant_hashes),
        None => Vec::new(),
    };
    PolicyPlan {
        split_flows,
        split_bytes,
        collisions,
        ..unranked(policy, dist, sweep, failures)
    }
}

fn bucket_plan(
    pl: &Planner,
    table: &HashMap<FlowKey, Entry, BuildKeyHasher>,
    policy: PlanPolicy,
    acc: &BucketAcc,
    elephants: &[FlowSummary],
    is_elephant: &dyn Fn(&FlowSummary) -> bool,
) -> PolicyPlan {
    let cfg = &pl.config;
    let n = cfg.members();
    let speeds = &cfg.speeds_gbps;
    let slot = acc.slot;
    let main = acc.main();
    let dist = Distribution::new(loads_to_members(&main.loads, &main.flows, speeds));
    let sweep = cfg
        .sweep
        .iter()
        .map(|&c| sweep_point(c, &acc.run(c).loads, speeds))
        .collect();
    let (mut split_flows, mut split_bytes) = (0, 0);
    for e in table.values() {
        if e.split & (1 << (8 + slot)) != 0 {
            split_flows += 1;
            split_bytes += e.total.bytes;
        }
    }
    // Elephants by the member their bucket ends on.
    let member_at_end = |h: u32| main.buckets.member_of(h).map_or(0, |p| usize::from(p.0));
    let mut by_member: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (i, el) in elephants.iter().enumerate() {
        if !is_elephant(el) {
            continue;
        }
        if let Some(e) = table.get(&el.key) {
            by_member[member_at_end(e.hashes[slot])].push(i);
        }
    }
    let idle = by_member.iter().any(|v| v.is_empty());
    let collisions = by_member
        .into_iter()
        .enumerate()
        .filter(|(_, v)| idle && v.len() >= 2)
        .map(|(member, elephants)| Collision { member, elephants })
        .collect();
    let failures = acc
        .failures()
        .map(|run| bucket_failure(acc, run, table, speeds, elephants))
        .collect();
    let mut buckets = vec![0u16; n];
    for b in 0..=u8::MAX {
        if let Some(p) = main.buckets.member_of_bucket(b) {
            buckets[usize::from(p.0)] += 1;
        }
    }
    let iv = &acc.intervals;
    PolicyPlan {
        split_flows,
        split_bytes,
        collisions,
        rebalancing: Some(Rebalancing {
            interval: cfg.balance.rebalance_interval,
            counters: BalanceCounters {
                rebalances: main.buckets.counters().rebalances + main.skipped,
                ..*main.buckets.counters()
            },
            buckets,
            intervals: iv.count,
            first_interval_imbalance: iv.first,
            last_interval_imbalance: iv.last,
            replayed: acc.replayed,
        }),
        ..unranked(policy, dist, sweep, failures)
    }
}

/// A member failing at time 0 in a bucket table: only its buckets move.
fn bucket_failure(
    acc: &BucketAcc,
    run: &Run,
    table: &HashMap<FlowKey, Entry, BuildKeyHasher>,
    speeds: &[f64],
    elephants: &[FlowSummary],
) -> Failure {
    let (failed, moved) = run.failure.expect("a failure table");
    let moves = |h: u32| moved[acc.bucket_of(h)];
    let flows_moved = table.values().filter(|e| moves(e.hashes[acc.slot])).count() as u64;
    let bytes_moved = acc
        .per_bucket
        .iter()
        .zip(moved)
        .filter(|(_, m)| *m)
        .fold(0u64, |a, (l, _)| a.saturating_add(l.bytes));
    let elephants_moved = elephants_moved(elephants, table, |e| moves(e.hashes[acc.slot]));
    let members = (0..run.count)
        .filter(|&i| i != failed)
        .map(|i| member_load(i, &run.loads[i], run.flows[i], speeds))
        .collect();
    own_failure(failed, members, flows_moved, bytes_moved, elephants_moved)
}

fn failures(
    f: &super::FailHist,
    table: &HashMap<FlowKey, Entry, BuildKeyHasher>,
    slot: usize,
    speeds: &[f64],
    elephant_hashes: &[Option<u32>],
) -> Vec<Failure> {
    let n = f.n;
    let m1 = n - 1;
    // Tracked flows per cell, the same cells as the traffic.
    let mut flow_cells = vec![0u64; n * m1];
    for e in table.values() {
        flow_cells[f.cell(e.hashes[slot])] += 1;
    }
    (0..n)
        .map(|failed| {
            let survivors: Vec<usize> = (0..n).filter(|&i| i != failed).collect();
            let moves = |c: usize| {
                let (a, b) = (c / m1, c % m1);
                let to = if f.ovs && a != failed {
                    a
                } else {
                    survivors[b]
                };
                (a, to)
            };
            let mut loads = vec![Load::default(); n];
            let mut flows = vec![0u64; n];
            let mut out = Failure {
                failed,
                dist: Distribution::new(Vec::new()),
                flows_moved: 0,
                bytes_moved: 0,
                collateral_flows: 0,
                collateral_bytes: 0,
                elephants_moved: elephant_hashes
                    .iter()
                    .enumerate()
                    .filter(|(_, h)| {
                        h.is_some_and(|h| {
                            let (a, to) = moves(f.cell(h));
                            a != to
                        })
                    })
                    .map(|(i, _)| i)
                    .collect(),
            };
            for a in 0..n {
                for b in 0..m1 {
                    let c = a * m1 + b;
                    let (_, to) = moves(c);
                    loads[to].add(f.cells[c].packets, f.cells[c].bytes);
                    flows[to] += flow_cells[c];
                    if to != a {
                        out.flows_moved += flow_cells[c];
                        out.bytes_moved += f.cells[c].bytes;
                        if a != failed {
                            out.collateral_flows += flow_cells[c];
                            out.collateral_bytes += f.cells[c].bytes;
                        }
                    }
                }
            }
            let members = survivors
                .iter()
                .map(|&i| member_load(i, &loads[i], flows[i], speeds))
                .collect();
            out.dist = Distribution::new(members);
            out
        })
        .collect()
}

fn rr_plan(
    pl: &Planner,
    table: &HashMap<FlowKey, Entry, BuildKeyHasher>,
    elephants: &[FlowSummary],
) -> PolicyPlan {
    let cfg = &pl.config;
    let n = cfg.members();
    let speeds = &cfg.speeds_gbps;
    let rr = pl
        .rr
        .as_ref()
        .expect("round-robin state exists when evaluated");
    let find = |c: usize| rr.for_count(c);
    // Flows per member: those with a packet on it. `next_too[i]`: flows on member i and on
    // the member after it (where i's turns go when i fails).
    let masks = rr.mask_n == n;
    let mut flows = vec![0u64; n];
    let mut next_too = vec![0u64; n];
    for e in table.values() {
        if masks {
            for i in mask_members(e.rr_mask) {
                flows[i] += 1;
                next_too[i] += (e.rr_mask >> ((i + 1) % n)) & 1;
            }
        } else {
            // More than 64 members: no masks; a flow counts on as many members as it has
            // packets, from the first.
            let used = e.total.packets.min(n as u64) as usize;
            for f in flows.iter_mut().take(used) {
                *f += 1;
            }
        }
    }
    let (cells, (re, re_tcp)) = find(n);
    let dist = Distribution::new(loads_to_members(&cells, &flows, speeds));
    let packets = pl.stats.packets;
    let sweep = cfg
        .sweep
        .iter()
        .map(|&c| sweep_point(c, &find(c).0, speeds))
        .collect();
    let failures = if masks && (2..=super::MAX_FAILURE_MEMBERS).contains(&n) {
        (0..n)
            .map(|failed| {
                // The failed member's turns go to the next member (the walk to a usable one).
                let to = (failed + 1) % n;
                let members = (0..n)
                    .filter(|&i| i != failed)
                    .map(|i| {
                        let mut l = cells[i];
                        let mut f = flows[i];
                        if i == to {
                            l.add(cells[failed].packets, cells[failed].bytes);
                            f += flows[failed] - next_too[failed];
                        }
                        member_load(i, &l, f, speeds)
                    })
                    .collect();
                let elephants_moved =
                    elephants_moved(elephants, table, |e| (e.rr_mask >> failed) & 1 != 0);
                own_failure(
                    failed,
                    members,
                    flows[failed],
                    cells[failed].bytes,
                    elephants_moved,
                )
            })
            .collect()
    } else {
        Vec::new()
    };
    PolicyPlan {
        reorder: Some(Reorder {
            packets: re,
            tcp_packets: re_tcp,
            share: if packets == 0 {
                0.0
            } else {
                re as f64 / packets as f64
            },
        }),
        ..unranked(PlanPolicy::RoundRobin, dist, sweep, failures)
    }
}

/// `stripe`: the daemon's byte-weighted round robin ([`super::stripe`]).
fn stripe_plan(
    pl: &Planner,
    table: &HashMap<FlowKey, Entry, BuildKeyHasher>,
    elephants: &[FlowSummary],
) -> PolicyPlan {
    let cfg = &pl.config;
    let n = cfg.members();
    let speeds = &cfg.speeds_gbps;
    let acc = pl
        .stripe
        .as_ref()
        .expect("stripe state exists when evaluated");
    // Flows per member: those with a packet on it.
    let mut flows = vec![0u64; n];
    if acc.masks {
        for e in table.values() {
            for i in mask_members(e.stripe_mask) {
                flows[i] += 1;
            }
        }
    }
    let main = acc.main();
    let dist = Distribution::new(loads_to_members(main, &flows, speeds));
    let sweep = cfg
        .sweep
        .iter()
        .map(|&c| {
            let loads = StripeAcc::sweep(c, speeds, pl.stats.packets, pl.stats.bytes);
            sweep_point(c, &loads, speeds)
        })
        .collect();
    let failures = (0..n)
        .map_while(|failed| acc.failure(failed).map(|loads| (failed, loads)))
        .map(|(failed, loads)| {
            // Every flow keeps being striped over the survivors; those with frames on the
            // failed member move (none is reordered at the host). The survivors' runs keep
            // no per-flow members, so their flow counts are left at 0.
            let moved_flows = table
                .values()
                .filter(|e| (e.stripe_mask >> failed) & 1 != 0)
                .count() as u64;
            let members = (0..n)
                .filter(|&i| i != failed)
                .zip(loads)
                .map(|(i, l)| member_load(i, l, 0, speeds))
                .collect();
            let elephants_moved =
                elephants_moved(elephants, table, |e| (e.stripe_mask >> failed) & 1 != 0);
            own_failure(
                failed,
                members,
                if acc.masks { moved_flows } else { 0 },
                main[failed].bytes,
                elephants_moved,
            )
        })
        .collect();
    unranked(PlanPolicy::Stripe, dist, sweep, failures)
}

fn recommend(
    policies: &[PolicyPlan],
    elephants: &[FlowSummary],
    total: u64,
    n: usize,
) -> Option<Recommendation> {
    if total == 0 {
        return None;
    }
    // The best policy without reordering that works against any peer; `stripe` (lagd at both
    // ends) only when nothing else without reordering was evaluated.
    let best = policies
        .iter()
        .find(|p| p.reorder.is_none() && p.policy.needs().is_none())
        .or_else(|| policies.iter().find(|p| p.reorder.is_none()))
        .or_else(|| policies.first())?;
    let d = &best.dist;
    let busiest = d.members[d.busiest()].bytes as f64 / total as f64 * 100.0;
    let speed = d.speed_gbps();
    let name = best.policy.name();
    let top = elephants
        .first()
        .map_or(0.0, |e| e.bytes as f64 / total as f64);
    let mut reason = if n == 1 {
        format!(
            "With one member every policy sends all traffic over it; {name} is the simplest choice."
        )
    } else if d.imbalance <= 1.05 {
        format!(
            "{name} spreads this traffic evenly over all {n} members (imbalance {:.2}), so the bond can deliver {:.1} of {:.1} Gbit/s.",
            d.imbalance, d.throughput_bound_gbps, speed
        )
    } else if top > 1.0 / n as f64 && best.policy.hash().is_some() {
        format!(
            "No hash policy can split the largest flow ({:.0}% of the bytes), and {name} does best around it: its busiest member carries {busiest:.0}% of the bytes, so the bond can deliver {:.1} of {:.1} Gbit/s.",
            top * 100.0,
            d.throughput_bound_gbps,
            speed
        )
    } else {
        format!(
            "{name} spreads this traffic best: its busiest member carries {busiest:.0}% of the bytes (imbalance {:.2}), so the bond can deliver {:.1} of {:.1} Gbit/s.",
            d.imbalance, d.throughput_bound_gbps, speed
        )
    };
    if let Some(need) = best.policy.needs() {
        reason.pop();
        write!(reason, "; it {need}.").expect("a String");
    }
    // Stripe, when evaluated and clearly better: it needs lagd at both ends, so it is a note.
    let stripe_note = policies
        .iter()
        .find(|p| p.policy.needs().is_some() && p.policy != best.policy)
        .filter(|s| s.dist.throughput_bound_gbps > d.throughput_bound_gbps * 1.1)
        .map(|s| {
            format!(
                "With lagd in mode=stripe at both ends, {} would deliver {:.1} Gbit/s, and its receiver puts every frame back in order.",
                s.policy, s.dist.throughput_bound_gbps
            )
        });
    let rr_note = policies
        .iter()
        .find(|p| p.reorder.is_some())
        .filter(|rr| rr.dist.throughput_bound_gbps > d.throughput_bound_gbps * 1.1)
        .map(|rr| {
            let re = rr.reorder.map_or(0.0, |r| r.share * 100.0);
            format!(
                "balance-rr would deliver {:.1} Gbit/s, but {re:.0}% of packets would leave on another member than the previous packet of their flow and may arrive out of order.",
                rr.dist.throughput_bound_gbps
            )
        })
        .or_else(|| {
            (best.split_flows > 0).then(|| {
                format!(
                    "{} flows have frames that {name} sends on different members (fragments, usually), which may reorder them.",
                    best.split_flows
                )
            })
        });
    let note = match (stripe_note, rr_note) {
        (Some(a), Some(b)) => Some(format!("{a} {b}")),
        (a, b) => a.or(b),
    };
    Some(Recommendation {
        policy: best.policy,
        reason,
        note,
    })
}

/// Bytes as `1.5 MB` (SI units, one decimal; plain bytes below 1000).
pub fn human_bytes(b: u64) -> String {
    const UNITS: [&str; 6] = ["kB", "MB", "GB", "TB", "PB", "EB"];
    if b < 1000 {
        return format!("{b} B");
    }
    let mut v = b as f64;
    let mut u = 0;
    v /= 1000.0;
    while v >= 999.95 && u + 1 < UNITS.len() {
        v /= 1000.0;
        u += 1;
    }
    format!("{v:.1} {}", UNITS[u])
}
