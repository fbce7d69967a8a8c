//! balance-xor, 802.3ad, balance-slb and balance-tcp: the policy's hash picks a usable member,
//! modulo their number (the kernel's `bond_xmit_3ad_xor_slave_get`) or through the 256-bucket
//! table (Open vSwitch's bond, and `distribution=buckets`).

use core::time::Duration;

use crate::balance::{BalanceConfig, Buckets};
use crate::bond::options::BondOptions;
use crate::bond::select::Selection;
use crate::hash::{HashPolicy, hasher};
use crate::port::PortId;
use crate::time::Instant;

/// The state of a mode that hashes.
#[derive(Debug, Clone)]
pub(crate) struct Hashed {
    pub(crate) policy: HashPolicy,
    hash: fn(&[u8]) -> u32,
    pub(crate) buckets: Option<Buckets>,
}

impl Hashed {
    /// Hashing with `policy`, through `buckets` when given.
    pub(crate) fn new(policy: HashPolicy, buckets: Option<Buckets>) -> Self {
        Self {
            policy,
            hash: hasher(policy),
            buckets,
        }
    }

    /// The member for `frame`; `None` when no member is usable.
    #[inline]
    pub(crate) fn choose(&mut self, now: Instant, frame: &[u8], sel: &Selection) -> Option<PortId> {
        let hash = (self.hash)(frame);
        self.member_for(now, hash, frame.len(), sel)
    }

    /// The member for a frame of `len` bytes whose hash is `hash`.
    pub(crate) fn member_for(
        &mut self,
        now: Instant,
        hash: u32,
        len: usize,
        sel: &Selection,
    ) -> Option<PortId> {
        match &mut self.buckets {
            Some(b) => b.member_for(now, hash, len as u32),
            None => sel.by_hash(hash),
        }
    }

    /// The usable members and their weights, for the bucket table.
    pub(crate) fn set_members(&mut self, now: Instant, weighted: &[(PortId, u32)]) {
        if let Some(b) = &mut self.buckets {
            b.set_members(now, weighted);
        }
    }
}

/// The bucket table's configuration the bonding options describe.
pub(crate) fn balance_config(o: &BondOptions) -> BalanceConfig {
    BalanceConfig {
        rebalance_interval: Duration::from_millis(o.rebalance_interval.into()),
        seed: o.hash_seed,
        idle_gap: Duration::from_millis(o.rebalance_idle_gap.into()),
        max_moves: o.rebalance_max_moves,
        force_after: o.rebalance_force_after,
        ..BalanceConfig::default()
    }
}
