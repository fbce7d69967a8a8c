//! Property tests: random weights, random warmed-up tables and random operation sequences.

use core::time::Duration;

use proptest::prelude::*;

use super::{Rng, ms, p, table, warm};
use crate::balance::{BUCKETS, BalanceConfig, Buckets};
use crate::port::PortId;
use crate::time::Instant;

/// 2 to 6 members with random speeds (no unknown speed).
fn speeds() -> impl Strategy<Value = Vec<u32>> {
    prop::collection::vec(
        prop_oneof![
            Just(100u32),
            Just(1000),
            Just(2500),
            Just(10_000),
            Just(25_000),
            1u32..=400_000
        ],
        2..=6,
    )
}

fn members(speeds: &[u32]) -> Vec<(PortId, u32)> {
    speeds
        .iter()
        .enumerate()
        .map(|(i, &w)| (p(i as u16), w))
        .collect()
}

fn config() -> impl Strategy<Value = BalanceConfig> {
    (
        prop_oneof![Just(0u64), Just(1000), Just(10_000), 1u64..30_000],
        any::<u32>(),
        prop_oneof![Just(0u64), Just(50), 1u64..300],
        0u16..32,
    )
        .prop_map(|(interval, seed, gap, moves)| BalanceConfig {
            rebalance_interval: Duration::from_millis(interval),
            seed,
            idle_gap: Duration::from_millis(gap),
            max_moves: moves,
            ..BalanceConfig::default()
        })
}

