//! The Receive machine (IEEE Std 802.1AX-2014 §6.4.12).
//!
//! It records what the partner says about itself, decides whether the partner's view of us is
//! current (setting NTT when it is not), and times the partner out: `current_while` runs for
//! the timeout *we* asked for (Short_Timeout_Time 3 s with a fast rate, Long_Timeout_Time 90 s
//! with a slow one). When it expires the port goes to EXPIRED (partner out of sync, partner
//! asked for the short timeout so we send fast, `current_while` 3 s, our Expired bit set) and
//! 3 s later to DEFAULTED, where the partner administrative defaults replace the partner.
//!
//! States and transitions, as in the standard:
//!
//! - BEGIN → INITIALIZE: Selected = UNSELECTED, recordDefault, Actor.Expired = FALSE,
//!   port_moved = FALSE; then unconditionally PORT_DISABLED.
//! - From any state, `!port_enabled && !port_moved` → PORT_DISABLED: Partner.Synchronization
//!   = FALSE.
//! - PORT_DISABLED → INITIALIZE if `port_moved`; → EXPIRED if `port_enabled && LACP_Enabled`;
//!   → LACP_DISABLED if `port_enabled && !LACP_Enabled`.
//! - LACP_DISABLED: Selected = UNSELECTED, recordDefault, Partner.Aggregation = FALSE,
//!   Actor.Expired = FALSE.
//! - EXPIRED → DEFAULTED when `current_while` expires; DEFAULTED: update_Default_Selected,
//!   recordDefault, Actor.Expired = FALSE.
//! - CURRENT → EXPIRED when `current_while` expires.
//! - A LACPDU received in EXPIRED, DEFAULTED or CURRENT → CURRENT: update_Selected,
//!   update_NTT, recordPDU, start `current_while` with our LACP_Timeout, Actor.Expired = FALSE.
//!
//! Beyond the standard, a daemon restarted after a kill may hand a port the partner it was in
//! sync with ([`resume`]): enabled with nothing heard, the port records it as a LACPDU and
//! goes to CURRENT at once, so the partner, which never saw the port leave, sees nothing change.
//!
//! `port_moved` is set on a port in PORT_DISABLED when its partner's system and port number
//! arrive in a LACPDU on another port of the bond ([`mark_moved`]).
//!
//! recordPDU takes the partner's Synchronization bit only when the LACPDU shows the partner
//! has our current information (or the partner is Individual) and at least one side is
//! active; so a partner claiming Synchronization with a stale or all-zero view of us (Open
//! vSwitch's first LACPDU does) is out of sync until its LACPDUs describe us correctly.

use core::time::Duration;

use super::config::{LONG_TIMEOUT_TIME, PARTNER_ADMIN, SHORT_TIMEOUT_TIME};
use super::port::{Actor, Port};
use super::state::{RxState, Selected};
use crate::time::Instant;
use crate::wire::slow::{LacpInfo, LacpRepr, PortState};

/// BEGIN.
pub(crate) fn begin(port: &mut Port) {
    enter_initialize(port);
    enter_port_disabled(port);
}

/// Takes every transition the port's variables and timers allow at `now`; true if the state
/// (or anything it sets) changed.
pub(crate) fn step(port: &mut Port, now: Instant) -> bool {
    let mut changed = false;
    // Each state is entered at most once per call (the longest chain is
    // PORT_DISABLED → INITIALIZE → PORT_DISABLED → EXPIRED).
    for _ in 0..6 {
        let state = port.rx.state;
        let next = if !port.port_enabled && !port.port_moved && state != RxState::PortDisabled {
            Some(RxState::PortDisabled)
        } else {
            match state {
                RxState::Initialize => Some(RxState::PortDisabled),
                RxState::PortDisabled if port.port_moved => Some(RxState::Initialize),
                RxState::PortDisabled if port.port_enabled && port.lacp_enabled => {
                    Some(RxState::Expired)
                }
                RxState::PortDisabled if port.port_enabled => Some(RxState::LacpDisabled),
                RxState::Expired if port.rx.current_while.expired(now) => Some(RxState::Defaulted),
                RxState::Current if port.rx.current_while.expired(now) => Some(RxState::Expired),
                _ => None,
            }
        };
        let Some(next) = next else { break };
        match next {
            RxState::Initialize => enter_initialize(port),
            RxState::PortDisabled => enter_port_disabled(port),
            RxState::LacpDisabled => enter_lacp_disabled(port),
            RxState::Expired => enter_expired(port, now),
            RxState::Defaulted => enter_defaulted(port),
            // CURRENT is only entered on a received LACPDU, never chosen above.
            RxState::Current => break,
        }
        changed = true;
    }
    changed
}

