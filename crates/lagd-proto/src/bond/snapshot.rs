//! Plain-data state of the bond, for `lagctl show` and the daemon's status.

use super::member::MiiStatus;
use std::net::{Ipv4Addr, Ipv6Addr};

use super::options::{ArpAllTargets, ArpValidate, Mode, PrimaryReselect};
use crate::balance::BucketsSnapshot;
use crate::hash::HashPolicy;
use crate::lacp::LacpSnapshot;
use crate::stripe::{PeersStatus, TcpOrderCounters, reorder::ReorderCounters};
use crate::wire::EthernetAddress;

/// Plain-data state for `lagctl show`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BondSnapshot {
    /// The mode.
    pub mode: Mode,
    /// The hash policy, when the mode uses one.
    pub xmit_hash_policy: Option<HashPolicy>,
    /// Whether the bond has carrier.
    pub carrier: bool,
    /// `miimon`.
    pub miimon: u32,
    /// `updelay`.
    pub updelay: u32,
    /// `downdelay`.
    pub downdelay: u32,
    /// `peer_notif_delay`.
    pub peer_notif_delay: u32,
    /// Primary member name (modes with an active member).
    pub primary: Option<String>,
    /// `primary_reselect` (modes with an active member).
    pub primary_reselect: Option<PrimaryReselect>,
    /// The active member's name (modes with an active member).
    pub active: Option<String>,
    /// Times the active member moved from one member to another (modes with one).
    pub failovers: u64,
    /// Per member, in enslave order.
    pub ports: Vec<PortSnapshot>,
    /// 802.3ad: the LACP engine's state.
    pub lacp: Option<LacpSnapshot>,
    /// Bucketed distribution: the table, loads, moves.
    pub buckets: Option<BucketsSnapshot>,
    /// Stripe mode: the peer and the reorder buffer's counters.
    pub stripe: Option<StripeSnapshot>,
    /// The tables keyed by what peers and the host send: sizes, bounds, evictions.
    pub tables: TablesSnapshot,
    /// The ARP (and neighbour-solicitation) monitor, when it runs.
    pub arp_monitor: Option<ArpMonitorSnapshot>,
}

/// The ARP monitor's settings in a [`BondSnapshot`] (members it took out read `down`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArpMonitorSnapshot {
    /// `arp_interval` in ms.
    pub interval_ms: u32,
    /// `arp_missed_max`.
    pub missed_max: u8,
    /// `arp_validate`.
    pub validate: ArpValidate,
    /// `arp_all_targets`.
    pub all_targets: ArpAllTargets,
    /// `arp_ip_target`: probed with ARP requests.
    pub ip_targets: Vec<Ipv4Addr>,
    /// `ns_ip6_target`: probed with neighbour solicitations.
    pub ns_targets: Vec<Ipv6Addr>,
}

/// The bond's tables whose keys come from frames (balance-alb clients by IPv4 address, the
/// IGMP/MLD groups replayed after a failover): how full they are, their bound, and how many
/// entries were dropped to make room. Each drops its oldest entry when full.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TablesSnapshot {
    /// balance-alb clients tracked (0 in other modes).
    pub alb_clients: usize,
    /// The most balance-alb clients tracked (0 in other modes).
    pub alb_clients_max: usize,
    /// balance-alb clients dropped to make room.
    pub alb_clients_evicted: u64,
    /// Multicast groups kept for `resend_igmp`.
    pub igmp_groups: usize,
    /// The most groups kept.
    pub igmp_groups_max: usize,
    /// Groups dropped to make room.
    pub igmp_groups_evicted: u64,
}

/// Stripe mode in a [`BondSnapshot`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StripeSnapshot {
    /// The peer, per member (names are the driver's to add).
    pub peers: PeersStatus,
    /// The receiver's counters.
    pub reorder: ReorderCounters,
    /// Frames held in the reorder buffer now.
    pub held_now: usize,
    /// The next sequence number to send.
    pub next_tx_seq: u32,
    /// Host frames that could not be striped (malformed super-frames).
    pub tx_errors: u64,
    /// Stripe frames from members that did not parse.
    pub rx_errors: u64,
    /// The TCP resequencer's counters.
    pub tcp: TcpOrderCounters,
    /// Bytes the TCP resequencer holds now.
    pub tcp_held_bytes: usize,
    /// TCP flows it tracks now.
    pub tcp_flows: usize,
}

/// One member in a [`BondSnapshot`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortSnapshot {
    /// Interface name.
    pub name: String,
    /// MII status.
    pub mii: MiiStatus,
    /// Speed in Mb/s, if known.
    pub speed_mbps: Option<u32>,
    /// Duplex, if known.
    pub full_duplex: Option<bool>,
    /// Times the member went down.
    pub link_failures: u32,
    /// Permanent MAC.
    pub perm_mac: EthernetAddress,
    /// Whether it is the active member (or, in other modes, usable).
    pub active: bool,
    /// Its `prio` (0 unless configured, and in modes without an active member).
    pub prio: i32,
}
