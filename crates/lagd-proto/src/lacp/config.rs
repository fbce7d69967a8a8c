//! The bond's LACP configuration, and the protocol's constants and partner defaults.

use core::fmt;
use core::str::FromStr;
use core::time::Duration;

use crate::wire::EthernetAddress;
use crate::wire::slow::{LacpInfo, PortState};

/// Fast_Periodic_Time: the LACPDU interval a partner asking for the short timeout gets.
pub const FAST_PERIODIC_TIME: Duration = Duration::from_secs(1);
/// Slow_Periodic_Time: the LACPDU interval a partner asking for the long timeout gets.
pub const SLOW_PERIODIC_TIME: Duration = Duration::from_secs(30);
/// Short_Timeout_Time: `current_while` with a short timeout (3 × [`FAST_PERIODIC_TIME`]), and
/// the time spent in EXPIRED.
pub const SHORT_TIMEOUT_TIME: Duration = Duration::from_secs(3);
/// Long_Timeout_Time: `current_while` with a long timeout (3 × [`SLOW_PERIODIC_TIME`]).
pub const LONG_TIMEOUT_TIME: Duration = Duration::from_secs(90);
/// Churn_Detection_Time: how long a port may stay out of sync before churn is declared.
pub const CHURN_DETECTION_TIME: Duration = Duration::from_secs(60);
/// Aggregate_Wait_Time: the `wait_while` time a port spends in WAITING before it attaches.
pub const AGGREGATE_WAIT_TIME: Duration = Duration::from_secs(2);
/// The most LACPDUs a port sends in any [`FAST_PERIODIC_TIME`] interval.
pub const MAX_TX_PER_FAST_PERIODIC: usize = 3;

/// The partner administrative defaults (`Partner_Admin_*`), loaded by recordDefault.
pub(crate) const PARTNER_ADMIN: LacpInfo = LacpInfo {
    system_priority: 65535,
    system: EthernetAddress::ZERO,
    key: 1,
    port_priority: 255,
    port: 1,
    state: PortState::EMPTY,
};

/// `lacp_rate`: the LACPDU rate lagd asks of its partner (its LACP_Timeout bit).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum LacpRate {
    /// Long timeout: the partner sends every 30 s (kernel default).
    #[default]
    Slow,
    /// Short timeout: the partner sends every second.
    Fast,
}

/// `ad_select`: how the active aggregator is chosen (see `select.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum AdSelect {
    /// Keep the active aggregator while it has ports up; otherwise as `Bandwidth` (default).
    #[default]
    Stable,
    /// The aggregator with the most bandwidth.
    Bandwidth,
    /// The aggregator with the most ports; ties by bandwidth.
    Count,
    /// The aggregator whose ports' `actor_port_prio` values add up to the most (Linux 6.18);
    /// ties by port count, then by bandwidth. The kernel's value 3.
    ActorPortPrio,
}

/// A config value name that is not one of the kernel's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParseNameError;

impl fmt::Display for ParseNameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("unknown value name")
    }
}

impl std::error::Error for ParseNameError {}

impl LacpRate {
    /// The kernel's name: `slow` or `fast`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Slow => "slow",
            Self::Fast => "fast",
        }
    }
}

impl FromStr for LacpRate {
    type Err = ParseNameError;

    /// Accepts the kernel's names and numbers: `slow`/`0`, `fast`/`1`.
    fn from_str(s: &str) -> Result<Self, ParseNameError> {
        match s {
            "slow" | "0" => Ok(Self::Slow),
            "fast" | "1" => Ok(Self::Fast),
            _ => Err(ParseNameError),
        }
    }
}

impl fmt::Display for LacpRate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl AdSelect {
    /// The kernel's name: `stable`, `bandwidth`, `count` or `actor_port_prio`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Stable => "stable",
            Self::Bandwidth => "bandwidth",
            Self::Count => "count",
            Self::ActorPortPrio => "actor_port_prio",
        }
    }
}

impl FromStr for AdSelect {
    type Err = ParseNameError;

