//! `Port`: the variables of one port, which every machine reads and writes, with its frame
//! counters; and `Actor`, the system-wide values every machine reads.

use core::time::Duration;

use super::state::Selected;
use super::{churn, limit, marker, state};
use crate::port::{AggregatorId, PortId};
use crate::time::Instant;
use crate::wire::EthernetAddress;
use crate::wire::slow::{LacpInfo, PortState};

/// A partner's identity on one port: what 802.1AX selects by (its system, key and port
/// number), without the state bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PartnerId {
    /// The partner's system ID (MAC).
    pub system: EthernetAddress,
    /// The partner's operational key.
    pub key: u16,
    /// The partner's port number.
    pub port: u16,
}

impl PartnerId {
    /// The identity `info` names.
    pub fn of(info: &LacpInfo) -> Self {
        Self {
            system: info.system,
            key: info.key,
            port: info.port,
        }
    }
}

/// Per-port frame counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PortCounters {
    /// LACPDUs received (loopback ones included).
    pub lacpdu_rx: u64,
    /// LACPDUs sent.
    pub lacpdu_tx: u64,
    /// Marker Information PDUs received.
    pub marker_rx: u64,
    /// Marker Information PDUs sent (lagd never originates one; always 0).
    pub marker_tx: u64,
    /// Marker Response PDUs received.
    pub marker_response_rx: u64,
    /// Marker Response PDUs sent.
    pub marker_response_tx: u64,
    /// Frames that were not valid slow-protocol PDUs (wrong address or EtherType, truncated,
    /// malformed TLVs, unknown Marker TLV type).
    pub illegal_rx: u64,
    /// Slow-protocol frames of another subtype (OAM, ESMC, …).
    pub unknown_rx: u64,
    /// LACPDUs carrying our own system id (a loop), dropped.
    pub loopback_rx: u64,
    /// Marker Information PDUs not answered: over the response rate
    /// ([`MARKER_RESPONSE_RATE`](super::limit::MARKER_RESPONSE_RATE)) or with responses
    /// already queued.
    pub marker_dropped: u64,
    /// LACPDUs not sent because they would have repeated the last one without need (see
    /// the Transmit machine).
    pub lacpdu_suppressed: u64,
    /// LACPDUs from another address held off while the confirmed partner was current (see
    /// [`limit`](super::limit)).
    pub foreign_rx: u64,
    /// Slow-protocol frames dropped unparsed: over the port's receive budget
    /// ([`limit`](super::limit)).
    pub rate_limited_rx: u64,
}

/// The system-wide actor values every machine reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Actor {
    /// Actor_System_Priority.
    pub(crate) system_priority: u16,
    /// Actor_System.
    pub(crate) system: EthernetAddress,
}