/// A LACPDU arrived on the port. Returns whether the machine took it (it ignores LACPDUs in
/// INITIALIZE, PORT_DISABLED and LACP_DISABLED).
pub(crate) fn receive(port: &mut Port, actor: &Actor, pdu: &LacpRepr, now: Instant) -> bool {
    match port.rx.state {
        RxState::Expired | RxState::Defaulted | RxState::Current => {
            enter_current(port, actor, pdu, now);
            true
        }
        _ => false,
    }
}

/// A restart of the daemon ([`Lacp::resume`](super::Lacp::resume)): a port enabled with
/// nothing heard yet (EXPIRED, not from CURRENT) and a partner recorded by the last run
/// takes that record as a LACPDU from the partner describing us as we are. True if it did.
pub(crate) fn resume(port: &mut Port, actor: &Actor, now: Instant) -> bool {
    if port.rx.state != RxState::Expired || !port.actor_state.contains(PortState::DEFAULTED) {
        return false;
    }
    let Some(partner) = port.primed.take() else {
        return false;
    };
    let mut us = port.actor_info(actor);
    us.state.insert(PortState::SYNCHRONIZATION);
    let pdu = LacpRepr {
        actor: partner,
        partner: us,
        ..LacpRepr::default()
    };
    enter_current(port, actor, &pdu, now);
    true
}

/// Sets `port_moved` on every other port in PORT_DISABLED whose partner system and port number
/// are the ones `pdu_actor` (received on port `on`) carries.
pub(crate) fn mark_moved(ports: &mut [Port], on: usize, pdu_actor: &LacpInfo) {
    for (i, p) in ports.iter_mut().enumerate() {
        if i != on
            && p.rx.state == RxState::PortDisabled
            && p.partner.system == pdu_actor.system
            && p.partner.port == pdu_actor.port
        {
            p.port_moved = true;
        }
    }
}

fn enter_initialize(port: &mut Port) {
    port.rx.state = RxState::Initialize;
    port.selected = Selected::Unselected;
    record_default(port);
    port.actor_state.remove(PortState::EXPIRED);
    port.port_moved = false;
    port.rx.current_while.stop();
}

fn enter_port_disabled(port: &mut Port) {
    port.rx.state = RxState::PortDisabled;
    port.partner.state.remove(PortState::SYNCHRONIZATION);
    port.rx.current_while.stop();
}

fn enter_lacp_disabled(port: &mut Port) {
    port.rx.state = RxState::LacpDisabled;
    port.selected = Selected::Unselected;
    record_default(port);
    port.partner.state.remove(PortState::AGGREGATION);
    port.actor_state.remove(PortState::EXPIRED);
    port.rx.current_while.stop();
}

fn enter_expired(port: &mut Port, now: Instant) {
    port.rx.state = RxState::Expired;
    port.partner.state.remove(PortState::SYNCHRONIZATION);
    port.partner.state.insert(PortState::TIMEOUT);
    port.rx.current_while.start(now, SHORT_TIMEOUT_TIME);
    port.actor_state.insert(PortState::EXPIRED);
}

fn enter_defaulted(port: &mut Port) {
    port.rx.state = RxState::Defaulted;
    // update_Default_Selected
    if !same_partner(&PARTNER_ADMIN, &port.partner) {
        port.selected = Selected::Unselected;
    }
    record_default(port);
    port.actor_state.remove(PortState::EXPIRED);
    port.rx.current_while.stop();
}

