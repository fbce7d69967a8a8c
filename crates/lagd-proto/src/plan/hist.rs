//! The hash-based distributors' histograms (the hash policies' and the switch hashes'):
//! per-member load by `hash % n`, and by member before and after a failure.

use super::load::Load;
use crate::hash::MemberMod;

/// Per-member load for one member count, indexed by `hash % n`.
#[derive(Debug, Clone)]
pub(super) struct Hist {
    pub(super) n: usize,
    pub(super) m: MemberMod,
    pub(super) cells: Vec<Load>,
}

/// Load by (member before, index among survivors after a failure) for the configured count.
#[derive(Debug, Clone)]
pub(super) struct FailHist {
    pub(super) n: usize,
    m: MemberMod,
    m1: MemberMod,
    pub(super) ovs: bool,
    pub(super) cells: Vec<Load>,
}

impl FailHist {
    #[inline(always)]
    pub(super) fn cell(&self, h: u32) -> usize {
        let a = self.m.index(h);
        let b = self.m1.index(if self.ovs { h & 0xff } else { h });
        a * (self.n - 1) + b
    }
}

/// The histograms of one hash-based distributor (a hash policy or a switch hash).
#[derive(Debug, Clone)]
pub(super) struct HashAcc {
    hists: Vec<Hist>,
    pub(super) fail: Option<FailHist>,
}

impl HashAcc {
    pub(super) fn new(counts: &[usize], fail: Option<(usize, bool)>) -> Self {
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
    pub(super) fn account(&mut self, h: u32, packets: u64, bytes: u64) {
        for hist in &mut self.hists {
            hist.cells[hist.m.index(h)].add(packets, bytes);
        }
        if let Some(f) = &mut self.fail {
            let c = f.cell(h);
            f.cells[c].add(packets, bytes);
        }
    }

    pub(super) fn hist(&self, n: usize) -> &Hist {
        self.hists
            .iter()
            .find(|h| h.n == n)
            .expect("histograms exist for every member count asked for")
    }
}
