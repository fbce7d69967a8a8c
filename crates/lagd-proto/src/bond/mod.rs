//! The bond: members, link monitoring, and the per-frame decisions of each mode.
//!
//! [`Bond`] is sans-IO. The driver tells it what it sees (`handle_carrier` after each carrier
//! poll, `handle_timeout` when [`Bond::poll_timeout`] is due) and asks it, per frame, where a
//! frame from the host goes ([`Bond::tx_choice`]) and whether a frame from a member is delivered
//! to the host ([`Bond::rx_verdict`]). Both per-frame calls are allocation-free.
//!
//! Link monitoring follows the driver's `miimon` semantics: a member whose carrier drops goes
//! `going down` for `downdelay` and then `down` (one link failure counted); a member whose
//! carrier returns goes `going back` for `updelay` and then `up`. When no member is up, the first
//! member going back is used at once (the driver ignores `updelay` then, and so does lagd).
//!
//! After an active-backup failover the bond announces itself on the new active member with
//! `num_grat_arp` gratuitous ARPs and `num_unsol_na` unsolicited IPv6 neighbour advertisements
//! (one per address, to all nodes, with the Override flag), `peer_notif_delay` apart (one
//! `miimon` interval when 0), so switches and neighbours relearn where the bond's MAC lives. The
//! bond's addresses are learned from the ARP and neighbour-discovery frames the host sends
//! ([`Bond::learn_from_host`]); lagd needs no address configuration of its own.
//!
//! The ARP monitor (`arp_interval`, `arp_ip_target`, `arp_validate`, `arp_all_targets`,
//! `arp_missed_max`) probes each target every interval with an ARP request from the bond's MAC
//! and learned address: on every member in the load-balancing modes, on the active member in
//! active-backup. A member that has heard nothing for `arp_missed_max` intervals (one more for a
//! backup) is taken out as `down`, even with carrier up; traffic it hears brings it back.
//! With validation (`arp_validate` other than `none`) or `filter`, only ARP frames from a target
//! count, not any frame (lagd's validation checks the ARP sender address against the targets;
//! with `arp_all_targets=all` every target must have been heard). Unlike the driver, which stops
//! reading carrier when ARP monitoring is on, lagd still takes a member without carrier out.
//!
//! In 802.3ad mode the bond owns a [`Lacp`] engine: members are reported to it as their MII
//! status makes them usable or not, slow-protocol frames go to it ([`Bond::handle_frame`]), its
//! LACPDUs come out of [`Bond::poll_transmit`], and it decides which members distribute (the
//! hash picks among them, in enslave order) and collect (frames from other members are dropped);
//! the bond's carrier follows its `min_links`.
//!
//! Modes implemented here: balance-rr (`packets_per_slave`), active-backup (`primary`,
//! `primary_reselect`, `all_slaves_active`), balance-xor (every hash policy) and broadcast.
//! 802.3ad. balance-tlb and balance-alb come with the balancers.

mod alb;
mod igmp;
pub mod options;

use core::fmt;
use core::time::Duration;

use crate::balance::{BalanceConfig, Buckets, BucketsSnapshot};
use crate::hash::{HashPolicy, MemberMod, hasher};
use crate::lacp::{self, Lacp, LacpConfig, LacpSnapshot, PortParams};
use crate::stripe::{PeersStatus, Stripe, StripeConfig, reorder::ReorderCounters};
use crate::time::Instant;
use crate::wire::EthernetAddress;
use crate::wire::arp::{ArpOperation, ArpPacket, ArpRepr};
use crate::wire::ip::{Ipv4Address, Ipv6Address};
use crate::wire::l4::IcmpPacket;
pub use options::{BondOptions, Distribution, FailOverMac, Mode, OptionError, PrimaryReselect};

/// A member's handle: its position in enslave order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PortId(pub u16);

impl PortId {
    /// The index into per-port arrays.
    pub const fn index(self) -> usize {
        self.0 as usize
    }
}

/// A member's link state as `/proc/net/bonding` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MiiStatus {
    /// Carrier up and usable.
    Up,
    /// Carrier lost, waiting out `downdelay`; still usable.
    GoingDown,
    /// Not usable.
    Down,
    /// Carrier back, waiting out `updelay`; not yet usable.
    GoingBack,
}

impl MiiStatus {
    /// The driver's wording.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Up => "up",
            Self::GoingDown => "going down",
            Self::Down => "down",
            Self::GoingBack => "going back",
        }
    }

    /// Whether frames may be sent on the member.
    pub const fn usable(self) -> bool {
        matches!(self, Self::Up | Self::GoingDown)
    }
}

impl fmt::Display for MiiStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What the driver knows about a member when it joins.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortInfo {
    /// Interface name.
    pub name: String,
    /// Permanent MAC.
    pub perm_mac: EthernetAddress,
    /// Speed in Mb/s, if known.
    pub speed_mbps: Option<u32>,
    /// Full duplex, if known.
    pub full_duplex: Option<bool>,
}

#[derive(Debug, Clone)]
struct Port {
    info: PortInfo,
    mii: MiiStatus,
    carrier: bool,
    /// When the current `going down` / `going back` began.
    since: Instant,
    link_failures: u32,
    /// ARP monitor: when each target was last heard on this member (any frame counts for all
    /// targets without validation).
    arp_heard: [Instant; MAX_ARP_TARGETS],
    /// ARP monitor: the member is taken out for silence.
    arp_down: bool,
}

/// The driver's limit on `arp_ip_target`.
const MAX_ARP_TARGETS: usize = 16;

impl Port {
    fn usable(&self) -> bool {
        self.mii.usable() && !self.arp_down
    }

    /// The status to show: a member the ARP monitor took out reads `down`.
    fn shown_status(&self) -> MiiStatus {
        if self.arp_down {
            MiiStatus::Down
        } else {
            self.mii
        }
    }
}

/// Where a frame from the host goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxChoice {
    /// On this member.
    Port(PortId),
    /// On every usable member (broadcast mode).
    All,
    /// Nowhere: no usable member.
    Drop,
}

/// Why a received frame is not delivered to the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DropReason {
    /// Arrived on a backup member (active-backup without `all_slaves_active`).
    InactiveMember,
    /// A slow-protocols frame (LACP, Marker): never given to the host.
    SlowProtocols,
    /// Shorter than an Ethernet header.
    Runt,
    /// Arrived on an 802.3ad member that LACP does not let collect.
    NotCollecting,
}

impl DropReason {
    /// Every reason, for counters.
    pub const ALL: [Self; 4] = [
        Self::InactiveMember,
        Self::SlowProtocols,
        Self::Runt,
        Self::NotCollecting,
    ];