fn enter_current(port: &mut Port, actor: &Actor, pdu: &LacpRepr, now: Instant) {
    port.rx.state = RxState::Current;
    // A LACPDU heard: the partner speaks for itself.
    port.primed = None;
    // update_Selected: the partner is another one (or changed its mind about aggregating).
    if !same_partner(&pdu.actor, &port.partner) {
        port.selected = Selected::Unselected;
    }
    // update_NTT: the partner's view of us is not current.
    let us = port.actor_info(actor);
    const NTT_BITS: PortState = PortState(
        PortState::ACTIVITY.0
            | PortState::TIMEOUT.0
            | PortState::SYNCHRONIZATION.0
            | PortState::AGGREGATION.0,
    );
    if !same_identity(&pdu.partner, &us) || pdu.partner.state & NTT_BITS != us.state & NTT_BITS {
        port.ntt = true;
        // Unless it crossed our last LACPDU, the partner lacks what we last sent: repeat it.
        if !super::tx::may_have_crossed(port, now) {
            port.tx.partner_lacks = true;
        }
    }
    record_pdu(port, &us, pdu);
    let timeout: Duration = if port.actor_state.contains(PortState::TIMEOUT) {
        SHORT_TIMEOUT_TIME
    } else {
        LONG_TIMEOUT_TIME
    };
    port.rx.current_while.start(now, timeout);
    port.actor_state.remove(PortState::EXPIRED);
}

/// recordPDU: the partner's actor information becomes our partner information; its
/// Synchronization bit counts only if it describes us as we are.
fn record_pdu(port: &mut Port, us: &LacpInfo, pdu: &LacpRepr) {
    let matched = (same_identity(&pdu.partner, us)
        && pdu.partner.state.contains(PortState::AGGREGATION)
            == us.state.contains(PortState::AGGREGATION))
        || !pdu.actor.state.contains(PortState::AGGREGATION);
    let activity = pdu.actor.state.contains(PortState::ACTIVITY)
        || (us.state.contains(PortState::ACTIVITY)
            && pdu.partner.state.contains(PortState::ACTIVITY));
    let sync = matched && activity && pdu.actor.state.contains(PortState::SYNCHRONIZATION);
    port.partner = pdu.actor;
    port.partner.state.set(PortState::SYNCHRONIZATION, sync);
    port.actor_state.remove(PortState::DEFAULTED);
}

/// recordDefault: the partner administrative defaults become the partner information.
fn record_default(port: &mut Port) {
    port.partner = PARTNER_ADMIN;
    port.actor_state.insert(PortState::DEFAULTED);
}

/// The fields that name a port: system priority, system, key, port priority, port number.
fn same_identity(a: &LacpInfo, b: &LacpInfo) -> bool {
    a.system_priority == b.system_priority
        && a.system == b.system
        && a.key == b.key
        && a.port_priority == b.port_priority
        && a.port == b.port
}

/// The fields update_Selected compares: the identity and the Aggregation bit.
fn same_partner(a: &LacpInfo, b: &LacpInfo) -> bool {
    same_identity(a, b)
        && a.state.contains(PortState::AGGREGATION) == b.state.contains(PortState::AGGREGATION)
}

#[cfg(test)]
mod test {
    use super::*;
    use crate::lacp::tests::script::{self, A_SYS, B_SYS, at, partner_pdu};
    use crate::lacp::{LacpConfig, LacpRate, PortId};

    const P: PortId = PortId(0);

    fn rx_state(l: &crate::lacp::Lacp) -> RxState {
        l.snapshot().ports[0].rx
    }

    #[test]
    fn link_up_goes_expired_then_defaulted_after_two_short_timeouts() {
        let mut l = script::bond(LacpConfig::default(), 1);
        assert_eq!(rx_state(&l), RxState::PortDisabled);
        l.handle_link(at(0), P, true, 10_000, true);
        let s = l.snapshot();
        assert_eq!(s.ports[0].rx, RxState::Expired);
        // EXPIRED: our Expired bit, the partner forced to short timeout and out of sync.
        assert!(s.ports[0].actor.state.contains(PortState::EXPIRED));
        assert!(s.ports[0].actor.state.contains(PortState::DEFAULTED));
        assert!(s.ports[0].partner.state.contains(PortState::TIMEOUT));
        assert_eq!(l.poll_timeout(), Some(at(0))); // a LACPDU is due
        script::drain(&mut l, at(0));
        l.handle_timeout(at(2_999));
        assert_eq!(rx_state(&l), RxState::Expired);
        l.handle_timeout(at(3_000));
        let s = l.snapshot();
        assert_eq!(s.ports[0].rx, RxState::Defaulted);
        assert_eq!(s.ports[0].partner, PARTNER_ADMIN);
        assert!(!s.ports[0].actor.state.contains(PortState::EXPIRED));
    }

