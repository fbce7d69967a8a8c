//! The Mux machine (IEEE Std 802.1AX-2014 §6.4.15).
//!
//! It attaches a selected port to its aggregator and turns collecting and distributing on
//! once the partner is in sync. The standard has two variants, both here:
//!
//! **Coupled control** (`coupled_control` on, the default; collecting and distributing
//! together):
//!
//! - BEGIN → DETACHED: detach from the aggregator, Actor.Synchronization, Collecting and
//!   Distributing FALSE, NTT = TRUE.
//! - DETACHED → WAITING when Selected is SELECTED or STANDBY: start `wait_while`
//!   (Aggregate_Wait_Time, 2 s); `ready_N` becomes TRUE when it expires.
//! - WAITING → DETACHED when UNSELECTED; → ATTACHED when SELECTED and Ready (every port
//!   waiting for the same aggregator has `ready_N`).
//! - ATTACHED: attach, Actor.Synchronization TRUE, Collecting and Distributing FALSE,
//!   NTT = TRUE. → DETACHED when UNSELECTED or STANDBY; → COLLECTING_DISTRIBUTING when
//!   SELECTED and Partner.Synchronization.
//! - COLLECTING_DISTRIBUTING: Actor.Collecting and Distributing TRUE, NTT = TRUE.
//!   → ATTACHED when UNSELECTED, STANDBY, or the partner is out of sync.
//!
//! **Independent control** (`coupled_control` off): ATTACHED → COLLECTING (collecting on,
//! NTT) when SELECTED and Partner.Synchronization; COLLECTING → DISTRIBUTING (distributing on)
//! once the partner also collects; DISTRIBUTING → COLLECTING and COLLECTING → ATTACHED when
//! the conditions go away.
//!
//! So a port never distributes while its partner is out of sync in our view: the condition
//! that leaves COLLECTING_DISTRIBUTING (or DISTRIBUTING) is checked every time the machines run,
//! in the same call that changed the partner's state.

use super::port::Port;
use super::state::{MuxState, Selected};
use crate::time::Instant;
use crate::wire::slow::PortState;

/// BEGIN.
pub(crate) fn begin(port: &mut Port) {
    enter(port, MuxState::Detached, Instant::ZERO);
}

/// Takes every transition allowed at `now`; `ready` is the aggregator's Ready. True if
/// anything changed.
pub(crate) fn step(port: &mut Port, ready: bool, coupled: bool, now: Instant) -> bool {
    let mut changed = false;
    for _ in 0..6 {
        if port.mux.state == MuxState::Waiting && port.mux.wait_while.expired(now) {
            port.mux.wait_while.stop();
            port.ready_n = true;
            changed = true;
        }
        let selected = port.selected;
        let partner = port.partner.state;
        let partner_sync = partner.contains(PortState::SYNCHRONIZATION);
        let partner_collecting = partner.contains(PortState::COLLECTING);
        let in_use = selected == Selected::Selected;
        let next = match port.mux.state {
            MuxState::Detached if selected != Selected::Unselected => Some(MuxState::Waiting),
            MuxState::Waiting if selected == Selected::Unselected => Some(MuxState::Detached),
            // `ready` was computed before this call; if this port's own ready_N was just set
            // above, the engine runs the machines again and the next call sees it.
            MuxState::Waiting if in_use && (ready || port.rejoining) && port.ready_n => {
                Some(MuxState::Attached)
            }
            MuxState::Attached if !in_use => Some(MuxState::Detached),
            MuxState::Attached if partner_sync && coupled => Some(MuxState::CollectingDistributing),
            MuxState::Attached if partner_sync => Some(MuxState::Collecting),
            MuxState::CollectingDistributing if !in_use || !partner_sync || !coupled => {
                Some(MuxState::Attached)
            }
            MuxState::Collecting if !in_use || !partner_sync => Some(MuxState::Attached),
            MuxState::Collecting if partner_collecting => Some(MuxState::Distributing),
            MuxState::Distributing if !in_use || !partner_sync || !partner_collecting => {
                Some(MuxState::Collecting)
            }
            _ => None,
        };
        let Some(next) = next else { break };
        enter(port, next, now);
        changed = true;
    }
    changed
}

