//! The end of the input: [`Planner::finish`] computes each policy's figures from the
//! accumulated counters, ranks the policies, recommends one and looks for pathologies
//! ([`findings`]), giving the [`Plan`].

use core::fmt::Write as _;
use std::collections::HashMap;

use super::buckets::{BucketAcc, Run};
use super::config::{MAX_FAILURE_MEMBERS, speed_for};
use super::findings;
use super::flow::{BuildKeyHasher, FlowKey};
use super::hist::{FailHist, Hist};
use super::load::Load;
use super::planner::{Entry, Planner};
use super::policy::PlanPolicy;
use super::report::{
    Collision, Confidence, Distribution, ELEPHANT_FRACTION_OF_FAIR_SHARE, Failure, FlowSummary,
    MIN_DURATION_S, MIN_FLOWS_PER_MEMBER, MIN_PACKETS, MemberLoad, Plan, PolicyPlan, Rebalancing,
    Recommendation, Reorder, ReturnPath, SampleVerdict, SweepPoint, TunnelSummary,
};
use super::stripe::StripeAcc;
use super::switch::SwitchHash;
use crate::balance::BalanceCounters;
use crate::hash::HashPolicy;

impl Planner {
    /// Ends the input and computes the report.
    pub fn finish(mut self) -> Plan {
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
        build(&self, &table)
    }
}

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
        cannot_judge: None,
    }
}

