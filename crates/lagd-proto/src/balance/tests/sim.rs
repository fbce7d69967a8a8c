//! Simulations in virtual time: flows with fixed rates and random pauses (seeded, so every
//! figure below is exact for the code, not luck), the rebalancer running every 10 s with the
//! default configuration, and the ground truth measured from the members [`Buckets::member_for`]
//! returned, not from the table's own accounting.
//!
//! Each simulation checks that the busiest member's load per unit of capacity over the mean
//! (measured over the last 100 s) is close to the best any table could do, that no bucket ever
//! went back to a member it had left (no ping-pong), and that the table is quiet once converged.

use super::{Rng, ms, p};
use crate::balance::{BUCKETS, BalanceConfig, Buckets};
use crate::port::PortId;

/// A flow: a hash, a rate, and on/off pauses.
#[derive(Debug, Clone)]
struct Flow {
    hash: u32,
    /// Bytes per second while sending.
    rate: u64,
    /// A pause starts with probability 1/`pause_one_in` per 10 ms tick...
    pause_one_in: u64,
    /// ... and lasts 20 ms to this long.
    pause_max_ms: u64,
    paused_until: u64,
}

struct Sim {
    t: Buckets,
    members: Vec<(PortId, u32)>,
    flows: Vec<Flow>,
    rng: Rng,
    now: u64,
    /// Per bucket, the members it was seen on, in order, without repeats in a row.
    history: Vec<Vec<PortId>>,
    /// Bytes per member since the last `reset_window`.
    window: Vec<u64>,
    /// Bytes per bucket since the last `reset_window`.
    bucket_window: Vec<u64>,
}

impl Sim {
    fn new(members: Vec<(PortId, u32)>, flows: Vec<Flow>, seed: u64) -> Self {
        let mut t = Buckets::new(BalanceConfig::default());
        t.set_members(ms(0), &members);
        Self {
            t,
            window: vec![0; members.len()],
            members,
            flows,
            rng: Rng(seed),
            now: 0,
            history: vec![Vec::new(); BUCKETS],
            bucket_window: vec![0; BUCKETS],
        }
    }

    /// Runs `secs` seconds of traffic in 10 ms ticks.
    fn run(&mut self, secs: u64) {
        for _ in 0..secs * 100 {
            for f in &mut self.flows {
                if self.now < f.paused_until {
                    continue;
                }
                if self.rng.below(f.pause_one_in) == 0 {
                    f.paused_until = self.now + 20 + self.rng.below(f.pause_max_ms - 20);
                    continue;
                }
                // One aggregate frame per tick, +-10 % jitter.
                let base = f.rate / 100;
                let len = base - base / 10 + self.rng.below(base / 5 + 1);
                let len = u32::try_from(len).unwrap();
                let got = self.t.member_for(ms(self.now), f.hash, len).unwrap();
                let b = usize::from(self.t.bucket_of(f.hash));
                if self.history[b].last() != Some(&got) {
                    self.history[b].push(got);
                }
                let i = self.members.iter().position(|&(q, _)| q == got).unwrap();
                self.window[i] += u64::from(len);
                self.bucket_window[b] += u64::from(len);
            }
            self.now += 10;
            if self.t.poll_timeout().is_some_and(|due| due <= ms(self.now)) {
                self.t.handle_timeout(ms(self.now));
            }
        }
    }

    fn reset_window(&mut self) {
        self.window.iter_mut().for_each(|w| *w = 0);
        self.bucket_window.iter_mut().for_each(|w| *w = 0);
    }

    /// Busiest member's bytes per capacity over the mean, per mille, in the window.
    fn busiest_over_mean(&self) -> u64 {
        self.busiest_over_mean_of(|_| true)
    }

    /// The same among the members `keep` selects.
    fn busiest_over_mean_of(&self, keep: impl Fn(PortId) -> bool) -> u64 {
        let kept = || {
            self.window
                .iter()
                .zip(&self.members)
                .filter(|(_, m)| keep(m.0))
        };
        let total: u64 = kept().map(|(&b, _)| b).sum();
        let wsum: u64 = kept().map(|(_, &(_, w))| u64::from(w)).sum();
        let worst = kept()
            .map(|(&b, &(_, w))| u128::from(b) * u128::from(wsum) * 1000 / u128::from(w))
            .max()
            .unwrap();
        (worst / u128::from(total)) as u64
    }