/// Every variable of one port (802.1AX-2014 §6.4.7 and §6.4.8), and its machines.
#[derive(Debug, Clone)]
pub(crate) struct Port {
    pub(crate) id: PortId,
    pub(crate) mac: EthernetAddress,
    /// Actor_Port_Number.
    pub(crate) number: u16,
    /// Actor_Port_Priority.
    pub(crate) priority: u16,
    /// The aggregator this port owns (one per port).
    pub(crate) own_aggregator: AggregatorId,
    pub(crate) speed_mbps: u32,
    pub(crate) full_duplex: bool,
    /// port_enabled: the MAC is operable (carrier).
    pub(crate) port_enabled: bool,
    /// LACP_Enabled: the link is full duplex (point-to-point).
    pub(crate) lacp_enabled: bool,
    /// Actor_Oper_Port_Key.
    pub(crate) key: u16,
    /// Actor_Oper_Port_State.
    pub(crate) actor_state: PortState,
    /// The Partner_Oper_* values (system priority, system, key, port priority, port, state).
    pub(crate) partner: LacpInfo,
    /// Selected.
    pub(crate) selected: Selected,
    /// The aggregator the Selection Logic chose for this port.
    pub(crate) aggregator: Option<AggregatorId>,
    /// NTT: Need To Transmit.
    pub(crate) ntt: bool,
    /// port_moved.
    pub(crate) port_moved: bool,
    /// ready_N: `wait_while` has expired in WAITING.
    pub(crate) ready_n: bool,
    pub(crate) rx: state::Receive,
    pub(crate) periodic: state::Periodic,
    pub(crate) mux: state::Mux,
    /// `wait_while` for this port (from
    /// [`LacpConfig::aggregate_wait`](super::config::LacpConfig::aggregate_wait)).
    pub(crate) aggregate_wait: Duration,
    /// [`LacpConfig::rejoin_hold`](super::config::LacpConfig::rejoin_hold).
    pub(crate) rejoin_hold: Duration,
    /// When the link last went down while the port was in sync, and the partner it had then
    /// (system, key, port number).
    pub(crate) left: Option<(Instant, PartnerId)>,
    /// The partner the port was in sync with under a previous run of the daemon (see
    /// [`Lacp::resume`](super::Lacp::resume)): if the first partner it is selected with is
    /// this one, it attaches without the aggregate wait. Used once.
    pub(crate) resume: Option<PartnerId>,
    /// That partner's whole information, recorded as if its last LACPDU had just arrived when
    /// the port is enabled with nothing heard yet. Used once; dropped by a LACPDU heard first
    /// or by the link going down.
    pub(crate) primed: Option<LacpInfo>,
    /// In WAITING without the aggregate wait (back to its partner within `rejoin_hold`, or
    /// resuming after a restart).
    pub(crate) rejoining: bool,
    pub(crate) tx: state::Transmit,
    pub(crate) actor_churn: churn::Churn,
    pub(crate) partner_churn: churn::Churn,
    pub(crate) markers: marker::Responder,
    /// Admission of received slow-protocol frames.
    pub(crate) rx_limit: limit::RxLimiter,
    /// Marker Responses allowed.
    pub(crate) marker_limit: limit::TokenBucket,
    pub(crate) counters: PortCounters,
}

impl Port {
    /// The actor information this port sends.
    pub(crate) fn actor_info(&self, actor: &Actor) -> LacpInfo {
        LacpInfo {
            system_priority: actor.system_priority,
            system: actor.system,
            key: self.key,
            port_priority: self.priority,
            port: self.number,
            state: self.actor_state,
        }
    }

    /// The partner's identity: system, key and port number.
    pub(crate) fn partner_id(&self) -> PartnerId {
        PartnerId::of(&self.partner)
    }

    /// Whether the port comes back, at `now`, to the partner it lost with its link within
    /// `rejoin_hold`.
    pub(crate) fn rejoins(&self, now: Instant) -> bool {
        !self.rejoin_hold.is_zero()
            && self.left.is_some_and(|(at, partner)| {
                now.saturating_since(at) <= self.rejoin_hold && partner == self.partner_id()
            })
    }

    /// Whether the port collects, as its machines say (fallback not included).
    pub(crate) fn lacp_collecting(&self) -> bool {
        self.actor_state.contains(PortState::COLLECTING)
    }

    /// Whether the port distributes, as its machines say (fallback not included).
    pub(crate) fn lacp_distributing(&self) -> bool {
        self.actor_state.contains(PortState::DISTRIBUTING)
    }

    /// Whether the dataplane sends on the port: it distributes and its partner says it
    /// collects. Under coupled control the Mux machine distributes as soon as the partner is in
    /// sync, and a partner that also has our Synchronization may still be ATTACHED (the Linux
    /// driver moves on at its next 100 ms tick): what we sent meanwhile it would drop. Its
    /// Collecting bit comes with the LACPDU it sends on entering COLLECTING_DISTRIBUTING (or
    /// COLLECTING). Independent control waits for it in the machine itself.
    pub(crate) fn sends(&self) -> bool {
        self.lacp_distributing() && self.partner.state.contains(PortState::COLLECTING)
    }
}
