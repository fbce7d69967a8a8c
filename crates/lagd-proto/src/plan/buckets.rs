//! The bucket policies: frames through [`crate::balance::Buckets`], the daemon's own table.
//!
//! A bucket policy ([`super::PlanPolicy::Buckets`]) sends each frame's transmit hash through
//! the 256-bucket table that lagd uses for `balance-tcp`, `balance-slb`, and balance-xor or
//! 802.3ad with `distribution=buckets`. Which member a frame takes depends on the table's
//! history (buckets move with load), so the planner cannot fold a flow's frames into one count
//! as it does for the hash policies: it keeps one [`Buckets`] per simulated table and feeds it
//! every frame, in capture order, at the frame's capture time, exactly as the daemon would.
//!
//! # Captures
//! The clock is the capture's: microseconds since the first packet's timestamp (timestamps
//! that go backwards count as the latest seen so far). Before a frame is sent,
//! [`Buckets::handle_timeout`] runs for every rebalance that [`Buckets::poll_timeout`] says is
//! due by the frame's time, at its due time, as the daemon's timer would fire. An idle stretch
//! longer than [`MAX_CATCH_UP`] intervals skips the rebalances in between (they find every
//! load decayed to nothing and move nothing) and runs the last one due; the skipped ones still
//! count in the reported rebalances. Members are
//! `PortId(0..n)`, weighted by their speed in Mb/s, all joining at time 0.
//!
//! For the configured member count the planner also records, per rebalance interval, the
//! bytes each member actually sent, so the report can compare the first complete interval
//! (the table as first assigned) with the last (after the rebalancer acted).
//!
//! # Flow lists
//! A flow list has no timing, so it is taken as a **steady mix repeated every rebalance
//! interval**: its rows are added up per bucket, and the whole mix is sent at the start of each
//! interval (one burst per bucket), with a rebalance between intervals, until a rebalance plans
//! no move (or after [`MAX_REPLAY_ROUNDS`] intervals). The report gives the last interval, the
//! table the rebalancer settled on. With rebalancing off, one interval is sent. Rates are taken
//! as the mix's bytes per interval, so only the absolute floor of
//! [`BalanceConfig::min_overload_rate`] depends on this choice.
//!
//! # What-ifs
//! - Other member counts: one more table per count, fed the same frames.
//! - A member failing (up to [`MAX_BUCKET_FAILURE_MEMBERS`] members): one table per member,
//!   which fails at time 0, right after the first assignment: only its buckets move (spread by
//!   the table's own rule, nothing else moves) and the rebalancer then runs as usual on the
//!   survivors. Flows and bytes moved are those of the buckets the failure moved.
//!
//! # Cost
//! Per frame and table: [`Buckets::member_for`] (a lookup and two stores) and a counter; no
//! allocation. Rebalancing runs once per interval per table.

use crate::balance::{BUCKETS, BalanceConfig, Buckets, bucket};
use crate::port::PortId;
use crate::time::Instant;

use super::config::speed_for;
use super::load::Load;

/// A failure is evaluated per member for bucket policies up to this many members (each costs a
/// table fed with every frame).
pub const MAX_BUCKET_FAILURE_MEMBERS: usize = 16;

/// Flow lists: the most rebalance intervals replayed.
pub const MAX_REPLAY_ROUNDS: usize = 64;

/// Rebalances run back to back, without a frame in between, before the rest of an idle
/// stretch is skipped.
pub const MAX_CATCH_UP: u32 = 64;

/// Flow lists: the most [`Buckets::member_for`] calls per bucket and interval; larger mixes are
/// scaled down for the table (loads are compared with each other, not with a fixed figure,
/// except for the overload floor, far below such rates).
const MAX_CHUNKS: u64 = 1024;

/// A member's weight for [`Buckets::set_members`]: its speed in Mb/s, at least 1 (0 would mean
/// "unknown" and weigh all members equally).
pub fn weight_mbps(speed_gbps: f64) -> u32 {
    let w = (speed_gbps * 1000.0).round();
    if w >= f64::from(u32::MAX) {
        u32::MAX
    } else if w >= 1.0 {
        w as u32
    } else {
        1
    }
}

