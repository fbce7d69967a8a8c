//! The ways to spread frames over members that the planner evaluates ([`PlanPolicy`]).

use core::fmt;
use core::str::FromStr;

use crate::hash::HashPolicy;

/// A way to spread frames over members that the planner evaluates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PlanPolicy {
    /// A transmit hash policy (`balance-xor`, `802.3ad`, or an Open vSwitch bond).
    Hash(HashPolicy),
    /// `balance-rr`: packet `i` on member `i % n`.
    RoundRobin,
    /// lagd's `mode=stripe`: every frame over the members by bytes, weighted by speed, put back
    /// in order by the lagd at the other end (so it needs lagd in `mode=stripe` at both ends).
    Stripe,
    /// The transmit hash through lagd's 256-bucket table, rebalanced by load and weighted by
    /// member speed ([`crate::balance`]): `balance-tcp` (ovs-tcp), `balance-slb` (ovs-slb), or
    /// balance-xor and 802.3ad with `distribution=buckets` (any hash).
    Buckets(HashPolicy),
}

impl PlanPolicy {
    /// The default set (`lagctl plan --policy all`): the eight hash policies, then
    /// `balance-rr` and `stripe` (cheap enough: one run of the daemon's striping sender per
    /// frame with equal members; see [`stripe`](super::stripe)).
    pub const ALL: [Self; 10] = [
        Self::Hash(HashPolicy::Layer2),
        Self::Hash(HashPolicy::Layer23),
        Self::Hash(HashPolicy::Layer34),
        Self::Hash(HashPolicy::Encap23),
        Self::Hash(HashPolicy::Encap34),
        Self::Hash(HashPolicy::VlanSrcMac),
        Self::Hash(HashPolicy::OvsSlb),
        Self::Hash(HashPolicy::OvsTcp),
        Self::RoundRobin,
        Self::Stripe,
    ];

    /// The usual bucket policies: layer3+4 through buckets (balance-xor or 802.3ad with
    /// `distribution=buckets`), `balance-tcp` and `balance-slb`.
    pub const BUCKETED: [Self; 3] = [
        Self::Buckets(HashPolicy::Layer34),
        Self::Buckets(HashPolicy::OvsTcp),
        Self::Buckets(HashPolicy::OvsSlb),
    ];

    /// `lagctl plan --policy all+buckets`: [`PlanPolicy::ALL`], then [`PlanPolicy::BUCKETED`].
    /// Not the default: each bucket policy runs a table per frame for every what-if (member
    /// count, failure), which takes the planner from 16 to about 7 million frames a second.
    pub const ALL_WITH_BUCKETS: [Self; 13] = [
        Self::ALL[0],
        Self::ALL[1],
        Self::ALL[2],
        Self::ALL[3],
        Self::ALL[4],
        Self::ALL[5],
        Self::ALL[6],
        Self::ALL[7],
        Self::ALL[8],
        Self::ALL[9],
        Self::BUCKETED[0],
        Self::BUCKETED[1],
        Self::BUCKETED[2],
    ];

    /// The name users write: a hash policy's name, `balance-rr`, `stripe`, `balance-tcp`,
    /// `balance-slb`, or a hash policy's name followed by `+buckets` (`layer3+4+buckets`).
    pub const fn name(self) -> &'static str {
        match self {
            Self::Hash(p) => p.name(),
            Self::RoundRobin => "balance-rr",
            Self::Stripe => "stripe",
            Self::Buckets(p) => match p {
                HashPolicy::OvsTcp => "balance-tcp",
                HashPolicy::OvsSlb => "balance-slb",
                HashPolicy::Layer2 => "layer2+buckets",
                HashPolicy::Layer23 => "layer2+3+buckets",
                HashPolicy::Layer34 => "layer3+4+buckets",
                HashPolicy::Encap23 => "encap2+3+buckets",
                HashPolicy::Encap34 => "encap3+4+buckets",
                HashPolicy::VlanSrcMac => "vlan+srcmac+buckets",
            },
        }
    }

    /// The transmit hash the policy uses, if any (`None` for `balance-rr` and `stripe`).
    pub const fn hash(self) -> Option<HashPolicy> {
        match self {
            Self::Hash(p) | Self::Buckets(p) => Some(p),
            Self::RoundRobin | Self::Stripe => None,
        }
    }

    /// What the policy needs beyond a bond against any peer (a switch, a kernel bond): for
    /// `stripe`, lagd in `mode=stripe` at both ends.
    pub const fn needs(self) -> Option<&'static str> {
        match self {
            Self::Stripe => Some("needs lagd mode=stripe at both ends"),
            _ => None,
        }
    }
}

impl fmt::Display for PlanPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for PlanPolicy {
    type Err = String;

    /// A hash policy name, `balance-rr` (also `rr`, `round-robin`), `stripe`, `balance-tcp`,
    /// `balance-slb`, or a hash policy name followed by `+buckets` (`ovs-tcp+buckets` is
    /// `balance-tcp`).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bucketed = s.strip_suffix("+buckets").map(str::parse::<HashPolicy>);
        match s {
            "balance-rr" | "rr" | "round-robin" => Ok(Self::RoundRobin),
            "stripe" => Ok(Self::Stripe),
            "balance-tcp" => Ok(Self::Buckets(HashPolicy::OvsTcp)),
            "balance-slb" => Ok(Self::Buckets(HashPolicy::OvsSlb)),
            _ => match bucketed {
                Some(Ok(h)) => Ok(Self::Buckets(h)),
                _ => s.parse::<HashPolicy>().map(Self::Hash).map_err(|_| {
                    let names: Vec<&str> = Self::ALL_WITH_BUCKETS.iter().map(|p| p.name()).collect();
                    format!(
                        "unknown policy '{s}' (expected all or one of: {}; or a hash policy followed by +buckets)",
                        names.join(" ")
                    )
                }),
            },
        }
    }
}
