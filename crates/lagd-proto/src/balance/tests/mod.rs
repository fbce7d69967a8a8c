//! Tests of the bucket table.
//!
//! - this file: unit tests, one behaviour each.
//! - `prop`: property tests over random weights, traffic and operation sequences.
//! - `sim`: virtual-time simulations of skewed traffic (elephants and mice, a zipf mix, mixed
//!   speeds, a member failing and returning) that check convergence and the absence of
//!   ping-pong, plus an ignored 480-run seed sweep (`cargo test --release -p lagd-proto --
//!   --ignored seed_sweep`).

mod prop;
mod sim;

use core::time::Duration;

use super::*;

/// A small deterministic generator (splitmix64) for traffic in tests.
#[derive(Debug, Clone)]
pub(super) struct Rng(pub(super) u64);

impl Rng {
    pub(super) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n`.
    pub(super) fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    /// A random 32-bit hash.
    pub(super) fn hash(&mut self) -> u32 {
        self.next() as u32
    }
}

/// Skewed random traffic for `secs` seconds from `from_ms`: 30 flows of random hashes and
/// rates, frames every 10 ms with random pauses, running the rebalancer when due. Returns the
/// time after the traffic.
pub(super) fn warm(t: &mut Buckets, seed: u64, from_ms: u64, secs: u64) -> u64 {
    let mut rng = Rng(seed);
    let flows: Vec<(u32, u32)> = (0..30)
        .map(|_| (rng.hash(), 100 + rng.below(60_000) as u32))
        .collect();
    let mut paused = vec![0u64; flows.len()];
    let mut now = from_ms;
    for _ in 0..secs * 100 {
        for (f, &(h, len)) in flows.iter().enumerate() {
            if now < paused[f] {
                continue;
            }
            if rng.below(40) == 0 {
                paused[f] = now + 20 + rng.below(200);
                continue;
            }
            t.member_for(ms(now), h, len);
        }
        now += 10;
        if t.poll_timeout().is_some_and(|due| due <= ms(now)) {
            t.handle_timeout(ms(now));
        }
    }
    now
}

pub(super) fn p(i: u16) -> PortId {
    PortId(i)
}

/// `n` members of equal speed (1 Gb/s).
pub(super) fn equal(n: u16) -> Vec<(PortId, u32)> {
    (0..n).map(|i| (p(i), 1000)).collect()
}

/// The table: each bucket's member.
pub(super) fn table(b: &Buckets) -> Vec<Option<PortId>> {
    (0..=255u8).map(|i| b.member_of_bucket(i)).collect()
}

pub(super) fn count(b: &Buckets, port: PortId) -> usize {
    table(b).iter().filter(|&&m| m == Some(port)).count()
}

pub(super) fn ms(x: u64) -> Instant {
    Instant::from_millis(x)
}

/// A hash that falls in bucket `b` under seed 0, with some high bits set.
pub(super) fn hash_in(b: u8) -> u32 {
    0x5a5a_0000 | u32::from(b)
}

fn config() -> BalanceConfig {
    BalanceConfig::default()
}

#[test]
fn defaults() {
    let c = BalanceConfig::default();
    assert_eq!(c.rebalance_interval, Duration::from_secs(10));
    assert_eq!(c.seed, 0);
    assert_eq!(c.idle_gap, Duration::from_millis(50));
    assert_eq!(c.max_moves, 16);
    assert_eq!(c.min_overload_pct, 10);
    assert_eq!(c.min_overload_rate, 125_000);
    assert_eq!(c.min_gain_pct, 20);
}

#[test]
fn bucket_is_low_byte_with_seed_zero_and_mixed_otherwise() {
    for h in [0u32, 1, 0xff, 0x100, 0xdead_beef, u32::MAX] {
        assert_eq!(bucket(0, h), h as u8);
    }
    // A seed separates hashes that share the low byte.
    let same_low: Vec<u32> = (0..64).map(|i| i << 8 | 0x17).collect();
    let mixed: std::collections::BTreeSet<u8> = same_low.iter().map(|&h| bucket(7, h)).collect();
    assert!(mixed.len() > 32, "{}", mixed.len());
    // Every bucket is reachable and the spread is fair.
    let mut n = [0u32; BUCKETS];
    for h in 0..65536u32 {
        n[usize::from(bucket(0x1234_5678, h.wrapping_mul(2_654_435_761)))] += 1;
    }
    assert!(n.iter().all(|&c| (160..=352).contains(&c)), "{n:?}");
    let t = Buckets::new(BalanceConfig {
        seed: 99,
        ..config()
    });
    assert_eq!(t.bucket_of(0xabcd), bucket(99, 0xabcd));
}

#[test]
fn no_member_no_choice() {
    let mut t = Buckets::new(config());
    assert_eq!(t.member_for(ms(0), 1, 100), None);
    assert_eq!(t.member_of(1), None);
    assert_eq!(t.poll_timeout(), None);
    t.handle_timeout(ms(100_000));
    t.set_members(ms(0), &[]);
    assert_eq!(t.member_for(ms(0), 1, 100), None);
    let s = t.snapshot();
    assert!(s.members.is_empty());
    assert_eq!(s.buckets.len(), 256);
    assert!(s.buckets.iter().all(|b| b.member.is_none()));
}

#[test]
fn equal_members_start_as_hash_modulo() {
    for n in [1u16, 2, 4, 8] {
        let mut t = Buckets::new(config());
        t.set_members(ms(0), &equal(n));
        for h in [0u32, 5, 77, 0xdead_beef, 0x1234_5677] {
            assert_eq!(t.member_of(h), Some(p((h % u32::from(n)) as u16)), "n={n}");
        }
    }
    // Three members: 86, 85, 85, interleaved.
    let mut t = Buckets::new(config());
    t.set_members(ms(0), &equal(3));
    assert_eq!(
        [count(&t, p(0)), count(&t, p(1)), count(&t, p(2))],
        [86, 85, 85]
    );
    assert_eq!(&table(&t)[..6], &[0, 1, 2, 0, 1, 2].map(|i| Some(p(i))));
    let s = t.snapshot();
    assert_eq!(s.recent_moves.len(), 1);
    assert_eq!(s.recent_moves[0].reason, MoveReason::Initial);
    assert_eq!(s.counters.moves(), 0);
}

#[test]
fn weighted_initial_shares() {
    let mut t = Buckets::new(config());
    t.set_members(ms(0), &[(p(0), 10_000), (p(1), 1000), (p(2), 25_000)]);
    // Ideal: 71.1, 7.1, 177.8.
    assert_eq!(
        [count(&t, p(0)), count(&t, p(1)), count(&t, p(2))],
        [71, 7, 178]
    );
    let s = t.snapshot();
    assert_eq!(
        s.members
            .iter()
            .map(|m| m.target_buckets)
            .collect::<Vec<_>>(),
        [71, 7, 178]
    );
    // An unknown speed weights everyone equally.
    let mut t = Buckets::new(config());
    t.set_members(ms(0), &[(p(0), 10_000), (p(1), 0)]);
    assert_eq!(count(&t, p(0)), 128);
    assert_eq!(t.snapshot().members[1].effective_weight, 1);
}

#[test]
fn duplicates_and_unchanged_calls_move_nothing() {
    let mut t = Buckets::new(config());
    t.set_members(ms(0), &[(p(0), 1000), (p(1), 1000), (p(0), 5)]);
    assert_eq!(t.snapshot().members.len(), 2);
    let before = table(&t);
    t.set_members(ms(10), &[(p(0), 1000), (p(1), 1000)]);
    t.set_members(ms(20), &[(p(1), 1000), (p(0), 1000)]);
    assert_eq!(table(&t), before);
    assert_eq!(t.counters().moves(), 0);
}

#[test]
fn leaving_member_spreads_only_its_buckets() {
    let mut t = Buckets::new(config());
    t.set_members(ms(0), &equal(4));
    let before = table(&t);
    t.set_members(ms(100), &[(p(0), 1000), (p(1), 1000), (p(3), 1000)]);
    let after = table(&t);
    for b in 0..256 {
        if before[b] == Some(p(2)) {
            assert_ne!(after[b], Some(p(2)));
        } else {
            assert_eq!(after[b], before[b], "bucket {b}");
        }
    }
    // Idle buckets are spread by count: 85 or 86 each.
    for i in [0, 1, 3] {
        assert!((85..=86).contains(&count(&t, p(i))));
    }
    let s = t.snapshot();
    assert_eq!(s.counters.moved_left, 64);
    let last = s.recent_moves.last().unwrap();
    assert_eq!(last.reason, MoveReason::Left);
    assert_eq!((last.from, last.to, last.buckets), (Some(p(2)), None, 64));
    assert_eq!(
        last.describe(|p| format!("eth{}", p.0)),
        "member eth2 left: 64 buckets (first 2) spread over the others"
    );
}

#[test]
fn leaving_member_loaded_buckets_go_to_least_loaded() {
    let mut t = Buckets::new(config());
    t.set_members(ms(0), &equal(3));
    // Bucket 0 (member 0) heavy, bucket 1 (member 1) light, bucket 2 (member 2) heavy.
    let mut now = 0;
    for _ in 0..1000 {
        t.member_for(ms(now), hash_in(0), 10_000);
        t.member_for(ms(now), hash_in(1), 1000);
        t.member_for(ms(now), hash_in(2), 10_000);
        now += 10;
    }
    t.handle_timeout(ms(10_000));
    t.set_members(ms(10_000), &[(p(0), 1000), (p(1), 1000)]);
    assert_eq!(t.member_of_bucket(2), Some(p(1)));
}

#[test]
fn returning_member_takes_idle_at_once_and_busy_at_the_idle_gap() {
    let mut t = Buckets::new(BalanceConfig {
        rebalance_interval: Duration::ZERO,
        ..config()
    });
    t.set_members(ms(0), &equal(2));
    t.set_members(ms(10), &[(p(0), 1000)]);
    assert_eq!(count(&t, p(0)), 256);
    // Idle buckets move at once.
    t.set_members(ms(20), &equal(2));
    assert_eq!(count(&t, p(1)), 128);
    t.set_members(ms(30), &[(p(0), 1000)]);
    // Every bucket is busy at 100 ms.
    for b in 0..=255u8 {
        t.member_for(ms(100), hash_in(b), 100);
    }
    t.set_members(ms(120), &equal(2));
    assert_eq!(count(&t, p(1)), 0);
    let s = t.snapshot();
    assert_eq!(
        s.buckets.iter().filter(|b| b.pending.is_some()).count(),
        128
    );
    // The returning member takes its stripe (the odd buckets), as the initial table had it.
    assert_eq!(s.buckets[1].pending, Some(p(1)));
    assert_eq!(s.buckets[0].pending, None);
    assert_eq!(s.buckets[1].pending_reason, Some(MoveReason::Returned));
    assert!(s.members[1].filling);
    // A frame 40 ms after the last one: still busy, still on member 0.
    assert_eq!(t.member_for(ms(140), hash_in(1), 100), Some(p(0)));
    // 49 ms later: still inside the gap.
    assert_eq!(t.member_for(ms(189), hash_in(1), 100), Some(p(0)));
    // After a 50 ms pause it moves.
    assert_eq!(t.member_for(ms(239), hash_in(1), 100), Some(p(1)));
    assert_eq!(count(&t, p(1)), 1);
    let last = *t.snapshot().recent_moves.last().unwrap();
    assert_eq!(
        last.describe(|p| format!("eth{}", p.0)),
        "member eth1 returned: bucket 1 from eth0"
    );
    // The others move with their next frames.
    for b in 0..=255u8 {
        t.member_for(ms(1000), hash_in(b), 100);
    }
    assert_eq!(count(&t, p(1)), 128);
    let s = t.snapshot();
    assert_eq!(s.counters.deferred, 128);
    assert_eq!(s.counters.moved_joined, 256);
    assert!(!s.members[1].filling);
    let last = s.recent_moves.last().unwrap();
    assert_eq!(
        (last.bucket, last.buckets),
        (3, 127),
        "the other odd buckets, as one record"
    );
    // A brand-new member is "joined"; it took idle buckets from both others at once: one
    // record.
    t.set_members(ms(2000), &equal(3));
    let last = *t.snapshot().recent_moves.last().unwrap();
    assert_eq!(
        (last.reason, last.from, last.buckets),
        (MoveReason::Joined, None, 85)
    );
    assert!(
        last.describe(|p| format!("eth{}", p.0))
            .starts_with("member eth2 joined: 85 buckets (first "),
        "{last}"
    );
    assert!(
        last.to_string().ends_with(") from several members"),
        "{last}"
    );
    assert_eq!(count(&t, p(2)), 85);
}

#[test]
fn speed_change_moves_buckets_to_the_faster_member() {
    let mut t = Buckets::new(config());
    t.set_members(ms(0), &equal(2));
    t.set_members(ms(10), &[(p(0), 1000), (p(1), 3000)]);
    assert_eq!(count(&t, p(1)), 192);
    assert_eq!(
        t.snapshot().recent_moves.last().unwrap().reason,
        MoveReason::Reweighted
    );
}

/// Buckets 0, 2, 4, 6 (all on member 0 of two) at 3, 2, 2 and 1 units of 10 kB per 10 ms.
const SKEW: [(u8, u32); 4] = [(0, 30_000), (2, 20_000), (4, 20_000), (6, 10_000)];

/// After 10 s of [`SKEW`] and one rebalancing: the loads are seen and two buckets moved.
fn moved_three_and_one(t: &Buckets) -> BucketsSnapshot {
    let s = t.snapshot();
    assert_eq!(s.counters.rebalances, 1);
    // Loads after one interval: half the rate (the decay starts from zero).
    assert_eq!(s.buckets[0].load, 30_000_000 * 1_000_000 / 10_090_000 / 2);
    // Member 0 carries 8 units, member 1 none: the 3 goes (5 vs 3), then the 1 (4 vs 4). The
    // 2s would overshoot (3 vs 5) and close nothing.
    let on1: Vec<u8> = SKEW
        .iter()
        .map(|&(b, _)| b)
        .filter(|&b| t.member_of_bucket(b) == Some(p(1)))
        .collect();
    assert_eq!(on1, [0, 6]);
    assert_eq!(s.counters.moved_rebalance, 2);
    s
}

#[test]
fn rebalance_moves_load_to_the_idle_member() {
    let mut t = Buckets::new(config());
    t.set_members(ms(0), &equal(2));
    assert_eq!(t.poll_timeout(), Some(ms(10_000)));
    // Member 0 gets buckets 0, 2, 4, 6 at 3, 2, 2, 1 MB/s; member 1 gets nothing.
    let mut now = 0;
    for _ in 0..1000 {
        for (b, per) in SKEW {
            t.member_for(ms(now), hash_in(b), per);
        }
        now += 10;
    }
    // After a pause of 100 ms, so moves happen at once.
    t.handle_timeout(ms(10_090));
    let s = moved_three_and_one(&t);
    assert_eq!(t.poll_timeout(), Some(ms(20_000)));
    let r = s.recent_moves[1];
    assert_eq!(
        r.reason,
        MoveReason::Rebalance {
            over_permille: 1000
        }
    );
    assert_eq!(
        r.describe(|p| format!("eth{}", p.0)),
        "rebalance: eth0 100.0% over mean: bucket 0 to eth1"
    );
    assert_eq!(
        s.recent_moves[2].reason,
        MoveReason::Rebalance { over_permille: 250 }
    );
    assert_eq!(s.busiest_over_mean_permille(), Some(1000));
}

#[test]
fn busy_bucket_moves_only_after_its_idle_gap_and_plans_expire() {
    let mut t = Buckets::new(config());
    t.set_members(ms(0), &equal(3));
    // Two elephants (buckets 0 and 3) on member 0, sending without pause.
    let mut now = 0;
    for _ in 0..1000 {
        t.member_for(ms(now), hash_in(0), 20_000);
        t.member_for(ms(now), hash_in(3), 20_000);
        now += 10;
    }
    t.handle_timeout(ms(now));
    // One of them is planned to move but both are busy.
    let s = t.snapshot();
    let pending: Vec<_> = s.buckets.iter().filter(|b| b.pending.is_some()).collect();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].pending_reason, Some(MoveReason::Elephant));
    let b = pending[0].bucket;
    // Frames keep coming every 10 ms: it never moves.
    for _ in 0..1000 {
        assert_eq!(t.member_for(ms(now), hash_in(b), 20_000), Some(p(0)));
        t.member_for(ms(now), hash_in(3 - b), 20_000);
        now += 10;
    }
    // The plan is dropped at the next interval, and not made again: a bucket that never
    // pauses cannot move, planning it would waste the budget.
    t.handle_timeout(ms(now));
    let s = t.snapshot();
    assert_eq!(s.counters.expired, 1);
    assert_eq!(s.counters.planned, 1);
    assert!(s.buckets.iter().all(|b| b.pending.is_none()));
    assert_eq!(s.buckets[usize::from(b)].idle_gaps, 0);
    // Both pause once (60 ms) in the next interval: planned again, and it moves at the
    // following pause.
    for i in 0..1000 {
        if !(500..505).contains(&i) {
            t.member_for(ms(now), hash_in(b), 20_000);
        }
        if !(600..605).contains(&i) {
            t.member_for(ms(now), hash_in(3 - b), 20_000);
        }
        now += 10;
    }
    t.handle_timeout(ms(now));
    let s = t.snapshot();
    assert_eq!(s.buckets[usize::from(b)].idle_gaps, 1);
    assert_eq!(s.counters.planned, 2);
    assert_eq!(s.buckets[usize::from(b)].pending, pending[0].pending);
    assert_eq!(
        t.member_for(ms(now + 50), hash_in(b), 100),
        pending[0].pending
    );
    assert_eq!(t.snapshot().counters.deferred, 1);
}

#[test]
fn hysteresis_small_overload_moves_nothing() {
    let mut t = Buckets::new(config());
    t.set_members(ms(0), &equal(2));
    // 1.05 vs 0.95 MB/s: 5 % over the mean.
    let mut now = 0;
    for _ in 0..3000 {
        t.member_for(ms(now), hash_in(0), 10_500);
        t.member_for(ms(now), hash_in(1), 9_500);
        t.member_for(ms(now), hash_in(2), 0);
        now += 10;
        t.handle_timeout(ms(now));
    }
    assert_eq!(t.counters().moves(), 0);
    assert_eq!(t.counters().rebalances, 3);
}

#[test]
fn idle_bond_moves_nothing() {
    let mut t = Buckets::new(config());
    t.set_members(ms(0), &equal(4));
    let before = table(&t);
    // An ARP a second on one bucket, for an hour: all of the load on one member.
    let mut now = 0;
    for s in 0..3600u64 {
        t.member_for(ms(now), hash_in((s % 3) as u8 * 4), 60);
        now += 1000;
        t.handle_timeout(ms(now));
    }
    // Keep-alives of 1 Mb/s minus a little on one member: still below the floor.
    for _ in 0..60_000 {
        t.member_for(ms(now), hash_in(8), 1_200);
        now += 10;
        t.handle_timeout(ms(now));
    }
    assert_eq!(table(&t), before);
    assert_eq!(t.counters().moves(), 0);
    assert_eq!(t.counters().planned, 0);
    assert!(t.counters().rebalances > 400);
}

#[test]
fn interval_zero_never_rebalances() {
    let mut t = Buckets::new(BalanceConfig {
        rebalance_interval: Duration::ZERO,
        ..config()
    });
    t.set_members(ms(0), &equal(2));
    assert_eq!(t.poll_timeout(), None);
    let mut now = 0;
    for _ in 0..10_000 {
        t.member_for(ms(now), hash_in(0), 50_000);
        t.member_for(ms(now), hash_in(2), 50_000);
        now += 10;
        t.handle_timeout(ms(now));
    }
    assert_eq!(t.counters().moves(), 0);
    assert_eq!(t.poll_timeout(), None);
    // Leave and return still move.
    t.set_members(ms(now), &[(p(1), 1000)]);
    assert_eq!(t.counters().moved_left, 128);
    t.set_members(ms(now + 1000), &equal(2));
    assert_eq!(t.counters().moved_joined, 128);
    assert_eq!(
        t.counters().moved_rebalance + t.counters().moved_elephant,
        0
    );
}

/// Member 0: buckets of 6 and 5 units; member 1: 4 units.
fn six_five_four(t: &mut Buckets, from: u64) -> u64 {
    let mut now = from;
    for _ in 0..1000 {
        t.member_for(ms(now), hash_in(0), 60_000);
        t.member_for(ms(now), hash_in(2), 50_000);
        t.member_for(ms(now), hash_in(1), 40_000);
        now += 10;
    }
    now
}

#[test]
fn overshooting_move_with_real_gain_is_made_and_not_undone() {
    // Moving the 5 overshoots (9 vs 6) but lowers the busiest from 11 to 9, closing 2/7 of the
    // gap; moving the 6 would close 1/7 only.
    let mut t = Buckets::new(config());
    t.set_members(ms(0), &equal(2));
    let now = six_five_four(&mut t, 0);
    t.handle_timeout(ms(now + 100));
    assert_eq!(t.member_of_bucket(2), Some(p(1)));
    assert_eq!(t.counters().moved_rebalance, 1);
    // From now on 6 vs 9: moving either bucket back would make things worse.
    let mut now = now + 100;
    for _ in 0..10 {
        now = six_five_four(&mut t, now) + 100;
        t.handle_timeout(ms(now));
    }
    assert_eq!(t.counters().moved_rebalance, 1);
}

#[test]
fn min_gain_refuses_near_swaps() {
    let mut t = Buckets::new(BalanceConfig {
        min_gain_pct: 50,
        ..config()
    });
    t.set_members(ms(0), &equal(2));
    let now = six_five_four(&mut t, 0);
    t.handle_timeout(ms(now + 100));
    assert_eq!(t.counters().moves(), 0);
}

#[test]
fn lone_bucket_stays() {
    // Member 0 carries one bucket of 10 MB/s, member 1 one of 1 MB/s.
    let mut t = Buckets::new(config());
    t.set_members(ms(0), &equal(2));
    let mut now = 0;
    for _ in 0..10 {
        for _ in 0..1000 {
            t.member_for(ms(now), hash_in(0), 100_000);
            t.member_for(ms(now), hash_in(1), 10_000);
            now += 10;
        }
        now += 100;
        t.handle_timeout(ms(now));
    }
    assert_eq!(t.counters().moves(), 0);
}

#[test]
fn weighted_loads_are_compared_per_capacity() {
    // A 1 Gb/s member carrying 80 MB/s (640 Mb/s) and a 10 Gb/s member carrying 400 MB/s
    // (3.2 Gb/s): the slow member is the busier per capacity (64 % vs 32 %).
    let mut t = Buckets::new(config());
    t.set_members(ms(0), &[(p(0), 10_000), (p(1), 1000)]);
    let slow: Vec<u8> = (0..=255u8)
        .filter(|&b| t.member_of_bucket(b) == Some(p(1)))
        .collect();
    let fast: Vec<u8> = (0..=255u8)
        .filter(|&b| t.member_of_bucket(b) == Some(p(0)))
        .take(4)
        .collect();
    let mut now = 0;
    for _ in 0..1000 {
        for &b in &slow[..4] {
            t.member_for(ms(now), hash_in(b), 200_000);
        }
        for &b in &fast {
            t.member_for(ms(now), hash_in(b), 1_000_000);
        }
        now += 10;
    }
    t.handle_timeout(ms(10_100));
    let s = t.snapshot();
    assert!(s.counters.moved_rebalance >= 1);
    for r in &s.recent_moves[1..] {
        assert_eq!((r.from, r.to), (Some(p(1)), Some(p(0))));
    }
}

#[test]
fn elephant_gets_its_member_to_itself() {
    // Three members; member 0 carries an elephant (bucket 0, 6 MB/s) and three mice; the
    // others carry one mouse each. Fair share: 11.5 / 3 = 3.8 MB/s.
    let mut t = Buckets::new(config());
    t.set_members(ms(0), &equal(3));
    let mice = [
        (3u8, 15_000u32),
        (6, 10_000),
        (9, 10_000),
        (1, 10_000),
        (2, 10_000),
    ];
    let mut now = 0;
    for _ in 0..1000 {
        t.member_for(ms(now), hash_in(0), 60_000);
        for (b, per) in mice {
            t.member_for(ms(now), hash_in(b), per);
        }
        now += 10;
    }
    t.handle_timeout(ms(10_100));
    let s = t.snapshot();
    assert_eq!(s.counters.moved_elephant, 3);
    for b in [3u8, 6, 9] {
        assert_ne!(t.member_of_bucket(b), Some(p(0)), "bucket {b}");
    }
    assert_eq!(t.member_of_bucket(0), Some(p(0)));
    let r = s.recent_moves.last().unwrap();
    assert_eq!(
        r.describe(|p| format!("eth{}", p.0)),
        "elephant isolated: 2 buckets (first 6) eth0 -> eth2"
    );
}

#[test]
fn two_elephants_are_separated() {
    // Three members. Buckets 0 and 3 (both member 0) carry 4 MB/s each; members 1 and 2 carry
    // two mice of 0.25 MB/s each. One elephant moves to member 1, whose mice then move to
    // member 2.
    let mut t = Buckets::new(config());
    t.set_members(ms(0), &equal(3));
    let mut now = 0;
    for _ in 0..1000 {
        t.member_for(ms(now), hash_in(0), 40_000);
        t.member_for(ms(now), hash_in(3), 40_000);
        for b in [1u8, 4, 2, 5] {
            t.member_for(ms(now), hash_in(b), 2_500);
        }
        now += 10;
    }
    t.handle_timeout(ms(now + 100));
    assert_eq!(t.member_of_bucket(0), Some(p(1)));
    assert_eq!(t.member_of_bucket(3), Some(p(0)));
    for b in [1u8, 4, 2, 5] {
        assert_eq!(t.member_of_bucket(b), Some(p(2)));
    }
    assert_eq!(t.counters().moved_elephant, 3);
    assert_eq!(t.counters().moves(), 3);
}

#[test]
fn move_budget_is_respected() {
    let mut t = Buckets::new(BalanceConfig {
        max_moves: 3,
        ..config()
    });
    t.set_members(ms(0), &equal(2));
    // 40 loaded buckets all on member 0.
    let mut now = 0;
    for _ in 0..1000 {
        for b in 0..40u8 {
            t.member_for(ms(now), hash_in(b * 2), 10_000);
        }
        now += 10;
    }
    t.handle_timeout(ms(10_100));
    assert_eq!(t.counters().planned, 3);
    assert_eq!(t.counters().moved_rebalance, 3);
}

#[test]
fn log_is_bounded_and_merges() {
    let mut t = Buckets::new(BalanceConfig {
        rebalance_interval: Duration::ZERO,
        ..config()
    });
    t.set_members(ms(0), &equal(2));
    for i in 0..100u64 {
        // Alternate leaving and returning: 200 records.
        t.set_members(ms(i * 10 + 1), &[(p(0), 1000)]);
        t.set_members(ms(i * 10 + 2), &equal(2));
    }
    let s = t.snapshot();
    assert_eq!(s.recent_moves.len(), MOVE_LOG_LEN);
    // Each return moved 128 idle buckets at one instant from one member: one record.
    let r = s.recent_moves.last().unwrap();
    assert_eq!((r.reason, r.buckets), (MoveReason::Returned, 128));
    assert!(
        r.to_string().contains("member #1 returned: 128 buckets"),
        "{r}"
    );
}

#[test]
fn snapshot_reports_loads_and_shares() {
    let mut t = Buckets::new(config());
    t.set_members(ms(0), &equal(2));
    let mut now = 0;
    for _ in 0..1000 {
        t.member_for(ms(now), hash_in(0), 30_000);
        t.member_for(ms(now), hash_in(1), 10_000);
        now += 10;
    }
    t.handle_timeout(ms(10_000));
    let s = t.snapshot();
    assert_eq!(s.members[0].load, 1_500_000);
    assert_eq!(s.members[1].load, 500_000);
    assert_eq!(s.members[0].last_interval_bytes, 30_000_000);
    assert_eq!(s.members[0].load_permille, 750);
    assert_eq!(s.busiest_over_mean_permille(), Some(1500));
    assert_eq!(s.next_rebalance, Some(ms(20_000)));
    assert_eq!(s.buckets[0].last_seen, Some(ms(9_990)));
    assert_eq!(s.buckets[5].last_seen, None);
    // Lone buckets: no move can help.
    assert_eq!(s.counters.moves(), 0);
}

#[test]
fn late_timer_keeps_cadence_or_restarts() {
    let mut t = Buckets::new(config());
    t.set_members(ms(0), &equal(2));
    t.handle_timeout(ms(9_999));
    assert_eq!(t.counters().rebalances, 0);
    t.handle_timeout(ms(12_000));
    assert_eq!(t.poll_timeout(), Some(ms(20_000)));
    t.handle_timeout(ms(55_000));
    assert_eq!(t.poll_timeout(), Some(ms(65_000)));
    assert_eq!(t.counters().rebalances, 2);
}

/// Two bulk streams that never pause, in buckets 2 and 4 (both on member 0 of 2): the
/// flowlet-safe rebalancer cannot move them; after `force_after` stuck passes one moves at
/// once, and from then on nothing moves back and forth.
fn never_pausing_elephants(force_after: u32) -> (Buckets, [u64; 2]) {
    let config = BalanceConfig {
        force_after,
        ..BalanceConfig::default()
    };
    let mut b = Buckets::new(config);
    let t0 = Instant::ZERO;
    b.set_members(t0, &[(PortId(0), 1000), (PortId(1), 1000)]);
    assert_eq!(b.member_of(2), Some(PortId(0)));
    assert_eq!(b.member_of(4), Some(PortId(0)));
    let mut last = [0u64; 2];
    // 120 s, a 1500-byte frame of each stream every millisecond (12 Mb/s each).
    for ms in 0..120_000u64 {
        let now = Instant::from_millis(ms);
        while b.poll_timeout().is_some_and(|t| t <= now) {
            b.handle_timeout(now);
        }
        for h in [2u32, 4] {
            let p = b.member_for(now, h, 1500).unwrap();
            if ms >= 100_000 {
                last[p.index()] += 1500;
            }
        }
    }
    (b, last)
}

#[test]
fn busy_buckets_move_after_a_persistent_overload() {
    let (b, last) = never_pausing_elephants(3);
    let c = b.counters();
    assert_eq!(c.forced, 1, "{c:?}");
    assert_eq!(c.moves(), 1, "one elephant moved, once: {c:?}");
    assert_eq!(last[0], last[1], "one stream per member in the last 20 s");
    // The move came after three stuck passes, not at the first sign of overload.
    let m = b.snapshot().recent_moves.last().copied().unwrap();
    assert!(
        m.at >= Instant::from_secs(40) && m.at <= Instant::from_secs(50),
        "{m}"
    );
}

#[test]
fn strictly_flowlet_safe_never_moves_a_busy_bucket() {
    let (b, last) = never_pausing_elephants(0);
    assert_eq!(b.counters().moves(), 0);
    assert_eq!(last[1], 0);
}

/// One dominant flow on the slow member of a 10G + 1G bond moves to the fast one (where it is
/// still an elephant, but weighs a tenth as much), and does not come back.
#[test]
fn an_elephant_on_a_slow_member_moves_to_a_faster_one() {
    let mut t = Buckets::new(BalanceConfig {
        force_after: 0,
        ..config()
    });
    t.set_members(ms(0), &[(p(0), 10_000), (p(1), 1000)]);
    // Find a bucket of the 1G member.
    let slow = (0..=255u8)
        .find(|&b| t.member_of_bucket(b) == Some(p(1)))
        .unwrap();
    // 800 Mb/s in bursts with pauses (movable), plus a little traffic elsewhere.
    let mut now = 0;
    while now < 60_000 {
        if now % 200 < 100 {
            t.member_for(ms(now), hash_in(slow), 1_000_000);
        }
        t.member_for(ms(now), hash_in(slow.wrapping_add(1)), 1000);
        now += 1;
        while t.poll_timeout().is_some_and(|x| x <= ms(now)) {
            t.handle_timeout(ms(now));
        }
    }
    assert_eq!(t.member_of_bucket(slow), Some(p(0)), "{:?}", t.counters());
    assert_eq!(t.counters().moves(), 1);
}

/// Samples as the kernel fast path gives them: `bytes` per bucket since the last sample, all
/// last sent at `last_ms`.
fn sample(bytes: &[(u8, u64)], last_ms: u64) -> [BucketSample; BUCKETS] {
    let mut s = [BucketSample::default(); BUCKETS];
    for &(b, n) in bytes {
        s[usize::from(b)] = BucketSample {
            bytes: n,
            last: Some(ms(last_ms)),
        };
    }
    s
}

#[test]
fn absorbed_loads_rebalance_as_frames_do() {
    // The traffic of `rebalance_moves_load_to_the_idle_member`, counted outside the table and
    // absorbed every 10 ms: the same loads and the same moves.
    let mut t = Buckets::new(config());
    t.set_members(ms(0), &equal(2));
    let mut now = 0;
    let bytes: Vec<(u8, u64)> = SKEW.iter().map(|&(b, n)| (b, u64::from(n))).collect();
    for _ in 0..1000 {
        t.absorb(ms(now), &sample(&bytes, now));
        now += 10;
    }
    t.absorb(ms(10_090), &[BucketSample::default(); BUCKETS]);
    t.handle_timeout(ms(10_090));
    moved_three_and_one(&t);
}

#[test]
fn absorbed_busy_bucket_moves_once_it_is_seen_idle() {
    let mut t = Buckets::new(config());
    t.set_members(ms(0), &equal(3));
    // Two elephants (buckets 0 and 3) on member 0, each pausing once for 60 ms, sampled every
    // 25 ms as the daemon reads the kernel's counters.
    let mut now = 0;
    let mut last = [0u64; 2];
    while now < 10_000 {
        let mut bytes = Vec::new();
        for (k, b) in [0u8, 3].into_iter().enumerate() {
            let pause = if k == 0 { 5_000..5_060 } else { 6_000..6_060 };
            if !pause.contains(&now) {
                bytes.push((b, 50_000));
                last[k] = now;
            }
        }
        let mut s = sample(&bytes, now);
        for (k, b) in [0u8, 3].into_iter().enumerate() {
            s[usize::from(b)].last = Some(ms(last[k]));
        }
        t.absorb(ms(now), &s);
        now += 25;
    }
    t.handle_timeout(ms(now));
    let snap = t.snapshot();
    let pending: Vec<_> = snap
        .buckets
        .iter()
        .filter(|b| b.pending.is_some())
        .collect();
    assert_eq!(pending.len(), 1, "one elephant planned to move");
    let b = pending[0].bucket;
    // Its first frames and its pause count as pauses, as they do frame by frame.
    assert_eq!(
        snap.buckets[usize::from(b)].idle_gaps,
        2,
        "its pause was seen"
    );
    // Still sending: it stays.
    t.absorb(ms(now), &sample(&[(b, 50_000)], now));
    assert_eq!(t.member_of_bucket(b), Some(p(0)));
    assert_eq!(t.snapshot().counters.deferred, 0);
    // Silent for 25 ms: not yet the idle gap (50 ms).
    t.absorb(ms(now + 25), &sample(&[], now));
    assert_eq!(t.member_of_bucket(b), Some(p(0)));
    // Silent for 50 ms: it moves, as its next frame would have moved it.
    t.absorb(ms(now + 50), &sample(&[], now));
    assert_eq!(t.member_of_bucket(b), pending[0].pending);
    assert_eq!(t.snapshot().counters.deferred, 1);
}
