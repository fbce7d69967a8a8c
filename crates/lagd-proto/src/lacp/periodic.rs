//! The Periodic Transmission machine (IEEE Std 802.1AX-2014 §6.4.13).
//!
//! It sets NTT every Fast_Periodic_Time (1 s) or Slow_Periodic_Time (30 s). The rate follows
//! the **partner's** LACP_Timeout bit: a partner that asks for the short timeout gets a LACPDU
//! every second. EXPIRED forces the partner's bit to short, so a port that lost its partner
//! sends every second until DEFAULTED, and every 30 s after (the defaults ask for the long
//! timeout).
//!
//! - `BEGIN || !LACP_Enabled || !port_enabled || (Actor passive && Partner passive)` →
//!   NO_PERIODIC: the timer stops; the Transmit machine sends nothing (§6.4.16).
//! - NO_PERIODIC → FAST_PERIODIC unconditionally (once the condition above is false).
//! - FAST_PERIODIC (timer 1 s) → SLOW_PERIODIC if the partner asks for the long timeout;
//!   → PERIODIC_TX when the timer expires.
//! - SLOW_PERIODIC (timer 30 s) → PERIODIC_TX when the timer expires, or at once when the
//!   partner switches to the short timeout.
//! - PERIODIC_TX: NTT = TRUE; then FAST_PERIODIC or SLOW_PERIODIC by the partner's bit.

use super::config::{FAST_PERIODIC_TIME, SLOW_PERIODIC_TIME};
use super::port::Port;
use super::state::PeriodicState;
use crate::time::Instant;
use crate::wire::slow::PortState;

/// BEGIN.
pub(crate) fn begin(port: &mut Port) {
    port.periodic.state = PeriodicState::NoPeriodic;
    port.periodic.periodic_timer.stop();
}

/// Takes every transition allowed at `now`; true if anything changed.
pub(crate) fn step(port: &mut Port, now: Instant) -> bool {
    let mut changed = false;
    for _ in 0..4 {
        let hold = !port.port_enabled
            || !port.lacp_enabled
            || (!port.actor_state.contains(PortState::ACTIVITY)
                && !port.partner.state.contains(PortState::ACTIVITY));
        let short = port.partner.state.contains(PortState::TIMEOUT);
        let expired = port.periodic.periodic_timer.expired(now);
        let next = if hold {
            (port.periodic.state != PeriodicState::NoPeriodic).then_some(PeriodicState::NoPeriodic)
        } else {
            match port.periodic.state {
                PeriodicState::NoPeriodic => Some(PeriodicState::FastPeriodic),
                PeriodicState::FastPeriodic if expired => Some(PeriodicState::PeriodicTx),
                PeriodicState::FastPeriodic if !short => Some(PeriodicState::SlowPeriodic),
                PeriodicState::SlowPeriodic if expired || short => Some(PeriodicState::PeriodicTx),
                PeriodicState::PeriodicTx if short => Some(PeriodicState::FastPeriodic),
                PeriodicState::PeriodicTx => Some(PeriodicState::SlowPeriodic),
                _ => None,
            }
        };
        let Some(next) = next else { break };
        port.periodic.state = next;
        match next {
            PeriodicState::NoPeriodic => port.periodic.periodic_timer.stop(),
            PeriodicState::FastPeriodic => {
                port.periodic.periodic_timer.start(now, FAST_PERIODIC_TIME);
            }
            PeriodicState::SlowPeriodic => {
                port.periodic.periodic_timer.start(now, SLOW_PERIODIC_TIME);
            }
            PeriodicState::PeriodicTx => {
                port.periodic.periodic_timer.stop();
                port.ntt = true;
                port.tx.periodic = true;
            }
        }
        changed = true;
    }
    changed
}

#[cfg(test)]
mod test {
    use super::*;
    use crate::lacp::tests::script::{self, at, partner_pdu};
    use crate::lacp::{LacpConfig, PortId};

    const P: PortId = PortId(0);

    /// Times (ms) of the LACPDUs port 0 sends in `[from, to]`, polling at every deadline.
    fn tx_times(l: &mut crate::lacp::Lacp, from: u64, to: u64) -> Vec<u64> {
        let mut out = Vec::new();
        let mut t = at(from);
        while t <= at(to) {
            l.handle_timeout(t);
            for _ in script::drain(l, t) {
                out.push(t.as_millis());
            }
            match l.poll_timeout() {
                Some(n) if n > t => t = n,
                _ => break,
            }
        }
        out
    }

    #[test]
    fn rate_follows_the_partners_timeout_bit() {
        let mut l = script::bond(LacpConfig::default(), 1);
        l.handle_link(at(0), P, true, 10_000, true);
        // EXPIRED: the partner counts as short-timeout, so we send every second.
        assert_eq!(l.snapshot().ports[0].periodic, PeriodicState::FastPeriodic);
        assert_eq!(tx_times(&mut l, 0, 2_500), [0, 1_000, 2_000]);
        // A partner with the long timeout: slow periodic, 30 s.
        l.handle_frame(
            at(2_500),
            P,
            &script::frame(&partner_pdu(1, PortState(0x05), None)),
        );
        assert_eq!(l.snapshot().ports[0].periodic, PeriodicState::SlowPeriodic);
        // The answer to the LACPDU at 2.5 s, the one saying we attached (after the 2 s
        // wait_while), then one every 30 s.
        assert_eq!(
            tx_times(&mut l, 2_500, 62_600),
            [2_500, 4_500, 32_500, 62_500]
        );
        // The partner switches to the short timeout: a LACPDU at once, then every second.
        l.handle_frame(
            at(70_000),
            P,
            &script::frame(&partner_pdu(1, PortState(0x07), None)),
        );
        assert_eq!(tx_times(&mut l, 70_000, 72_100), [70_000, 71_000, 72_000]);
    }

    #[test]
    fn passive_with_passive_partner_sends_nothing() {
        let cfg = LacpConfig {
            lacp_active: false,
            ..LacpConfig::default()
        };
        let mut l = script::bond(cfg, 1);
        l.handle_link(at(0), P, true, 10_000, true);
        assert_eq!(l.snapshot().ports[0].periodic, PeriodicState::NoPeriodic);
        assert!(tx_times(&mut l, 0, 200_000).is_empty());
        // An active partner wakes us up.
        l.handle_frame(
            at(200_000),
            P,
            &script::frame(&partner_pdu(1, PortState(0x07), None)),
        );
        assert_eq!(l.snapshot().ports[0].periodic, PeriodicState::FastPeriodic);
        assert_eq!(tx_times(&mut l, 200_000, 201_500), [200_000, 201_000]);
    }

    #[test]
    fn no_periodic_while_link_down_or_half_duplex() {
        let mut l = script::bond(LacpConfig::default(), 1);
        assert_eq!(l.snapshot().ports[0].periodic, PeriodicState::NoPeriodic);
        l.handle_link(at(0), P, true, 100, false);
        assert_eq!(l.snapshot().ports[0].periodic, PeriodicState::NoPeriodic);
        assert!(tx_times(&mut l, 0, 100_000).is_empty());
    }
}