    /// A short name for counters and status.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::InactiveMember => "inactive_member",
            Self::SlowProtocols => "slow_protocols",
            Self::Runt => "runt",
            Self::NotCollecting => "not_collecting",
        }
    }
}

/// What happens to a frame received on a member.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RxVerdict {
    /// Give it to the host.
    Deliver,
    /// Count and drop it.
    Drop(DropReason),
}

/// Something the driver may want to log or act on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BondEvent {
    /// A member's MII status changed.
    Link {
        /// The member.
        port: PortId,
        /// Its new status.
        status: MiiStatus,
    },
    /// The active member changed (active-backup).
    ActiveChanged {
        /// The previous active member.
        from: Option<PortId>,
        /// The new one.
        to: Option<PortId>,
    },
    /// The bond's own carrier changed.
    Carrier {
        /// Whether any member is usable.
        up: bool,
    },
    /// The bond's MAC changed (`fail_over_mac=active`: it follows the active member); the
    /// driver gives the host interface the new MAC.
    MacChanged {
        /// The new MAC.
        mac: EthernetAddress,
    },
    /// A member's interface should carry this MAC (`fail_over_mac=follow`: the active member
    /// takes the bond's MAC; the others keep distinct ones).
    MemberMac {
        /// The member.
        port: PortId,
        /// Its MAC.
        mac: EthernetAddress,
    },
}

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
    /// Per member, in enslave order.
    pub ports: Vec<PortSnapshot>,
    /// 802.3ad: the LACP engine's state.
    pub lacp: Option<LacpSnapshot>,
    /// Bucketed distribution: the table, loads, moves.
    pub buckets: Option<BucketsSnapshot>,
    /// Stripe mode: the peer and the reorder buffer's counters.
    pub stripe: Option<StripeSnapshot>,
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
}

/// A bond's decision state.
#[derive(Debug, Clone)]
pub struct Bond {
    opts: BondOptions,
    ports: Vec<Port>,
    /// Usable members in enslave order: what the hash picks among.
    usable: Vec<PortId>,
    usable_mod: Option<MemberMod>,
    hash: fn(&[u8]) -> u32,
    active: Option<PortId>,
    rr_counter: u32,
    rng: u32,
    carrier: bool,
    events: Vec<BondEvent>,
    mac: EthernetAddress,
    host_ipv4: Option<Ipv4Address>,
    /// The bond's IPv6 addresses seen in the host's neighbour discovery (at most 4).
    host_ipv6: Vec<Ipv6Address>,
    /// Announcement rounds after a failover: the next round's number (0-based) and when it is
    /// due; the frames of the round being sent.
    notify: Option<(u8, Instant)>,
    notify_queue: Vec<Announce>,
    /// ARP monitor: the next probe round, and probes queued for sending.
    arp_next: Option<Instant>,
    arp_queue: Vec<(PortId, Ipv4Address)>,
    /// 802.3ad: the LACP engine, the link state last reported to it, and which members collect.
    lacp: Option<Lacp>,
    lacp_link: Vec<bool>,
    collecting: Vec<bool>,
    /// balance-alb: receive load balancing.
    rlb: Option<alb::Rlb>,
    /// balance-tlb/alb: when the members next send learning packets.
    lp_next: Option<Instant>,
    lp_queue: Vec<PortId>,
    /// The host's multicast memberships, replayed after a failover (`resend_igmp`).
    igmp: igmp::IgmpCache,
    /// `fail_over_mac=follow`: the MAC each member's interface was last told to carry.
    member_macs: Vec<EthernetAddress>,
    /// Bucketed distribution (see [`BondOptions::uses_buckets`]).
    buckets: Option<Buckets>,
    /// Stripe mode's engine.
    stripe: Option<Stripe>,
    /// The members with their weights (speed in Mb/s, or `member_speed`), as last given to
    /// the buckets and the stripe engine.
    weighted: Vec<(PortId, u32)>,
    /// The latest time a `handle_*`/`poll_transmit` call brought (for [`Bond::snapshot`]).
    last_now: Instant,
    /// The member IGMP reports leave on, as last seen (a change is a failover for
    /// `resend_igmp`).
    igmp_port: Option<PortId>,
}

/// Stripe mode as the daemon runs it: gaps are given up on by timeout only when the driver
/// polls, after it has read every member (see `ReorderConfig::expire_on_push`).
fn stripe_config() -> StripeConfig {
    let mut c = StripeConfig::default();
    c.reorder.expire_on_push = false;
    c
}

/// The bucket table's configuration the bonding options describe.
fn balance_config(o: &BondOptions) -> BalanceConfig {
    BalanceConfig {
        rebalance_interval: Duration::from_millis(o.rebalance_interval.into()),
        seed: o.hash_seed,
        idle_gap: Duration::from_millis(o.rebalance_idle_gap.into()),
        max_moves: o.rebalance_max_moves,
        force_after: o.rebalance_force_after,
        ..BalanceConfig::default()
    }
}

/// The LACP configuration the bonding options describe.
fn lacp_config(o: &BondOptions) -> LacpConfig {
    LacpConfig {
        lacp_rate: o.lacp_rate,
        lacp_active: o.lacp_active,
        ad_select: o.ad_select,
        ad_actor_sys_prio: o.ad_actor_sys_prio,
        ad_actor_system: o.ad_actor_system.unwrap_or(EthernetAddress::ZERO),
        ad_user_port_key: o.ad_user_port_key,
        min_links: o.min_links,
        coupled_control: o.coupled_control,
        fallback: (o.lacp_fallback > 0).then(|| Duration::from_millis(o.lacp_fallback.into())),
        aggregate_wait: Duration::from_millis(o.lacp_aggregate_wait.into()),
    }
}

/// One announcement frame of a notification round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Announce {
    GratuitousArp(Ipv4Address),
    UnsolicitedNa(Ipv6Address),
}

/// How many IPv6 addresses of the bond lagd announces.
const MAX_ANNOUNCED_IPV6: usize = 4;

/// A frame the bond wants sent, written into the caller's buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transmit {
    /// The member to send it on.
    pub port: PortId,
    /// The frame's length in the buffer.
    pub len: usize,
}