/// The members of a bond of `count` members: `PortId(i)` with the speed of member `i`
/// (members beyond the configured ones take the first one's, as in the sweep).
fn members(count: usize, speeds: &[f64]) -> Vec<(PortId, u32)> {
    (0..count)
        .map(|i| {
            let s = speed_for(speeds, i);
            (PortId(u16::try_from(i).unwrap_or(u16::MAX)), weight_mbps(s))
        })
        .collect()
}

/// One simulated table and what it sent.
#[derive(Debug, Clone)]
pub(super) struct Run {
    /// The member count.
    pub(super) count: usize,
    pub(super) buckets: Buckets,
    /// Per member index.
    pub(super) loads: Vec<Load>,
    /// Tracked flows per member of their first frame.
    pub(super) flows: Vec<u64>,
    /// Failure runs: the failed member and the buckets its failure moved.
    pub(super) failure: Option<(usize, [bool; BUCKETS])>,
    /// Rebalances skipped in long idle stretches (see [`MAX_CATCH_UP`]).
    pub(super) skipped: u64,
}

impl Run {
    fn new(config: BalanceConfig, count: usize, speeds: &[f64]) -> Self {
        let mut buckets = Buckets::new(config);
        buckets.set_members(Instant::ZERO, &members(count, speeds));
        Self {
            count,
            buckets,
            loads: vec![Load::default(); count],
            flows: vec![0; count],
            failure: None,
            skipped: 0,
        }
    }

    /// A table of `count` members of which `failed` fails at time 0, after the first
    /// assignment.
    fn failing(config: BalanceConfig, count: usize, speeds: &[f64], failed: usize) -> Self {
        let mut run = Self::new(config, count, speeds);
        let before: Vec<Option<PortId>> = (0..BUCKETS)
            .map(|b| run.buckets.member_of_bucket(b as u8))
            .collect();
        let mut survivors = members(count, speeds);
        survivors.remove(failed);
        run.buckets.set_members(Instant::ZERO, &survivors);
        let mut moved = [false; BUCKETS];
        for (b, m) in moved.iter_mut().enumerate() {
            *m = run.buckets.member_of_bucket(b as u8) != before[b];
        }
        run.failure = Some((failed, moved));
        run
    }

    /// Sends one frame; the member index it took.
    #[inline(always)]
    fn frame(&mut self, now: Instant, hash: u32, len: u32, bytes: u64, new_flow: bool) -> usize {
        let i = self
            .buckets
            .member_for(now, hash, len)
            .map_or(0, |p| usize::from(p.0));
        self.loads[i].add(1, bytes);
        if new_flow {
            self.flows[i] += 1;
        }
        i
    }

    /// Runs the rebalances due by `now`; `on_rebalance` is called after each.
    fn catch_up(&mut self, now: Instant, mut on_rebalance: impl FnMut()) {
        let interval = self.buckets.config().rebalance_interval;
        let mut runs = 0u32;
        while let Some(t) = self.buckets.poll_timeout().filter(|&t| t <= now) {
            if runs == MAX_CATCH_UP {
                // Only idle intervals left: run the last one due.
                let step = u64::try_from(interval.as_micros())
                    .unwrap_or(u64::MAX)
                    .max(1);
                let k = (now.as_micros() - t.as_micros()) / step;
                let last = Instant::from_micros(t.as_micros() + k * step);
                self.buckets.handle_timeout(last);
                self.skipped += k;
                on_rebalance();
                break;
            }
            self.buckets.handle_timeout(t);
            on_rebalance();
            runs += 1;
        }
    }
}

/// Per-interval figures of the configured table.
#[derive(Debug, Clone, Default)]
pub(super) struct Intervals {
    /// Bytes per member since the last rebalance.
    cur: Vec<u64>,
    /// Complete intervals with traffic.
    pub(super) count: u64,
    /// Imbalance per unit of speed of the first and the last of them.
    pub(super) first: Option<f64>,
    pub(super) last: Option<f64>,
}

impl Intervals {
    fn close(&mut self, speeds: &[f64]) {
        if let Some(imb) = speed_imbalance(&self.cur, speeds) {
            self.count += 1;
            self.first.get_or_insert(imb);
            self.last = Some(imb);
        }
        self.cur.fill(0);
    }
}

