//! Bonding options with the Linux driver's names, values, ranges and defaults.
//!
//! [`BondOptions::parse_opts`] takes a `BONDING_OPTS` / NetworkManager `bond.options` string
//! verbatim (`mode=802.3ad miimon=100 xmit_hash_policy=layer3+4`); [`BondOptions::set`] takes one
//! key and value (what a config file line gives). Enumerated options accept the kernel's names
//! and its numbers (`mode=4`, `xmit_hash_policy=1`), as sysfs and `BONDING_OPTS` do. A bad key or
//! value is an [`OptionError`] naming the key; nothing is changed by a failed call.
//!
//! Cross-option rules follow the driver, which applies options in order and corrects
//! combinations with a warning ([`BondOptions::finish`] returns them): ARP monitoring and
//! `miimon` exclude each other (the later wins), `arp_interval` without `arp_ip_target` (or
//! `ns_ip6_target`) is turned off, `updelay`/`downdelay` are rounded down to multiples of
//! `miimon`, and 802.3ad, balance-tlb and balance-alb force `miimon=100` when it is 0. ARP
//! monitoring is refused in those three modes, as the driver refuses it.

use core::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};

use crate::hash::HashPolicy;
pub use crate::lacp::{AdSelect, LacpRate};
use crate::wire::EthernetAddress;