    /// A lower bound on what any table could do in the window, per mille: the heaviest
    /// bucket alone on the largest member, or perfect balance.
    fn lower_bound(&self) -> u64 {
        let per_bucket = &self.bucket_window;
        let total: u64 = per_bucket.iter().sum();
        let wsum: u64 = self.members.iter().map(|&(_, w)| u64::from(w)).sum();
        let wmax = self
            .members
            .iter()
            .map(|&(_, w)| u64::from(w))
            .max()
            .unwrap();
        let heaviest = *per_bucket.iter().max().unwrap();
        (u128::from(heaviest) * u128::from(wsum) * 1000 / u128::from(wmax) / u128::from(total))
            .max(1000) as u64
    }

    /// Asserts no bucket was ever moved back to a member it had left; returns the most moves
    /// any bucket made.
    fn assert_no_ping_pong(&self) -> usize {
        for (b, h) in self.history.iter().enumerate() {
            for (i, m) in h.iter().enumerate() {
                assert!(
                    !h[..i].contains(m),
                    "bucket {b} went back to {m:?}: history {h:?}"
                );
            }
        }
        self.history
            .iter()
            .map(|h| h.len().saturating_sub(1))
            .max()
            .unwrap()
    }

    fn moves(&self) -> u64 {
        self.t.counters().moves()
    }
}

fn mouse(rng: &mut Rng, min_mbps: u64, max_mbps: u64) -> Flow {
    Flow {
        hash: rng.hash(),
        rate: (min_mbps + rng.below(max_mbps - min_mbps + 1)) * 125_000,
        pause_one_in: 50,
        pause_max_ms: 300,
        paused_until: 0,
    }
}

/// What a simulation reached, ratios per mille.
#[derive(Debug)]
struct Outcome {
    /// Busiest over mean in the 9 s before the first rebalance.
    before: u64,
    /// Busiest over mean in the measured window (the last 100 s).
    ratio: u64,
    /// The lower bound in the measured window.
    bound: u64,
    /// Moves in the first 200 s.
    converging: u64,
    /// Moves in the measured window.
    after: u64,
    /// The most moves any bucket made.
    most: usize,
}

/// The common shape: 9 s before the first rebalance, converge until 200 s, then measure 100 s.
fn converge(sim: &mut Sim) -> Outcome {
    sim.run(9);
    let before = sim.busiest_over_mean();
    sim.run(191);
    let converging = sim.moves();
    sim.reset_window();
    sim.run(100);
    let o = Outcome {
        before,
        ratio: sim.busiest_over_mean(),
        bound: sim.lower_bound(),
        converging,
        after: sim.moves() - converging,
        most: sim.assert_no_ping_pong(),
    };
    eprintln!("{o:?}");
    // No bucket moved twice; nearly quiet once converged (each test says how quiet).
    assert!(o.most <= 1, "{o:?}");
    assert!(o.after <= 1, "{o:?}");
    o
}

fn elephants_and_mice(elephant_mbps: u64, same_member: bool) -> Sim {
    let mut rng = Rng(0x1a9d);
    let mut flows: Vec<Flow> = (0..2u32)
        .map(|i| Flow {
            hash: if same_member {
                (rng.hash() & !0xff) | (i * 4 + 8)
            } else {
                rng.hash()
            },
            rate: elephant_mbps * 125_000,
            pause_one_in: 300,
            pause_max_ms: 150,
            paused_until: 0,
        })
        .collect();
    flows.extend((0..50).map(|_| mouse(&mut rng, 2, 20)));
    Sim::new((0..4).map(|i| (p(i), 1000)).collect(), flows, 0x5eed)
}

#[test]
fn two_elephants_and_fifty_mice() {
    // Four 1 Gb/s members. Two 300 Mb/s elephants that both start on member 0 (their buckets
    // are multiples of 4), 50 mice of 2 to 20 Mb/s with random hashes. The elephants pause
    // (20 to 150 ms) about every 3 s, the mice (20 to 300 ms) about every 0.5 s.
    let mut sim = elephants_and_mice(300, true);
    let o = converge(&mut sim);
    // Both elephants ended on members of their own, the mice on the other two.
    let e: Vec<_> = sim.flows[..2]
        .iter()
        .map(|f| sim.t.member_of(f.hash).unwrap())
        .collect();
    assert_ne!(e[0], e[1]);
    for f in &sim.flows[2..] {
        assert!(!e.contains(&sim.t.member_of(f.hash).unwrap()));
    }
    let mice = sim.busiest_over_mean_of(|m| !e.contains(&m));
    // Figures for these seeds: busiest/mean from 2.82 before the first rebalance to 1.169 in
    // the last 100 s, which is the bound (an elephant alone on a member); the two members
    // carrying mice within 1.01 of their mean; 21 moves, all in the first 30 s.
    assert!(o.before >= 2800, "{o:?}");
    assert!(o.ratio <= o.bound + 5, "{o:?}");
    assert!(mice <= 1020, "{mice}");
    assert!(o.converging <= 24, "{o:?}");
    assert_eq!(o.after, 0, "{o:?}");
}