    #[test]
    fn lacpdu_makes_current_and_records_the_partner() {
        let mut l = script::bond(LacpConfig::default(), 1);
        l.handle_link(at(0), P, true, 10_000, true);
        script::drain(&mut l, at(0));
        let pdu = partner_pdu(1, PortState(0x05), None);
        l.handle_frame(at(100), P, &script::frame(&pdu));
        let s = l.snapshot();
        assert_eq!(s.ports[0].rx, RxState::Current);
        assert_eq!(s.ports[0].partner.system, B_SYS);
        assert_eq!(s.ports[0].partner.port, 1);
        assert!(!s.ports[0].actor.state.contains(PortState::DEFAULTED));
        assert!(!s.ports[0].actor.state.contains(PortState::EXPIRED));
        // The partner's view of us is empty: we must answer, as soon as the spacing after our
        // first LACPDU (at 0 ms) allows, since our state bits did not change.
        assert!(script::drain(&mut l, at(100)).is_empty());
        assert_eq!(l.poll_timeout(), Some(at(333)));
        let sent = script::drain(&mut l, at(333));
        assert_eq!(sent.len(), 1);
        assert_eq!(sent[0].1.partner.system, B_SYS);
        // Slow rate (our default): current_while is the long timeout, 90 s.
        l.handle_timeout(at(100 + 89_999));
        assert_eq!(rx_state(&l), RxState::Current);
        l.handle_timeout(at(100 + 90_000));
        assert_eq!(rx_state(&l), RxState::Expired);
        l.handle_timeout(at(100 + 93_000));
        assert_eq!(rx_state(&l), RxState::Defaulted);
    }

    #[test]
    fn current_while_uses_our_timeout_not_the_partners() {
        let cfg = LacpConfig {
            lacp_rate: LacpRate::Fast,
            ..LacpConfig::default()
        };
        let mut l = script::bond(cfg, 1);
        l.handle_link(at(0), P, true, 10_000, true);
        // The partner asks for the long timeout; we asked for the short one.
        let pdu = partner_pdu(1, PortState(0x05), None);
        l.handle_frame(at(0), P, &script::frame(&pdu));
        l.handle_timeout(at(2_999));
        assert_eq!(rx_state(&l), RxState::Current);
        l.handle_timeout(at(3_000));
        assert_eq!(rx_state(&l), RxState::Expired);
    }

    #[test]
    fn partner_sync_counts_only_when_the_partner_describes_us() {
        let mut l = script::bond(LacpConfig::default(), 1);
        l.handle_link(at(0), P, true, 10_000, true);
        let us = l.snapshot().ports[0].actor;
        // Sync claimed with an all-zero partner (Open vSwitch's first LACPDU): not in sync.
        let ovs_first = partner_pdu(1, PortState(0x3d), None);
        l.handle_frame(at(10), P, &script::frame(&ovs_first));
        assert!(
            !l.snapshot().ports[0]
                .partner
                .state
                .contains(PortState::SYNCHRONIZATION)
        );
        // Sync claimed with our info but a wrong key: still not.
        let mut wrong = us;
        wrong.key ^= 1;
        l.handle_frame(
            at(20),
            P,
            &script::frame(&partner_pdu(1, PortState(0x3d), Some(wrong))),
        );
        assert!(
            !l.snapshot().ports[0]
                .partner
                .state
                .contains(PortState::SYNCHRONIZATION)
        );
        // Our current info: in sync.
        l.handle_frame(
            at(30),
            P,
            &script::frame(&partner_pdu(1, PortState(0x3d), Some(us))),
        );
        assert!(
            l.snapshot().ports[0]
                .partner
                .state
                .contains(PortState::SYNCHRONIZATION)
        );
        // An Individual partner (single-member Open vSwitch bond) is believed as it is.
        let mut l = script::bond(LacpConfig::default(), 1);
        l.handle_link(at(0), P, true, 10_000, true);
        let individual = partner_pdu(1, PortState(0x39), None);
        l.handle_frame(at(10), P, &script::frame(&individual));
        assert!(
            l.snapshot().ports[0]
                .partner
                .state
                .contains(PortState::SYNCHRONIZATION)
        );
    }

