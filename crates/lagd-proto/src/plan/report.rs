//! The planner's result as plain data ([`Plan`]), which
//! [`Planner::finish`](super::Planner::finish) computes from the accumulated counters.
//! Rendering it (the terminal table, JSON, the HTML report) is `lagctl plan`'s job, in the
//! `lagd` crate.

use core::time::Duration;

use super::flow::{FlowKey, Tunnel};
use super::input::InputStats;
use super::policy::PlanPolicy;
use super::switch::SwitchHash;
use crate::balance::BalanceCounters;

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

/// The switch's return path under one switch hash.
#[derive(Debug, Clone, PartialEq)]
pub struct ReturnPath {
    /// The switch hash (a generic XOR fold: see [`super::switch`]).
    pub hash: SwitchHash,
    /// The spread over the links.
    pub dist: Distribution,
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
    pub(super) fn new(members: Vec<MemberLoad>) -> Self {
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
    /// Why the input cannot judge this policy (it hashes fields most of the input lacks: MACs
    /// in a Linux cooked or raw IP capture, or a flow list without MACs). Such a policy is
    /// ranked after every other and never recommended; its figures are shown as computed
    /// with the missing fields zero.
    pub cannot_judge: Option<String>,
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
    /// The exact settings that apply it (see [`super::apply::settings`]), the switch's for the
    /// return path last.
    pub settings: Vec<super::apply::Setting>,
}

/// How sure the recommendation is: how often the recommended hash policy is still among the
/// best when the ranking is redone on half of the flows (each flow in one half or the other by
/// a hash of its key, for several such splits).
#[derive(Debug, Clone, PartialEq)]
pub struct Confidence {
    /// `high` (best in every half), `medium` (in at least three quarters), or `low`.
    pub level: &'static str,
    /// Halves in which the recommended policy is among the best hash policies.
    pub agreeing: usize,
    /// Halves tried.
    pub halves: usize,
    /// The lowest and highest bound of the recommended policy over the halves, as a share of
    /// the bond's speed.
    pub bound_range: (f64, f64),
}

/// Whether the input is big enough to judge, and how sure the recommendation is.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SampleVerdict {
    /// Why the input is too small to judge, one plain sentence each (empty: big enough). When
    /// not empty, [`Plan::recommendation`] is `None` and `best_in_sample` names the policy
    /// that did best.
    pub too_small: Vec<String>,
    /// The policy that would be recommended, were the input big enough.
    pub best_in_sample: Option<PlanPolicy>,
    /// The recommendation's confidence (`None` when there is no recommendation, or it is not
    /// a plain hash policy, or the bond has one member).
    pub confidence: Option<Confidence>,
}

/// Fewer data packets than this: too small to judge.
pub const MIN_PACKETS: u64 = 100;
/// A capture shorter than this (seconds, from its timestamps): too short to judge.
pub const MIN_DURATION_S: f64 = 1.0;
/// Fewer tracked flows than this many per member (and at least 4): too few to judge how a
/// hash spreads them.
pub const MIN_FLOWS_PER_MEMBER: u64 = 2;

/// A pathology and what to do about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// A stable identifier (`mac-bytes-ignored`, `macs-follow-ips`, `one-peer`, `one-source`,
    /// `port-bits`, `ip-bits`, `tunnel`, `elephant`, `no-macs`).
    pub kind: &'static str,
    /// The field that causes it, in words ("MAC bytes 0-4", "TCP/UDP ports"...).
    pub field: String,
    /// The policies it hurts (empty: all of them).
    pub policies: Vec<PlanPolicy>,
    /// What happens, with numbers.
    pub message: String,
    /// What to do.
    pub advice: String,
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
    /// The recommended policy (`None` with no data traffic, or when the input is too small to
    /// judge: see [`Plan::sample`]).
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
    /// Whether the input is big enough to judge, and how sure the recommendation is.
    pub sample: SampleVerdict,
    /// The names a pcapng capture gives its interfaces (interface number, `if_name`), for
    /// [`InputStats::interfaces`](super::InputStats::interfaces).
    pub interface_names: Vec<(u32, String)>,
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