impl Bond {
    /// A bond with no members yet, whose interface has MAC `mac`.
    pub fn new(opts: BondOptions, mac: EthernetAddress) -> Self {
        let hash = hasher(opts.mode.fixed_hash().unwrap_or(opts.xmit_hash_policy));
        // The option parser enforces the ranges LacpConfig::validate checks.
        let lacp = opts
            .mode
            .uses_lacp()
            .then(|| Lacp::new(lacp_config(&opts), mac).expect("validated bonding options"));
        Self {
            rlb: (opts.mode == Mode::BalanceAlb).then(alb::Rlb::default),
            lp_next: matches!(opts.mode, Mode::BalanceTlb | Mode::BalanceAlb)
                .then_some(Instant::ZERO),
            lp_queue: Vec::new(),
            igmp: igmp::IgmpCache::default(),
            member_macs: Vec::new(),
            igmp_port: None,
            buckets: opts
                .uses_buckets()
                .then(|| Buckets::new(balance_config(&opts))),
            stripe: (opts.mode == Mode::Stripe)
                .then(|| Stripe::new(stripe_config(), mac, 0, Instant::ZERO)),
            weighted: Vec::new(),
            last_now: Instant::ZERO,
            lacp,
            lacp_link: Vec::new(),
            collecting: Vec::new(),
            mac,
            host_ipv4: None,
            host_ipv6: Vec::new(),
            notify: None,
            notify_queue: Vec::new(),
            arp_next: (opts.arp_interval > 0 && !opts.arp_ip_target.is_empty())
                .then_some(Instant::ZERO),
            arp_queue: Vec::new(),
            opts,
            ports: Vec::new(),
            usable: Vec::new(),
            usable_mod: None,
            hash,
            active: None,
            rr_counter: 0,
            rng: 0x9e37_79b9,
            carrier: false,
            events: Vec::new(),
        }
    }

    /// The options in force.
    pub fn options(&self) -> &BondOptions {
        &self.opts
    }

    /// Adds a member with its current carrier. A member with carrier starts `up` (the driver
    /// does not apply `updelay` at enslave time).
    pub fn add_port(&mut self, now: Instant, info: PortInfo, carrier: bool) -> PortId {
        let id = PortId(self.ports.len() as u16);
        let mii = if carrier {
            MiiStatus::Up
        } else {
            MiiStatus::Down
        };
        self.ports.push(Port {
            info,
            mii,
            carrier,
            since: now,
            link_failures: 0,
            arp_heard: [now; MAX_ARP_TARGETS],
            arp_down: false,
        });
        self.events.push(BondEvent::Link {
            port: id,
            status: mii,
        });
        if let Some(l) = &mut self.lacp {
            let info = &self.ports[id.index()].info;
            let mut params = PortParams::new(
                info.perm_mac,
                info.speed_mbps.unwrap_or(0),
                info.full_duplex.unwrap_or(false),
            );
            if let Some((_, prio)) = self
                .opts
                .actor_port_prio
                .iter()
                .find(|(n, _)| *n == info.name)
            {
                params.port_priority = *prio;
            }
            // Port ids are enslave positions on both sides, so the add cannot collide.
            l.add_port(now, lacp::PortId(id.0), params)
                .expect("fresh LACP port id");
        }
        self.lacp_link.push(false);
        self.collecting.push(false);
        let perm = self.ports[id.index()].info.perm_mac;
        self.member_macs.push(perm);
        self.reselect(now);
        id
    }

    /// Gives the bond a slow-protocols frame (LACPDU, Marker) received on `port`. In modes
    /// without LACP it is ignored (it was counted as dropped by [`Bond::rx_verdict`]).
    pub fn handle_frame(&mut self, now: Instant, port: PortId, frame: &[u8]) {
        if let Some(l) = &mut self.lacp {
            l.handle_frame(now, lacp::PortId(port.0), frame);
            self.sync_lacp(now);
        }
    }

    /// Updates a member's speed and duplex (after a link change).
    pub fn set_port_speed(
        &mut self,
        now: Instant,
        port: PortId,
        speed_mbps: Option<u32>,
        full_duplex: Option<bool>,
    ) {
        let info = &mut self.ports[port.index()].info;
        if info.speed_mbps == speed_mbps && info.full_duplex == full_duplex {
            return;
        }
        info.speed_mbps = speed_mbps;
        info.full_duplex = full_duplex;
        self.update_weighted(now);
        if self.lacp_link.get(port.index()) == Some(&true) {
            // Report the new speed: LACP recomputes the port's key.
            self.lacp_link[port.index()] = false;
            self.reselect(now);
        }
    }

    /// Before the daemon stops: in 802.3ad mode every member's farewell LACPDU (Synchronization,
    /// Collecting, Distributing and Aggregation cleared) is queued; send them from
    /// [`Bond::poll_transmit`] so the partner stops using the links at once.
    pub fn shutdown(&mut self, now: Instant) {
        if let Some(l) = &mut self.lacp {
            for i in 0..self.ports.len() {
                let p = lacp::PortId(i as u16);
                if l.has_port(p) {
                    l.remove_port(now, p);
                }
            }
        }
    }

    /// The LACP engine, in 802.3ad mode.
    pub fn lacp(&self) -> Option<&Lacp> {
        self.lacp.as_ref()
    }

    /// Reads the LACP engine's decisions (distributing members, collecting members, carrier)
    /// when it reported a change; the engine raises an event for every change of those.
    fn sync_lacp(&mut self, now: Instant) {
        let Some(l) = &mut self.lacp else { return };
        let mut changed = false;
        while l.poll_event().is_some() {
            changed = true;
        }
        if !changed {
            return;
        }
        self.usable.clear();
        self.usable
            .extend(l.distributing_ports().map(|p| PortId(p.0)));
        self.usable_mod = MemberMod::new(self.usable.len());
        for (i, c) in self.collecting.iter_mut().enumerate() {
            *c = l.is_collecting(lacp::PortId(i as u16));
        }
        let carrier = l.carrier();
        if carrier != self.carrier {
            self.carrier = carrier;
            self.events.push(BondEvent::Carrier { up: carrier });
        }
        self.update_weighted(now);
    }

    /// A member's weight: `member_speed` if configured, else its reported speed (0: unknown).
    fn weight(&self, port: PortId) -> u32 {
        let info = &self.ports[port.index()].info;
        self.opts
            .member_speed
            .iter()
            .find(|(n, _)| *n == info.name)
            .map(|(_, s)| *s)
            .or(info.speed_mbps)
            .unwrap_or(0)
    }

    /// Gives the buckets and the stripe engine the usable members and their weights, when
    /// those changed.
    fn update_weighted(&mut self, now: Instant) {
        if self.buckets.is_none() && self.stripe.is_none() {
            return;
        }
        // Called on every timeout (stripe's reorder timers among them): compare first, so
        // nothing is allocated unless something changed.
        let same = self
            .usable
            .iter()
            .map(|&p| (p, self.weight(p)))
            .eq(self.weighted.iter().copied());
        if same {
            return;
        }
        let fresh: Vec<(PortId, u32)> = self.usable.iter().map(|&p| (p, self.weight(p))).collect();
        if let Some(b) = &mut self.buckets {
            b.set_members(now, &fresh);
        }
        if let Some(s) = &mut self.stripe {
            s.set_members(now, &fresh);
        }
        self.weighted = fresh;
    }

