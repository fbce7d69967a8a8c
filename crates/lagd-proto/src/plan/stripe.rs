//! Stripe mode (`mode=stripe`, [`crate::stripe`]) in the planner.
//!
//! The daemon stripes every frame the host sends over the members by **bytes**, weighted by
//! member speed: [`StripeTx`], a smooth weighted round robin, picks each frame's member from
//! the frame's length plus the 8-byte stripe header ([`HEADER_LEN`]). The receiving lagd puts
//! the frames back in order before its host sees them, so no reordering reaches the host, at
//! the price of lagd in `mode=stripe` at **both ends** (a switch or a kernel bond cannot
//! undo the striping).
//!
//! The planner drives the daemon's own [`StripeTx`] frame by frame, in input order, with the
//! members' speeds in Mb/s (the daemon's `member_speed` weights), once per distinct member set:
//! the configured members and the survivors of each member failing (modelled, as for the hash
//! policies, as failed from the start). Sets with the same speeds, in order, share one run
//! (with equal speeds every failure shares one), and a one-member set needs none, so the
//! default two equal members cost one run. The figures count each frame's bytes as the input
//! gives them (the header the daemon adds is in the member choice, not in the bytes), so they
//! compare with the other policies'.
//!
//! The round robin keeps every member within one frame of its speed's share of the bytes (see
//! [`StripeTx`]), so the member-count sweep, a what-if, is not run frame by frame: each count's
//! members get the input's packets and bytes split in proportion to their speeds (member `i`
//! at the `i`-th configured speed, or the first one's past the list). Running the sweep's
//! counts too would cost a run per count for every frame, about half the planner's speed.
//! A flow list has no packet order or sizes either: each row is split the same way. A capture taken on the host's side of a bond shows its TCP super-frames
//! (TSO/GSO) whole, where the daemon segments them before striping; the planner stripes the
//! frames as captured.

use super::buckets::weight_mbps;
use super::config::speed_for;
use super::load::Load;
use crate::port::PortId;
use crate::stripe::StripeTx;
use crate::stripe::header::HEADER_LEN;

/// One member set striped over.
#[derive(Debug, Clone)]
pub(super) struct StripeRun {
    /// Member speeds in Mb/s, by position.
    speeds: Vec<u32>,
    tx: StripeTx,
    /// Load by position.
    pub(super) loads: Vec<Load>,
}

impl StripeRun {
    fn new(speeds: Vec<u32>) -> Self {
        let mut tx = StripeTx::new(0);
        let members: Vec<(PortId, u32)> = speeds
            .iter()
            .enumerate()
            .map(|(i, &s)| (PortId(i as u16), s))
            .collect();
        tx.set_members(&members);
        Self {
            loads: vec![Load::default(); speeds.len()],
            speeds,
            tx,
        }
    }

    /// One frame of `bytes`: its member's position.
    #[inline(always)]
    fn frame(&mut self, bytes: u64) -> usize {
        let p = if self.loads.len() == 1 {
            0
        } else {
            let len = usize::try_from(bytes)
                .unwrap_or(usize::MAX)
                .saturating_add(HEADER_LEN);
            self.tx.choose(len).map_or(0, PortId::index)
        };
        self.loads[p].add(1, bytes);
        p
    }

    /// A flow-list row: `packets` and `bytes` split by speed (largest remainders for the
    /// packets). Returns the positions that got a packet, as bits (positions below 64).
    fn row(&mut self, packets: u64, bytes: u64) -> u64 {
        let total: u128 = self.speeds.iter().map(|&s| u128::from(s)).sum();
        let mut given_p = 0u64;
        let mut given_b = 0u64;
        let mut rem: Vec<(u128, usize)> = Vec::with_capacity(self.speeds.len());
        let mut share = vec![0u64; self.speeds.len()];
        for (i, &s) in self.speeds.iter().enumerate() {
            let p = u128::from(packets) * u128::from(s);
            share[i] = (p / total) as u64;
            rem.push((p % total, i));
            given_p += share[i];
            let b = (u128::from(bytes) * u128::from(s) / total) as u64;
            self.loads[i].add(0, b);
            given_b += b;
        }
        rem.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        for &(_, i) in rem.iter().take((packets - given_p) as usize) {
            share[i] += 1;
        }
        self.loads[0].add(0, bytes - given_b);
        let mut mask = 0u64;
        for (i, &p) in share.iter().enumerate() {
            self.loads[i].add(p, 0);
            if p > 0 && i < 64 {
                mask |= 1 << i;
            }
        }
        mask
    }
}

