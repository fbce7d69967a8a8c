//! What the Receive, Periodic Transmission, Mux and Transmit machines and the Selection Logic
//! keep per port between calls: the state enums the snapshots report, and the machines'
//! timers. The transitions are in the machines' files; the state lives here, below them, so
//! that `Port` (port.rs) can hold it while the machines take the whole port. The Churn
//! Detection machines and the Marker Responder take no `Port` and keep their state in
//! `churn.rs` and `marker.rs`.

use core::fmt;

use super::config::{FAST_PERIODIC_TIME, MAX_TX_PER_FAST_PERIODIC};
use super::timer::Timer;
use crate::time::Instant;
use crate::wire::slow::LacpRepr;

/// The states of the Receive machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RxState {
    /// INITIALIZE (transient).
    Initialize,
    /// PORT_DISABLED: no carrier.
    PortDisabled,
    /// LACP_DISABLED: the link is not full duplex; the port is Individual.
    LacpDisabled,
    /// EXPIRED: the partner's information timed out once.
    Expired,
    /// DEFAULTED: the partner administrative defaults are in use.
    Defaulted,
    /// CURRENT: the partner's information is current.
    Current,
}

impl RxState {
    /// The standard's name, e.g. `CURRENT`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Initialize => "INITIALIZE",
            Self::PortDisabled => "PORT_DISABLED",
            Self::LacpDisabled => "LACP_DISABLED",
            Self::Expired => "EXPIRED",
            Self::Defaulted => "DEFAULTED",
            Self::Current => "CURRENT",
        }
    }
}

impl fmt::Display for RxState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The Receive machine of one port.
#[derive(Debug, Clone)]
pub(crate) struct Receive {
    pub(crate) state: RxState,
    pub(crate) current_while: Timer,
}

impl Receive {
    pub(crate) fn new() -> Self {
        Self {
            state: RxState::Initialize,
            current_while: Timer::STOPPED,
        }
    }
}

/// The states of the Periodic Transmission machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PeriodicState {
    /// NO_PERIODIC: no periodic transmission (and no transmission at all).
    NoPeriodic,
    /// FAST_PERIODIC: a LACPDU every second.
    FastPeriodic,
    /// SLOW_PERIODIC: a LACPDU every 30 s.
    SlowPeriodic,
    /// PERIODIC_TX (transient): NTT set.
    PeriodicTx,
}

impl PeriodicState {
    /// The standard's name, e.g. `FAST_PERIODIC`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::NoPeriodic => "NO_PERIODIC",
            Self::FastPeriodic => "FAST_PERIODIC",
            Self::SlowPeriodic => "SLOW_PERIODIC",
            Self::PeriodicTx => "PERIODIC_TX",
        }
    }
}

impl fmt::Display for PeriodicState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The Periodic Transmission machine of one port.
#[derive(Debug, Clone)]
pub(crate) struct Periodic {
    pub(crate) state: PeriodicState,
    pub(crate) periodic_timer: Timer,
}

impl Periodic {
    pub(crate) fn new() -> Self {
        Self {
            state: PeriodicState::NoPeriodic,
            periodic_timer: Timer::STOPPED,
        }
    }
}

/// The states of the Mux machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MuxState {
    /// DETACHED: not attached to an aggregator.
    Detached,
    /// WAITING: selected, waiting `wait_while` (Aggregate_Wait_Time, or the configured
    /// `aggregate_wait`) and for the other ports of the aggregator.
    Waiting,
    /// ATTACHED: attached, in sync on our side, not collecting or distributing.
    Attached,
    /// COLLECTING (independent control only): collecting, not distributing.
    Collecting,
    /// DISTRIBUTING (independent control only): collecting and distributing.
    Distributing,
    /// COLLECTING_DISTRIBUTING (coupled control): collecting and distributing.
    CollectingDistributing,
}

impl MuxState {
    /// The standard's name, e.g. `COLLECTING_DISTRIBUTING`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Detached => "DETACHED",
            Self::Waiting => "WAITING",
            Self::Attached => "ATTACHED",
            Self::Collecting => "COLLECTING",
            Self::Distributing => "DISTRIBUTING",
            Self::CollectingDistributing => "COLLECTING_DISTRIBUTING",
        }
    }
}

impl fmt::Display for MuxState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The Mux machine of one port.
#[derive(Debug, Clone)]
pub(crate) struct Mux {
    pub(crate) state: MuxState,
    pub(crate) wait_while: Timer,
}

impl Mux {
    pub(crate) fn new() -> Self {
        Self {
            state: MuxState::Detached,
            wait_while: Timer::STOPPED,
        }
    }
}

/// Selected: the Selection Logic's verdict for a port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Selected {
    /// UNSELECTED: no aggregator chosen (or the choice is no longer valid).
    Unselected,
    /// SELECTED: the port may attach to its aggregator, the active one.
    Selected,
    /// STANDBY: an aggregator is chosen but it is not the active one.
    Standby,
}

impl Selected {
    /// The standard's name, e.g. `SELECTED`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Unselected => "UNSELECTED",
            Self::Selected => "SELECTED",
            Self::Standby => "STANDBY",
        }
    }
}

impl fmt::Display for Selected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The transmit limit of one port: the times of its last three LACPDUs, and the last LACPDU
/// sent (what the partner was last told).
#[derive(Debug, Clone)]
pub(crate) struct Transmit {
    sent: [Option<Instant>; MAX_TX_PER_FAST_PERIODIC],
    /// The last LACPDU sent since the link came up, and when.
    pub(crate) last: Option<(Instant, LacpRepr)>,
    /// The partner showed it lacks our current information: NTT is honoured even by a LACPDU
    /// identical to the last one.
    pub(crate) partner_lacks: bool,
    /// The Periodic machine set NTT: honoured by a LACPDU identical to the last one unless
    /// that one is recent.
    pub(crate) periodic: bool,
}

impl Transmit {
    pub(crate) fn new() -> Self {
        Self {
            sent: [None; MAX_TX_PER_FAST_PERIODIC],
            last: None,
            partner_lacks: false,
            periodic: false,
        }
    }

    /// The earliest time at or after `now` a LACPDU may go.
    pub(crate) fn next_allowed(&self, now: Instant) -> Instant {
        self.next_allowed_within(now, MAX_TX_PER_FAST_PERIODIC)
    }

    /// The earliest time at or after `now` a LACPDU may go if at most `limit` may be sent in
    /// any Fast_Periodic_Time.
    pub(crate) fn next_allowed_within(&self, now: Instant, limit: usize) -> Instant {
        let limit = limit.clamp(1, MAX_TX_PER_FAST_PERIODIC);
        let mut in_window = [Instant::ZERO; MAX_TX_PER_FAST_PERIODIC];
        let mut n = 0;
        for &t in self.sent.iter().flatten() {
            if now < t + FAST_PERIODIC_TIME {
                in_window[n] = t;
                n += 1;
            }
        }
        if n < limit {
            return now;
        }
        // The next one when enough of them leave the window.
        in_window[..n].sort_unstable();
        in_window[n - limit] + FAST_PERIODIC_TIME
    }

    /// Notes a LACPDU sent at `now`.
    pub(crate) fn record(&mut self, now: Instant) {
        let slot = self
            .sent
            .iter_mut()
            .min_by_key(|t| **t)
            .expect("MAX_TX_PER_FAST_PERIODIC > 0");
        *slot = Some(now);
    }
}