/// The busiest member's bytes per unit of speed over the bond's (total bytes over total
/// speed); `None` without traffic. With equal speeds: the busiest member's bytes over the mean.
pub(super) fn speed_imbalance(bytes: &[u64], speeds: &[f64]) -> Option<f64> {
    let total: u64 = bytes.iter().fold(0, |a, &b| a.saturating_add(b));
    if total == 0 {
        return None;
    }
    let speed = |i: usize| speed_for(speeds, i);
    let wsum: f64 = (0..bytes.len()).map(speed).sum();
    let worst = bytes
        .iter()
        .enumerate()
        .map(|(i, &b)| b as f64 / speed(i))
        .fold(0.0, f64::max);
    Some(worst / (total as f64 / wsum))
}

/// Flow-list rows added up by bucket.
#[derive(Debug, Clone)]
struct Rows {
    load: [Load; BUCKETS],
    /// A hash that falls in the bucket (the last row's).
    hash: [u32; BUCKETS],
    seen: [bool; BUCKETS],
    /// Tracked flows first seen in a row, by bucket.
    flows: [u64; BUCKETS],
}

/// One bucket policy's tables and counters.
#[derive(Debug, Clone)]
pub(super) struct BucketAcc {
    /// The hash slot (index into the planner's hash policies) of the policy's hash.
    pub(super) slot: usize,
    pub(super) seed: u32,
    /// Tables: first one per member count (the configured count first), then failures.
    pub(super) runs: Vec<Run>,
    /// Speeds of the configured members.
    speeds: Vec<f64>,
    /// All traffic by bucket.
    pub(super) per_bucket: [Load; BUCKETS],
    pub(super) intervals: Intervals,
    rows: Option<Box<Rows>>,
    /// The earliest rebalance due over all tables (`u64::MAX` if none).
    next_due: u64,
    /// A flow list was replayed.
    pub(super) replayed: bool,
}

impl BucketAcc {
    /// Tables for the member counts `counts` (the configured one first) and, when `failures`,
    /// one per failing member of the configured count.
    pub(super) fn new(
        config: BalanceConfig,
        slot: usize,
        counts: &[usize],
        speeds: &[f64],
        failures: bool,
    ) -> Self {
        let n = counts[0];
        let mut runs: Vec<Run> = counts
            .iter()
            .map(|&c| Run::new(config, c, speeds))
            .collect();
        if failures {
            runs.extend((0..n).map(|f| Run::failing(config, n, speeds, f)));
        }
        let mut acc = Self {
            slot,
            seed: config.seed,
            runs,
            speeds: speeds.to_vec(),
            per_bucket: [Load::default(); BUCKETS],
            intervals: Intervals {
                cur: vec![0; n],
                ..Intervals::default()
            },
            rows: None,
            next_due: u64::MAX,
            replayed: false,
        };
        acc.update_due();
        acc
    }

    fn update_due(&mut self) {
        self.next_due = self
            .runs
            .iter()
            .filter_map(|r| r.buckets.poll_timeout())
            .map(Instant::as_micros)
            .min()
            .unwrap_or(u64::MAX);
    }

    /// The table of `count` members.
    pub(super) fn run(&self, count: usize) -> &Run {
        self.runs
            .iter()
            .find(|r| r.failure.is_none() && r.count == count)
            .expect("a table exists for every member count asked for")
    }

    /// The configured table.
    pub(super) fn main(&self) -> &Run {
        &self.runs[0]
    }

    /// The failure tables.
    pub(super) fn failures(&self) -> impl Iterator<Item = &Run> {
        self.runs.iter().filter(|r| r.failure.is_some())
    }

    /// The bucket of `hash`.
    #[inline(always)]
    pub(super) fn bucket_of(&self, hash: u32) -> usize {
        usize::from(bucket(self.seed, hash))
    }

    /// Runs the rebalances due by `now` in every table.
    fn advance(&mut self, now: Instant) {
        let speeds = &self.speeds;
        let (main, rest) = self.runs.split_first_mut().expect("one table at least");
        let iv = &mut self.intervals;
        main.catch_up(now, || iv.close(speeds));
        for r in rest {
            r.catch_up(now, || {});
        }
        self.update_due();
    }