#[test]
fn borderline_elephants() {
    // The same mix with elephants of 150, 200 and 250 Mb/s: around their fair share (about
    // 200 Mb/s), where a bucket keeps crossing the elephant line.
    // Figures: 2.34, 2.54, 2.69 before; 1.086, 1.082, 1.092 after (bounds 1.0, 1.0, 1.08),
    // with 8, 13 and 19 moves in the first 200 s and 0, 0, 1 in the last 100 s: within the
    // 10 % hysteresis, nothing moved twice.
    for rate in [150, 200, 250] {
        let mut sim = elephants_and_mice(rate, true);
        let o = converge(&mut sim);
        assert!(o.before >= 2300, "{o:?}");
        assert!(o.ratio <= 1100.max(o.bound + 20), "{o:?}");
        assert!(o.converging <= 20, "{o:?}");
    }
}

#[test]
fn zipf_mix() {
    // Three 1 Gb/s members, 200 flows with rates proportional to 1/k (the largest 17 % of
    // the total, 2.4 Gb/s), random hashes, all pausing about every 0.5 s.
    let mut sim = zipf(BalanceConfig::default());
    let o = converge(&mut sim);
    // Figures: from 1.264 to 1.021 with 2 moves.
    assert!(o.before >= 1250, "{o:?}");
    assert!(o.ratio <= 1030, "{o:?}");
    assert!(o.converging <= 4, "{o:?}");
    assert_eq!(o.after, 0, "{o:?}");
}

fn zipf(config: BalanceConfig) -> Sim {
    let mut rng = Rng(0x21bf);
    let h: f64 = (1..=200).map(|k| 1.0 / f64::from(k)).sum();
    let flows: Vec<Flow> = (1..=200)
        .map(|k| Flow {
            hash: rng.hash(),
            rate: (2.4e9 / 8.0 / h / f64::from(k)) as u64,
            pause_one_in: 50,
            pause_max_ms: 200,
            paused_until: 0,
        })
        .collect();
    let mut sim = Sim::new((0..3).map(|i| (p(i), 1000)).collect(), flows, 0x21bf);
    sim.t = Buckets::new(config);
    sim.t.set_members(ms(0), &sim.members);
    sim
}

#[test]
fn zipf_mix_without_rebalancing_never_moves() {
    let mut sim = zipf(BalanceConfig {
        rebalance_interval: core::time::Duration::ZERO,
        ..BalanceConfig::default()
    });
    let o = converge(&mut sim);
    assert_eq!(o.converging, 0);
    assert_eq!(sim.t.poll_timeout(), None);
    // It stays as unbalanced as it started (1.25).
    assert!(o.ratio >= 1200, "{o:?}");
}

#[test]
fn mixed_speeds() {
    // Members of 10, 10 and 1 Gb/s; 100 mice of 10 to 100 Mb/s and one 500 Mb/s flow that
    // starts on the 1 Gb/s member. Loads compare per capacity.
    let mut rng = Rng(0x3c3c);
    let mut flows = vec![Flow {
        hash: rng.hash(),
        rate: 500 * 125_000,
        pause_one_in: 300,
        pause_max_ms: 150,
        paused_until: 0,
    }];
    flows.extend((0..100).map(|_| mouse(&mut rng, 10, 100)));
    let members = vec![(p(0), 10_000), (p(1), 10_000), (p(2), 1000)];
    let mut sim = Sim::new(members, flows, 0x3c3c);
    let slow = (0..=255u8)
        .rev()
        .find(|&b| sim.t.member_of_bucket(b) == Some(p(2)))
        .unwrap();
    sim.flows[0].hash = (sim.flows[0].hash & !0xff) | u32::from(slow);
    let o = converge(&mut sim);
    // The big flow left the slow member. Figures: busiest per capacity over mean from 3.32 to
    // 1.085 with 2 moves.
    assert_ne!(sim.t.member_of(sim.flows[0].hash), Some(p(2)));
    assert!(o.before >= 3000, "{o:?}");
    assert!(o.ratio <= 1100, "{o:?}");
    assert!(o.converging <= 4, "{o:?}");
    assert_eq!(o.after, 0, "{o:?}");
}

