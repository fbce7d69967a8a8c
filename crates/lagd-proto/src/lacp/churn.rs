//! The Churn Detection machines (IEEE Std 802.1AX-2014 §6.4.17).
//!
//! Two per port, one watching `Actor_Oper_Port_State.Synchronization` and one watching
//! `Partner_Oper_Port_State.Synchronization`. A port that does not reach sync within
//! Churn_Detection_Time (60 s) is *churned*: a sign of a misconfiguration (keys, a partner on
//! two systems, a standby port) rather than a transient. Each entry into ACTOR_CHURN /
//! PARTNER_CHURN is counted, as Linux's "Churned Count".
//!
//! For the actor machine (the partner machine is the same with the partner's bit):
//!
//! - `BEGIN || !port_enabled` → ACTOR_CHURN_MONITOR: actor_churn = FALSE, start
//!   `actor_churn_timer` (60 s). While the port stays disabled the state is re-entered
//!   continuously, so the timer effectively starts when the port is enabled.
//! - ACTOR_CHURN_MONITOR → NO_ACTOR_CHURN when in sync; → ACTOR_CHURN when the timer expires.
//! - NO_ACTOR_CHURN → ACTOR_CHURN_MONITOR when out of sync.
//! - ACTOR_CHURN (actor_churn = TRUE) → NO_ACTOR_CHURN when in sync.

use core::fmt;

use super::config::CHURN_DETECTION_TIME;
use super::timer::Timer;
use crate::time::Instant;

/// The states of the Actor Churn Detection machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ActorChurnState {
    /// NO_ACTOR_CHURN: the actor is in sync (Linux prints "none").
    NoActorChurn,
    /// ACTOR_CHURN_MONITOR: out of sync for less than 60 s ("monitoring").
    ActorChurnMonitor,
    /// ACTOR_CHURN: out of sync for 60 s or more ("churned").
    ActorChurn,
}

/// The states of the Partner Churn Detection machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PartnerChurnState {
    /// NO_PARTNER_CHURN: the partner is in sync (Linux prints "none").
    NoPartnerChurn,
    /// PARTNER_CHURN_MONITOR: out of sync for less than 60 s ("monitoring").
    PartnerChurnMonitor,
    /// PARTNER_CHURN: out of sync for 60 s or more ("churned").
    PartnerChurn,
}

impl ActorChurnState {
    /// The standard's name, e.g. `ACTOR_CHURN_MONITOR`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::NoActorChurn => "NO_ACTOR_CHURN",
            Self::ActorChurnMonitor => "ACTOR_CHURN_MONITOR",
            Self::ActorChurn => "ACTOR_CHURN",
        }
    }

    /// The word `/proc/net/bonding` prints: `none`, `monitoring` or `churned`.
    pub const fn proc_name(self) -> &'static str {
        match self {
            Self::NoActorChurn => "none",
            Self::ActorChurnMonitor => "monitoring",
            Self::ActorChurn => "churned",
        }
    }
}

impl PartnerChurnState {
    /// The standard's name, e.g. `PARTNER_CHURN_MONITOR`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::NoPartnerChurn => "NO_PARTNER_CHURN",
            Self::PartnerChurnMonitor => "PARTNER_CHURN_MONITOR",
            Self::PartnerChurn => "PARTNER_CHURN",
        }
    }

    /// The word `/proc/net/bonding` prints: `none`, `monitoring` or `churned`.
    pub const fn proc_name(self) -> &'static str {
        match self {
            Self::NoPartnerChurn => "none",
            Self::PartnerChurnMonitor => "monitoring",
            Self::PartnerChurn => "churned",
        }
    }
}

impl fmt::Display for ActorChurnState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Display for PartnerChurnState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The state of either machine, without the actor/partner prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    NoChurn,
    Monitor,
    Churn,
}

/// One Churn Detection machine.
#[derive(Debug, Clone)]
pub(crate) struct Churn {
    phase: Phase,
    timer: Timer,
    /// Entries into the CHURN state.
    pub(crate) count: u32,
}

impl Churn {
    pub(crate) fn new() -> Self {
        Self {
            phase: Phase::Monitor,
            timer: Timer::STOPPED,
            count: 0,
        }
    }