    /// Stripe mode: starts the engine afresh with `epoch` (random per start of the daemon, so
    /// the peer can tell a restart). Call once, before the first frame.
    pub fn set_stripe_epoch(&mut self, now: Instant, epoch: u32) {
        if let Some(s) = &mut self.stripe {
            *s = Stripe::new(stripe_config(), self.mac, epoch, now);
            s.set_members(now, &self.weighted);
        }
    }

    /// Stripe mode's engine: the driver stripes host frames with it, hands it the stripe
    /// frames members receive, and calls its `poll` when [`Stripe::poll_timeout`] is due (the
    /// bond's own [`Bond::poll_timeout`] covers only stripe's hellos).
    pub fn stripe_mut(&mut self) -> Option<&mut Stripe> {
        self.stripe.as_mut()
    }

    /// Stripe mode's engine, to read its deadlines ([`Stripe::poll_timeout`]).
    pub fn stripe(&self) -> Option<&Stripe> {
        self.stripe.as_ref()
    }

    /// Marks a member as gone (its interface was deleted): it stays in the table, `down`.
    pub fn remove_port(&mut self, now: Instant, port: PortId) {
        let p = &mut self.ports[port.index()];
        p.carrier = false;
        if p.mii != MiiStatus::Down {
            if p.mii.usable() {
                p.link_failures += 1;
            }
            p.mii = MiiStatus::Down;
            self.events.push(BondEvent::Link {
                port,
                status: MiiStatus::Down,
            });
        }
        self.reselect(now);
    }

    /// The member named `name`.
    pub fn port_by_name(&self, name: &str) -> Option<PortId> {
        self.ports
            .iter()
            .position(|p| p.info.name == name)
            .map(|i| PortId(i as u16))
    }

    /// Members in enslave order.
    pub fn ports(&self) -> impl Iterator<Item = (PortId, &PortInfo)> {
        self.ports
            .iter()
            .enumerate()
            .map(|(i, p)| (PortId(i as u16), &p.info))
    }

    /// Records a carrier reading of `port` (each poll, or a link event).
    pub fn handle_carrier(&mut self, now: Instant, port: PortId, carrier: bool) {
        self.last_now = self.last_now.max(now);
        let p = &mut self.ports[port.index()];
        if p.carrier == carrier {
            return;
        }
        p.carrier = carrier;
        let next = match (p.mii, carrier) {
            (MiiStatus::Up, false) => Some(if self.opts.downdelay == 0 {
                MiiStatus::Down
            } else {
                MiiStatus::GoingDown
            }),
            (MiiStatus::GoingDown, true) => Some(MiiStatus::Up),
            (MiiStatus::Down, true) => Some(if self.opts.updelay == 0 {
                MiiStatus::Up
            } else {
                MiiStatus::GoingBack
            }),
            (MiiStatus::GoingBack, false) => Some(MiiStatus::Down),
            _ => None,
        };
        if let Some(s) = next {
            self.set_status(now, port, s);
        }
        self.reselect(now);
    }

