//! IEEE 802.1AX Link Aggregation Control Protocol (LACP): the bond-level engine.
//!
//! [`Lacp`] runs the per-port state machines of IEEE Std 802.1AX-2014 clause 6.4 for one bond
//! (one logical link made of member ports), plus the Marker Responder of clause 6.5 and an
//! optional fallback to active-backup. It is sans-IO: inputs are `handle_*` calls, outputs are
//! `poll_*` calls, and time is an [`Instant`] the caller passes in.
//!
//! | machine | file | clause |
//! |---|---|---|
//! | Receive machine | `rx.rs` | 802.1AX-2014 §6.4.12 |
//! | Periodic Transmission machine | `periodic.rs` | 802.1AX-2014 §6.4.13 |
//! | Selection Logic | `select.rs` | 802.1AX-2014 §6.4.14 |
//! | Mux machine | `mux.rs` | 802.1AX-2014 §6.4.15 |
//! | Transmit machine | `tx.rs` | 802.1AX-2014 §6.4.16 |
//! | Churn Detection machines | `churn.rs` | 802.1AX-2014 §6.4.17 |
//! | Marker Responder | `marker.rs` | 802.1AX-2014 §6.5.4 |
//! | LACP fallback (Open vSwitch's `lacp-fallback-ab`, not in the standard) | `fallback.rs` | — |
//!
//! What the machines share lies below them, in files of its own: `config.rs` (the
//! configuration and the protocol's constants), `timer.rs`, `state.rs` (the machines' per-port
//! state) and `port.rs` (`Port`, every variable of one port). The machines take a `Port`; this
//! file creates the ports, runs the machines on them and answers for the bond.
//!
//! The per-port variables keep the standard's names where they have one (`actor_state` is
//! `Actor_Oper_Port_State`, `partner` holds the `Partner_Oper_*` values, `ntt`, `selected`,
//! `ready_n`, `port_moved`, `port_enabled`, `lacp_enabled`).
//!
//! # Driving it
//!
//! ```
//! use lagd_proto::lacp::{Lacp, LacpConfig, PortId, PortParams, MAX_FRAME_LEN};
//! use lagd_proto::time::Instant;
//! use lagd_proto::wire::EthernetAddress;
//! use lagd_proto::wire::slow::LacpRepr;
//!
//! let bond_mac = EthernetAddress([0x02, 0xaa, 0, 0, 0, 1]);
//! let mut lacp = Lacp::new(LacpConfig::default(), bond_mac).unwrap();
//! let now = Instant::ZERO;
//! lacp.add_port(now, PortId(0), PortParams::new(EthernetAddress([0x02, 0xaa, 0, 0, 1, 0]), 10_000, true))
//!     .unwrap();
//! lacp.handle_link(now, PortId(0), true, 10_000, true);
//!
//! let mut buf = [0u8; MAX_FRAME_LEN];
//! let tx = lacp.poll_transmit(now, &mut buf).expect("a LACPDU at link-up");
//! let pdu = LacpRepr::parse_frame(&buf[..tx.len]).unwrap();
//! assert_eq!(pdu.actor.key, 15); // 10G full duplex, ad_user_port_key 0
//! assert_eq!(lacp.poll_timeout().map(|t| t > now), Some(true));
//! ```
//!
//! # Timing model
//!
//! Linux runs the machines on a 100 ms tick. lagd does not tick: every timer of the standard
//! (`current_while`, `periodic_timer`, `wait_while`, the churn timers, the transmit limit) is an
//! exact deadline, the machines run to a fixed point on every `handle_*` / `poll_transmit`
//! call, and [`Lacp::poll_timeout`] returns the earliest deadline. The observable timing is the
//! standard's: a LACPDU every [`FAST_PERIODIC_TIME`] (1 s) or [`SLOW_PERIODIC_TIME`] (30 s) as
//! the partner asks, a partner expired [`SHORT_TIMEOUT_TIME`] (3 s) or [`LONG_TIMEOUT_TIME`]
//! (90 s) after its last LACPDU and defaulted [`SHORT_TIMEOUT_TIME`] later, [`AGGREGATE_WAIT_TIME`]
//! (2 s) in WAITING, churn after [`CHURN_DETECTION_TIME`] (60 s), and no more than
//! [`MAX_TX_PER_FAST_PERIODIC`] (3) LACPDUs in any [`FAST_PERIODIC_TIME`] interval. Unlike Linux,
//! timers are not rounded to ticks, and there is no 8 s aggregator selection timer at enslave
//! time (a Linux addition). Time never goes backwards: an earlier `now` than one already seen is
//! taken as the latest one seen.
//!
//! # Choices where the standard leaves room (and where lagd differs from Linux)
//!
//! - **One logical link per bond.** A bond forwards over one aggregator at a time, the *active*
//!   aggregator, chosen by `ad_select` as Linux does (see `select.rs`). Ports selected to any
//!   other aggregator are `STANDBY`: they wait in WAITING with `Actor.Synchronization` clear, so
//!   the partner never distributes on them either.
//! - **Link-down ports are not selected.** A port without carrier is UNSELECTED and DETACHED.
//! - **The dataplane sends where the partner collects.** A port whose Mux machine distributes
//!   carries frames once the partner's last LACPDU says it collects ([`Lacp::is_distributing`]):
//!   under coupled control both ends enter COLLECTING_DISTRIBUTING on the other's
//!   Synchronization, and the one that gets it first would otherwise send to a partner still
//!   ATTACHED (the Linux driver moves on at its next 100 ms tick and drops what comes
//!   meanwhile). It costs one LACPDU's latency at formation; the bits we advertise are the
//!   standard's.
//! - **Carrier.** [`Lacp::carrier`] is up when the active aggregator has at least
//!   `max(min_links, 1)` ports the dataplane sends on, or when the fallback is active and `min_links <= 1`.
//!   (Linux also calls a bond with `min_links 0` up when no port is enabled.)
//! - **Partner admin defaults** are Linux's: system 00:00:00:00:00:00, system priority 65535,
//!   key 1, port 1, port priority 255, state 0 (passive, long timeout, individual). A partner
//!   that never spoke therefore makes the port Individual and never in sync: without the
//!   fallback, no port distributes towards a silent partner.
//! - **Passive ports stay silent** while the Periodic machine is in NO_PERIODIC (802.1AX-2014
//!   §6.4.16): a passive bond sends nothing until it hears an active partner.
//! - **Loopback.** A LACPDU whose actor system is our own system is counted
//!   ([`PortCounters::loopback_rx`]) and dropped, as Linux does.
//! - **Port numbers** are 1, 2, … in `add_port` order and never reused; aggregator ids likewise
//!   (one aggregator per port, as in Linux).
//!
//! # Peer input
//!
//! [`Lacp::handle_frame`] never fails and never panics on frame contents: what it cannot use is
//! counted in the port's [`PortCounters`]. Unknown port handles are caller mistakes and panic
//! (documented per method); queries about unknown ports return `false` / `None`.