#[test]
fn member_failure_and_return_under_load() {
    // The elephants-and-mice bond (elephants on random members) loses member 1 for 60 s and
    // gets it back: the table re-converges, and nothing ping-pongs.
    let mut sim = elephants_and_mice(300, false);
    let all = sim.members.clone();
    sim.run(100);
    let rest: Vec<_> = all.iter().copied().filter(|&(q, _)| q != p(1)).collect();
    sim.t.set_members(ms(sim.now), &rest);
    sim.members = rest;
    sim.window = vec![0; sim.members.len()];
    sim.run(60);
    sim.t.set_members(ms(sim.now), &all);
    sim.members = all;
    sim.window = vec![0; sim.members.len()];
    sim.history.iter_mut().for_each(Vec::clear);
    let back = sim.moves();
    sim.run(100);
    let converging = sim.moves() - back;
    sim.reset_window();
    sim.run(100);
    let ratio = sim.busiest_over_mean();
    let bound = sim.lower_bound();
    let s = sim.t.snapshot();
    // Figures: 1.164 after the return, the bound (an elephant alone), 18 moves after it came
    // back, nothing in the last 100 s, no bucket moved twice since the return.
    assert!(s.members.iter().all(|m| !m.filling));
    assert!(ratio <= bound + 5, "{ratio} {bound}");
    assert!(converging <= 24, "{converging}");
    assert_eq!(sim.moves() - back - converging, 0);
    assert!(sim.assert_no_ping_pong() <= 1);
}
/// A sweep over 60 seeds and 8 shapes (2 to 8 members, equal or mixed speeds from 1 to
/// 25 Gb/s, 0 to 2 elephants, 10 to 300 mice), 600 s each: nothing ping-pongs, and
/// busiest/mean stays near the bound. Slow in debug builds: run it with
/// `cargo test --release -p lagd-proto -- --ignored seed_sweep`.
///
/// Figures: with equal speeds, busiest/mean is within 0.089 of the bound in every run (the
/// hysteresis leaves up to 10 %), and no bucket ever returns to a member it left. With mixed
/// speeds within 0.275 (an 8-member bond of 1 to 25 Gb/s carrying 1.6 Gb/s, where moving an
/// elephant to the 25 Gb/s member needs more room-making moves than one interval's budget);
/// there, 14 buckets in all 240 runs returned to a member they had left once an elephant had
/// moved away from it, and no bucket made the same move twice.
#[test]
#[ignore]
fn seed_sweep() {
    let mut worst = [0u64; 2];
    let mut returns = 0;
    for seed in 0..60u64 {
        let shapes = [
            (4u16, 300u64, 50u64),
            (4, 200, 50),
            (2, 100, 30),
            (3, 0, 200),
            (8, 400, 100),
            (3, 150, 20),
            (2, 60, 10),
            (5, 250, 300),
        ];
        for (n, erate, nm) in shapes {
            let mut rng = Rng(seed * 7919 + 1);
            let mut flows: Vec<Flow> = (0..if erate > 0 { 2 } else { 0 })
                .map(|_| Flow {
                    hash: rng.hash(),
                    rate: erate * 125_000,
                    pause_one_in: 300,
                    pause_max_ms: 150,
                    paused_until: 0,
                })
                .collect();
            flows.extend((0..nm).map(|_| mouse(&mut rng, 2, 20)));
            let mixed = seed % 2 == 1;
            let speeds = [1000, 10_000, 2500, 1000, 25_000, 1000, 1000, 10_000];
            let members = (0..n)
                .map(|i| (p(i), if mixed { speeds[usize::from(i)] } else { 1000 }))
                .collect();
            let mut sim = Sim::new(members, flows, seed);
            sim.run(300);
            sim.reset_window();
            sim.run(300);
            if mixed {
                // Elephants moving to faster members change the picture, and a mouse may
                // later return to a member it left; but no move is ever made twice.
                for h in &sim.history {
                    let moves: Vec<_> = h.windows(2).collect();
                    for (i, m) in moves.iter().enumerate() {
                        assert!(!moves[..i].contains(m), "seed {seed} n {n}: {h:?}");
                    }
                    returns += h
                        .iter()
                        .enumerate()
                        .filter(|&(i, m)| h[..i].contains(m))
                        .count();
                }
            } else {
                sim.assert_no_ping_pong();
            }
            let excess = sim.busiest_over_mean().saturating_sub(sim.lower_bound());
            worst[usize::from(mixed)] = worst[usize::from(mixed)].max(excess);
        }
    }
    eprintln!(
        "worst excess over the bound: equal {} mixed {}; returns (mixed) {returns}",
        worst[0], worst[1]
    );
    assert!(worst[0] <= 90, "{worst:?}");
    assert!(worst[1] <= 280, "{worst:?}");
}
