//! LACP fallback to active-backup (not in IEEE 802.1AX; Open vSwitch's `lacp-fallback-ab`).
//!
//! A host bonded to a switch port that does not (yet) run LACP — a switch before its LAG is
//! configured, a PXE boot — would have no connectivity at all: a port without a partner never
//! distributes. With `fallback: Some(t)` the bond instead carries traffic on one member, as
//! active-backup would, when no partner has been heard on any port for `t`:
//!
//! - the bond is *quiet* while at least one port has carrier and no port's Receive machine is
//!   CURRENT (never heard a LACPDU, or every partner has timed out to EXPIRED / DEFAULTED);
//! - once quiet for `t`, the fallback port is the lowest [`PortId`] with carrier (it moves if
//!   that port loses carrier);
//! - the fallback ends as soon as any port's Receive machine reaches CURRENT, that is on the
//!   first LACPDU a partner sends; LACP then forms as usual (through WAITING's 2 s).
//!
//! The LACP machines keep running during the fallback and the LACPDUs are unchanged (the
//! fallback port does not claim Collecting or Distributing); only the dataplane view
//! ([`Lacp::is_distributing`](super::Lacp::is_distributing), `distributing_ports`, `carrier`)
//! includes the fallback port. As with Open vSwitch, the fallback also covers a partner that
//! stops speaking later, not only one that never spoke.

use core::time::Duration;

use super::port::Port;
use super::state::RxState;
use crate::port::PortId;
use crate::time::Instant;

/// The fallback state of a bond.
#[derive(Debug, Clone)]
pub(crate) struct Fallback {
    after: Option<Duration>,
    quiet_since: Option<Instant>,
    active: Option<PortId>,
}

impl Fallback {
    pub(crate) fn new(after: Option<Duration>) -> Self {
        Self {
            after,
            quiet_since: None,
            active: None,
        }
    }

    /// The port carrying traffic in fallback.
    pub(crate) fn active(&self) -> Option<PortId> {
        self.active
    }

    /// When the fallback will start if nothing changes.
    pub(crate) fn deadline(&self) -> Option<Instant> {
        match (self.after, self.quiet_since, self.active) {
            (Some(after), Some(since), None) => Some(since + after),
            _ => None,
        }
    }

    /// Re-evaluates at `now` from the ports' states.
    pub(crate) fn update(&mut self, now: Instant, ports: &[Port]) {
        let Some(after) = self.after else {
            return;
        };
        let heard = ports.iter().any(|p| p.rx.state == RxState::Current);
        let lowest_up = ports.iter().filter(|p| p.port_enabled).map(|p| p.id).min();
        match lowest_up {
            Some(port) if !heard => {
                let since = *self.quiet_since.get_or_insert(now);
                self.active = (now >= since + after).then_some(port);
            }
            _ => {
                self.quiet_since = None;
                self.active = None;
            }
        }
    }
}

#[cfg(test)]
mod test {
    use super::*;
    use crate::lacp::tests::script::{self, at, partner_pdu};
    use crate::lacp::{LacpConfig, LacpEvent};
    use crate::wire::slow::PortState;

    fn cfg(after_ms: u64) -> LacpConfig {
        LacpConfig {
            fallback: Some(Duration::from_millis(after_ms)),
            ..LacpConfig::default()
        }
    }

    #[test]
    fn off_by_default() {
        let mut l = script::bond(LacpConfig::default(), 2);
        l.handle_link(at(0), PortId(0), true, 10_000, true);
        l.handle_timeout(at(1_000_000));
        assert_eq!(l.fallback_active(), None);
        assert!(!l.carrier());
        assert_eq!(l.distributing_ports().count(), 0);
    }

    #[test]
    fn silent_partner_falls_back_to_the_lowest_port_with_carrier() {
        let mut l = script::bond(cfg(5_000), 3);
        l.handle_link(at(1_000), PortId(2), true, 10_000, true);
        l.handle_link(at(1_000), PortId(1), true, 10_000, true);
        assert_eq!(l.poll_timeout().map(|t| t <= at(6_000)), Some(true));
        l.handle_timeout(at(5_999));
        assert_eq!(l.fallback_active(), None);
        l.handle_timeout(at(6_000));
        assert_eq!(l.fallback_active(), Some(PortId(1)));
        assert!(l.carrier());
        assert!(l.is_distributing(PortId(1)) && l.is_collecting(PortId(1)));
        assert_eq!(l.distributing_ports().collect::<Vec<_>>(), [PortId(1)]);
        let evs: Vec<_> = core::iter::from_fn(|| l.poll_event()).collect();
        assert!(evs.contains(&LacpEvent::FallbackChanged {
            port: Some(PortId(1))
        }));
        assert!(evs.contains(&LacpEvent::CarrierChanged { up: true }));
        // Port 0 comes up: lower id, it takes over. Then it loses carrier: back to port 1.
        l.handle_link(at(7_000), PortId(0), true, 10_000, true);
        assert_eq!(l.fallback_active(), Some(PortId(0)));
        l.handle_link(at(8_000), PortId(0), false, 10_000, true);
        assert_eq!(l.fallback_active(), Some(PortId(1)));
        // Every port down: no fallback, and the quiet time starts again.
        l.handle_link(at(9_000), PortId(1), false, 10_000, true);
        l.handle_link(at(9_000), PortId(2), false, 10_000, true);
        assert_eq!(l.fallback_active(), None);
        l.handle_link(at(10_000), PortId(2), true, 10_000, true);
        l.handle_timeout(at(14_999));
        assert_eq!(l.fallback_active(), None);
        l.handle_timeout(at(15_000));
        assert_eq!(l.fallback_active(), Some(PortId(2)));
        // A partner speaks: LACP again at once.
        l.handle_frame(
            at(16_000),
            PortId(2),
            &script::frame(&partner_pdu(1, PortState(0x07), None)),
        );
        assert_eq!(l.fallback_active(), None);
        assert!(!l.is_distributing(PortId(2)));
        assert!(!l.carrier());
    }
}