mod churn;
mod config;
mod fallback;
pub mod limit;
mod marker;
mod mux;
mod periodic;
mod port;
mod rx;
mod select;
mod state;
mod timer;
mod tx;

#[cfg(test)]
mod tests;

pub use crate::port::{AggregatorId, PortId, Transmit};
pub use churn::{ActorChurnState, PartnerChurnState};
pub use config::{
    AGGREGATE_WAIT_TIME, AdSelect, CHURN_DETECTION_TIME, ConfigError, FAST_PERIODIC_TIME,
    LONG_TIMEOUT_TIME, LacpConfig, LacpRate, MAX_TX_PER_FAST_PERIODIC, ParseNameError,
    SHORT_TIMEOUT_TIME, SLOW_PERIODIC_TIME,
};
pub use port::{PartnerId, PortCounters};
pub use state::{MuxState, PeriodicState, RxState, Selected};

use core::fmt;
use std::collections::VecDeque;

use config::PARTNER_ADMIN;
use port::{Actor, Port};

use crate::time::{Instant, earliest};
use crate::wire::EthernetAddress;
use crate::wire::slow::{
    LacpInfo, LacpRepr, MarkerKind, PortState, SlowPdu, is_slow_protocols_frame,
};

/// The longest frame [`Lacp::poll_transmit`] writes (a LACPDU or Marker PDU with its Ethernet
/// header).
pub const MAX_FRAME_LEN: usize = 124;

/// Most rounds the machines run in one call before the engine stops looking for changes. Every
/// cascade the machines can produce settles in far fewer; the bound only guarantees progress.
const MAX_ROUNDS: usize = 32;

/// A member port as [`Lacp::add_port`] gets it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortParams {
    /// The member's permanent MAC: the source address of its LACPDUs.
    pub mac: EthernetAddress,
    /// The last known link speed in Mb/s (0 when unknown).
    pub speed_mbps: u32,
    /// The last known duplex.
    pub full_duplex: bool,
    /// The port priority (`actor_port_prio`; default 255, as Linux). Sent in the LACPDUs;
    /// with `ad_select=actor_port_prio` the aggregator whose ports' priorities add up to the
    /// most is the active one.
    pub port_priority: u16,
}

impl PortParams {
    /// Parameters with the default port priority (255).
    pub const fn new(mac: EthernetAddress, speed_mbps: u32, full_duplex: bool) -> Self {
        Self {
            mac,
            speed_mbps,
            full_duplex,
            port_priority: 255,
        }
    }
}

/// Why [`Lacp::add_port`] refused a port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddPortError {
    /// The bond already has a port with this id.
    Duplicate,
    /// Port numbers (or aggregator ids) 1..=65535 are used up.
    Full,
}

impl fmt::Display for AddPortError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Duplicate => "port already in the bond",
            Self::Full => "no port number left",
        })
    }
}

impl std::error::Error for AddPortError {}

/// Something the dataplane or the operator may want to react to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LacpEvent {
    /// The set of ports returned by [`Lacp::distributing_ports`] (or collecting) changed.
    DistributionChanged,
    /// The bond's carrier ([`Lacp::carrier`]) changed.
    CarrierChanged {
        /// The new carrier.
        up: bool,
    },
    /// A port's machine states, selection or state bits changed.
    PortStateChanged {
        /// The port.
        port: PortId,
    },
    /// The active aggregator changed.
    ActiveAggregatorChanged {
        /// The new active aggregator.
        aggregator: Option<AggregatorId>,
    },
    /// The partner a port records changed: another system, key or port number, or none (the
    /// partner timed out, or the port was reset, and the administrative defaults apply:
    /// system all zeros).
    PartnerChanged {
        /// The port.
        port: PortId,
        /// The partner's system id (all zeros: no partner).
        system: EthernetAddress,
        /// The partner's operational key.
        key: u16,
        /// The partner's port number.
        partner_port: u16,
    },
    /// The LACP fallback started, moved to another port, or ended (`None`).
    FallbackChanged {
        /// The port carrying traffic in fallback.
        port: Option<PortId>,
    },
}

impl LacpEvent {
    /// Events in the same slot replace each other in the queue: a newer one supersedes.
    fn same_slot(&self, other: &Self) -> bool {
        match (self, other) {
            (Self::PortStateChanged { port: a }, Self::PortStateChanged { port: b }) => a == b,
            (Self::PartnerChanged { port: a, .. }, Self::PartnerChanged { port: b, .. }) => a == b,
            _ => core::mem::discriminant(self) == core::mem::discriminant(other),
        }
    }
}

/// What `/proc/net/bonding` shows about an aggregator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AggregatorSnapshot {
    /// The aggregator id.
    pub id: AggregatorId,
    /// Whether this is the bond's active aggregator.
    pub active: bool,
    /// Whether it holds an Individual link (no other port may join).
    pub individual: bool,
    /// Ports selected to it (SELECTED or STANDBY), in port order.
    pub ports: Vec<PortId>,
    /// Ports distributing through it ("Number of ports" in `/proc`).
    pub enabled_ports: u32,
    /// Actor key.
    pub actor_key: u16,
    /// Partner key.
    pub partner_key: u16,
    /// Partner system priority.
    pub partner_system_priority: u16,
    /// Partner system ("Partner Mac Address").
    pub partner_system: EthernetAddress,
}