    /// Accepts the kernel's names and numbers: `stable`/`0`, `bandwidth`/`1`, `count`/`2`,
    /// `actor_port_prio`/`3`.
    fn from_str(s: &str) -> Result<Self, ParseNameError> {
        match s {
            "stable" | "0" => Ok(Self::Stable),
            "bandwidth" | "1" => Ok(Self::Bandwidth),
            "count" | "2" => Ok(Self::Count),
            "actor_port_prio" | "3" => Ok(Self::ActorPortPrio),
            _ => Err(ParseNameError),
        }
    }
}

impl fmt::Display for AdSelect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Bond-level LACP configuration, with the Linux bonding option names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LacpConfig {
    /// `lacp_rate`: the rate asked of the partner (our LACP_Timeout bit).
    pub lacp_rate: LacpRate,
    /// `lacp_active`: on (active, sends LACPDUs unprompted) or off (passive).
    pub lacp_active: bool,
    /// `ad_select`: how the active aggregator is chosen.
    pub ad_select: AdSelect,
    /// `ad_actor_sys_prio`: the system priority, 1..=65535 (default 65535).
    pub ad_actor_sys_prio: u16,
    /// `ad_actor_system`: the system identifier; all-zero (default) means the bond MAC.
    pub ad_actor_system: EthernetAddress,
    /// `ad_user_port_key`: the upper 10 bits of every port's key, 0..=1023 (default 0).
    pub ad_user_port_key: u16,
    /// `min_links`: ports that must be distributing for the bond to have carrier.
    pub min_links: u32,
    /// `coupled_control`: on (default) collecting and distributing switch together; off, a port
    /// collects first and distributes once the partner collects (802.1AX-2014 §6.4.15).
    pub coupled_control: bool,
    /// LACP fallback to active-backup (Open vSwitch's `lacp-fallback-ab`): after this long
    /// without a partner on any port, one port carries traffic. `None` (default): off.
    pub fallback: Option<Duration>,
    /// How long a selected port waits in WAITING before it attaches, so the other ports of its
    /// aggregator can join it at once. 802.1AX's Aggregate_Wait_Time, 2 s, by default; shorter
    /// forms aggregations faster (Open vSwitch does not wait at all) at the cost of attaching
    /// ports one by one when they come up together.
    pub aggregate_wait: Duration,
    /// Flap dampening (lagd's `lacp_rejoin_hold`): a port whose link was down for at most this
    /// long, and that comes back to the partner it had (same system, key and port number)
    /// while it was in sync, attaches without the aggregate wait. With members flapping in
    /// turn, each one that returns carries traffic at once instead of waiting 2 s (and losing
    /// its link again before it ever distributes). Zero (default): off, as the kernel does.
    pub rejoin_hold: Duration,
}

impl Default for LacpConfig {
    /// The kernel's defaults: slow rate, active, stable, priority 65535, bond MAC as system,
    /// user key 0, `min_links` 0, coupled control; no fallback.
    fn default() -> Self {
        Self {
            lacp_rate: LacpRate::Slow,
            lacp_active: true,
            ad_select: AdSelect::Stable,
            ad_actor_sys_prio: 65535,
            ad_actor_system: EthernetAddress::ZERO,
            ad_user_port_key: 0,
            min_links: 0,
            coupled_control: true,
            fallback: None,
            aggregate_wait: AGGREGATE_WAIT_TIME,
            rejoin_hold: Duration::ZERO,
        }
    }
}

/// Why a [`LacpConfig`] was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigError {
    /// `ad_actor_sys_prio` is 0 (the kernel accepts 1..=65535).
    SystemPriorityZero,
    /// `ad_user_port_key` is above 1023 (it has 10 bits).
    UserPortKeyTooLarge,
    /// `ad_actor_system` is a multicast address.
    ActorSystemMulticast,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::SystemPriorityZero => "ad_actor_sys_prio must be 1..65535",
            Self::UserPortKeyTooLarge => "ad_user_port_key must be 0..1023",
            Self::ActorSystemMulticast => "ad_actor_system must not be a multicast address",
        })
    }
}

impl std::error::Error for ConfigError {}

impl LacpConfig {
    /// Checks the values the kernel would refuse.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.ad_actor_sys_prio == 0 {
            return Err(ConfigError::SystemPriorityZero);
        }
        if self.ad_user_port_key > 1023 {
            return Err(ConfigError::UserPortKeyTooLarge);
        }
        if self.ad_actor_system.is_multicast() {
            return Err(ConfigError::ActorSystemMulticast);
        }
        Ok(())
    }
}