/// The stripe policy's state: one [`StripeRun`] per distinct member set.
#[derive(Debug, Clone)]
pub(super) struct StripeAcc {
    runs: Vec<StripeRun>,
    /// The configured members' run.
    main: usize,
    /// Per failed member, the survivors' run (empty when failures are not evaluated).
    failures: Vec<usize>,
    /// Per-flow member masks are kept (at most 64 members).
    pub(super) masks: bool,
}

impl StripeAcc {
    /// Runs for `speeds` (Gbit/s, the configured members) and, if `failures`, each member
    /// failing.
    pub(super) fn new(speeds: &[f64], failures: bool) -> Self {
        let n = speeds.len();
        let speed = |i: usize| weight_mbps(speeds[i]);
        let mut runs: Vec<StripeRun> = Vec::new();
        let mut run_of = |s: Vec<u32>| match runs.iter().position(|r| r.speeds == s) {
            Some(i) => i,
            None => {
                runs.push(StripeRun::new(s));
                runs.len() - 1
            }
        };
        let main = run_of((0..n).map(speed).collect());
        let failures = if failures {
            (0..n)
                .map(|f| run_of((0..n).filter(|&i| i != f).map(speed).collect()))
                .collect()
        } else {
            Vec::new()
        };
        Self {
            runs,
            main,
            failures,
            masks: n <= 64,
        }
    }

    /// One frame of `bytes`, in input order. Returns its member's bit (configured members;
    /// 0 without masks).
    #[inline]
    pub(super) fn frame(&mut self, bytes: u64) -> u64 {
        let mut chosen = 0;
        for (i, r) in self.runs.iter_mut().enumerate() {
            let p = r.frame(bytes);
            if i == self.main {
                chosen = p;
            }
        }
        if self.masks { 1 << chosen } else { 0 }
    }

    /// A flow-list row. Returns the configured members that got a packet, as bits.
    pub(super) fn row(&mut self, packets: u64, bytes: u64) -> u64 {
        let mut mask = 0;
        for (i, r) in self.runs.iter_mut().enumerate() {
            let m = r.row(packets, bytes);
            if i == self.main {
                mask = m;
            }
        }
        if self.masks { mask } else { 0 }
    }

    /// The configured members' loads.
    pub(super) fn main(&self) -> &[Load] {
        &self.runs[self.main].loads
    }

    /// The loads with `c` members (speeds as in `speeds`, the first one's past the list) of
    /// `packets` and `bytes` in all: split by speed.
    pub(super) fn sweep(c: usize, speeds: &[f64], packets: u64, bytes: u64) -> Vec<Load> {
        let s = (0..c).map(|i| weight_mbps(speed_for(speeds, i))).collect();
        let mut run = StripeRun::new(s);
        run.row(packets, bytes);
        run.loads
    }

    /// The survivors' loads (by position among them) when member `f` fails, if evaluated.
    pub(super) fn failure(&self, f: usize) -> Option<&[Load]> {
        self.failures.get(f).map(|&r| &self.runs[r].loads[..])
    }

    /// How many distinct member sets are striped over per frame (one-member sets excluded).
    #[cfg(test)]
    pub(super) fn live_runs(&self) -> usize {
        self.runs.iter().filter(|r| r.loads.len() > 1).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn member_sets_with_equal_speeds_share_a_run() {
        // Two equal members: the failures leave one member each, which needs no run.
        assert_eq!(StripeAcc::new(&[10.0, 10.0], true).live_runs(), 1);
        // Four equal members: every failure leaves the same three.
        assert_eq!(StripeAcc::new(&[10.0; 4], true).live_runs(), 2);
        // Unequal: the configured set and three distinct survivor sets.
        assert_eq!(StripeAcc::new(&[10.0, 25.0, 1.0], true).live_runs(), 4);
        assert_eq!(StripeAcc::new(&[10.0, 25.0, 1.0], false).live_runs(), 1);
        // Speeds in Mb/s as the daemon weighs them, never 0 (which would mean unknown).
        assert_eq!(weight_mbps(2.5), 2500);
        assert_eq!(weight_mbps(1e-9), 1);
        assert_eq!(weight_mbps(1e12), u32::MAX);
    }

    #[test]
    fn shared_runs_give_each_failure_the_daemons_choices() {
        let mut acc = StripeAcc::new(&[10.0, 10.0, 10.0], true);
        let mut tx = StripeTx::new(0);
        tx.set_members(&[(PortId(0), 10_000), (PortId(1), 10_000)]);
        let mut want = [Load::default(); 2];
        for i in 0..500u64 {
            let bytes = 60 + (i * 37) % 1400;
            acc.frame(bytes);
            let p = tx.choose(bytes as usize + HEADER_LEN).unwrap().index();
            want[p].add(1, bytes);
        }
        for f in 0..3 {
            assert_eq!(acc.failure(f), Some(&want[..]), "m{f} down");
        }
        assert_eq!(acc.failure(3), None);
    }
}