/// What `/proc/net/bonding` shows about a port, and more.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LacpPortSnapshot {
    /// The port.
    pub port: PortId,
    /// Its permanent MAC.
    pub mac: EthernetAddress,
    /// Carrier.
    pub up: bool,
    /// Speed in Mb/s as last reported.
    pub speed_mbps: u32,
    /// Duplex as last reported.
    pub full_duplex: bool,
    /// The aggregator it is selected to.
    pub aggregator: Option<AggregatorId>,
    /// Selection state.
    pub selected: Selected,
    /// Receive machine state.
    pub rx: RxState,
    /// Periodic Transmission machine state.
    pub periodic: PeriodicState,
    /// Mux machine state.
    pub mux: MuxState,
    /// Actor Churn Detection machine state.
    pub actor_churn: ActorChurnState,
    /// Partner Churn Detection machine state.
    pub partner_churn: PartnerChurnState,
    /// Times the actor churn machine entered ACTOR_CHURN.
    pub actor_churn_count: u32,
    /// Times the partner churn machine entered PARTNER_CHURN.
    pub partner_churn_count: u32,
    /// Our information as we send it (`details actor lacp pdu`).
    pub actor: LacpInfo,
    /// The partner information in use (`details partner lacp pdu`).
    pub partner: LacpInfo,
    /// Whether the dataplane may collect on this port (LACP or fallback).
    pub collecting: bool,
    /// Whether the dataplane may distribute on this port (LACP or fallback).
    pub distributing: bool,
    /// Frame counters.
    pub counters: PortCounters,
}

/// Plain data describing the whole engine: what `lagctl show` renders.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LacpSnapshot {
    /// `lacp_active`.
    pub lacp_active: bool,
    /// `lacp_rate`.
    pub lacp_rate: LacpRate,
    /// `min_links`.
    pub min_links: u32,
    /// `ad_select`.
    pub ad_select: AdSelect,
    /// `coupled_control`.
    pub coupled_control: bool,
    /// System priority in use.
    pub system_priority: u16,
    /// System id in use.
    pub system: EthernetAddress,
    /// The bond's carrier.
    pub carrier: bool,
    /// The port carrying traffic in fallback, if the fallback is active.
    pub fallback_active: Option<PortId>,
    /// The active aggregator.
    pub active_aggregator: Option<AggregatorId>,
    /// Every aggregator with at least one port, in id order.
    pub aggregators: Vec<AggregatorSnapshot>,
    /// Every port, in port order.
    pub ports: Vec<LacpPortSnapshot>,
}

impl LacpSnapshot {
    /// The active aggregator's entry ("Active Aggregator Info").
    pub fn active_aggregator_info(&self) -> Option<&AggregatorSnapshot> {
        self.aggregators.iter().find(|a| a.active)
    }

    /// A port's entry.
    pub fn port(&self, port: PortId) -> Option<&LacpPortSnapshot> {
        self.ports.iter().find(|p| p.port == port)
    }
}

/// The speed code of the Linux oper key, from a speed in Mb/s (0 when unknown).
pub(crate) fn speed_code(speed_mbps: u32) -> u16 {
    match speed_mbps {
        1 => 1,
        10 => 2,
        100 => 3,
        1_000 => 4,
        2_500 => 5,
        5_000 => 6,
        10_000 => 7,
        14_000 => 8,
        20_000 => 9,
        25_000 => 10,
        40_000 => 11,
        50_000 => 12,
        56_000 => 13,
        100_000 => 14,
        200_000 => 15,
        400_000 => 16,
        800_000 => 17,
        _ => 0,
    }
}

/// The actor oper key: `user_key << 6 | speed_code << 1 | full_duplex`, with the speed and
/// duplex parts zero while the link is down.
pub(crate) fn oper_key(user_key: u16, up: bool, speed_mbps: u32, full_duplex: bool) -> u16 {
    let link = if up {
        speed_code(speed_mbps) << 1 | u16::from(full_duplex)
    } else {
        0
    };
    (user_key & 0x3ff) << 6 | link
}

// Creating a port and BEGIN run the machines, which take a `Port`: so they are here, with the
// engine that runs the machines, and not in port.rs, which the machines import.
impl Port {
    /// A port after BEGIN, link down.
    pub(crate) fn new(
        id: PortId,
        params: PortParams,
        number: u16,
        own_aggregator: AggregatorId,
        config: &LacpConfig,
    ) -> Self {
        let mut actor_state = PortState::AGGREGATION;
        actor_state.set(PortState::ACTIVITY, config.lacp_active);
        actor_state.set(PortState::TIMEOUT, config.lacp_rate == LacpRate::Fast);
        let mut port = Self {
            id,
            mac: params.mac,
            number,
            priority: params.port_priority,
            own_aggregator,
            speed_mbps: params.speed_mbps,
            full_duplex: params.full_duplex,
            port_enabled: false,
            lacp_enabled: params.full_duplex,
            key: oper_key(config.ad_user_port_key, false, 0, false),
            actor_state,
            partner: PARTNER_ADMIN,
            selected: Selected::Unselected,
            aggregator: None,
            ntt: false,
            port_moved: false,
            ready_n: false,
            rx: state::Receive::new(),
            periodic: state::Periodic::new(),
            mux: state::Mux::new(),
            aggregate_wait: config.aggregate_wait,
            rejoin_hold: config.rejoin_hold,
            left: None,
            resume: None,
            primed: None,
            rejoining: false,
            tx: state::Transmit::new(),
            actor_churn: churn::Churn::new(),
            partner_churn: churn::Churn::new(),
            markers: marker::Responder::new(),
            rx_limit: limit::RxLimiter::new(),
            marker_limit: limit::TokenBucket::new(limit::MARKER_RESPONSE_RATE),
            counters: PortCounters::default(),
        };
        port.begin();
        port
    }

    /// BEGIN: every machine of the port to its initial state.
    pub(crate) fn begin(&mut self) {
        self.ntt = false;
        self.tx.last = None;
        self.tx.partner_lacks = false;
        self.tx.periodic = false;
        self.ready_n = false;
        rx::begin(self);
        periodic::begin(self);
        mux::begin(self);
        self.actor_churn.begin();
        self.partner_churn.begin();
    }