/// Per bucket: the time of its last frame in microseconds, if any.
fn last_seen(t: &Buckets) -> Vec<Option<u64>> {
    t.snapshot()
        .buckets
        .iter()
        .map(|b| b.last_seen.map(Instant::as_micros))
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Initial shares are within one bucket of `256 * weight / total` for any speeds; an
    /// unknown speed gives equal shares.
    #[test]
    fn weighted_initial_shares_within_one_bucket(speeds in speeds(), unknown in any::<bool>()) {
        let mut m = members(&speeds);
        if unknown {
            m[0].1 = 0;
        }
        let mut t = Buckets::new(BalanceConfig::default());
        t.set_members(ms(0), &m);
        let total: u64 = m.iter().map(|&(_, w)| if unknown { 1 } else { u64::from(w) }).sum();
        let tab = table(&t);
        for &(port, w) in &m {
            let w = if unknown { 1 } else { u64::from(w) };
            let n = tab.iter().filter(|&&x| x == Some(port)).count() as u64;
            // |n - 256 w / total| < 1  <=>  |n * total - 256 w| < total
            let diff = (n * total).abs_diff(256 * w);
            prop_assert!(diff < total, "{port:?}: {n} buckets for weight {w} of {total}");
        }
    }

    /// Between `set_members` and `handle_timeout` calls, frames of one hash go to one member;
    /// the only change allowed is a planned move of its bucket, after an idle gap, once.
    #[test]
    fn same_hash_same_member_between_calls(
        speeds in speeds(),
        config in config(),
        seed in any::<u64>(),
        frames in prop::collection::vec((0usize..40, 0u64..120_000), 1..400),
    ) {
        let mut t = Buckets::new(config);
        t.set_members(ms(0), &members(&speeds));
        let start = warm(&mut t, seed, 0, 35);
        let snap = t.snapshot();
        let gap = u64::try_from(config.idle_gap.as_micros()).unwrap();
        let mut member: Vec<Option<PortId>> = snap.buckets.iter().map(|b| b.member).collect();
        let mut pending: Vec<Option<PortId>> = snap.buckets.iter().map(|b| b.pending).collect();
        let mut seen = last_seen(&t);
        let mut rng = Rng(seed ^ 1);
        let hashes: Vec<u32> = (0..40).map(|_| rng.hash()).collect();
        let mut now = Instant::from_millis(start).as_micros();
        for (h, dt) in frames {
            now += dt;
            let hash = hashes[h];
            let b = usize::from(t.bucket_of(hash));
            let got = t.member_for(Instant::from_micros(now), hash, 100);
            let idle = seen[b].is_none_or(|s| now >= s + gap);
            if got != member[b] {
                prop_assert!(idle, "bucket {b} moved while busy");
                prop_assert_eq!(got, pending[b], "bucket {} moved elsewhere than planned", b);
                member[b] = got;
            }
            // Whether it moved or not, a plan that could apply has applied, and no new one
            // appears between calls.
            if idle {
                pending[b] = None;
            }
            seen[b] = Some(now);
        }
        // The same hash asked twice in a row without time passing: same member.
        for &h in &hashes {
            let now = Instant::from_micros(now);
            prop_assert_eq!(t.member_for(now, h, 1), t.member_for(now, h, 1));
        }
    }

    /// A member leaving moves only its own buckets, to the remaining members.
    #[test]
    fn leaving_moves_only_its_buckets(
        speeds in speeds(),
        config in config(),
        seed in any::<u64>(),
        which in any::<prop::sample::Index>(),
    ) {
        let mut t = Buckets::new(config);
        let all = members(&speeds);
        t.set_members(ms(0), &all);
        let now = warm(&mut t, seed, 0, 25);
        let gone = all[which.index(all.len())].0;
        let before = table(&t);
        let rest: Vec<_> = all.iter().copied().filter(|&(q, _)| q != gone).collect();
        let moves = t.counters().moves();
        t.set_members(ms(now), &rest);
        let after = table(&t);
        let mut moved = 0;
        for b in 0..BUCKETS {
            if before[b] == Some(gone) {
                moved += 1;
                prop_assert!(after[b].is_some_and(|m| m != gone));
            } else {
                prop_assert_eq!(after[b], before[b], "bucket {} moved", b);
            }
        }
        prop_assert_eq!(t.counters().moves() - moves, moved);
        // No plan points at the member that left.
        prop_assert!(t.snapshot().buckets.iter().all(|b| b.pending != Some(gone)));
    }

    /// A member returning takes only buckets of others, moves a bucket only after its idle
    /// gap, and ends with exactly its weighted share once every bucket has paused.
    #[test]
    fn returning_takes_only_from_others_and_waits_for_idle(
        speeds in speeds(),
        seed in any::<u64>(),
        gap_ms in 1u64..200,
        which in any::<prop::sample::Index>(),
        frames in prop::collection::vec((0usize..60, 0u64..100_000), 0..400),
    ) {
        let config = BalanceConfig {
            rebalance_interval: Duration::ZERO,
            idle_gap: Duration::from_millis(gap_ms),
            ..BalanceConfig::default()
        };
        let gap = gap_ms * 1000;
        let mut t = Buckets::new(config);
        let all = members(&speeds);
        t.set_members(ms(0), &all);
        let back = all[which.index(all.len())].0;
        let rest: Vec<_> = all.iter().copied().filter(|&(q, _)| q != back).collect();
        t.set_members(ms(0), &rest);
        let now_ms = warm(&mut t, seed, 0, 3);
        let seen_before = last_seen(&t);
        let before = table(&t);
        let mut now = Instant::from_millis(now_ms).as_micros() + (seed % 3) * 20_000;
        t.set_members(Instant::from_micros(now), &all);
        let mut member = table(&t);
        for b in 0..BUCKETS {
            if member[b] != before[b] {
                prop_assert_eq!(member[b], Some(back));
                prop_assert!(seen_before[b].is_none_or(|s| now >= s + gap), "bucket {} was busy", b);
            }
        }
        let target = usize::from(t.snapshot().members.iter().find(|m| m.port == back).unwrap().target_buckets);
        let mut seen = seen_before;
        let mut rng = Rng(seed ^ 2);
        let hashes: Vec<u32> = (0..60).map(|_| rng.hash()).collect();
        for (h, dt) in frames {
            now += dt;
            let hash = hashes[h];
            let b = usize::from(t.bucket_of(hash));
            let got = t.member_for(Instant::from_micros(now), hash, 1000);
            if got != member[b] {
                prop_assert_eq!(got, Some(back), "bucket {} went to another member", b);
                prop_assert!(seen[b].is_none_or(|s| now >= s + gap), "bucket {} moved while busy", b);
                member[b] = got;
            }
            seen[b] = Some(now);
            prop_assert!(member.iter().filter(|&&m| m == Some(back)).count() <= target);
        }
        // Every bucket pauses, then sends: the share is complete.
        now += gap;
        for b in 0..=255u8 {
            t.member_for(Instant::from_micros(now), u32::from(b), 1);
        }
        prop_assert_eq!(table(&t).iter().filter(|&&m| m == Some(back)).count(), target);
    }

    /// Any sequence of operations: no panic, and the table always names current members.
    #[test]
    fn arbitrary_operations_keep_the_table_sound(
        config in config(),
        ops in prop::collection::vec(op(), 1..120),
    ) {
        let mut t = Buckets::new(config);
        let mut now = 0u64;
        let mut current: Vec<PortId> = Vec::new();
        for op in ops {
            match op {
                Op::Members(m) => {
                    t.set_members(Instant::from_micros(now), &m);
                    current.clear();
                    for (q, _) in m {
                        if !current.contains(&q) {
                            current.push(q);
                        }
                    }
                }
                Op::Frames(hash, len, n, dt) => {
                    for _ in 0..n {
                        let got = t.member_for(Instant::from_micros(now), hash, len);
                        prop_assert_eq!(got.is_some(), !current.is_empty());
                        prop_assert!(got.is_none_or(|g| current.contains(&g)));
                        now = now.saturating_add(dt);
                    }
                }
                Op::Advance(dt) => {
                    now = now.saturating_add(dt);
                    t.handle_timeout(Instant::from_micros(now));
                    if let Some(due) = t.poll_timeout() {
                        prop_assert!(config.rebalance_interval > Duration::ZERO);
                        prop_assert!(due > Instant::from_micros(now) || due == Instant::from_micros(u64::MAX));
                    }
                }
                Op::Back(dt) => {
                    // A clock that steps back must not break anything either.
                    now = now.saturating_sub(dt);
                }
            }
            if config.rebalance_interval.is_zero() {
                prop_assert_eq!(t.poll_timeout(), None);
            }
            let s = t.snapshot();
            let n: usize = s.members.iter().map(|m| usize::from(m.buckets)).sum();
            prop_assert_eq!(n, if current.is_empty() { 0 } else { BUCKETS });
            let shares: usize = s.members.iter().map(|m| usize::from(m.target_buckets)).sum();
            prop_assert_eq!(shares, if current.is_empty() { 0 } else { BUCKETS });
            for b in &s.buckets {
                prop_assert!(b.member.is_none_or(|m| current.contains(&m)));
                prop_assert!(b.pending.is_none_or(|m| current.contains(&m)));
                prop_assert!(b.pending.is_none() || b.pending != b.member);
            }
            prop_assert!(s.recent_moves.len() <= crate::balance::MOVE_LOG_LEN);
            let _ = s.busiest_over_mean_permille();
            for r in &s.recent_moves {
                let _ = r.to_string();
            }
        }
    }
}

#[derive(Debug, Clone)]
enum Op {
    Members(Vec<(PortId, u32)>),
    Frames(u32, u32, u16, u64),
    Advance(u64),
    Back(u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        2 => prop::collection::vec(
            (0u16..8, prop_oneof![Just(0u32), Just(1000), Just(10_000), any::<u32>()]),
            0..6,
        )
        .prop_map(|m| Op::Members(m.into_iter().map(|(q, w)| (p(q), w)).collect())),
        6 => (any::<u32>(), any::<u32>(), 1u16..50, 0u64..100_000)
            .prop_map(|(h, l, n, dt)| Op::Frames(h, l, n, dt)),
        3 => prop_oneof![0u64..20_000_000, Just(u64::MAX / 2)].prop_map(Op::Advance),
        1 => (0u64..1_000_000).prop_map(Op::Back),
    ]
}