fn enter(port: &mut Port, state: MuxState, now: Instant) {
    port.mux.state = state;
    let s = &mut port.actor_state;
    match state {
        MuxState::Detached => {
            port.mux.wait_while.stop();
            port.ready_n = false;
            s.remove(PortState::SYNCHRONIZATION | PortState::COLLECTING | PortState::DISTRIBUTING);
            port.ntt = true;
        }
        MuxState::Waiting => {
            // Flap dampening: back to the partner it just lost, no aggregate wait. The same
            // after a restart of the daemon, back to the partner it had before.
            let resumed = port.resume.take() == Some(port.partner_id());
            port.rejoining = port.rejoins(now) || resumed;
            port.left = None;
            let wait = if port.rejoining {
                core::time::Duration::ZERO
            } else {
                port.aggregate_wait
            };
            port.mux.wait_while.start(now, wait);
            port.ready_n = false;
        }
        MuxState::Attached => {
            s.insert(PortState::SYNCHRONIZATION);
            s.remove(PortState::COLLECTING | PortState::DISTRIBUTING);
            port.ntt = true;
        }
        MuxState::Collecting => {
            s.insert(PortState::COLLECTING);
            s.remove(PortState::DISTRIBUTING);
            port.ntt = true;
        }
        MuxState::Distributing => {
            s.insert(PortState::DISTRIBUTING);
        }
        MuxState::CollectingDistributing => {
            s.insert(PortState::COLLECTING | PortState::DISTRIBUTING);
            port.ntt = true;
        }
    }
}

#[cfg(test)]
mod test {
    use super::*;
    use crate::lacp::tests::script::{self, at, partner_pdu};
    use crate::lacp::{LacpConfig, LacpRate, PortId};
    use crate::wire::slow::LacpInfo;

    const P: PortId = PortId(0);

    fn mux(l: &crate::lacp::Lacp) -> MuxState {
        l.snapshot().ports[0].mux
    }

    /// A bond whose port 0 came up at t=0 and heard an active partner (not yet in sync) at t=0.
    fn heard(coupled: bool) -> (crate::lacp::Lacp, LacpInfo) {
        let cfg = LacpConfig {
            lacp_rate: LacpRate::Fast,
            coupled_control: coupled,
            ..LacpConfig::default()
        };
        let mut l = script::bond(cfg, 1);
        l.handle_link(at(0), P, true, 10_000, true);
        l.handle_frame(
            at(0),
            P,
            &script::frame(&partner_pdu(1, PortState(0x07), None)),
        );
        script::drain(&mut l, at(0));
        let us = l.snapshot().ports[0].actor;
        (l, us)
    }

    #[test]
    fn waits_two_seconds_then_attaches_and_distributes_on_partner_sync() {
        let (mut l, _) = heard(true);
        assert_eq!(mux(&l), MuxState::Waiting);
        l.handle_timeout(at(1_999));
        assert_eq!(mux(&l), MuxState::Waiting);
        l.handle_timeout(at(2_000));
        assert_eq!(mux(&l), MuxState::Attached);
        let sent = script::drain(&mut l, at(2_000));
        assert_eq!(sent.len(), 1, "ATTACHED sets NTT");
        assert_eq!(sent[0].1.actor.state, PortState(0x0f));
        // The partner answers in sync with our current info.
        let us = l.snapshot().ports[0].actor;
        l.handle_frame(
            at(2_001),
            P,
            &script::frame(&partner_pdu(1, PortState(0x0f), Some(us))),
        );
        assert_eq!(mux(&l), MuxState::CollectingDistributing);
        assert_eq!(
            script::drain(&mut l, at(2_001))[0].1.actor.state,
            PortState(0x3f)
        );
        // It collects at once; it sends once the partner says it collects too (a partner
        // under coupled control may still be ATTACHED).
        assert!(l.is_collecting(P) && !l.is_distributing(P));
        assert_eq!(l.distributing_ports().count(), 0);
        assert!(!l.carrier());
        while l.poll_event().is_some() {}
        l.handle_frame(
            at(2_002),
            P,
            &script::frame(&partner_pdu(1, PortState(0x3f), Some(us))),
        );
        assert!(l.is_distributing(P) && l.carrier());
        assert_eq!(l.distributing_ports().collect::<Vec<_>>(), [P]);
        let mut events = Vec::new();
        while let Some(e) = l.poll_event() {
            events.push(e);
        }
        assert!(
            events.contains(&crate::lacp::LacpEvent::DistributionChanged),
            "{events:?}"
        );
        // The partner drops sync: back to ATTACHED at once.
        l.handle_frame(
            at(2_500),
            P,
            &script::frame(&partner_pdu(1, PortState(0x07), Some(us))),
        );
        assert_eq!(mux(&l), MuxState::Attached);
        assert!(!l.is_distributing(P));
    }