    /// What a [`LacpEvent::PortStateChanged`] reports a change of.
    fn view(&self) -> PortView {
        PortView {
            rx: self.rx.state,
            periodic: self.periodic.state,
            mux: self.mux.state,
            selected: self.selected,
            aggregator: self.aggregator,
            actor_state: self.actor_state,
            partner_state: self.partner.state,
            partner: (self.partner.system, self.partner.key, self.partner.port),
            enabled: self.port_enabled,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct PortView {
    rx: RxState,
    periodic: PeriodicState,
    mux: MuxState,
    selected: Selected,
    aggregator: Option<AggregatorId>,
    actor_state: PortState,
    partner_state: PortState,
    /// The partner's system, key and port number.
    partner: (EthernetAddress, u16, u16),
    enabled: bool,
}

/// What the engine compares before and after a call to raise events.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Observed {
    ports: Vec<(PortId, PortView)>,
    distributing: Vec<PortId>,
    collecting: Vec<PortId>,
    carrier: bool,
    active: Option<AggregatorId>,
    fallback: Option<PortId>,
}

/// The bond-level LACP engine.
#[derive(Debug, Clone)]
pub struct Lacp {
    config: LacpConfig,
    actor: Actor,
    /// Ports in `PortId` order.
    ports: Vec<Port>,
    aggregators: Vec<select::Aggregator>,
    active: Option<AggregatorId>,
    next_port_number: u16,
    next_aggregator_id: u16,
    fallback: fallback::Fallback,
    /// The time the machines have run up to: real state, not a cache of the last call's
    /// argument (time never goes backwards here: an earlier `now` is taken as this one, and
    /// what is queued to send is due at it).
    machines_at: Instant,
    events: VecDeque<LacpEvent>,
    /// Farewell LACPDUs of removed ports: (port, source MAC, PDU).
    farewells: VecDeque<(PortId, EthernetAddress, LacpRepr)>,
    /// Where the next `poll_transmit` starts looking, for fairness between ports.
    tx_cursor: usize,
}

impl Lacp {
    /// A bond with no ports. `bond_mac` is the system id when `ad_actor_system` is zero.
    pub fn new(config: LacpConfig, bond_mac: EthernetAddress) -> Result<Self, ConfigError> {
        config.validate()?;
        let system = if config.ad_actor_system.is_zero() {
            bond_mac
        } else {
            config.ad_actor_system
        };
        Ok(Self {
            actor: Actor {
                system_priority: config.ad_actor_sys_prio,
                system,
            },
            fallback: fallback::Fallback::new(config.fallback),
            config,
            ports: Vec::new(),
            aggregators: Vec::new(),
            active: None,
            next_port_number: 1,
            next_aggregator_id: 1,
            machines_at: Instant::ZERO,
            events: VecDeque::new(),
            farewells: VecDeque::new(),
            tx_cursor: 0,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &LacpConfig {
        &self.config
    }

    /// The system id in use (`ad_actor_system`, or the bond MAC).
    pub fn system(&self) -> EthernetAddress {
        self.actor.system
    }

    /// Whether the bond has this port.
    pub fn has_port(&self, port: PortId) -> bool {
        self.index(port).is_some()
    }

    /// The bond's ports, in port order.
    pub fn ports(&self) -> impl Iterator<Item = PortId> + '_ {
        self.ports.iter().map(|p| p.id)
    }

    /// Adds a member port. It starts with carrier down (machines at BEGIN); report its link
    /// with [`Lacp::handle_link`].
    pub fn add_port(
        &mut self,
        now: Instant,
        port: PortId,
        params: PortParams,
    ) -> Result<(), AddPortError> {
        let now = self.advance(now);
        let before = self.observe();
        self.run(now);
        let Err(pos) = self.ports.binary_search_by_key(&port, |p| p.id) else {
            self.note(&before);
            return Err(AddPortError::Duplicate);
        };
        if self.next_port_number == 0 || self.next_aggregator_id == 0 {
            self.note(&before);
            return Err(AddPortError::Full);
        }
        let number = self.next_port_number;
        let agg = AggregatorId(self.next_aggregator_id);
        self.next_port_number = self.next_port_number.wrapping_add(1);
        self.next_aggregator_id = self.next_aggregator_id.wrapping_add(1);
        self.ports
            .insert(pos, Port::new(port, params, number, agg, &self.config));
        self.aggregators.push(select::Aggregator::new(agg, port));
        self.run(now);
        self.note(&before);
        Ok(())
    }

    /// Removes a member port. If it was talking LACP, a farewell LACPDU (Synchronization,
    /// Collecting, Distributing and Aggregation cleared) is queued for it: send it from
    /// [`Lacp::poll_transmit`] before closing the member.
    ///
    /// # Panics
    /// If the bond has no such port.
    pub fn remove_port(&mut self, now: Instant, port: PortId) {
        let now = self.advance(now);
        let before = self.observe();
        self.run(now);
        let idx = self.expect_index(port);
        let p = self.ports.remove(idx);
        if tx::may_transmit(&p) {
            self.farewells
                .push_back((p.id, p.mac, tx::farewell(&p, &self.actor)));
        }
        select::remove_aggregator(
            &mut self.ports,
            &mut self.aggregators,
            &mut self.active,
            p.own_aggregator,
        );
        self.run(now);
        self.note(&before);
    }

    /// Reports a port's link: carrier, speed (Mb/s) and duplex. A speed or duplex change on a
    /// port that stays up restarts its machines (BEGIN), as Linux does.
    ///
    /// # Panics
    /// If the bond has no such port.
    pub fn handle_link(
        &mut self,
        now: Instant,
        port: PortId,
        up: bool,
        speed_mbps: u32,
        full_duplex: bool,
    ) {
        let now = self.advance(now);
        let before = self.observe();
        self.run(now);
        let idx = self.expect_index(port);
        let user_key = self.config.ad_user_port_key;
        let p = &mut self.ports[idx];
        let restart =
            up && p.port_enabled && (p.speed_mbps != speed_mbps || p.full_duplex != full_duplex);
        p.speed_mbps = speed_mbps;
        p.full_duplex = full_duplex;
        if restart {
            p.begin();
        }
        let was_in_sync = p.port_enabled
            && p.actor_state.contains(PortState::SYNCHRONIZATION)
            && p.partner.state.contains(PortState::SYNCHRONIZATION);
        p.port_enabled = up;
        p.lacp_enabled = full_duplex;
        if !up {
            // The partner may forget us while the link is down: the next LACPDU is news.
            p.tx.last = None;
            p.rx_limit.forget();
            p.primed = None;
            if was_in_sync {
                p.left = Some((now, p.partner_id()));
            }
        }
        let key = oper_key(user_key, up, speed_mbps, full_duplex);
        if key != p.key {
            // A new operational key: the port must be selected again, and the partner told.
            p.key = key;
            p.selected = Selected::Unselected;
            p.ntt = true;
        }
        self.run(now);
        self.note(&before);
    }

    /// Sets a port's priority (`actor_port_prio`) at run time, as the kernel's per-slave option
    /// does: the port's next LACPDU carries it (sent at once), and under
    /// `ad_select=actor_port_prio` the active aggregator is chosen again with it.
    ///
    /// # Panics
    /// If the bond has no such port.
    pub fn set_port_priority(&mut self, now: Instant, port: PortId, priority: u16) {
        let now = self.advance(now);
        let before = self.observe();
        self.run(now);
        let idx = self.expect_index(port);
        let p = &mut self.ports[idx];
        if p.priority != priority {
            p.priority = priority;
            p.ntt = true;
        }
        self.run(now);
        self.note(&before);
    }

    /// Handles a frame received on a member (a whole Ethernet frame). Slow-protocol frames only:
    /// LACPDUs go to the Receive machine, Marker Information PDUs are answered, everything else
    /// is counted. Never fails, never panics on the frame's contents.
    ///
    /// # Panics
    /// If the bond has no such port.
    pub fn handle_frame(&mut self, now: Instant, port: PortId, frame: &[u8]) {
        let now = self.advance(now);
        let idx = self.expect_index(port);
        let src = frame
            .get(6..12)
            .map(|b| EthernetAddress([b[0], b[1], b[2], b[3], b[4], b[5]]));
        if !self.ports[idx].rx_limit.admit(now, src) {
            // Over the port's budget: dropped before any parsing or machine run (see `limit`);
            // timers due are run by the next `handle_timeout`.
            self.ports[idx].counters.rate_limited_rx += 1;
            return;
        }
        let before = self.observe();
        self.run(now);
        let parsed = if is_slow_protocols_frame(frame) {
            SlowPdu::parse_frame(frame).ok()
        } else {
            None
        };
        let counters = &mut self.ports[idx].counters;
        match parsed {
            None => counters.illegal_rx += 1,
            Some(SlowPdu::Unknown { .. }) => counters.unknown_rx += 1,
            Some(SlowPdu::Marker(m)) => match m.kind {
                MarkerKind::Information => {
                    counters.marker_rx += 1;
                    let p = &mut self.ports[idx];
                    if !p.marker_limit.take(now) || !p.markers.push(m) {
                        p.counters.marker_dropped += 1;
                    }
                }
                MarkerKind::Response => counters.marker_response_rx += 1,
                MarkerKind::Unknown(_) => counters.illegal_rx += 1,
            },
            Some(SlowPdu::Lacp(pdu)) => {
                counters.lacpdu_rx += 1;
                if pdu.actor.system == self.actor.system {
                    counters.loopback_rx += 1;
                } else {
                    let p = &mut self.ports[idx];
                    let partner_current = p.rx.state == RxState::Current;
                    let knows_us =
                        pdu.partner.system == self.actor.system && pdu.partner.port == p.number;
                    let held = src.is_some_and(|src| {
                        p.rx_limit.holds_off(
                            src,
                            pdu.actor.system,
                            pdu.actor.port,
                            knows_us,
                            partner_current,
                        )
                    });
                    if held {
                        p.counters.foreign_rx += 1;
                    } else {
                        if let Some(src) = src {
                            p.rx_limit
                                .lacpdu(src, pdu.actor.system, pdu.actor.port, knows_us);
                        }
                        rx::mark_moved(&mut self.ports, idx, &pdu.actor);
                        let actor = self.actor;
                        rx::receive(&mut self.ports[idx], &actor, &pdu, now);
                    }
                }
            }
        }
        self.run(now);
        self.note(&before);
    }

    /// Runs the machines up to `now` (timer expiries).
    pub fn handle_timeout(&mut self, now: Instant) {
        let now = self.advance(now);
        let before = self.observe();
        self.run(now);
        self.note(&before);
    }

    /// Writes the next frame to send into `buf` and says on which port: farewell LACPDUs first,
    /// then Marker Responses, then LACPDUs of ports with NTT set (at most
    /// [`MAX_TX_PER_FAST_PERIODIC`] per second per port). Call until it returns `None`.
    ///
    /// # Panics
    /// If `buf` is shorter than [`MAX_FRAME_LEN`].
    #[must_use]
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        assert!(
            buf.len() >= MAX_FRAME_LEN,
            "poll_transmit needs a buffer of MAX_FRAME_LEN bytes"
        );
        let now = self.advance(now);
        let before = self.observe();
        self.run(now);
        self.note(&before);
        if let Some((port, src, pdu)) = self.farewells.pop_front() {
            let len = pdu.frame_len();
            pdu.emit_frame(src, &mut buf[..len]);
            return Some(Transmit { port, len });
        }
        for p in &mut self.ports {
            if let Some(m) = p.markers.pop() {
                let len = m.frame_len();
                m.emit_frame(p.mac, &mut buf[..len]);
                p.counters.marker_response_tx += 1;
                return Some(Transmit { port: p.id, len });
            }
        }
        let n = self.ports.len();
        for k in 0..n {
            let i = (self.tx_cursor + k) % n;
            let p = &mut self.ports[i];
            if !tx::wants(p) {
                continue;
            }
            match tx::decide(p, &self.actor, now) {
                tx::Decision::Wait(_) => {}
                tx::Decision::Suppress => {
                    p.ntt = false;
                    p.tx.partner_lacks = false;
                    p.tx.periodic = false;
                    p.counters.lacpdu_suppressed += 1;
                }
                tx::Decision::Send(pdu) => {
                    let len = pdu.frame_len();
                    pdu.emit_frame(p.mac, &mut buf[..len]);
                    p.tx.record(now);
                    p.tx.last = Some((now, pdu));
                    p.tx.partner_lacks = false;
                    p.tx.periodic = false;
                    p.ntt = false;
                    p.counters.lacpdu_tx += 1;
                    self.tx_cursor = (i + 1) % n;
                    return Some(Transmit { port: p.id, len });
                }
            }
        }
        None
    }

    /// When the engine next needs [`Lacp::handle_timeout`] (or [`Lacp::poll_transmit`]): the
    /// earliest timer deadline, or the time the machines have run up to if frames are waiting
    /// to be sent.
    pub fn poll_timeout(&self) -> Option<Instant> {
        if !self.farewells.is_empty() || self.ports.iter().any(|p| !p.markers.is_empty()) {
            return Some(self.machines_at);
        }
        let per_port = self.ports.iter().flat_map(|p| {
            let tx = tx::wants(p).then(|| match tx::decide(p, &self.actor, self.machines_at) {
                tx::Decision::Wait(t) => t,
                tx::Decision::Send(_) | tx::Decision::Suppress => self.machines_at,
            });
            [
                p.rx.current_while.deadline(),
                p.periodic.periodic_timer.deadline(),
                p.mux.wait_while.deadline(),
                p.actor_churn.deadline(),
                p.partner_churn.deadline(),
                tx,
            ]
        });
        earliest(per_port.chain([self.fallback.deadline()]))
    }

    /// The next event, oldest first. Events of one kind (per port) are coalesced.
    pub fn poll_event(&mut self) -> Option<LacpEvent> {
        self.events.pop_front()
    }

    /// Whether the dataplane may send on `port`: its Mux machine distributes and the partner
    /// collects (the port's Distributing bit alone is not enough: a partner under coupled
    /// control may not take frames yet), or it carries the fallback. `false` for an unknown
    /// port.
    pub fn is_distributing(&self, port: PortId) -> bool {
        self.fallback.active() == Some(port)
            || self.index(port).is_some_and(|i| self.ports[i].sends())
    }

    /// The source MAC of `port`'s confirmed partner (two consecutive LACPDUs from it naming
    /// the same partner and knowing this port; see [`limit`]): a dataplane may read that
    /// address's slow-protocol frames apart from the rest, so a flood from elsewhere cannot
    /// crowd them out of a socket's queue before the port's own limits see them.
    pub fn confirmed_partner_source(&self, port: PortId) -> Option<EthernetAddress> {
        self.index(port)
            .and_then(|i| self.ports[i].rx_limit.trusted())
    }

    /// The partner `port` is in sync with (both sides' Synchronization set), if any, as the
    /// port records it: what a daemon keeps to [`resume`](Self::resume) after a restart.
    pub fn synced_partner(&self, port: PortId) -> Option<LacpInfo> {
        let p = &self.ports[self.index(port)?];
        (p.port_enabled
            && p.actor_state.contains(PortState::SYNCHRONIZATION)
            && p.partner.state.contains(PortState::SYNCHRONIZATION))
        .then_some(p.partner)
    }

    /// A restart of the daemon (killed, not stopped): `port` was in sync with `partner` under
    /// the previous run, which never told the partner otherwise. The partner kept its
    /// aggregation, and the port takes up where the last run left it: enabled with nothing
    /// heard yet, it records `partner` as if its last LACPDU had just arrived (the Receive
    /// machine goes to CURRENT, `current_while` runs as after a LACPDU), so it selects,
    /// attaches without the aggregate wait and collects and distributes before it sends
    /// anything, and its first LACPDU tells the partner nothing new. The partner's next
    /// LACPDU confirms it or, if anything changed, corrects it as any LACPDU does.
    /// A LACPDU heard before the port is enabled, or the link going down first, drops the
    /// record; the port still attaches without the wait if the first partner it is selected
    /// with has `partner`'s system, key and port (as a port back from a short flap does with
    /// `rejoin_hold`). Any other partner, or none, and the port waits as usual. Unknown ports:
    /// nothing.
    pub fn resume(&mut self, port: PortId, partner: LacpInfo) {
        if let Some(i) = self.index(port) {
            let p = &mut self.ports[i];
            p.resume = Some(PartnerId::of(&partner));
            p.primed = partner
                .state
                .contains(PortState::SYNCHRONIZATION)
                .then_some(partner);
        }
    }

    /// Whether the dataplane may accept frames from `port`: its Mux machine collects, or it
    /// carries the fallback. `false` for an unknown port.
    pub fn is_collecting(&self, port: PortId) -> bool {
        self.fallback.active() == Some(port)
            || self
                .index(port)
                .is_some_and(|i| self.ports[i].lacp_collecting())
    }

    /// Whether the dataplane takes frames from `port`: it collects ([`Lacp::is_collecting`]),
    /// or its Mux machine is ATTACHED to the active aggregator, selected, with current partner
    /// information (the Receive machine in CURRENT), and tells the partner it is in sync. A partner under coupled control (the Linux driver) enters
    /// COLLECTING_DISTRIBUTING and distributes on the port as soon as it has our
    /// Synchronization, and tells us its own only with its next LACPDU, which the driver may
    /// hold back for up to 300 ms (it sends at most three a second); what it sends meanwhile
    /// belongs to the aggregate we attached the port to, and refusing it would lose it. The
    /// Collecting bit we advertise does not change. `false` for an unknown port.
    pub fn accepts_from(&self, port: PortId) -> bool {
        self.is_collecting(port)
            || self.index(port).is_some_and(|i| {
                let p = &self.ports[i];
                p.mux.state == MuxState::Attached
                    && p.rx.state == RxState::Current
                    && p.selected == Selected::Selected
                    && p.actor_state.contains(PortState::SYNCHRONIZATION)
                    && p.aggregator.is_some()
                    && p.aggregator == self.active
            })
    }

    /// The ports the dataplane hashes over, in port order.
    pub fn distributing_ports(&self) -> impl Iterator<Item = PortId> + '_ {
        self.ports
            .iter()
            .filter(|p| p.sends() || self.fallback.active() == Some(p.id))
            .map(|p| p.id)
    }

    /// The bond's carrier: the active aggregator has at least `max(min_links, 1)` ports
    /// distributing, or the fallback is active and `min_links <= 1`.
    pub fn carrier(&self) -> bool {
        let need = self.config.min_links.max(1);
        if self.fallback.active().is_some() {
            return need <= 1;
        }
        let Some(active) = self.active else {
            return false;
        };
        let n = self
            .ports
            .iter()
            .filter(|p| p.aggregator == Some(active) && p.sends())
            .count();
        u32::try_from(n).unwrap_or(u32::MAX) >= need
    }

    /// The port carrying traffic because the LACP fallback is active.
    pub fn fallback_active(&self) -> Option<PortId> {
        self.fallback.active()
    }

    /// The active aggregator.
    pub fn active_aggregator(&self) -> Option<AggregatorId> {
        self.active
    }

    /// Everything `/proc/net/bonding` shows in 802.3ad mode, and the machine states.
    pub fn snapshot(&self) -> LacpSnapshot {
        let ports = self
            .ports
            .iter()
            .map(|p| LacpPortSnapshot {
                port: p.id,
                mac: p.mac,
                up: p.port_enabled,
                speed_mbps: p.speed_mbps,
                full_duplex: p.full_duplex,
                aggregator: p.aggregator,
                selected: p.selected,
                rx: p.rx.state,
                periodic: p.periodic.state,
                mux: p.mux.state,
                actor_churn: p.actor_churn.actor_state(),
                partner_churn: p.partner_churn.partner_state(),
                actor_churn_count: p.actor_churn.count,
                partner_churn_count: p.partner_churn.count,
                actor: p.actor_info(&self.actor),
                partner: p.partner,
                collecting: self.is_collecting(p.id),
                distributing: self.is_distributing(p.id),
                counters: p.counters,
            })
            .collect();
        let mut aggregators: Vec<AggregatorSnapshot> = self
            .aggregators
            .iter()
            .filter_map(|a| {
                let members: Vec<&Port> = self
                    .ports
                    .iter()
                    .filter(|p| p.aggregator == Some(a.id))
                    .collect();
                if members.is_empty() {
                    return None;
                }
                Some(AggregatorSnapshot {
                    id: a.id,
                    active: self.active == Some(a.id),
                    individual: a.individual,
                    ports: members.iter().map(|p| p.id).collect(),
                    enabled_ports: u32::try_from(
                        members.iter().filter(|p| p.lacp_distributing()).count(),
                    )
                    .unwrap_or(u32::MAX),
                    actor_key: a.actor_key,
                    partner_key: a.partner_key,
                    partner_system_priority: a.partner_system_priority,
                    partner_system: a.partner_system,
                })
            })
            .collect();
        aggregators.sort_by_key(|a| a.id);
        LacpSnapshot {
            lacp_active: self.config.lacp_active,
            lacp_rate: self.config.lacp_rate,
            min_links: self.config.min_links,
            ad_select: self.config.ad_select,
            coupled_control: self.config.coupled_control,
            system_priority: self.actor.system_priority,
            system: self.actor.system,
            carrier: self.carrier(),
            fallback_active: self.fallback.active(),
            active_aggregator: self.active,
            aggregators,
            ports,
        }
    }

    fn index(&self, port: PortId) -> Option<usize> {
        self.ports.binary_search_by_key(&port, |p| p.id).ok()
    }

    fn expect_index(&self, port: PortId) -> usize {
        match self.index(port) {
            Some(i) => i,
            None => panic!("lacp: no port {port} in this bond"),
        }
    }

    /// Moves the clock to `now` (never backwards) and returns the time to use.
    fn advance(&mut self, now: Instant) -> Instant {
        self.machines_at = self.machines_at.max(now);
        self.machines_at
    }

    /// Runs every machine of every port to a fixed point at `now`.
    fn run(&mut self, now: Instant) {
        let coupled = self.config.coupled_control;
        let actor = self.actor;
        for _ in 0..MAX_ROUNDS {
            let mut changed = false;
            for p in &mut self.ports {
                changed |= rx::step(p, now);
                changed |= rx::resume(p, &actor, now);
                changed |= periodic::step(p, now);
            }
            changed |= select::run(
                &mut self.ports,
                &mut self.aggregators,
                &mut self.active,
                self.config.ad_select,
            );
            for i in 0..self.ports.len() {
                let ready = select::ready(&self.ports, self.ports[i].aggregator);
                changed |= mux::step(&mut self.ports[i], ready, coupled, now);
            }
            for p in &mut self.ports {
                let (enabled, actor_sync, partner_sync) = (
                    p.port_enabled,
                    p.actor_state.contains(PortState::SYNCHRONIZATION),
                    p.partner.state.contains(PortState::SYNCHRONIZATION),
                );
                changed |= p.actor_churn.step(enabled, actor_sync, now);
                changed |= p.partner_churn.step(enabled, partner_sync, now);
            }
            if !changed {
                break;
            }
        }
        for p in &mut self.ports {
            tx::settle_ntt(p);
        }
        self.fallback.update(now, &self.ports);
    }

    fn observe(&self) -> Observed {
        Observed {
            ports: self.ports.iter().map(|p| (p.id, p.view())).collect(),
            distributing: self.distributing_ports().collect(),
            collecting: self
                .ports
                .iter()
                .filter(|p| self.accepts_from(p.id))
                .map(|p| p.id)
                .collect(),
            carrier: self.carrier(),
            active: self.active,
            fallback: self.fallback.active(),
        }
    }

    /// Raises the events for what changed since `before`.
    fn note(&mut self, before: &Observed) {
        let after = self.observe();
        for (id, view) in &after.ports {
            let old = before.ports.iter().find(|(b, _)| b == id).map(|(_, v)| v);
            if old != Some(view) {
                self.push_event(LacpEvent::PortStateChanged { port: *id });
            }
            if old.is_some_and(|o| o.partner != view.partner) {
                let (system, key, partner_port) = view.partner;
                self.push_event(LacpEvent::PartnerChanged {
                    port: *id,
                    system,
                    key,
                    partner_port,
                });
            }
        }
        for (id, _) in &before.ports {
            if !after.ports.iter().any(|(a, _)| a == id) {
                self.push_event(LacpEvent::PortStateChanged { port: *id });
            }
        }
        if after.active != before.active {
            self.push_event(LacpEvent::ActiveAggregatorChanged {
                aggregator: after.active,
            });
        }
        if after.fallback != before.fallback {
            self.push_event(LacpEvent::FallbackChanged {
                port: after.fallback,
            });
        }
        if after.distributing != before.distributing || after.collecting != before.collecting {
            self.push_event(LacpEvent::DistributionChanged);
        }
        if after.carrier != before.carrier {
            self.push_event(LacpEvent::CarrierChanged { up: after.carrier });
        }
    }

    fn push_event(&mut self, ev: LacpEvent) {
        self.events.retain(|e| !e.same_slot(&ev));
        self.events.push_back(ev);
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn oper_key_matches_linux_examples() {
        // §3.3 of the research notes: 10G → 15, 1G → 9, 25G → 21, 100G → 29 (user key 0).
        assert_eq!(oper_key(0, true, 10_000, true), 15);
        assert_eq!(oper_key(0, true, 1_000, true), 9);
        assert_eq!(oper_key(0, true, 25_000, true), 21);
        assert_eq!(oper_key(0, true, 100_000, true), 29);
        assert_eq!(oper_key(0, true, 800_000, true), 35);
        assert_eq!(oper_key(3, true, 10_000, true), 3 << 6 | 15);
        assert_eq!(oper_key(0, true, 10_000, false), 14);
        assert_eq!(oper_key(0, true, 12_345, true), 1);
        assert_eq!(oper_key(5, false, 10_000, true), 5 << 6);
    }

    #[test]
    fn config_validation_and_names() {
        assert_eq!(LacpConfig::default().validate(), Ok(()));
        let bad = LacpConfig {
            ad_actor_sys_prio: 0,
            ..LacpConfig::default()
        };
        assert_eq!(bad.validate(), Err(ConfigError::SystemPriorityZero));
        let bad = LacpConfig {
            ad_user_port_key: 1024,
            ..LacpConfig::default()
        };
        assert_eq!(
            Lacp::new(bad, EthernetAddress::ZERO).err(),
            Some(ConfigError::UserPortKeyTooLarge)
        );
        let bad = LacpConfig {
            ad_actor_system: EthernetAddress([1, 0, 0, 0, 0, 1]),
            ..LacpConfig::default()
        };
        assert_eq!(bad.validate(), Err(ConfigError::ActorSystemMulticast));
        assert_eq!("fast".parse(), Ok(LacpRate::Fast));
        assert_eq!("0".parse(), Ok(LacpRate::Slow));
        assert_eq!("count".parse(), Ok(AdSelect::Count));
        assert_eq!("1".parse(), Ok(AdSelect::Bandwidth));
        assert_eq!("actor_port_prio".parse(), Ok(AdSelect::ActorPortPrio));
        assert_eq!("3".parse(), Ok(AdSelect::ActorPortPrio));
        assert_eq!("4".parse::<AdSelect>(), Err(ParseNameError));
        assert_eq!(AdSelect::ActorPortPrio.to_string(), "actor_port_prio");
        assert_eq!("bogus".parse::<AdSelect>(), Err(ParseNameError));
        assert_eq!(AdSelect::Stable.to_string(), "stable");
        assert_eq!(LacpRate::Fast.to_string(), "fast");
    }

    #[test]
    fn system_id_is_the_bond_mac_unless_configured() {
        let mac = EthernetAddress([2, 0, 0, 0, 0, 9]);
        assert_eq!(Lacp::new(LacpConfig::default(), mac).unwrap().system(), mac);
        let sys = EthernetAddress([2, 0, 0, 0, 0, 7]);
        let cfg = LacpConfig {
            ad_actor_system: sys,
            ..LacpConfig::default()
        };
        assert_eq!(Lacp::new(cfg, mac).unwrap().system(), sys);
    }

    #[test]
    fn ports_are_numbered_in_add_order_and_never_reused() {
        let mut l = Lacp::new(LacpConfig::default(), EthernetAddress([2, 0, 0, 0, 0, 1])).unwrap();
        let t = Instant::ZERO;
        let params = PortParams::new(EthernetAddress([2, 0, 0, 0, 1, 1]), 1000, true);
        l.add_port(t, PortId(5), params).unwrap();
        l.add_port(t, PortId(2), params).unwrap();
        assert_eq!(
            l.add_port(t, PortId(2), params),
            Err(AddPortError::Duplicate)
        );
        l.remove_port(t, PortId(5));
        l.add_port(t, PortId(7), params).unwrap();
        let s = l.snapshot();
        let numbers: Vec<(PortId, u16)> = s.ports.iter().map(|p| (p.port, p.actor.port)).collect();
        assert_eq!(numbers, [(PortId(2), 2), (PortId(7), 3)]);
        assert_eq!(l.ports().collect::<Vec<_>>(), [PortId(2), PortId(7)]);
        // A port that never came up says nothing and is in no aggregator.
        assert!(s.ports.iter().all(|p| p.aggregator.is_none() && !p.up));
        assert!(s.aggregators.is_empty());
        let mut buf = [0u8; MAX_FRAME_LEN];
        assert_eq!(l.poll_transmit(t, &mut buf), None);
    }

    #[test]
    #[should_panic(expected = "no port 3")]
    fn unknown_port_is_a_caller_mistake() {
        let mut l = Lacp::new(LacpConfig::default(), EthernetAddress([2, 0, 0, 0, 0, 1])).unwrap();
        l.handle_link(Instant::ZERO, PortId(3), true, 1000, true);
    }

    #[test]
    fn events_coalesce_per_slot() {
        let mut l = Lacp::new(LacpConfig::default(), EthernetAddress([2, 0, 0, 0, 0, 1])).unwrap();
        l.push_event(LacpEvent::CarrierChanged { up: true });
        l.push_event(LacpEvent::PortStateChanged { port: PortId(1) });
        l.push_event(LacpEvent::CarrierChanged { up: false });
        l.push_event(LacpEvent::PortStateChanged { port: PortId(2) });
        l.push_event(LacpEvent::PortStateChanged { port: PortId(1) });
        let evs: Vec<_> = core::iter::from_fn(|| l.poll_event()).collect();
        assert_eq!(
            evs,
            [
                LacpEvent::CarrierChanged { up: false },
                LacpEvent::PortStateChanged { port: PortId(2) },
                LacpEvent::PortStateChanged { port: PortId(1) },
            ]
        );
    }
}