    /// Sends one frame of `bytes` with transmit hash `hash` at `now` through every table.
    #[inline]
    pub(super) fn frame(&mut self, now: Instant, hash: u32, bytes: u64, new_flow: bool) {
        if now.as_micros() >= self.next_due {
            self.advance(now);
        }
        let len = u32::try_from(bytes).unwrap_or(u32::MAX);
        let b = self.bucket_of(hash);
        self.per_bucket[b].add(1, bytes);
        let (main, rest) = self.runs.split_first_mut().expect("one table at least");
        let m = main.frame(now, hash, len, bytes, new_flow);
        self.intervals.cur[m] = self.intervals.cur[m].saturating_add(bytes);
        for r in rest {
            r.frame(now, hash, len, bytes, new_flow);
        }
    }

    /// Adds a flow-list row (replayed at [`BucketAcc::finish`]).
    pub(super) fn row(&mut self, hash: u32, packets: u64, bytes: u64, new_flow: bool) {
        let b = self.bucket_of(hash);
        self.per_bucket[b].add(packets, bytes);
        let rows = self.rows.get_or_insert_with(|| {
            Box::new(Rows {
                load: [Load::default(); BUCKETS],
                hash: [0; BUCKETS],
                seen: [false; BUCKETS],
                flows: [0; BUCKETS],
            })
        });
        rows.load[b].add(packets, bytes);
        rows.hash[b] = hash;
        rows.seen[b] = true;
        if new_flow {
            rows.flows[b] += 1;
        }
    }

    /// Ends the input at `now`: replays the flow-list rows, if any.
    pub(super) fn finish(&mut self, now: Instant) {
        self.advance(now);
        let Some(rows) = self.rows.take() else {
            return;
        };
        self.replayed = true;
        let max = rows.load.iter().map(|l| l.bytes).max().unwrap_or(0);
        let scale = max.div_ceil(MAX_CHUNKS * u64::from(u32::MAX)).max(1);
        let speeds = &self.speeds;
        for (i, run) in self.runs.iter_mut().enumerate() {
            let iv = (i == 0).then_some(&mut self.intervals);
            replay(run, &rows, scale, now, speeds, iv);
        }
    }
}

/// Sends the flow-list mix `rows` through `run` once per rebalance interval from `start`, until
/// a rebalance plans nothing; `run` keeps what it sent before plus the last interval.
fn replay(
    run: &mut Run,
    rows: &Rows,
    scale: u64,
    start: Instant,
    speeds: &[f64],
    mut iv: Option<&mut Intervals>,
) {
    let (base_loads, base_flows) = (run.loads.clone(), run.flows.clone());
    let mut now = start;
    for round in 0..MAX_REPLAY_ROUNDS {
        run.loads.clone_from(&base_loads);
        run.flows.clone_from(&base_flows);
        for b in 0..BUCKETS {
            if !rows.seen[b] {
                continue;
            }
            let mut left = rows.load[b].bytes / scale;
            let mut member = 0;
            loop {
                let chunk = u32::try_from(left).unwrap_or(u32::MAX);
                member = run
                    .buckets
                    .member_for(now, rows.hash[b], chunk)
                    .map_or(member, |p| usize::from(p.0));
                left -= u64::from(chunk);
                if left == 0 {
                    break;
                }
            }
            run.loads[member].add(rows.load[b].packets, rows.load[b].bytes);
            run.flows[member] += rows.flows[b];
            if let Some(iv) = iv.as_deref_mut() {
                iv.cur[member] = iv.cur[member].saturating_add(rows.load[b].bytes);
            }
        }
        if let Some(iv) = iv.as_deref_mut() {
            iv.close(speeds);
        }
        if round + 1 == MAX_REPLAY_ROUNDS {
            break;
        }
        let Some(t) = run.buckets.poll_timeout() else {
            break;
        };
        let planned = run.buckets.counters().planned;
        run.buckets.handle_timeout(t);
        now = t;
        if run.buckets.counters().planned == planned {
            break;
        }
    }
}