macro_rules! kernel_enum {
    (
        $(#[$attr:meta])*
        pub enum $name:ident {
            $( $(#[$vattr:meta])* $variant:ident = ($num:expr, $text:expr) ),+ $(,)?
        }
    ) => {
        $(#[$attr])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name {
            $( $(#[$vattr])* $variant ),+
        }

        impl $name {
            /// Every value, in the kernel's numeric order.
            pub const ALL: &'static [Self] = &[$(Self::$variant),+];

            /// The kernel's name.
            pub const fn name(self) -> &'static str {
                match self { $(Self::$variant => $text),+ }
            }

            /// The kernel's number.
            pub const fn number(self) -> u8 {
                match self { $(Self::$variant => $num),+ }
            }

            /// Parses the kernel's name or number.
            pub fn parse(s: &str) -> Option<Self> {
                Self::ALL
                    .iter()
                    .copied()
                    .find(|v| v.name() == s || s.parse::<u8>().ok() == Some(v.number()))
            }

            fn expected() -> String {
                let names: Vec<&str> = Self::ALL.iter().map(|v| v.name()).collect();
                names.join(", ")
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}

kernel_enum! {
    /// The bonding mode.
    pub enum Mode {
        /// Round-robin over all members.
        BalanceRr = (0, "balance-rr"),
        /// One active member, the others standing by.
        ActiveBackup = (1, "active-backup"),
        /// Transmit hash modulo the usable members.
        BalanceXor = (2, "balance-xor"),
        /// Every frame on every member.
        Broadcast = (3, "broadcast"),
        /// IEEE 802.3ad / 802.1AX dynamic link aggregation (LACP).
        Ieee8023ad = (4, "802.3ad"),
        /// Adaptive transmit load balancing.
        BalanceTlb = (5, "balance-tlb"),
        /// Adaptive load balancing (transmit and ARP-negotiated receive).
        BalanceAlb = (6, "balance-alb"),
        /// lagd: Open vSwitch's balance-slb: source MAC and VLAN hashed into 256 buckets,
        /// rebalanced by load; no LACP; broadcast and multicast received on one member only.
        BalanceSlb = (16, "balance-slb"),
        /// lagd: Open vSwitch's balance-tcp: LACP (as 802.3ad) with the L3/L4 5-tuple hashed
        /// into 256 buckets, rebalanced by load.
        BalanceTcp = (17, "balance-tcp"),
        /// lagd: every frame round-robin over the members by speed, numbered, and put back in
        /// order by the lagd at the other end: one TCP stream gets the sum of the links.
        Stripe = (18, "stripe"),
    }
}

kernel_enum! {
    /// How balance-xor and 802.3ad map the transmit hash to a member (`distribution`, lagd).
    pub enum Distribution {
        /// `hash % usable members`, as the Linux driver (bit-exact placement).
        Modulo = (0, "modulo"),
        /// 256 buckets, moved between members by load (OVS-style), weighted by speed.
        Buckets = (1, "buckets"),
    }
}

impl Mode {
    /// The line `/proc/net/bonding` prints for the mode.
    pub const fn description(self) -> &'static str {
        match self {
            Self::BalanceRr => "load balancing (round-robin)",
            Self::ActiveBackup => "fault-tolerance (active-backup)",
            Self::BalanceXor => "load balancing (xor)",
            Self::Broadcast => "fault-tolerance (broadcast)",
            Self::Ieee8023ad => "IEEE 802.3ad Dynamic link aggregation",
            Self::BalanceTlb => "transmit load balancing",
            Self::BalanceAlb => "adaptive load balancing",
            Self::BalanceSlb => "source load balancing (Open vSwitch balance-slb)",
            Self::BalanceTcp => "IEEE 802.3ad with L4 hash buckets (Open vSwitch balance-tcp)",
            Self::Stripe => "stripe (ordered round-robin between two lagd ends)",
        }
    }

    /// Whether the mode runs LACP.
    pub const fn uses_lacp(self) -> bool {
        matches!(self, Self::Ieee8023ad | Self::BalanceTcp)
    }

    /// Whether the mode picks members with the transmit hash policy.
    pub const fn uses_hash(self) -> bool {
        matches!(self, Self::BalanceXor | Self::Ieee8023ad)
    }

    /// The hash the mode always uses, whatever `xmit_hash_policy` says (the OVS modes).
    pub const fn fixed_hash(self) -> Option<HashPolicy> {
        match self {
            Self::BalanceSlb => Some(HashPolicy::OvsSlb),
            Self::BalanceTcp => Some(HashPolicy::OvsTcp),
            _ => None,
        }
    }

    /// Bytes the mode adds to every data frame on the wire (stripe's sequence header): the
    /// members need that much more MTU than the bond.
    pub const fn encap_overhead(self) -> u32 {
        match self {
            Self::Stripe => crate::stripe::header::HEADER_LEN as u32,
            _ => 0,
        }
    }

    /// Whether the bond segments the host's TCP super-frames itself (stripe mode numbers every
    /// wire frame), so the host must not hand it UDP super-frames.
    pub const fn segments_in_software(self) -> bool {
        matches!(self, Self::Stripe)
    }

    /// Whether the mode has one active member (`primary`, `Currently Active Slave`).
    pub const fn uses_primary(self) -> bool {
        matches!(
            self,
            Self::ActiveBackup | Self::BalanceTlb | Self::BalanceAlb
        )
    }
}

kernel_enum! {
    /// When the primary member takes over again (`primary_reselect`).
    pub enum PrimaryReselect {
        /// Whenever it comes back.
        Always = (0, "always"),
        /// When it is better (speed, then duplex) than the current active member.
        Better = (1, "better"),
        /// Only when the current active member fails.
        Failure = (2, "failure"),
    }
}

kernel_enum! {
    /// lagd's `fastpath`: whether data frames are forwarded in the kernel, by tcx programs
    /// that read the bond's distribution, or through lagd.
    pub enum FastPathMode {
        /// In the kernel where the mode, the kernel and the privileges allow it; otherwise
        /// through lagd, saying why.
        Auto = (0, "auto"),
        /// In the kernel, or lagd refuses to start.
        On = (1, "on"),
        /// Through lagd.
        Off = (2, "off"),
    }
}

kernel_enum! {
    /// lagd's `fastpath_attach`: how lagd's programs (the fast path's, and the members'
    /// isolation drop) are attached to their interfaces.
    pub enum FastPathAttach {
        /// With tcx links where the kernel has tcx (Linux 6.6+), else as clsact filters.
        Auto = (0, "auto"),
        /// With tcx links only: without tcx, no kernel path and no ingress drop.
        Tcx = (1, "tcx"),
        /// As direct-action `cls_bpf` filters on the clsact qdisc (any kernel).
        Tc = (2, "tc"),
    }
}

kernel_enum! {
    /// How MAC addresses are handled on failover (`fail_over_mac`).
    pub enum FailOverMac {
        /// Every member takes the bond's MAC.
        None = (0, "none"),
        /// The bond takes the active member's MAC.
        Active = (1, "active"),
        /// The new active member takes the bond's MAC, the old one the new one's.
        Follow = (2, "follow"),
    }
}

kernel_enum! {
    /// Which ARP monitor replies count (`arp_validate`).
    pub enum ArpValidate {
        /// No validation.
        None = (0, "none"),
        /// Validate on the active member.
        Active = (1, "active"),
        /// Validate on backup members.
        Backup = (2, "backup"),
        /// Validate on all members.
        All = (3, "all"),
        /// Only ARP frames count.
        Filter = (4, "filter"),
        /// Filter, and validate on the active member.
        FilterActive = (5, "filter_active"),
        /// Filter, and validate on backup members.
        FilterBackup = (6, "filter_backup"),
    }
}

kernel_enum! {
    /// Whether any or all ARP targets must answer (`arp_all_targets`).
    pub enum ArpAllTargets {
        /// Any target answering keeps the member up.
        Any = (0, "any"),
        /// Every target must answer.
        All = (1, "all"),
    }
}

/// A rejected option.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OptionError {
    /// The option's name as given.
    pub key: String,
    /// What is wrong.
    pub reason: String,
}

impl fmt::Display for OptionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "option '{}': {}", self.key, self.reason)
    }
}

impl std::error::Error for OptionError {}

/// Every bonding option lagd understands, with the kernel's defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BondOptions {
    /// `mode` (default balance-rr).
    pub mode: Mode,
    /// `miimon`: link check interval in ms (0 = off; see [`BondOptions::finish`]).
    pub miimon: u32,
    /// `updelay` in ms.
    pub updelay: u32,
    /// `downdelay` in ms.
    pub downdelay: u32,
    /// `peer_notif_delay` in ms.
    pub peer_notif_delay: u32,
    /// `xmit_hash_policy` (default layer2).
    pub xmit_hash_policy: HashPolicy,
    /// `packets_per_slave` (balance-rr; 0 = a random member per frame).
    pub packets_per_slave: u16,
    /// `primary`: the preferred member's name.
    pub primary: Option<String>,
    /// `primary_reselect`.
    pub primary_reselect: PrimaryReselect,
    /// `fail_over_mac`.
    pub fail_over_mac: FailOverMac,
    /// `num_grat_arp`: gratuitous ARPs after a failover. The kernel's `num_peer_notif`, which
    /// `num_unsol_na` names too: setting either sets both.
    pub num_grat_arp: u8,
    /// `num_unsol_na`: unsolicited IPv6 neighbour advertisements (one per address) after a
    /// failover; always equal to `num_grat_arp` when set through the option names.
    pub num_unsol_na: u8,
    /// `all_slaves_active`: deliver frames received on backup members too.
    pub all_slaves_active: bool,
    /// `resend_igmp`.
    pub resend_igmp: u8,
    /// `arp_interval` in ms (0 = off).
    pub arp_interval: u32,
    /// `arp_ip_target` (at most 16).
    pub arp_ip_target: Vec<Ipv4Addr>,
    /// `ns_ip6_target` (at most 16): IPv6 targets the ARP monitor probes with neighbour
    /// solicitations, the IPv6 counterpart of `arp_ip_target`.
    pub ns_ip6_target: Vec<Ipv6Addr>,
    /// `arp_validate`.
    pub arp_validate: ArpValidate,
    /// `arp_all_targets`.
    pub arp_all_targets: ArpAllTargets,
    /// `arp_missed_max`.
    pub arp_missed_max: u8,
    /// `tlb_dynamic_lb`.
    pub tlb_dynamic_lb: bool,
    /// `lp_interval` in seconds.
    pub lp_interval: u32,
    /// `lacp_rate`.
    pub lacp_rate: LacpRate,
    /// `lacp_active`.
    pub lacp_active: bool,
    /// `ad_select`.
    pub ad_select: AdSelect,
    /// `ad_actor_sys_prio`.
    pub ad_actor_sys_prio: u16,
    /// `ad_actor_system` (`None`: the bond's MAC).
    pub ad_actor_system: Option<EthernetAddress>,
    /// `ad_user_port_key`.
    pub ad_user_port_key: u16,
    /// `min_links`.
    pub min_links: u32,
    /// `coupled_control`.
    pub coupled_control: bool,
    /// `use_carrier` (lagd always reads carrier; kept for compatibility).
    pub use_carrier: bool,
    /// lagd's `lacp_fallback` in ms (0 = off): active-backup when no LACPDU is ever heard.
    pub lacp_fallback: u32,
    /// lagd's `lacp_aggregate_wait` in ms: 802.1AX's Aggregate_Wait_Time (2000 by default).
    pub lacp_aggregate_wait: u32,
    /// lagd's `lacp_rejoin_hold` in ms (0 = off, the default): a member back within this
    /// long to the partner it had skips the aggregate wait (flap dampening).
    pub lacp_rejoin_hold: u32,
    /// `actor_port_prio` per member (the kernel's per-slave option, Linux 6.18), written
    /// `actor_port_prio=eth0:100,eth1:200`; members not named keep 255. Sent in the members'
    /// LACPDUs; with `ad_select=actor_port_prio` the aggregator whose members' values add up
    /// to the most carries the traffic. Changes at run time (as the kernel's per-slave option).
    pub actor_port_prio: Vec<(String, u16)>,
    /// `prio` per member (the kernel's per-slave option, Linux 6.0), written
    /// `prio=eth0:10,eth1:-50`; members not named have 0. Higher is preferred: with no
    /// primary up, a failover picks the highest, and a member coming up with a higher one than
    /// the active member's takes over as `primary_reselect` allows (active-backup,
    /// balance-tlb and balance-alb).
    pub prio: Vec<(String, i32)>,
    /// lagd's `fastpath`.
    pub fastpath: FastPathMode,
    /// lagd's `fastpath_attach`.
    pub fastpath_attach: FastPathAttach,
    /// lagd's `broadcast_dedup` (on by default): in broadcast mode the far end sends every
    /// frame on each link, and the kernel bond hands the host each copy (ping says `DUP!`,
    /// TCP answers each duplicate with an ACK). With it a member does not deliver a frame
    /// identical to one another member delivered within the last millisecond, as long as
    /// fewer copies of it than usable members arrived ([`super::dedup`]). Off: the kernel's
    /// behaviour.
    pub broadcast_dedup: bool,
    /// lagd's `distribution` for balance-xor and 802.3ad (balance-slb and balance-tcp always
    /// use buckets; balance-tlb and balance-alb use them with `tlb_dynamic_lb`).
    pub distribution: Distribution,
    /// lagd's `rebalance_interval` in ms (0 = never): how often the buckets are rebalanced.
    pub rebalance_interval: u32,
    /// lagd's `rebalance_idle_gap` in ms: a bucket moves only after this long without a frame,
    /// so a moved flow is not reordered.
    pub rebalance_idle_gap: u32,
    /// lagd's `rebalance_max_moves`: buckets moved per rebalancing at most.
    pub rebalance_max_moves: u16,
    /// lagd's `rebalance_force_after`: rebalancings in a row with an overload that only busy
    /// buckets could relieve, after which those move at once (0: strictly flowlet-safe).
    pub rebalance_force_after: u32,
    /// lagd's `hash_seed`, mixed into the bucket choice (0: the hash's low 8 bits, as OVS).
    pub hash_seed: u32,
    /// lagd's `member_speed=eth0:1000,eth1:10000` in Mb/s: weights that override what the
    /// member reports (ethtool), for buckets and stripe.
    pub member_speed: Vec<(String, u32)>,
    /// Which keys were given explicitly (for warnings about turning monitoring off).
    pub(crate) explicit_miimon: bool,
    /// Every key set successfully, sorted (for warnings about options a mode ignores).
    pub(crate) given: Vec<String>,
}

impl Default for BondOptions {
    fn default() -> Self {
        Self {
            mode: Mode::BalanceRr,
            miimon: 0,
            updelay: 0,
            downdelay: 0,
            peer_notif_delay: 0,
            xmit_hash_policy: HashPolicy::Layer2,
            packets_per_slave: 1,
            primary: None,
            primary_reselect: PrimaryReselect::Always,
            fail_over_mac: FailOverMac::None,
            num_grat_arp: 1,
            num_unsol_na: 1,
            all_slaves_active: false,
            resend_igmp: 1,
            arp_interval: 0,
            arp_ip_target: Vec::new(),
            ns_ip6_target: Vec::new(),
            arp_validate: ArpValidate::None,
            arp_all_targets: ArpAllTargets::Any,
            arp_missed_max: 2,
            tlb_dynamic_lb: true,
            lp_interval: 1,
            lacp_rate: LacpRate::Slow,
            lacp_active: true,
            ad_select: AdSelect::Stable,
            ad_actor_sys_prio: 65535,
            ad_actor_system: None,
            ad_user_port_key: 0,
            min_links: 0,
            coupled_control: true,
            use_carrier: true,
            lacp_fallback: 0,
            lacp_aggregate_wait: 2000,
            lacp_rejoin_hold: 0,
            actor_port_prio: Vec::new(),
            prio: Vec::new(),
            distribution: Distribution::Modulo,
            fastpath: FastPathMode::Auto,
            fastpath_attach: FastPathAttach::Auto,
            broadcast_dedup: true,
            rebalance_interval: 10_000,
            rebalance_idle_gap: 50,
            rebalance_max_moves: 16,
            rebalance_force_after: 3,
            hash_seed: 0,
            member_speed: Vec::new(),
            explicit_miimon: false,
            given: Vec::new(),
        }
    }
}

/// The option names [`BondOptions::set`] accepts.
pub const OPTION_NAMES: &[&str] = &[
    "mode",
    "miimon",
    "updelay",
    "downdelay",
    "peer_notif_delay",
    "xmit_hash_policy",
    "packets_per_slave",
    "primary",
    "primary_reselect",
    "fail_over_mac",
    "num_grat_arp",
    "num_unsol_na",
    "all_slaves_active",
    "resend_igmp",
    "arp_interval",
    "arp_ip_target",
    "ns_ip6_target",
    "arp_validate",
    "arp_all_targets",
    "arp_missed_max",
    "tlb_dynamic_lb",
    "lp_interval",
    "lacp_rate",
    "lacp_active",
    "ad_select",
    "ad_actor_sys_prio",
    "ad_actor_system",
    "ad_user_port_key",
    "min_links",
    "coupled_control",
    "use_carrier",
    "lacp_fallback",
    "lacp_aggregate_wait",
    "lacp_rejoin_hold",
    "actor_port_prio",
    "prio",
    "distribution",
    "fastpath",
    "fastpath_attach",
    "broadcast_dedup",
    "rebalance_interval",
    "rebalance_idle_gap",
    "rebalance_max_moves",
    "rebalance_force_after",
    "hash_seed",
    "member_speed",
];

const INT_MAX: u64 = i32::MAX as u64;

fn number(value: &str, lo: u64, hi: u64, unit: &str) -> Result<u64, String> {
    match value.parse::<u64>() {
        Ok(n) if (lo..=hi).contains(&n) => Ok(n),
        _ => Err(format!(
            "invalid value '{value}': expected {unit} from {lo} to {hi}"
        )),
    }
}

fn boolean(value: &str) -> Result<bool, String> {
    match value {
        "1" | "on" => Ok(true),
        "0" | "off" => Ok(false),
        _ => Err(format!("invalid value '{value}': expected 0/1 or off/on")),
    }
}

/// `NAME:VALUE,NAME:VALUE` per-member values.
fn per_member<T>(
    value: &str,
    expected: &str,
    parse: impl Fn(&str) -> Option<T>,
) -> Result<Vec<(String, T)>, String> {
    let mut out = Vec::new();
    for item in value.split(',').filter(|i| !i.is_empty()) {
        let parsed = item.split_once(':').and_then(|(name, v)| {
            let v = parse(v)?;
            (!name.is_empty() && name.len() < 16).then(|| (name.to_owned(), v))
        });
        let Some(p) = parsed else {
            return Err(format!("invalid value '{item}': expected {expected}"));
        };
        out.push(p);
    }
    Ok(out)
}

fn choice<E>(value: &str, parse: fn(&str) -> Option<E>, expected: String) -> Result<E, String> {
    parse(value).ok_or_else(|| format!("invalid value '{value}': expected one of {expected}"))
}

impl BondOptions {
    /// Parses a `BONDING_OPTS`-style string: `key=value` pairs separated by white space,
    /// applied in order over the defaults, then [`finish`](Self::finish)ed.
    pub fn parse_opts(opts: &str) -> Result<(Self, Vec<String>), OptionError> {
        let mut o = Self::default();
        for pair in opts.split_whitespace() {
            let Some((key, value)) = pair.split_once('=') else {
                return Err(OptionError {
                    key: pair.to_owned(),
                    reason: "expected key=value".to_owned(),
                });
            };
            o.set(key, value)?;
        }
        let warnings = o.finish()?;
        Ok((o, warnings))
    }

    /// Sets one option from its text value. On error nothing changes.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), OptionError> {
        self.set_inner(key, value).map_err(|reason| OptionError {
            key: key.to_owned(),
            reason,
        })?;
        // Kept sorted, so that two option sets with the same keys compare equal.
        if let Err(at) = self.given.binary_search_by(|k| k.as_str().cmp(key)) {
            self.given.insert(at, key.to_owned());
        }
        Ok(())
    }

    /// Whether option `key` was set explicitly (by [`set`](Self::set)).
    pub fn was_given(&self, key: &str) -> bool {
        self.given.binary_search_by(|k| k.as_str().cmp(key)).is_ok()
    }

    fn set_inner(&mut self, key: &str, value: &str) -> Result<(), String> {
        let ms = |v| number(v, 0, INT_MAX, "milliseconds").map(|n| n as u32);
        match key {
            "mode" => self.mode = choice(value, Mode::parse, Mode::expected())?,
            "miimon" => {
                self.miimon = ms(value)?;
                self.explicit_miimon = true;
                if self.miimon > 0 {
                    self.arp_interval = 0;
                }
            }
            "updelay" => self.updelay = ms(value)?,
            "downdelay" => self.downdelay = ms(value)?,
            "peer_notif_delay" => {
                self.peer_notif_delay = number(value, 0, 300_000, "milliseconds")? as u32
            }
            "xmit_hash_policy" => {
                self.xmit_hash_policy = value
                    .parse::<HashPolicy>()
                    .ok()
                    .filter(|p| p.kernel_value().is_some())
                    .or_else(|| {
                        value
                            .parse::<u8>()
                            .ok()
                            .and_then(HashPolicy::from_kernel_value)
                    })
                    .ok_or_else(|| {
                        let names: Vec<&str> =
                            HashPolicy::KERNEL.iter().map(|p| p.name()).collect();
                        // The OVS hashes are modes, not hash policies: point there.
                        let mode = match value.parse::<HashPolicy>() {
                            Ok(HashPolicy::OvsTcp) => Some("balance-tcp"),
                            Ok(HashPolicy::OvsSlb) => Some("balance-slb"),
                            _ => None,
                        };
                        match mode {
                            Some(m) => format!(
                                "invalid value '{value}': {value} is the hash of mode={m}, not an xmit_hash_policy; set mode={m} instead (xmit_hash_policy takes {})",
                                names.join(", ")
                            ),
                            None => format!(
                                "invalid value '{value}': expected one of {}",
                                names.join(", ")
                            ),
                        }
                    })?
            }
            "packets_per_slave" => {
                self.packets_per_slave = number(value, 0, 65535, "a count")? as u16
            }
            "primary" => {
                self.primary = match value {
                    "" => None,
                    // The kernel's interface names: no '/', no white space of any kind.
                    name if name.len() < 16
                        && !name.contains(|c: char| c == '/' || c.is_whitespace()) =>
                    {
                        Some(name.to_owned())
                    }
                    _ => return Err(format!("invalid value '{value}': not an interface name")),
                }
            }
            "primary_reselect" => {
                self.primary_reselect =
                    choice(value, PrimaryReselect::parse, PrimaryReselect::expected())?
            }
            "fail_over_mac" => {
                self.fail_over_mac = choice(value, FailOverMac::parse, FailOverMac::expected())?
            }
            // One value in the driver (its num_peer_notif): either name sets both, the last
            // one given wins.
            "num_grat_arp" | "num_unsol_na" => {
                let n = number(value, 0, 255, "a count")? as u8;
                self.num_grat_arp = n;
                self.num_unsol_na = n;
            }
            "all_slaves_active" => self.all_slaves_active = boolean(value)?,
            "resend_igmp" => self.resend_igmp = number(value, 0, 255, "a count")? as u8,
            "arp_interval" => {
                self.arp_interval = ms(value)?;
                if self.arp_interval > 0 {
                    self.miimon = 0;
                }
            }
            "arp_ip_target" => {
                let mut targets = Vec::new();
                for t in value.split(',').filter(|t| !t.is_empty()) {
                    let ip: Ipv4Addr = t
                        .parse()
                        .map_err(|_| format!("invalid value '{t}': not an IPv4 address"))?;
                    if ip.is_unspecified() || ip.is_broadcast() {
                        return Err(format!("invalid value '{t}': not a usable target"));
                    }
                    targets.push(ip);
                }
                if targets.len() > 16 {
                    return Err(format!("{} targets given: at most 16", targets.len()));
                }
                self.arp_ip_target = targets;
            }
            "ns_ip6_target" => {
                let mut targets = Vec::new();
                for t in value.split(',').filter(|t| !t.is_empty()) {
                    let ip: Ipv6Addr = t
                        .parse()
                        .map_err(|_| format!("invalid value '{t}': not an IPv6 address"))?;
                    // As the driver: a target must be an address a neighbour can own.
                    if ip.is_unspecified() || ip.is_loopback() || ip.is_multicast() {
                        return Err(format!(
                            "invalid value '{t}': not a usable target (unspecified, loopback \
                             or multicast)"
                        ));
                    }
                    if targets.contains(&ip) {
                        return Err(format!("invalid value '{t}': listed twice"));
                    }
                    targets.push(ip);
                }
                if targets.len() > 16 {
                    return Err(format!("{} targets given: at most 16", targets.len()));
                }
                self.ns_ip6_target = targets;
            }
            "arp_validate" => {
                self.arp_validate = choice(value, ArpValidate::parse, ArpValidate::expected())?
            }
            "arp_all_targets" => {
                self.arp_all_targets =
                    choice(value, ArpAllTargets::parse, ArpAllTargets::expected())?
            }
            "arp_missed_max" => self.arp_missed_max = number(value, 1, 255, "a count")? as u8,
            "tlb_dynamic_lb" => self.tlb_dynamic_lb = boolean(value)?,
            "lp_interval" => self.lp_interval = number(value, 1, INT_MAX, "seconds")? as u32,
            "lacp_rate" => {
                self.lacp_rate = value
                    .parse()
                    .map_err(|_| format!("invalid value '{value}': expected one of slow, fast"))?
            }
            "lacp_active" => self.lacp_active = boolean(value)?,
            "ad_select" => {
                self.ad_select = value.parse().map_err(|_| {
                    format!("invalid value '{value}': expected one of stable, bandwidth, count, actor_port_prio")
                })?
            }
            "ad_actor_sys_prio" => {
                self.ad_actor_sys_prio = number(value, 1, 65535, "a priority")? as u16
            }
            "ad_actor_system" => {
                let mac: EthernetAddress = value
                    .parse()
                    .map_err(|_| format!("invalid value '{value}': not a MAC address"))?;
                if mac.is_multicast() {
                    return Err(format!("invalid value '{value}': a multicast MAC"));
                }
                self.ad_actor_system = (!mac.is_zero()).then_some(mac);
            }
            "ad_user_port_key" => self.ad_user_port_key = number(value, 0, 1023, "a key")? as u16,
            "min_links" => self.min_links = number(value, 0, INT_MAX, "a count")? as u32,
            "coupled_control" => self.coupled_control = boolean(value)?,
            "use_carrier" => self.use_carrier = boolean(value)?,
            "lacp_fallback" => self.lacp_fallback = ms(value)?,
            "actor_port_prio" => {
                self.actor_port_prio = per_member(value, "MEMBER:PRIORITY (0 to 65535)", |v| {
                    v.parse::<u16>().ok()
                })?
            }
            "prio" => {
                self.prio = per_member(value, "MEMBER:PRIORITY (a 32-bit signed number)", |v| {
                    v.parse::<i32>().ok()
                })?
            }
            "member_speed" => {
                self.member_speed = per_member(value, "MEMBER:MBPS (1 to 4000000)", |v| {
                    v.parse::<u32>()
                        .ok()
                        .filter(|s| (1..=4_000_000).contains(s))
                })?
            }
            "distribution" => {
                self.distribution = choice(value, Distribution::parse, Distribution::expected())?
            }
            "fastpath" => {
                self.fastpath = choice(value, FastPathMode::parse, FastPathMode::expected())?
            }
            "fastpath_attach" => {
                self.fastpath_attach =
                    choice(value, FastPathAttach::parse, FastPathAttach::expected())?
            }
            "broadcast_dedup" => self.broadcast_dedup = boolean(value)?,
            "rebalance_interval" => self.rebalance_interval = ms(value)?,
            "rebalance_idle_gap" => {
                self.rebalance_idle_gap = number(value, 0, 10_000, "milliseconds")? as u32
            }
            "rebalance_max_moves" => {
                self.rebalance_max_moves = number(value, 1, 256, "a count")? as u16
            }
            "rebalance_force_after" => {
                self.rebalance_force_after = number(value, 0, 1000, "a count")? as u32
            }
            "hash_seed" => self.hash_seed = number(value, 0, u64::from(u32::MAX), "a seed")? as u32,
            "lacp_aggregate_wait" => {
                self.lacp_aggregate_wait = number(value, 0, 10_000, "milliseconds")? as u32
            }
            "lacp_rejoin_hold" => {
                self.lacp_rejoin_hold = number(value, 0, 60_000, "milliseconds")? as u32
            }
            _ => {
                let hint = OPTION_NAMES
                    .iter()
                    .find(|n| n.replace('_', "") == key.replace(['_', '-'], ""))
                    .map(|n| format!(" (did you mean '{n}'?)"))
                    .unwrap_or_default();
                return Err(format!("unknown option{hint}"));
            }
        }
        Ok(())
    }

    /// Applies the driver's cross-option rules; returns the warnings it would log, or an error
    /// for a combination the driver refuses.
    pub fn finish(&mut self) -> Result<Vec<String>, OptionError> {
        let mut warnings = Vec::new();
        let lacp_like = matches!(
            self.mode,
            Mode::Ieee8023ad | Mode::BalanceTlb | Mode::BalanceAlb | Mode::BalanceTcp
        );
        if lacp_like && self.arp_interval > 0 {
            return Err(OptionError {
                key: "arp_interval".to_owned(),
                reason: format!("ARP monitoring cannot be used with mode {}", self.mode),
            });
        }
        if self.arp_interval > 0 && self.arp_ip_target.is_empty() && self.ns_ip6_target.is_empty() {
            warnings.push(
                "arp_interval set without arp_ip_target or ns_ip6_target: ARP monitoring is off"
                    .into(),
            );
            self.arp_interval = 0;
        }
        if lacp_like && self.miimon == 0 {
            if self.explicit_miimon {
                warnings.push(format!(
                    "mode {} needs link monitoring: miimon set to 100",
                    self.mode
                ));
            }
            self.miimon = 100;
        }
        if self.mode == Mode::BalanceAlb {
            self.tlb_dynamic_lb = true;
        }
        if self.miimon > 0 {
            for (name, v) in [
                ("updelay", &mut self.updelay),
                ("downdelay", &mut self.downdelay),
            ] {
                if *v % self.miimon != 0 {
                    let rounded = *v / self.miimon * self.miimon;
                    warnings.push(format!(
                        "{name} ({}) is not a multiple of miimon ({}): rounded down to {rounded} ms",
                        *v, self.miimon
                    ));
                    *v = rounded;
                }
            }
        } else if self.updelay > 0 || self.downdelay > 0 {
            warnings.push("updelay/downdelay need miimon: ignored".into());
        }
        if self.explicit_miimon && self.miimon == 0 && self.arp_interval == 0 {
            warnings.push(
                "link monitoring turned off (miimon=0, no arp_interval): lagd still follows \
                 carrier, but a member that fails behind its link will keep its traffic"
                    .into(),
            );
        }
        if self.primary.is_some() && !self.mode.uses_primary() {
            warnings.push(format!("primary is ignored in mode {}", self.mode));
        }
        if !self.prio.is_empty() && !self.mode.uses_primary() {
            // The kernel refuses the per-slave option in these modes; lagd keeps the value
            // (a mode may change on restart) and says it does nothing.
            warnings.push(format!("prio is ignored in mode {}", self.mode));
        }
        if self.mode == Mode::ActiveBackup
            && !self.explicit_miimon
            && self.miimon == 0
            && self.arp_interval == 0
        {
            warnings.push(
                "active-backup without link monitoring (no miimon or arp_interval): lagd fails \
                 over only when a member loses carrier; set miimon=100 or ARP monitoring"
                    .into(),
            );
        }
        if self.mode.uses_lacp() && self.lacp_rate == LacpRate::Slow {
            warnings.push(
                "lacp_rate=slow: a partner that stops answering is noticed only after 90 s \
                 (3 LACPDUs at 30 s); lacp_rate=fast notices it in 3 s"
                    .into(),
            );
        }
        if self.was_given("xmit_hash_policy") && !self.hashes_with_policy() {
            let why = match self.mode.fixed_hash() {
                Some(h) => format!("it always hashes with {h}"),
                None => "it does not hash".to_owned(),
            };
            warnings.push(format!(
                "xmit_hash_policy is ignored in mode {} ({why})",
                self.mode
            ));
        }
        if self.was_given("lacp_rate") && !self.mode.uses_lacp() {
            warnings.push(format!(
                "lacp_rate is ignored in mode {} (only 802.3ad and balance-tcp run LACP)",
                self.mode
            ));
        }
        Ok(warnings)
    }

    /// Whether `xmit_hash_policy` decides anything in this mode: balance-xor and 802.3ad,
    /// balance-tlb and balance-alb (their transmit balancing hashes with it).
    pub fn hashes_with_policy(&self) -> bool {
        self.mode.uses_hash() || matches!(self.mode, Mode::BalanceTlb | Mode::BalanceAlb)
    }

    /// Warnings about the options against the bond's members (in enslave order): a `primary`
    /// or a `prio` member that is not a member, `min_links` above the member count.
    pub fn member_warnings(&self, members: &[String]) -> Vec<String> {
        let mut warnings = Vec::new();
        if let Some(p) = &self.primary {
            if self.mode.uses_primary() && !members.contains(p) {
                warnings.push(format!(
                    "primary '{p}' is not a member ({}): no member is preferred",
                    members.join(", ")
                ));
            }
        }
        for (m, _) in &self.prio {
            if self.mode.uses_primary() && !members.contains(m) {
                warnings.push(format!("prio names '{m}', which is not a member: ignored"));
            }
        }
        if self.mode.uses_lacp() && self.min_links as usize > members.len() {
            warnings.push(format!(
                "min_links={} is above the member count ({}): the bond never gets carrier",
                self.min_links,
                members.len()
            ));
        }
        warnings
    }

    /// Every option as `key=value`, the form [`parse_opts`](Self::parse_opts) reads back.
    pub fn to_opts(&self) -> String {
        let mut v = vec![
            format!("mode={}", self.mode),
            format!("miimon={}", self.miimon),
            format!("updelay={}", self.updelay),
            format!("downdelay={}", self.downdelay),
            format!("xmit_hash_policy={}", self.xmit_hash_policy),
        ];
        if let Some(p) = &self.primary {
            v.push(format!("primary={p}"));
        }
        v.push(format!("primary_reselect={}", self.primary_reselect));
        if self.arp_interval > 0 {
            v.push(format!("arp_interval={}", self.arp_interval));
            if !self.arp_ip_target.is_empty() {
                let t: Vec<String> = self.arp_ip_target.iter().map(|t| t.to_string()).collect();
                v.push(format!("arp_ip_target={}", t.join(",")));
            }
            if !self.ns_ip6_target.is_empty() {
                let t: Vec<String> = self.ns_ip6_target.iter().map(|t| t.to_string()).collect();
                v.push(format!("ns_ip6_target={}", t.join(",")));
            }
        }
        v.push(format!("lacp_rate={}", self.lacp_rate));
        v.push(format!("min_links={}", self.min_links));
        if self.fastpath != FastPathMode::Auto {
            v.push(format!("fastpath={}", self.fastpath));
        }
        if self.fastpath_attach != FastPathAttach::Auto {
            v.push(format!("fastpath_attach={}", self.fastpath_attach));
        }
        if self.mode == Mode::Broadcast && !self.broadcast_dedup {
            v.push("broadcast_dedup=off".to_owned());
        }
        if self.uses_buckets() {
            v.push(format!("distribution={}", Distribution::Buckets));
            v.push(format!("rebalance_interval={}", self.rebalance_interval));
        }
        v.join(" ")
    }

    /// Whether option `key` is an on/off option (the kernel's 0/1 values): the only ones a
    /// configuration file may write as `true`/`false`.
    pub fn takes_boolean(key: &str) -> bool {
        matches!(
            key,
            "all_slaves_active"
                | "tlb_dynamic_lb"
                | "lacp_active"
                | "coupled_control"
                | "use_carrier"
                | "broadcast_dedup"
        )
    }

    /// Whether the transmit hash goes through the 256-bucket table: balance-slb and
    /// balance-tcp always, balance-xor and 802.3ad with `distribution=buckets`, balance-tlb and
    /// balance-alb with `tlb_dynamic_lb`.
    pub fn uses_buckets(&self) -> bool {
        match self.mode {
            Mode::BalanceSlb | Mode::BalanceTcp => true,
            Mode::BalanceXor | Mode::Ieee8023ad => self.distribution == Distribution::Buckets,
            Mode::BalanceTlb | Mode::BalanceAlb => self.tlb_dynamic_lb,
            _ => false,
        }
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn parses_bonding_opts_with_names_and_numbers() {
        let (o, w) =
            BondOptions::parse_opts("mode=balance-xor xmit_hash_policy=layer3+4 miimon=100")
                .unwrap();
        assert_eq!(o.mode, Mode::BalanceXor);
        assert_eq!(o.xmit_hash_policy, HashPolicy::Layer34);
        assert_eq!(o.miimon, 100);
        assert!(w.is_empty(), "{w:?}");
        let (o, _) = BondOptions::parse_opts("mode=4 xmit_hash_policy=1 lacp_rate=1").unwrap();
        assert_eq!(o.mode, Mode::Ieee8023ad);
        assert_eq!(o.xmit_hash_policy, HashPolicy::Layer34);
        assert_eq!(o.lacp_rate, LacpRate::Fast);
        // 802.3ad forces miimon=100 when unset, silently as the driver does.
        assert_eq!(o.miimon, 100);
        let (o, _) = BondOptions::parse_opts("xmit_hash_policy=2").unwrap();
        assert_eq!(o.xmit_hash_policy, HashPolicy::Layer23);
    }

    #[test]
    fn broadcast_dedup_is_on_unless_turned_off_and_shows_when_off() {
        let (o, _) = BondOptions::parse_opts("mode=broadcast").unwrap();
        assert!(o.broadcast_dedup);
        assert!(!o.to_opts().contains("broadcast_dedup"));
        for (text, want) in [("off", false), ("0", false), ("on", true), ("1", true)] {
            let (o, w) =
                BondOptions::parse_opts(&format!("mode=broadcast broadcast_dedup={text}")).unwrap();
            assert_eq!(o.broadcast_dedup, want, "{text}");
            assert!(w.is_empty(), "{w:?}");
            assert_eq!(o.to_opts().contains("broadcast_dedup=off"), !want);
        }
        // lagd's TOML writes it true or false.
        assert!(BondOptions::takes_boolean("broadcast_dedup"));
        let mut o = BondOptions::default();
        let e = o.set("broadcast_dedup", "yes").unwrap_err();
        assert_eq!(e.key, "broadcast_dedup");
    }

    #[test]
    fn fastpath_attach_takes_auto_tcx_tc_and_shows_when_not_auto() {
        let (o, _) = BondOptions::parse_opts("mode=balance-xor").unwrap();
        assert_eq!(o.fastpath_attach, FastPathAttach::Auto);
        assert!(!o.to_opts().contains("fastpath_attach"));
        for (text, want) in [
            ("tcx", FastPathAttach::Tcx),
            ("tc", FastPathAttach::Tc),
            ("auto", FastPathAttach::Auto),
        ] {
            let (o, w) =
                BondOptions::parse_opts(&format!("mode=balance-xor fastpath_attach={text}"))
                    .unwrap();
            assert_eq!(o.fastpath_attach, want);
            assert!(w.is_empty(), "{w:?}");
            let summary = o.to_opts();
            assert_eq!(
                summary.contains(&format!("fastpath_attach={text}")),
                want != FastPathAttach::Auto,
                "{summary}"
            );
        }
        let mut o = BondOptions::default();
        let before = o.clone();
        let e = o.set("fastpath_attach", "clsact").unwrap_err();
        assert_eq!(e.key, "fastpath_attach");
        assert!(e.reason.contains("auto, tcx, tc"), "{e}");
        assert_eq!(o, before);
    }

    #[test]
    fn an_ovs_hash_as_xmit_hash_policy_points_to_its_mode() {
        for (name, mode) in [("ovs-tcp", "balance-tcp"), ("ovs-slb", "balance-slb")] {
            let mut o = BondOptions::default();
            let before = o.clone();
            let e = o.set("xmit_hash_policy", name).unwrap_err();
            assert_eq!(e.key, "xmit_hash_policy");
            let text = e.to_string();
            assert!(text.contains(&format!("set mode={mode} instead")), "{text}");
            assert_eq!(o, before);
            // The mode itself is accepted.
            assert!(o.set("mode", mode).is_ok());
        }
    }

    #[test]
    fn errors_name_the_key_and_change_nothing() {
        let mut o = BondOptions::default();
        let before = o.clone();
        let e = o.set("miimon", "fast").unwrap_err();
        assert_eq!(e.key, "miimon");
        assert!(e.to_string().contains("option 'miimon'"), "{e}");
        assert_eq!(o, before);
        let e = o.set("mode", "balance-xoor").unwrap_err();
        assert!(e.reason.contains("balance-xor"), "{e}");
        let e = o.set("xmit_hash_policy", "ovs-tcp").unwrap_err();
        assert!(e.reason.contains("layer3+4"), "{e}");
        let mut n = BondOptions::default();
        n.set("num_grat_arp", "10").unwrap();
        assert_eq!(
            (n.num_grat_arp, n.num_unsol_na),
            (10, 10),
            "one value, two names"
        );
        n.set("num_unsol_na", "3").unwrap();
        assert_eq!(
            (n.num_grat_arp, n.num_unsol_na),
            (3, 3),
            "the last one given wins"
        );
        assert!(n.set("num_unsol_na", "256").is_err());
        assert_eq!((n.num_grat_arp, n.num_unsol_na), (3, 3));
        let e = o.set("ad_select", "9").unwrap_err();
        assert_eq!(e.key, "ad_select");
        let e = o.set("miimonn", "100").unwrap_err();
        assert!(e.to_string().contains("unknown option"), "{e}");
        let e = o.set("lacp-rate", "fast").unwrap_err();
        assert!(e.to_string().contains("did you mean 'lacp_rate'"), "{e}");
        assert_eq!(o, before);
        let e = BondOptions::parse_opts("mode=balance-rr miimon").unwrap_err();
        assert_eq!(e.key, "miimon");
        for (k, v) in [
            ("ad_user_port_key", "1024"),
            ("ad_actor_sys_prio", "0"),
            ("arp_missed_max", "0"),
            ("packets_per_slave", "65536"),
            ("peer_notif_delay", "300001"),
            ("ad_actor_system", "01:00:5e:00:00:01"),
            ("arp_ip_target", "255.255.255.255"),
            ("all_slaves_active", "yes"),
            ("miimon", "-1"),
            ("lacp_aggregate_wait", "10001"),
            ("lacp_rejoin_hold", "60001"),
            ("lacp_rejoin_hold", "-1"),
            ("actor_port_prio", "eth0"),
            ("actor_port_prio", "eth0:70000"),
            ("prio", "eth0"),
            ("prio", "eth0:2147483648"),
            ("prio", "eth0:ten"),
        ] {
            assert!(o.set(k, v).is_err(), "{k}={v}");
        }
    }

    #[test]
    fn cross_option_rules_follow_the_driver() {
        let (o, _) =
            BondOptions::parse_opts("miimon=100 arp_interval=200 arp_ip_target=10.0.0.1").unwrap();
        assert_eq!((o.miimon, o.arp_interval), (0, 200));
        let (o, _) =
            BondOptions::parse_opts("arp_interval=200 arp_ip_target=10.0.0.1 miimon=50").unwrap();
        assert_eq!((o.miimon, o.arp_interval), (50, 0));
        let (o, w) = BondOptions::parse_opts("arp_interval=200").unwrap();
        assert_eq!(o.arp_interval, 0);
        assert!(w[0].contains("arp_ip_target"), "{w:?}");
        let e = BondOptions::parse_opts("mode=802.3ad arp_interval=100 arp_ip_target=10.0.0.1")
            .unwrap_err();
        assert_eq!(e.key, "arp_interval");
        let (o, w) = BondOptions::parse_opts("miimon=100 updelay=250 downdelay=200").unwrap();
        assert_eq!((o.updelay, o.downdelay), (200, 200));
        assert_eq!(w.len(), 1, "{w:?}");
        let (_, w) = BondOptions::parse_opts("mode=active-backup miimon=0").unwrap();
        assert!(
            w.iter().any(|w| w.contains("monitoring turned off")),
            "{w:?}"
        );
        let (o, _) = BondOptions::parse_opts("mode=balance-alb tlb_dynamic_lb=0").unwrap();
        assert!(o.tlb_dynamic_lb);
        let (o, _) =
            BondOptions::parse_opts("arp_interval=100 arp_ip_target=10.0.0.1,10.0.0.2").unwrap();
        assert_eq!(o.arp_ip_target.len(), 2);
        let (o, _) =
            BondOptions::parse_opts("mode=802.3ad actor_port_prio=eth0:100,eth1:7").unwrap();
        assert_eq!(
            o.actor_port_prio,
            [("eth0".into(), 100), ("eth1".into(), 7)]
        );
        let (o, w) = BondOptions::parse_opts(
            "mode=active-backup miimon=100 prio=eth0:1000000,eth1:0,eth2:-50",
        )
        .unwrap();
        assert_eq!(
            o.prio,
            [
                ("eth0".into(), 1_000_000),
                ("eth1".into(), 0),
                ("eth2".into(), -50)
            ]
        );
        assert!(!w.iter().any(|w| w.contains("prio")), "{w:?}");
        let (_, w) = BondOptions::parse_opts("mode=balance-xor miimon=100 prio=eth0:5").unwrap();
        assert!(w.iter().any(|w| w.contains("prio is ignored")), "{w:?}");
    }

    fn warned(opts: &str, members: &[&str], word: &str) -> bool {
        let (o, mut w) = BondOptions::parse_opts(opts).unwrap();
        let members: Vec<String> = members.iter().map(|m| (*m).to_owned()).collect();
        w.extend(o.member_warnings(&members));
        w.iter().any(|w| w.contains(word))
    }

    #[test]
    fn warnings_fire_on_their_case_only() {
        let two = ["eth0", "eth1"];
        // No link monitoring in active-backup.
        assert!(warned(
            "mode=active-backup",
            &two,
            "without link monitoring"
        ));
        assert!(!warned("mode=active-backup miimon=100", &two, "monitoring"));
        assert!(!warned(
            "mode=active-backup arp_interval=100 arp_ip_target=10.0.0.1",
            &two,
            "monitoring"
        ));
        assert!(!warned("mode=balance-xor", &two, "without link monitoring"));
        // Slow LACP rate.
        assert!(warned("mode=802.3ad", &two, "lacp_rate=slow"));
        assert!(warned(
            "mode=balance-tcp lacp_rate=slow",
            &two,
            "lacp_rate=slow"
        ));
        assert!(!warned("mode=802.3ad lacp_rate=fast", &two, "lacp_rate"));
        // Options for a mode that ignores them.
        assert!(warned(
            "mode=active-backup miimon=100 xmit_hash_policy=layer3+4",
            &two,
            "xmit_hash_policy is ignored in mode active-backup"
        ));
        assert!(warned(
            "mode=balance-slb xmit_hash_policy=layer2",
            &two,
            "always hashes with"
        ));
        assert!(!warned(
            "mode=balance-xor xmit_hash_policy=layer3+4",
            &two,
            "ignored"
        ));
        assert!(!warned(
            "mode=active-backup miimon=100",
            &two,
            "xmit_hash_policy"
        ));
        assert!(warned(
            "mode=balance-xor lacp_rate=fast",
            &two,
            "lacp_rate is ignored in mode balance-xor"
        ));
        assert!(!warned("mode=balance-xor", &two, "lacp_rate"));
        // A primary that is not a member.
        assert!(warned(
            "mode=active-backup miimon=100 primary=eth2",
            &two,
            "primary 'eth2' is not a member"
        ));
        assert!(!warned(
            "mode=active-backup miimon=100 primary=eth1",
            &two,
            "primary"
        ));
        // min_links above the member count.
        assert!(warned(
            "mode=802.3ad lacp_rate=fast min_links=3",
            &two,
            "min_links=3 is above the member count (2)"
        ));
        assert!(!warned(
            "mode=802.3ad lacp_rate=fast min_links=2",
            &two,
            "min_links"
        ));
        // A clean configuration warns of nothing.
        for clean in [
            "mode=802.3ad lacp_rate=fast miimon=100 xmit_hash_policy=layer3+4 min_links=1",
            "mode=active-backup miimon=100 primary=eth0",
            "mode=balance-xor miimon=100 xmit_hash_policy=layer2+3",
        ] {
            let (o, w) = BondOptions::parse_opts(clean).unwrap();
            assert!(w.is_empty(), "{clean}: {w:?}");
            assert!(
                o.member_warnings(&two.map(String::from)).is_empty(),
                "{clean}"
            );
        }
    }

    #[test]
    fn to_opts_reads_back() {
        let (o, _) = BondOptions::parse_opts(
            "mode=active-backup primary=eth1 miimon=100 updelay=200 primary_reselect=better",
        )
        .unwrap();
        let (again, _) = BondOptions::parse_opts(&o.to_opts()).unwrap();
        assert_eq!(again.mode, o.mode);
        assert_eq!(again.primary, o.primary);
        assert_eq!(again.updelay, 200);
        assert_eq!(again.primary_reselect, PrimaryReselect::Better);
    }
}