    /// Runs the delays that are due.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.last_now = self.last_now.max(now);
        let down = Duration::from_millis(self.opts.downdelay.into());
        let up = Duration::from_millis(self.opts.updelay.into());
        for i in 0..self.ports.len() {
            let p = &self.ports[i];
            let due = match p.mii {
                MiiStatus::GoingDown if now >= p.since + down => Some(MiiStatus::Down),
                MiiStatus::GoingBack if now >= p.since + up => Some(MiiStatus::Up),
                _ => None,
            };
            if let Some(s) = due {
                self.set_status(now, PortId(i as u16), s);
            }
        }
        if self.arp_next.is_some_and(|t| now >= t) {
            self.arp_round(now);
        }
        if let Some(l) = &mut self.lacp {
            l.handle_timeout(now);
        }
        if let Some(b) = &mut self.buckets {
            b.handle_timeout(now);
        }
        self.reselect(now);
    }

    /// Whether the ARP monitor runs.
    pub fn arp_monitoring(&self) -> bool {
        self.arp_next.is_some()
    }

    /// Records a frame received on `port` for the ARP monitor (call for every received frame,
    /// or at least once per batch and for every ARP frame). Cheap when the monitor is off.
    #[inline]
    pub fn note_rx(&mut self, now: Instant, port: PortId, frame: &[u8]) {
        if self.arp_next.is_none() {
            return;
        }
        let validate = !matches!(self.opts.arp_validate, options::ArpValidate::None);
        let is_arp = frame.len() >= 42 && frame[12..14] == [0x08, 0x06];
        let p = &mut self.ports[port.index()];
        if !validate {
            // Without validation any frame is a sign of life for every target.
            p.arp_heard = [now; MAX_ARP_TARGETS];
            return;
        }
        if !is_arp {
            return;
        }
        let spa = Ipv4Address([frame[28], frame[29], frame[30], frame[31]]);
        let targets = &self.opts.arp_ip_target;
        if let Some(k) = targets.iter().position(|t| t.octets() == spa.0) {
            p.arp_heard[k] = now;
        }
    }

    /// One ARP monitor round: judge every member, queue the next probes.
    fn arp_round(&mut self, now: Instant) {
        let interval = Duration::from_millis(self.opts.arp_interval.into());
        let targets = self.opts.arp_ip_target.len().min(MAX_ARP_TARGETS);
        let all = self.opts.arp_all_targets == options::ArpAllTargets::All;
        let ab = self.opts.mode.uses_primary();
        for i in 0..self.ports.len() {
            let backup = ab && self.active != Some(PortId(i as u16));
            let missed = u32::from(self.opts.arp_missed_max) + u32::from(backup);
            let window = interval * missed;
            let p = &self.ports[i];
            let fresh = |t: &Instant| now.saturating_since(*t) <= window;
            let alive = if all {
                p.arp_heard[..targets].iter().all(fresh)
            } else {
                p.arp_heard[..targets].iter().any(fresh)
            };
            let was_down = p.arp_down;
            if !alive && !was_down && p.mii.usable() {
                self.ports[i].arp_down = true;
                self.ports[i].link_failures += 1;
                self.events.push(BondEvent::Link {
                    port: PortId(i as u16),
                    status: MiiStatus::Down,
                });
            } else if alive && was_down {
                self.ports[i].arp_down = false;
                self.events.push(BondEvent::Link {
                    port: PortId(i as u16),
                    status: self.ports[i].mii,
                });
            }
        }
        self.arp_queue.clear();
        let probe_on: Vec<PortId> = if ab {
            // The active member probes; with none, every member with carrier tries.
            match self.active {
                Some(a) => vec![a],
                None => self.carrier_ports(),
            }
        } else {
            self.carrier_ports()
        };
        for port in probe_on {
            for t in &self.opts.arp_ip_target {
                self.arp_queue.push((port, Ipv4Address(t.octets())));
            }
        }
        self.arp_next = Some(now + interval);
    }

    fn carrier_ports(&self) -> Vec<PortId> {
        (0..self.ports.len())
            .filter(|&i| self.ports[i].mii.usable())
            .map(|i| PortId(i as u16))
            .collect()
    }

    /// When [`handle_timeout`](Self::handle_timeout) should next run, and
    /// [`poll_transmit`](Self::poll_transmit) has something to send: a time not after now
    /// whenever a frame is waiting.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let down = Duration::from_millis(self.opts.downdelay.into());
        let up = Duration::from_millis(self.opts.updelay.into());
        self.ports
            .iter()
            .filter_map(|p| match p.mii {
                MiiStatus::GoingDown => Some(p.since + down),
                MiiStatus::GoingBack => Some(p.since + up),
                _ => None,
            })
            .chain(self.notify.map(|(_, t)| t))
            .chain(self.arp_next)
            .chain(self.lacp.as_ref().and_then(Lacp::poll_timeout))
            .chain(self.rlb.as_ref().and_then(alb::Rlb::poll_timeout))
            .chain(self.lp_next)
            .chain(self.igmp_port.and_then(|_| self.igmp.poll_timeout()))
            .chain(self.buckets.as_ref().and_then(Buckets::poll_timeout))
            // Only stripe's hellos: its reorder and liveness deadlines are the driver's to poll
            // ([`Stripe::poll_timeout`], [`Stripe::poll`]), without the bond's machines.
            .chain(self.stripe.as_ref().and_then(Stripe::transmit_timeout))
            .chain(
                (!self.arp_queue.is_empty()
                    || !self.notify_queue.is_empty()
                    || !self.lp_queue.is_empty())
                .then_some(Instant::ZERO),
            )
            .min()
    }

    /// Learns the bond's IPv4 address from a frame the host sends: an ARP frame from the
    /// bond's MAC carries it as the sender protocol address. Cheap enough to call per frame;
    /// only ARP frames are looked at.
    #[inline]
    pub fn learn_from_host(&mut self, frame: &[u8]) {
        if frame.len() < 42 || frame[6..12] != self.mac.0 {
            return;
        }
        self.igmp.learn(frame);
        if frame[12..14] == [0x08, 0x06] {
            let spa = Ipv4Address([frame[28], frame[29], frame[30], frame[31]]);
            if !spa.0.iter().all(|&b| b == 0) {
                self.host_ipv4 = Some(spa);
            }
        } else if frame.len() >= 58
            && frame[12..14] == [0x86, 0xdd]
            && frame[20] == 58
            && matches!(frame[54], 135 | 136)
        {
            // Neighbour solicitation or advertisement from the host: its source is one of the
            // bond's addresses (not :: as in duplicate-address detection).
            let mut a = [0u8; 16];
            a.copy_from_slice(&frame[22..38]);
            let addr = Ipv6Address(a);
            if a != [0; 16]
                && !self.host_ipv6.contains(&addr)
                && self.host_ipv6.len() < MAX_ANNOUNCED_IPV6
            {
                self.host_ipv6.push(addr);
            }
        }
    }

    /// The bond's IPv6 addresses as learned from the host.
    pub fn host_ipv6(&self) -> &[Ipv6Address] {
        &self.host_ipv6
    }

    /// The bond's IPv4 address as learned from the host, if any.
    pub fn host_ipv4(&self) -> Option<Ipv4Address> {
        self.host_ipv4
    }

    /// The next frame the bond itself wants sent (LACPDUs, ARP probes, gratuitous ARPs and
    /// neighbour advertisements after a failover, receive-balancing ARP replies, learning
    /// packets, replayed IGMP/MLD reports), written into `buf` (at least 1514 bytes: a replayed
    /// report is as long as the host's). Call after every `handle_*`, until `None`.
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        self.last_now = self.last_now.max(now);
        if let Some(l) = &mut self.lacp {
            let tx = l.poll_transmit(now, buf);
            self.sync_lacp(now);
            if let Some(tx) = tx {
                return Some(Transmit {
                    port: PortId(tx.port.0),
                    len: tx.len,
                });
            }
        }
        if let Some((port, hello)) = self.stripe.as_mut().and_then(|s| s.poll_transmit(now)) {
            let src = self.ports[port.index()].info.perm_mac;
            if let Ok(len) = hello.emit_frame(src, buf) {
                return Some(Transmit { port, len });
            }
        }
        if let Some((port, target)) = self.arp_queue.pop() {
            let probe = ArpRepr::EthernetIpv4 {
                operation: ArpOperation::Request,
                source_hardware_addr: self.mac,
                source_protocol_addr: self.host_ipv4.unwrap_or(Ipv4Address([0; 4])),
                target_hardware_addr: EthernetAddress::ZERO,
                target_protocol_addr: target,
            };
            let len = probe.frame_len();
            probe.emit_frame(&mut buf[..len]);
            return Some(Transmit { port, len });
        }
        if let Some((port, c)) = self.rlb.as_mut().and_then(|r| r.poll_update(now)) {
            // A request for the client's own address, sent to it alone.
            let update = ArpRepr::EthernetIpv4 {
                operation: ArpOperation::Request,
                source_hardware_addr: self.wire_mac(port),
                source_protocol_addr: c.server,
                target_hardware_addr: EthernetAddress::ZERO,
                target_protocol_addr: c.ip,
            };
            let len = update.frame_len();
            update.emit_frame(&mut buf[..len]);
            buf[..6].copy_from_slice(&c.mac.0);
            return Some(Transmit { port, len });
        }
        if let Some(next) = self.lp_next {
            if now >= next {
                self.lp_queue.clone_from(&self.usable);
                let every = Duration::from_secs(self.opts.lp_interval.into());
                self.lp_next = Some(now + every);
            }
        }
        if let Some(port) = self.lp_queue.pop() {
            let len = alb::emit_learning_packet(self.wire_mac(port), buf);
            return Some(Transmit { port, len });
        }
        if let Some(port) = self.igmp_port {
            if let Some(len) = self.igmp.poll(now, buf) {
                return Some(Transmit { port, len });
            }
        }
        if self.notify_queue.is_empty() {
            let (round, due) = self.notify?;
            if now < due {
                return None;
            }
            // One round: a gratuitous ARP while rounds < num_grat_arp, an unsolicited NA per
            // address while rounds < num_unsol_na.
            if round < self.opts.num_grat_arp {
                if let Some(ip) = self.host_ipv4 {
                    self.notify_queue.push(Announce::GratuitousArp(ip));
                }
            }
            if round < self.opts.num_unsol_na {
                self.notify_queue
                    .extend(self.host_ipv6.iter().map(|a| Announce::UnsolicitedNa(*a)));
            }
            let rounds = self.opts.num_grat_arp.max(self.opts.num_unsol_na);
            self.notify = (round + 1 < rounds).then(|| (round + 1, now + self.notify_spacing()));
        }
        let announce = self.notify_queue.pop()?;
        let Some(port) = self.active else {
            self.notify_queue.clear();
            self.notify = None;
            return None;
        };
        let len = match announce {
            Announce::GratuitousArp(ip) => {
                let arp = ArpRepr::gratuitous(self.mac, ip);
                let len = arp.frame_len();
                arp.emit_frame(&mut buf[..len]);
                len
            }
            Announce::UnsolicitedNa(addr) => emit_unsolicited_na(self.mac, addr, buf),
        };
        Some(Transmit { port, len })
    }

    fn notify_spacing(&self) -> Duration {
        let ms = match (self.opts.peer_notif_delay, self.opts.miimon) {
            (0, 0) => 100,
            (0, m) => m,
            (d, _) => d,
        };
        Duration::from_millis(ms.into())
    }

    /// The next event, oldest first.
    pub fn poll_event(&mut self) -> Option<BondEvent> {
        if self.events.is_empty() {
            None
        } else {
            Some(self.events.remove(0))
        }
    }

    fn set_status(&mut self, now: Instant, port: PortId, status: MiiStatus) {
        let p = &mut self.ports[port.index()];
        if p.usable() && !status.usable() {
            p.link_failures += 1;
        }
        p.mii = status;
        p.since = now;
        self.events.push(BondEvent::Link { port, status });
    }

    /// Recomputes the usable set, the active member and the bond carrier.
    fn reselect(&mut self, now: Instant) {
        // Nothing usable but a member coming back: use it now, updelay or not.
        if !self.ports.iter().any(Port::usable) {
            if let Some(i) = self
                .ports
                .iter()
                .position(|p| p.mii == MiiStatus::GoingBack)
            {
                self.set_status(now, PortId(i as u16), MiiStatus::Up);
            }
        }
        if let Some(l) = &mut self.lacp {
            // LACP decides who distributes; it hears about each member's usability.
            for (i, p) in self.ports.iter().enumerate() {
                let up = p.usable();
                if self.lacp_link[i] != up {
                    self.lacp_link[i] = up;
                    l.handle_link(
                        now,
                        lacp::PortId(i as u16),
                        up,
                        p.info.speed_mbps.unwrap_or(0),
                        p.info.full_duplex.unwrap_or(false),
                    );
                }
            }
            self.sync_lacp(now);
            return;
        }
        let ports = &self.ports;
        let fresh = || {
            ports
                .iter()
                .enumerate()
                .filter(|(_, p)| p.usable())
                .map(|(i, _)| PortId(i as u16))
        };
        let changed = !fresh().eq(self.usable.iter().copied());
        if changed {
            self.usable.clear();
            self.usable.extend(fresh());
            self.usable_mod = MemberMod::new(self.usable.len());
        }
        self.update_weighted(now);
        let active = self.choose_active();
        let active_changed = active != self.active;
        if active != self.active {
            self.events.push(BondEvent::ActiveChanged {
                from: self.active,
                to: active,
            });
            // A failover (not the first choice) is announced to the network.
            if self.active.is_some()
                && active.is_some()
                && self.opts.mode.uses_primary()
                && (self.opts.num_grat_arp > 0 || self.opts.num_unsol_na > 0)
            {
                self.notify = Some((0, now));
                self.notify_queue.clear();
            }
            self.active = active;
            self.apply_fail_over_mac();
            if self.lp_next.is_some() {
                // The switch learns the MACs where they now live.
                self.lp_next = Some(now);
            }
        }
        if let Some(r) = &mut self.rlb {
            if active_changed {
                r.teach_all(now);
            }
            if changed || active_changed {
                r.rebalance(now, &self.usable);
            }
        }
        let igmp_port = self.igmp_member();
        if igmp_port != self.igmp_port {
            if self.igmp_port.is_some() && igmp_port.is_some() {
                self.igmp.schedule(now, self.opts.resend_igmp);
            }
            self.igmp_port = igmp_port;
        }
        let carrier = !self.usable.is_empty();
        if carrier != self.carrier {
            self.carrier = carrier;
            self.events.push(BondEvent::Carrier { up: carrier });
        }
    }

    /// The member IGMP leaves on: the active one, or in balance-rr the first usable one. Other
    /// modes hash IGMP like any frame, and a failover there has no single new port.
    fn igmp_member(&self) -> Option<PortId> {
        match self.opts.mode {
            Mode::BalanceRr => self.usable.first().copied(),
            m if m.uses_primary() => self.active,
            _ => None,
        }
    }

    /// The MAC a member shows the network: the bond's on the active member; its own on the
    /// others, except that the member whose own MAC is the bond's uses the active member's own
    /// MAC instead (the driver swaps the two), so no MAC is on two ports.
    pub fn wire_mac(&self, port: PortId) -> EthernetAddress {
        if Some(port) == self.active {
            return self.mac;
        }
        let own = self.ports[port.index()].info.perm_mac;
        match self.active {
            Some(a) if own == self.mac => self.ports[a.index()].info.perm_mac,
            _ => own,
        }
    }

    /// `fail_over_mac` after the active member changed (active-backup only, as the driver).
    fn apply_fail_over_mac(&mut self) {
        if self.opts.mode != Mode::ActiveBackup {
            return;
        }
        match self.opts.fail_over_mac {
            FailOverMac::None => {}
            FailOverMac::Active => {
                if let Some(a) = self.active {
                    let mac = self.ports[a.index()].info.perm_mac;
                    if mac != self.mac && !mac.is_zero() {
                        self.mac = mac;
                        self.events.push(BondEvent::MacChanged { mac });
                    }
                }
            }
            FailOverMac::Follow => {
                for i in 0..self.ports.len() {
                    let port = PortId(i as u16);
                    let mac = self.wire_mac(port);
                    if self.member_macs[i] != mac {
                        self.member_macs[i] = mac;
                        self.events.push(BondEvent::MemberMac { port, mac });
                    }
                }
            }
        }
    }

    /// The bond's MAC (it changes with `fail_over_mac=active`).
    pub fn mac(&self) -> EthernetAddress {
        self.mac
    }

    /// The driver's `bond_find_best_slave` with `primary_reselect`.
    fn choose_active(&self) -> Option<PortId> {
        let usable = |id: PortId| self.ports[id.index()].usable();
        let current = self.active.filter(|&a| usable(a));
        let primary = self
            .opts
            .primary
            .as_deref()
            .and_then(|n| self.port_by_name(n))
            .filter(|&p| {
                let p = &self.ports[p.index()];
                p.mii == MiiStatus::Up && !p.arp_down
            });
        if let Some(p) = primary {
            let take = match (self.opts.primary_reselect, current) {
                (_, None) => true,
                (PrimaryReselect::Always, _) => true,
                (PrimaryReselect::Better, Some(c)) => self.better(p, c),
                (PrimaryReselect::Failure, Some(c)) => c == p,
            };
            if take {
                return Some(p);
            }
        }
        current.or_else(|| self.usable.first().copied())
    }

    /// Whether `a` is faster (then: full duplex where `b` is not) than `b`.
    fn better(&self, a: PortId, b: PortId) -> bool {
        let (a, b) = (&self.ports[a.index()].info, &self.ports[b.index()].info);
        let sa = a.speed_mbps.unwrap_or(0);
        let sb = b.speed_mbps.unwrap_or(0);
        sa > sb || (sa == sb && a.full_duplex == Some(true) && b.full_duplex != Some(true))
    }

    /// Whether any member is usable.
    pub fn carrier(&self) -> bool {
        self.carrier
    }

    /// The active member (modes with one).
    pub fn active(&self) -> Option<PortId> {
        self.active
    }

    /// Usable members in enslave order.
    pub fn usable(&self) -> &[PortId] {
        &self.usable
    }

    /// Where a frame from the host goes. Per frame; no allocation. In balance-tlb/alb the frame
    /// must then go through [`Bond::tx_fixup`] for the member chosen.
    #[inline]
    pub fn tx_choice(&mut self, now: Instant, frame: &[u8]) -> TxChoice {
        match self.opts.mode {
            Mode::BalanceXor | Mode::Ieee8023ad | Mode::BalanceSlb | Mode::BalanceTcp => {
                if let Some(b) = &mut self.buckets {
                    let hash = (self.hash)(frame);
                    return b
                        .member_for(now, hash, frame.len() as u32)
                        .map_or(TxChoice::Drop, TxChoice::Port);
                }
                match self.usable_mod {
                    Some(m) => TxChoice::Port(self.usable[m.index((self.hash)(frame))]),
                    None => TxChoice::Drop,
                }
            }
            // Stripe: the driver stripes through [`Bond::stripe_mut`]; this is for frames it
            // cannot.
            Mode::ActiveBackup | Mode::Stripe => self.active.map_or(TxChoice::Drop, TxChoice::Port),
            Mode::Broadcast => {
                if self.usable.is_empty() {
                    TxChoice::Drop
                } else {
                    TxChoice::All
                }
            }
            Mode::BalanceRr => self.rr_choice(frame),
            Mode::BalanceTlb | Mode::BalanceAlb => self.tlb_choice(now, frame),
        }
    }

    /// balance-tlb/alb: balanced frames by hash over the usable members, the rest (and, in
    /// balance-alb, ARP as receive balancing decides) through the active member.
    fn tlb_choice(&mut self, now: Instant, frame: &[u8]) -> TxChoice {
        let Some(active) = self.active else {
            return TxChoice::Drop;
        };
        let hash = if self.opts.mode == Mode::BalanceTlb {
            if !alb::tlb_balanced(frame) {
                return TxChoice::Port(active);
            }
            (self.hash)(frame)
        } else {
            if frame.len() >= 42 && frame[12..14] == [0x08, 0x06] {
                let port = ArpPacket::new_checked(&frame[14..])
                    .ok()
                    .and_then(|p| ArpRepr::parse(&p).ok())
                    .zip(self.rlb.as_mut())
                    .and_then(|(arp, r)| r.host_arp(now, &arp, &self.usable, self.active));
                return TxChoice::Port(port.unwrap_or(active));
            }
            match alb::alb_hash(frame) {
                Some(h) => h,
                None => return TxChoice::Port(active),
            }
        };
        if let Some(b) = &mut self.buckets {
            return TxChoice::Port(
                b.member_for(now, hash, frame.len() as u32)
                    .unwrap_or(active),
            );
        }
        match self.usable_mod {
            Some(m) => TxChoice::Port(self.usable[m.index(hash)]),
            None => TxChoice::Port(active),
        }
    }

    /// balance-tlb/alb, after [`Bond::tx_choice`] chose `port`: a frame leaving on another member
    /// than the active one carries that member's MAC as source (and, for an ARP reply of the
    /// host in balance-alb, as sender hardware address). Other modes: nothing to do.
    #[inline]
    pub fn tx_fixup(&self, port: PortId, frame: &mut [u8]) {
        if !matches!(self.opts.mode, Mode::BalanceTlb | Mode::BalanceAlb)
            || frame.len() < 14
            || Some(port) == self.active
        {
            return;
        }
        let mac = self.wire_mac(port);
        if frame[6..12] == self.mac.0 {
            frame[6..12].copy_from_slice(&mac.0);
        }
        if self.rlb.is_some()
            && frame.len() >= 42
            && frame[12..14] == [0x08, 0x06]
            && frame[20..22] == [0, 2]
            && frame[22..28] == self.mac.0
        {
            frame[22..28].copy_from_slice(&mac.0);
        }
    }

    /// balance-tlb/alb, for a frame [`Bond::rx_verdict`] delivers: a frame sent to a member's
    /// MAC is given to the host with the bond's MAC as destination, and in balance-alb the ARP
    /// of clients feeds receive balancing. Other modes: nothing to do.
    #[inline]
    pub fn rx_fixup(&mut self, now: Instant, frame: &mut [u8]) {
        if !matches!(self.opts.mode, Mode::BalanceTlb | Mode::BalanceAlb) || frame.len() < 14 {
            return;
        }
        if frame[0] & 1 == 0 && frame[..6] != self.mac.0 {
            let to_member =
                (0..self.ports.len()).any(|i| frame[..6] == self.wire_mac(PortId(i as u16)).0);
            if to_member {
                frame[..6].copy_from_slice(&self.mac.0);
            }
        }
        if frame.len() >= 42 && frame[12..14] == [0x08, 0x06] {
            let arp = ArpPacket::new_checked(&frame[14..])
                .ok()
                .and_then(|p| ArpRepr::parse(&p).ok());
            if let (Some(arp), Some(r)) = (arp, self.rlb.as_mut()) {
                r.member_arp(now, &arp, self.host_ipv4, &self.usable, self.active);
            }
        }
    }

    /// balance-rr: the driver's `bond_rr_gen_slave_id` and the walk to a usable member.
    fn rr_choice(&mut self, frame: &[u8]) -> TxChoice {
        if self.usable.is_empty() {
            return TxChoice::Drop;
        }
        // IGMP always leaves on the active (first usable) member.
        if is_igmp(frame) {
            return TxChoice::Port(self.usable[0]);
        }
        let value = match self.opts.packets_per_slave {
            0 => {
                // xorshift32: any member per frame, as the driver's prandom.
                let mut x = self.rng;
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                self.rng = x;
                x
            }
            1 => {
                let v = self.rr_counter;
                self.rr_counter = v.wrapping_add(1);
                v
            }
            n => {
                let v = self.rr_counter;
                self.rr_counter = v.wrapping_add(1);
                v / u32::from(n)
            }
        };
        let n = self.ports.len();
        let start = value as usize % n;
        (0..n)
            .map(|k| (start + k) % n)
            .find(|&i| self.ports[i].usable())
            .map_or(TxChoice::Drop, |i| TxChoice::Port(PortId(i as u16)))
    }

    /// Whether a frame received on `port` goes to the host. Per frame; no allocation.
    #[inline]
    pub fn rx_verdict(&self, port: PortId, frame: &[u8]) -> RxVerdict {
        if frame.len() < 14 {
            return RxVerdict::Drop(DropReason::Runt);
        }
        if frame[12] == 0x88 && frame[13] == 0x09 {
            return RxVerdict::Drop(DropReason::SlowProtocols);
        }
        if self.lacp.is_some() && !self.collecting[port.index()] {
            return RxVerdict::Drop(DropReason::NotCollecting);
        }
        // balance-slb faces a switch without a LAG, which floods to every member: broadcast
        // and multicast are taken on one member only (as Open vSwitch does).
        if self.opts.mode == Mode::BalanceSlb && frame[0] & 1 != 0 && self.active != Some(port) {
            return RxVerdict::Drop(DropReason::InactiveMember);
        }
        if self.opts.mode.uses_primary()
            && !self.opts.all_slaves_active
            && self.active != Some(port)
            // balance-alb: the other members receive their clients' unicast.
            && !(self.rlb.is_some() && frame[0] & 1 == 0)
        {
            return RxVerdict::Drop(DropReason::InactiveMember);
        }
        RxVerdict::Deliver
    }

    /// Plain-data state for status output.
    pub fn snapshot(&self) -> BondSnapshot {
        let uses_primary = self.opts.mode.uses_primary();
        BondSnapshot {
            mode: self.opts.mode,
            xmit_hash_policy: (self.opts.mode.uses_hash()
                || (self.opts.mode == Mode::BalanceTlb && !self.opts.tlb_dynamic_lb))
                .then_some(self.opts.xmit_hash_policy),
            carrier: self.carrier,
            miimon: self.opts.miimon,
            updelay: self.opts.updelay,
            downdelay: self.opts.downdelay,
            peer_notif_delay: self.opts.peer_notif_delay,
            primary: uses_primary.then(|| self.opts.primary.clone()).flatten(),
            primary_reselect: uses_primary.then_some(self.opts.primary_reselect),
            active: if uses_primary {
                self.active.map(|a| self.ports[a.index()].info.name.clone())
            } else {
                None
            },
            lacp: self.lacp.as_ref().map(Lacp::snapshot),
            buckets: self.buckets.as_ref().map(Buckets::snapshot),
            stripe: self.stripe.as_ref().map(|s| StripeSnapshot {
                peers: s.status(self.last_now),
                reorder: *s.rx().counters(),
                held_now: s.rx().occupancy(),
                next_tx_seq: s.tx().next_seq(),
            }),
            ports: self
                .ports
                .iter()
                .enumerate()
                .map(|(i, p)| PortSnapshot {
                    name: p.info.name.clone(),
                    mii: p.shown_status(),
                    speed_mbps: p.info.speed_mbps,
                    full_duplex: p.info.full_duplex,
                    link_failures: p.link_failures,
                    perm_mac: p.info.perm_mac,
                    active: if uses_primary {
                        self.active == Some(PortId(i as u16))
                    } else if self.lacp.is_some() {
                        self.usable.contains(&PortId(i as u16))
                    } else {
                        p.usable()
                    },
                })
                .collect(),
        }
    }
}