/// Why the input cannot judge `policy` (see [`PolicyPlan::cannot_judge`]): more than half of
/// it lacks the destination MAC (or the source MAC) that the policy hashes.
fn cannot_judge(policy: PlanPolicy, st: &super::input::InputStats) -> Option<String> {
    let (units, no_dst, no_src, what) = if st.rows > 0 {
        (
            st.rows,
            st.rows_without_macs,
            st.rows_without_macs,
            "the flow list has no MAC addresses",
        )
    } else {
        (
            st.packets,
            st.rebuilt_ethernet,
            st.rebuilt_without_src_mac,
            "the capture holds no Ethernet header (Linux cooked or raw IP): no destination MAC",
        )
    };
    let h = policy.hash()?;
    let dst = matches!(
        h,
        HashPolicy::Layer2 | HashPolicy::Layer23 | HashPolicy::Encap23
    );
    let src = dst || matches!(h, HashPolicy::VlanSrcMac | HashPolicy::OvsSlb);
    if units == 0 {
        return None;
    }
    if dst && no_dst * 2 > units {
        Some(format!("cannot be judged from this input: {what}"))
    } else if src && no_src * 2 > units {
        Some(format!(
            "cannot be judged from this input: {what}, and no source MAC"
        ))
    } else {
        None
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

fn build(pl: &Planner, table: &HashMap<FlowKey, Entry, BuildKeyHasher>) -> Plan {
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

    for p in &mut policies {
        p.cannot_judge = cannot_judge(p.policy, &pl.stats);
    }
    // Rank: what the input can judge first, then bound (to 0.5% of the bond's speed), then no
    // reordering risk, then evenness, then the simpler policy.
    let bond_speed: f64 = speeds.iter().sum();
    let bucket =
        |p: &PolicyPlan| (p.dist.throughput_bound_gbps / bond_speed * 200.0).round() as i64;
    policies.sort_by(|a, b| {
        a.cannot_judge
            .is_some()
            .cmp(&b.cannot_judge.is_some())
            .then(bucket(b).cmp(&bucket(a)))
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

    let mut recommendation = recommendation;
    if let Some(r) = &mut recommendation {
        let best_return = return_path
            .iter()
            .min_by(|a, b| {
                b.dist
                    .throughput_bound_gbps
                    .total_cmp(&a.dist.throughput_bound_gbps)
                    .then(a.dist.imbalance.total_cmp(&b.dist.imbalance))
            })
            .map(|best| (best.hash, best.dist.imbalance));
        r.settings = super::apply::settings(r.policy, n, best_return);
    }
    let mut plan = Plan {
        input: pl.stats,
        interface_names: Vec::new(),
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
        sample: SampleVerdict::default(),
    };
    plan.findings = findings::find(&plan, pl, table);
    // A finding about policies the input cannot judge says nothing: drop those policies from
    // it, and the finding when none is left.
    let unjudged: Vec<PlanPolicy> = plan
        .policies
        .iter()
        .filter(|p| p.cannot_judge.is_some())
        .map(|p| p.policy)
        .collect();
    plan.findings.retain_mut(|f| {
        // `no-macs` says why they cannot be judged: it stays.
        if f.policies.is_empty() || f.kind == "no-macs" {
            return true;
        }
        f.policies.retain(|p| !unjudged.contains(p));
        !f.policies.is_empty()
    });
    plan.sample = verdict(pl, table, &plan);
    if !plan.sample.too_small.is_empty() {
        plan.recommendation = None;
    }
    plan
}

/// Whether the input is big enough to judge ([`SampleVerdict::too_small`]), and the
/// recommendation's confidence from split halves of the flows.
fn verdict(
    pl: &Planner,
    table: &HashMap<FlowKey, Entry, BuildKeyHasher>,
    plan: &Plan,
) -> SampleVerdict {
    let n = plan.members();
    let st = &pl.stats;
    if st.packets == 0 {
        // Nothing to judge at all: the report says there is no data traffic.
        return SampleVerdict::default();
    }
    let mut too_small = Vec::new();
    match st.sflow {
        // Sampled input: the samples are what was seen.
        Some(sf) if sf.samples < MIN_PACKETS => too_small.push(format!(
            "only {} sFlow samples (at least {MIN_PACKETS} are needed)",
            sf.samples
        )),
        Some(_) => {}
        // Sampled flow records: the packets they counted are the sample.
        None if st.ipfix.is_some_and(|x| {
            x.rate_range.is_some_and(|r| r.1 > 1) && x.sampled_packets < MIN_PACKETS
        }) =>
        {
            too_small.push(format!(
                "only {} sampled packets in the IPFIX records (at least {MIN_PACKETS} are needed)",
                st.ipfix.map_or(0, |x| x.sampled_packets)
            ))
        }
        None if st.packets < MIN_PACKETS => too_small.push(format!(
            "only {} data packets (at least {MIN_PACKETS} are needed)",
            st.packets
        )),
        None => {}
    }
    let min_flows = (MIN_FLOWS_PER_MEMBER * n as u64).max(4);
    // Tunnelled flows count by their inner flows (the encap policies see those).
    let inner: u64 = plan.tunnels.iter().map(|t| t.inner_flows).sum();
    let flows = plan.flows.max(inner) + u64::from(st.untracked.packets > 0);
    if flows < min_flows {
        too_small.push(format!(
            "only {flows} flows: with {n} members at least {min_flows} are needed, or the spread is chance"
        ));
    }
    if st.rows == 0 {
        if let Some((a, b)) = st.time_span {
            let secs = (b - a) as f64 / 1e9;
            if secs < MIN_DURATION_S {
                too_small.push(format!(
                    "it spans only {secs:.3} s (at least {MIN_DURATION_S:.0} s are needed)"
                ));
            }
        }
    }
    let best_in_sample = plan.recommendation.as_ref().map(|r| r.policy);
    let confidence = match best_in_sample {
        Some(PlanPolicy::Hash(h)) if n >= 2 && too_small.is_empty() => confidence(pl, table, h),
        _ => None,
    };
    SampleVerdict {
        too_small,
        best_in_sample,
        confidence,
    }
}

/// Redoes the hash policies' ranking (by throughput bound, to 0.5% of the bond's speed) on
/// half of the tracked flows, for 4 splits of the flows into two halves, and counts the halves
/// in which `best` is still among the best.
fn confidence(
    pl: &Planner,
    table: &HashMap<FlowKey, Entry, BuildKeyHasher>,
    best: HashPolicy,
) -> Option<Confidence> {
    use core::hash::BuildHasher as _;
    const SPLITS: usize = 4;
    let cfg = &pl.config;
    let n = cfg.members();
    let slots = pl.hash_policies.len();
    let best_slot = pl.hash_policies.iter().position(|(h, _)| *h == best)?;
    // The slots of the hash policies evaluated as such (not only for a bucket policy).
    let ranked: Vec<usize> = (0..slots)
        .filter(|&s| {
            cfg.policies
                .contains(&PlanPolicy::Hash(pl.hash_policies[s].0))
        })
        .collect();
    let m = crate::hash::MemberMod::new(n)?;
    // bytes[split][half][slot][member]
    let mut bytes = vec![vec![vec![vec![0u64; n]; slots]; 2]; SPLITS];
    let hasher = BuildKeyHasher::default();
    for (key, e) in table {
        let mut x = hasher.hash_one(key);
        // Mix the bits (splitmix64's finaliser) so each split is independent.
        x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        x ^= x >> 31;
        for (split, halves) in bytes.iter_mut().enumerate() {
            let half = ((x >> split) & 1) as usize;
            for (slot, per_member) in halves[half].iter_mut().enumerate() {
                per_member[m.index(e.hashes[slot])] += e.total.bytes;
            }
        }
    }
    let bond: f64 = cfg.speeds_gbps.iter().sum();
    let bound = |per_member: &[u64]| -> f64 {
        let total: u64 = per_member.iter().sum();
        let worst = per_member
            .iter()
            .enumerate()
            .map(|(i, b)| *b as f64 / speed_for(&cfg.speeds_gbps, i))
            .fold(0.0, f64::max);
        if worst == 0.0 {
            1.0
        } else {
            total as f64 / worst / bond
        }
    };
    let (mut agreeing, mut halves) = (0, 0);
    let (mut lo, mut hi) = (f64::INFINITY, 0.0f64);
    for split in &bytes {
        for half in split {
            if half[best_slot].iter().all(|&b| b == 0) {
                continue;
            }
            halves += 1;
            let mine = bound(&half[best_slot]);
            lo = lo.min(mine);
            hi = hi.max(mine);
            let top = ranked
                .iter()
                .map(|&slot| (bound(&half[slot]) * 200.0).round() as i64)
                .max()
                .unwrap_or(0);
            if (mine * 200.0).round() as i64 >= top {
                agreeing += 1;
            }
        }
    }
    if halves == 0 {
        return None;
    }
    let level = if agreeing == halves {
        "high"
    } else if agreeing * 4 >= halves * 3 {
        "medium"
    } else {
        "low"
    };
    Some(Confidence {
        level,
        agreeing,
        halves,
        bound_range: (lo, hi),
    })
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
    let flows_for = |hist: &Hist| {
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
    f: &FailHist,
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
    let failures = if masks && (2..=MAX_FAILURE_MEMBERS).contains(&n) {
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
    let judged: Vec<&PolicyPlan> = policies
        .iter()
        .filter(|p| p.cannot_judge.is_none())
        .collect();
    let best = judged
        .iter()
        .find(|p| p.reorder.is_none() && p.policy.needs().is_none())
        .or_else(|| judged.iter().find(|p| p.reorder.is_none()))
        .or_else(|| judged.first())
        .copied()?;
    let d = &best.dist;
    let busiest = d.members[d.busiest()].bytes as f64 / total as f64 * 100.0;
    let speed = d.speed_gbps();
    // A hash that belongs to a mode (ovs-tcp, ovs-slb) is named as that mode.
    let name = match best.policy {
        PlanPolicy::Hash(HashPolicy::OvsTcp | HashPolicy::OvsSlb) => format!(
            "{} (the {} hash)",
            super::apply::applied_name(best.policy),
            best.policy.name()
        ),
        p => p.name().to_owned(),
    };
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
        settings: Vec::new(),
    })
}
