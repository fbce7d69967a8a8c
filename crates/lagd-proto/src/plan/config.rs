//! What to plan for ([`PlanConfig`]) and the planner's limits.

use super::error::PlanError;
use super::policy::PlanPolicy;
use super::switch::SwitchHash;
use crate::balance::BalanceConfig;

/// What to plan for.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanConfig {
    /// The policies to evaluate, at least one.
    pub policies: Vec<PlanPolicy>,
    /// Each member's speed in Gbit/s; the member count is the length (1 to [`MAX_MEMBERS`]).
    pub speeds_gbps: Vec<f64>,
    /// Other member counts to evaluate (each 1 to [`MAX_MEMBERS`]); by default 2, 3, 4, 8.
    pub sweep: Vec<usize>,
    /// The switch hash whose return path the report details (all are computed).
    pub switch_hash: SwitchHash,
    /// The most flows tracked individually (at least 1).
    pub max_flows: usize,
    /// How many of the largest flows to report as elephants.
    pub elephants: usize,
    /// Hash a flow's simple frames once (the default); `false` hashes every frame, which gives
    /// the same figures more slowly (tests use it to check the shortcut).
    pub reuse_hashes: bool,
    /// The bucket table's configuration for bucket policies; by default
    /// [`BalanceConfig::default`], which the daemon's defaults match (a rebalance every 10 s,
    /// hash seed 0, 50 ms idle gap, 16 moves per interval...). A zero `rebalance_interval`
    /// turns load rebalancing off.
    pub balance: BalanceConfig,
}

/// The most members the planner handles.
pub const MAX_MEMBERS: usize = 1024;
/// The most members for which each member's failure is evaluated.
pub const MAX_FAILURE_MEMBERS: usize = 64;
/// The default cap on tracked flows: 7/8 of 2^20, the most a 2^20-slot table holds (160 MB of
/// table; a peak of about 275 MB while it grows and at the end, see the module documentation).
pub const DEFAULT_MAX_FLOWS: usize = 917_504;

impl PlanConfig {
    /// Every hash policy, balance-rr and stripe ([`PlanPolicy::ALL`]), `members` members of 10 Gbit/s, the
    /// default sweep, caps and bucket table.
    pub fn new(members: usize) -> Self {
        Self {
            policies: PlanPolicy::ALL.to_vec(),
            speeds_gbps: vec![10.0; members],
            sweep: vec![2, 3, 4, 8],
            switch_hash: SwitchHash::SrcDstIp,
            max_flows: DEFAULT_MAX_FLOWS,
            elephants: 10,
            reuse_hashes: true,
            balance: BalanceConfig::default(),
        }
    }

    /// The member count.
    pub fn members(&self) -> usize {
        self.speeds_gbps.len()
    }

    pub(super) fn check(&self) -> Result<(), PlanError> {
        let bad = |m: String| Err(PlanError::Config(m));
        let n = self.members();
        if n == 0 || n > MAX_MEMBERS {
            return bad(format!(
                "the bond needs 1 to {MAX_MEMBERS} members, not {n}"
            ));
        }
        if let Some(s) = self
            .speeds_gbps
            .iter()
            .find(|s| !(s.is_finite() && **s > 0.0))
        {
            return bad(format!("member speed {s} Gbit/s is not a positive number"));
        }
        if let Some(&s) = self.sweep.iter().find(|&&s| s == 0 || s > MAX_MEMBERS) {
            return bad(format!("sweep member count {s} is not 1 to {MAX_MEMBERS}"));
        }
        if self.policies.is_empty() {
            return bad("no policy to evaluate".into());
        }
        if self.max_flows == 0 {
            return bad("the flow cap must be at least 1".into());
        }
        Ok(())
    }
}

/// Member `i`'s speed in Gbit/s: its configured speed, or the first member's for members beyond
/// the configured ones (the member-count sweep).
pub(super) fn speed_for(speeds: &[f64], i: usize) -> f64 {
    speeds.get(i).copied().unwrap_or(speeds[0])
}