    #[test]
    fn attached_in_sync_takes_frames_before_it_collects() {
        let (mut l, _) = heard(true);
        assert!(!l.accepts_from(P), "WAITING: nothing taken");
        l.handle_timeout(at(2_000));
        assert_eq!(mux(&l), MuxState::Attached);
        // We advertise Synchronization; a coupled-control partner may distribute already.
        assert!(
            l.snapshot().ports[0]
                .actor
                .state
                .contains(PortState::SYNCHRONIZATION)
        );
        assert!(l.accepts_from(P) && !l.is_collecting(P) && !l.is_distributing(P));
        // The dataplane hears of it: the receive rules are recomputed on this event.
        let mut events = Vec::new();
        while let Some(e) = l.poll_event() {
            events.push(e);
        }
        assert!(
            events.contains(&crate::lacp::LacpEvent::DistributionChanged),
            "{events:?}"
        );
        // Detached again (the link goes down): nothing taken.
        l.handle_link(at(2_100), P, false, 10_000, true);
        assert_eq!(mux(&l), MuxState::Detached);
        assert!(!l.accepts_from(P));
    }

    #[test]
    fn in_sync_partner_before_wait_while_does_not_shortcut_waiting() {
        let (mut l, us) = heard(true);
        l.handle_frame(
            at(500),
            P,
            &script::frame(&partner_pdu(1, PortState(0x3f), Some(us))),
        );
        assert_eq!(mux(&l), MuxState::Waiting);
        assert!(!l.is_distributing(P));
        l.handle_timeout(at(2_000));
        assert_eq!(mux(&l), MuxState::CollectingDistributing);
    }

    #[test]
    fn independent_control_collects_before_distributing() {
        let (mut l, _) = heard(false);
        l.handle_timeout(at(2_000));
        assert_eq!(mux(&l), MuxState::Attached);
        let us = l.snapshot().ports[0].actor;
        l.handle_frame(
            at(2_100),
            P,
            &script::frame(&partner_pdu(1, PortState(0x0f), Some(us))),
        );
        assert_eq!(mux(&l), MuxState::Collecting);
        assert!(l.is_collecting(P) && !l.is_distributing(P));
        assert_eq!(
            script::drain(&mut l, at(2_100))[0].1.actor.state,
            PortState(0x1f)
        );
        let us = l.snapshot().ports[0].actor;
        l.handle_frame(
            at(2_200),
            P,
            &script::frame(&partner_pdu(1, PortState(0x1f), Some(us))),
        );
        assert_eq!(mux(&l), MuxState::Distributing);
        assert!(l.is_distributing(P));
        // DISTRIBUTING does not set NTT: the partner learns it from the next periodic LACPDU.
        assert!(script::drain(&mut l, at(2_200)).is_empty());
        // The partner stops collecting: we stop distributing but keep collecting.
        l.handle_frame(
            at(2_300),
            P,
            &script::frame(&partner_pdu(1, PortState(0x0f), Some(us))),
        );
        assert_eq!(mux(&l), MuxState::Collecting);
        assert!(l.is_collecting(P) && !l.is_distributing(P));
        // Out of sync: back to ATTACHED.
        l.handle_frame(
            at(2_400),
            P,
            &script::frame(&partner_pdu(1, PortState(0x07), Some(us))),
        );
        assert_eq!(mux(&l), MuxState::Attached);
        assert!(!l.is_collecting(P));
    }

    #[test]
    fn link_down_detaches_at_once() {
        let (mut l, us) = heard(true);
        l.handle_timeout(at(2_000));
        l.handle_frame(
            at(2_001),
            P,
            &script::frame(&partner_pdu(1, PortState(0x3f), Some(us))),
        );
        assert!(l.is_distributing(P));
        l.handle_link(at(3_000), P, false, 10_000, true);
        assert_eq!(mux(&l), MuxState::Detached);
        assert!(!l.is_distributing(P));
        assert_eq!(l.snapshot().ports[0].actor.state.0 & 0x38, 0);
    }
}
