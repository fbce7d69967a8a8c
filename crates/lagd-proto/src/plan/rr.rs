//! `balance-rr` in the planner: per-member load and reordering risk, kept for every member
//! count at once.

use super::load::Load;
use crate::hash::MemberMod;

/// `balance-rr`'s state. Packet `i` leaves on member `i % n`, so for member counts whose
/// least common multiple `l` is small, one table indexed by `i % l` (and one of the gaps
/// between a flow's packets, by `gap % l`) serves them all at one update per packet; the
/// counts are folded out of it at the end. Counts are grouped so each group's `l` stays at
/// most [`RR_MAX_PERIOD`] (one group in practice).
#[derive(Debug, Clone)]
pub(super) struct RrAcc {
    groups: Vec<RrGroup>,
    /// Flow-list rows (bursts of known size): per member count, loads and reordering.
    bursts: Vec<(usize, Vec<Load>, (u64, u64))>,
    /// IGMP frames: they leave on the first usable member and do not advance the counter.
    igmp: Load,
    /// The configured member count when it is at most 64, so a flow's members fit in a `u64`
    /// ([`Entry::rr_mask`](super::planner::Entry::rr_mask)); 0 otherwise (no masks kept).
    pub(super) mask_n: usize,
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
    pub(super) fn new(counts: &[usize], n: usize) -> Self {
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
    /// [`Entry::rr_mask`](super::planner::Entry::rr_mask) (0 when no masks are kept).
    #[inline(always)]
    pub(super) fn packet(&mut self, bytes: u64) -> u64 {
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
    pub(super) fn igmp(&mut self, packets: u64, bytes: u64) -> u64 {
        self.igmp.add(packets, bytes);
        u64::from(self.mask_n != 0)
    }

    /// The members (as [`Entry::rr_mask`](super::planner::Entry::rr_mask) bits) of `packets`
    /// packets back to back from the current position, which it advances past them.
    pub(super) fn burst_mask(&mut self, packets: u64) -> u64 {
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
    pub(super) fn burst(&mut self, position: u64, packets: u64, bytes: u64, tcp: bool) {
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
    pub(super) fn gap(&mut self, gap: u64, tcp: bool) {
        // A gap beyond 2^32 packets carries no reordering risk: count it as 0.
        let g = u32::try_from(gap).unwrap_or(0);
        for grp in &mut self.groups {
            let c = &mut grp.gaps[grp.m.index(g)];
            c.0 += 1;
            c.1 += u64::from(tcp);
        }
    }

    /// Per-member loads and reordering (all, TCP) for `n` members.
    pub(super) fn for_count(&self, n: usize) -> (Vec<Load>, (u64, u64)) {
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