/// Writes an unsolicited neighbour advertisement for `addr` at `mac` (RFC 4861 §7.2.6): from
/// the address to all nodes (ff02::1, 33:33:00:00:00:01), hop limit 255, Override set,
/// Solicited clear, with the target link-layer address option. Returns the frame length (86).
fn emit_unsolicited_na(mac: EthernetAddress, addr: Ipv6Address, buf: &mut [u8]) -> usize {
    const LEN: usize = 14 + 40 + 32;
    let all_nodes = Ipv6Address([0xff, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
    let f = &mut buf[..LEN];
    f.fill(0);
    f[0..6].copy_from_slice(&[0x33, 0x33, 0, 0, 0, 1]);
    f[6..12].copy_from_slice(&mac.0);
    f[12..14].copy_from_slice(&[0x86, 0xdd]);
    f[14] = 0x60;
    f[18..20].copy_from_slice(&32u16.to_be_bytes());
    f[20] = 58;
    f[21] = 255;
    f[22..38].copy_from_slice(&addr.0);
    f[38..54].copy_from_slice(&all_nodes.0);
    let icmp = &mut f[54..];
    icmp[0] = 136;
    icmp[4] = 0x20; // Override
    icmp[8..24].copy_from_slice(&addr.0);
    icmp[24] = 2; // target link-layer address option, 8 bytes
    icmp[25] = 1;
    icmp[26..32].copy_from_slice(&mac.0);
    IcmpPacket::new_unchecked(icmp).fill_checksum_v6(addr, all_nodes);
    LEN
}

/// IPv4 carrying IGMP (protocol 2), untagged or behind one tag: `balance-rr` sends it on the
/// first usable member without taking a turn, as the kernel's `bond_xmit_roundrobin` does (the
/// planner models the same rule with this function).
pub(crate) fn is_igmp(frame: &[u8]) -> bool {
    let (ty, l3) = match frame.get(12..14) {
        Some([0x81, 0x00]) | Some([0x88, 0xa8]) => (frame.get(16..18), 18),
        _ => (frame.get(12..14), 14),
    };
    ty == Some(&[0x08, 0x00]) && frame.get(l3 + 9) == Some(&2)
}

#[cfg(test)]
mod test;