    #[test]
    fn passive_pair_never_syncs() {
        let cfg = LacpConfig {
            lacp_active: false,
            ..LacpConfig::default()
        };
        let mut l = script::bond(cfg, 1);
        l.handle_link(at(0), P, true, 10_000, true);
        let mut us = l.snapshot().ports[0].actor;
        us.state = PortState(0x04); // passive, as we are
        // A passive partner with our exact info claiming sync.
        l.handle_frame(
            at(10),
            P,
            &script::frame(&partner_pdu(1, PortState(0x0c), Some(us))),
        );
        assert!(
            !l.snapshot().ports[0]
                .partner
                .state
                .contains(PortState::SYNCHRONIZATION)
        );
    }

    #[test]
    fn loopback_is_counted_and_dropped() {
        let mut l = script::bond(LacpConfig::default(), 1);
        l.handle_link(at(0), P, true, 10_000, true);
        let mut own = partner_pdu(1, PortState(0x3d), None);
        own.actor.system = A_SYS;
        l.handle_frame(at(10), P, &script::frame(&own));
        let s = l.snapshot();
        assert_eq!(s.ports[0].rx, RxState::Expired);
        assert_eq!(s.ports[0].counters.lacpdu_rx, 1);
        assert_eq!(s.ports[0].counters.loopback_rx, 1);
    }

    #[test]
    fn link_down_disables_and_half_duplex_disables_lacp() {
        let mut l = script::bond(LacpConfig::default(), 1);
        l.handle_link(at(0), P, true, 10_000, true);
        l.handle_frame(
            at(10),
            P,
            &script::frame(&partner_pdu(1, PortState(0x3d), None)),
        );
        l.handle_link(at(20), P, false, 10_000, true);
        let s = l.snapshot();
        assert_eq!(s.ports[0].rx, RxState::PortDisabled);
        // The partner is remembered (for port_moved) but out of sync.
        assert_eq!(s.ports[0].partner.system, B_SYS);
        assert!(
            !s.ports[0]
                .partner
                .state
                .contains(PortState::SYNCHRONIZATION)
        );
        // LACPDUs on a disabled port are counted and ignored.
        l.handle_frame(
            at(30),
            P,
            &script::frame(&partner_pdu(1, PortState(0x3d), None)),
        );
        assert_eq!(rx_state(&l), RxState::PortDisabled);
        assert_eq!(l.snapshot().ports[0].counters.lacpdu_rx, 2);
        l.handle_link(at(40), P, true, 100, false);
        let s = l.snapshot();
        assert_eq!(s.ports[0].rx, RxState::LacpDisabled);
        assert!(!s.ports[0].partner.state.contains(PortState::AGGREGATION));
        assert_eq!(s.ports[0].partner.system, PARTNER_ADMIN.system);
    }

    #[test]
    fn port_moved_reinitializes_a_disabled_port() {
        let mut l = script::bond(LacpConfig::default(), 2);
        l.handle_link(at(0), PortId(0), true, 10_000, true);
        l.handle_link(at(0), PortId(1), true, 10_000, true);
        let pdu = partner_pdu(7, PortState(0x3d), None);
        l.handle_frame(at(10), PortId(0), &script::frame(&pdu));
        l.handle_link(at(20), PortId(0), false, 10_000, true);
        assert_eq!(l.snapshot().ports[0].partner.port, 7);
        // The partner's port 7 now shows up on our port 1: the cable moved.
        l.handle_frame(at(30), PortId(1), &script::frame(&pdu));
        let s = l.snapshot();
        assert_eq!(s.ports[0].rx, RxState::PortDisabled);
        assert_eq!(s.ports[0].partner, PARTNER_ADMIN);
        assert_eq!(s.ports[1].partner.port, 7);
    }
}