    /// BEGIN: monitoring, timer held until the port is enabled.
    pub(crate) fn begin(&mut self) {
        self.phase = Phase::Monitor;
        self.timer.stop();
    }

    /// When the churn timer expires, if it runs.
    pub(crate) fn deadline(&self) -> Option<Instant> {
        self.timer.deadline()
    }

    /// Takes the transitions allowed at `now`, given whether the port is enabled and whether the
    /// watched Synchronization bit is set; true if anything changed.
    pub(crate) fn step(&mut self, port_enabled: bool, in_sync: bool, now: Instant) -> bool {
        if !port_enabled {
            let changed = self.phase != Phase::Monitor || self.timer.is_running();
            self.begin();
            return changed;
        }
        let mut changed = false;
        if self.phase == Phase::Monitor && !self.timer.is_running() {
            // The port was just enabled: the last (re-)entry into MONITOR is now.
            self.timer.start(now, CHURN_DETECTION_TIME);
            changed = true;
        }
        let next = match self.phase {
            Phase::Monitor if in_sync => Some(Phase::NoChurn),
            Phase::Monitor if self.timer.expired(now) => Some(Phase::Churn),
            Phase::NoChurn if !in_sync => Some(Phase::Monitor),
            Phase::Churn if in_sync => Some(Phase::NoChurn),
            _ => None,
        };
        if let Some(next) = next {
            self.phase = next;
            match next {
                Phase::Monitor => self.timer.start(now, CHURN_DETECTION_TIME),
                Phase::NoChurn => self.timer.stop(),
                Phase::Churn => {
                    self.timer.stop();
                    self.count = self.count.saturating_add(1);
                }
            }
            changed = true;
        }
        changed
    }

    /// The state, named as the actor machine's.
    pub(crate) fn actor_state(&self) -> ActorChurnState {
        match self.phase {
            Phase::NoChurn => ActorChurnState::NoActorChurn,
            Phase::Monitor => ActorChurnState::ActorChurnMonitor,
            Phase::Churn => ActorChurnState::ActorChurn,
        }
    }

    /// The state, named as the partner machine's.
    pub(crate) fn partner_state(&self) -> PartnerChurnState {
        match self.phase {
            Phase::NoChurn => PartnerChurnState::NoPartnerChurn,
            Phase::Monitor => PartnerChurnState::PartnerChurnMonitor,
            Phase::Churn => PartnerChurnState::PartnerChurn,
        }
    }
}

#[cfg(test)]
mod test {
    use super::*;
    use crate::lacp::tests::script::at;

    #[test]
    fn out_of_sync_for_sixty_seconds_is_churn() {
        let mut c = Churn::new();
        c.step(false, false, at(0));
        assert_eq!(c.deadline(), None, "held while the port is disabled");
        c.step(true, false, at(5_000));
        assert_eq!(c.actor_state(), ActorChurnState::ActorChurnMonitor);
        assert_eq!(c.deadline(), Some(at(65_000)));
        c.step(true, false, at(64_999));
        assert_eq!(c.actor_state(), ActorChurnState::ActorChurnMonitor);
        c.step(true, false, at(65_000));
        assert_eq!(c.actor_state(), ActorChurnState::ActorChurn);
        assert_eq!(c.actor_state().proc_name(), "churned");
        assert_eq!(c.count, 1);
        c.step(true, true, at(70_000));
        assert_eq!(c.partner_state(), PartnerChurnState::NoPartnerChurn);
        assert_eq!(c.partner_state().proc_name(), "none");
        // Losing sync again starts a new 60 s watch and a second churn counts again.
        c.step(true, false, at(80_000));
        assert_eq!(c.deadline(), Some(at(140_000)));
        c.step(true, false, at(140_000));
        assert_eq!(c.count, 2);
    }

    #[test]
    fn sync_within_sixty_seconds_is_no_churn() {
        let mut c = Churn::new();
        c.step(true, false, at(0));
        c.step(true, true, at(59_999));
        assert_eq!(c.actor_state(), ActorChurnState::NoActorChurn);
        assert_eq!(c.deadline(), None);
        c.step(true, true, at(200_000));
        assert_eq!(c.count, 0);
        // Link down: back to monitoring, timer held.
        assert!(c.step(false, true, at(200_001)));
        assert_eq!(c.actor_state().proc_name(), "monitoring");
        assert_eq!(c.deadline(), None);
    }
}
