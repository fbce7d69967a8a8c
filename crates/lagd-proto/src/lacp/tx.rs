//! The Transmit machine (IEEE Std 802.1AX-2014 §6.4.16).
//!
//! When NTT is set, a LACPDU is built from the port's current variables and sent; NTT is then
//! cleared. Two limits apply:
//!
//! - no more than three LACPDUs in any Fast_Periodic_Time (1 s) interval: a fourth NTT within
//!   the second waits (NTT stays set) until the oldest of the three is a second old;
//! - nothing is sent while the Periodic machine is in NO_PERIODIC (link down, LACP disabled,
//!   or both sides passive), and NTT is cleared there — this is what keeps a passive port
//!   silent until it hears an active partner.
//!
//! The LACPDU carries our Actor information (`Actor_Oper_*`), the Partner information in use
//! (`Partner_Oper_*`, the administrative defaults when defaulted) and a zero
//! CollectorMaxDelay. Frames go from the member's permanent MAC to 01:80:c2:00:00:02.
//!
//! Each LACPDU carries news or is due ([`decide`]): one identical to the last sent since the
//! link came up is not sent again (NTT is cleared) unless the partner showed it lacks our
//! information in a LACPDU that cannot have crossed ours on the wire (received
//! [`CROSSING_TIME`] or more after our last one), or the Periodic machine asked for it and the
//! last one is [`PERIODIC_SLACK`] old or more (a periodic timer expiring just after a LACPDU
//! went does not repeat it).
//!
//! Spacing: a LACPDU that changes none of our Synchronization, Collecting and Distributing
//! bits (it tells the partner what we know of it, or other details, or is periodic) goes no
//! sooner than [`PERIODIC_SLACK`] after the previous one, and may use only two of the three
//! slots of any second; news it carries meanwhile rides on the next LACPDU. One announcing a
//! change of those bits goes at once (within the three per second), so it is not held back
//! behind a burst of lesser ones: with a short aggregate wait the partner learns that we
//! distribute when we do, not a second later.
//!
//! A port removed from the bond sends a last LACPDU with Synchronization, Collecting,
//! Distributing and Aggregation cleared ([`farewell`]), as Linux does, so the partner stops
//! distributing to it at once instead of after its timeout.

use core::time::Duration;

use super::config::MAX_TX_PER_FAST_PERIODIC;
use super::port::{Actor, Port};
use super::state::PeriodicState;
use crate::time::Instant;
use crate::wire::slow::{LacpRepr, PortState};

/// A partner's LACPDU received within this time of our last one may have been sent before ours
/// arrived: its out-of-date view of us does not make us repeat ourselves.
pub(crate) const CROSSING_TIME: Duration = Duration::from_millis(100);

/// A periodic LACPDU identical to one sent less than this ago is not sent (the partner just
/// heard the same); a third of Fast_Periodic_Time, the spacing Linux keeps between LACPDUs.
pub(crate) const PERIODIC_SLACK: Duration = Duration::from_millis(333);

/// What the Transmit machine does about a port with NTT set.
#[derive(Debug)]
pub(crate) enum Decision {
    /// Send this LACPDU now.
    Send(LacpRepr),
    /// Nothing new to say: clear NTT.
    Suppress,
    /// Send at this time (the transmit limit).
    Wait(Instant),
}

/// What to do at `now` about a port that [`wants`] to send.
pub(crate) fn decide(port: &Port, actor: &Actor, now: Instant) -> Decision {
    let pdu = lacpdu(port, actor);
    let last = port.tx.last.as_ref().map(|(_, l)| l);
    if let Some((at, l)) = &port.tx.last
        && *l == pdu
    {
        let needed = port.tx.partner_lacks || (port.tx.periodic && now >= *at + PERIODIC_SLACK);
        if !needed {
            return Decision::Suppress;
        }
    }
    const STATE: PortState = PortState(
        PortState::SYNCHRONIZATION.0 | PortState::COLLECTING.0 | PortState::DISTRIBUTING.0,
    );
    let state_change = last.is_none_or(|l| (l.actor.state.0 ^ pdu.actor.state.0) & STATE.0 != 0);
    let at = match &port.tx.last {
        Some((last_at, _)) if !state_change => port
            .tx
            .next_allowed_within(now, MAX_TX_PER_FAST_PERIODIC - 1)
            .max(*last_at + PERIODIC_SLACK),
        _ => port.tx.next_allowed(now),
    };
    if at <= now {
        Decision::Send(pdu)
    } else {
        Decision::Wait(at)
    }
}

/// Whether a partner LACPDU received at `now` may have crossed our last one on the wire.
pub(crate) fn may_have_crossed(port: &Port, now: Instant) -> bool {
    port.tx
        .last
        .as_ref()
        .is_some_and(|(t, _)| now < *t + CROSSING_TIME)
}

/// Whether the port may send LACPDUs at all (the Periodic machine is not in NO_PERIODIC).
pub(crate) fn may_transmit(port: &Port) -> bool {
    port.port_enabled && port.lacp_enabled && port.periodic.state != PeriodicState::NoPeriodic
}

/// Whether the port has a LACPDU to send (NTT, and allowed to transmit).
pub(crate) fn wants(port: &Port) -> bool {
    port.ntt && may_transmit(port)
}

/// In NO_PERIODIC the Transmit machine sends nothing and clears NTT.
pub(crate) fn settle_ntt(port: &mut Port) {
    if !may_transmit(port) {
        port.ntt = false;
    }
}

/// The LACPDU the port sends now.
pub(crate) fn lacpdu(port: &Port, actor: &Actor) -> LacpRepr {
    LacpRepr {
        actor: port.actor_info(actor),
        partner: port.partner,
        ..LacpRepr::default()
    }
}

/// The last LACPDU of a port leaving the bond.
pub(crate) fn farewell(port: &Port, actor: &Actor) -> LacpRepr {
    let mut pdu = lacpdu(port, actor);
    pdu.actor.state.remove(
        PortState::SYNCHRONIZATION
            | PortState::COLLECTING
            | PortState::DISTRIBUTING
            | PortState::AGGREGATION,
    );
    pdu
}

#[cfg(test)]
mod test {
    use super::*;
    use crate::lacp::state::Transmit;
    use crate::lacp::tests::script::{self, A_SYS, at, partner_pdu};
    use crate::lacp::{LacpConfig, LacpRate, PortId};
    use crate::wire::slow::LacpInfo;

    #[test]
    fn window_allows_three_per_second() {
        let mut t = Transmit::new();
        assert_eq!(t.next_allowed(at(0)), at(0));
        t.record(at(0));
        t.record(at(100));
        assert_eq!(t.next_allowed(at(100)), at(100));
        t.record(at(200));
        assert_eq!(t.next_allowed(at(200)), at(1_000));
        assert_eq!(t.next_allowed(at(999)), at(1_000));
        assert_eq!(t.next_allowed(at(1_000)), at(1_000));
        t.record(at(1_000));
        assert_eq!(t.next_allowed(at(1_000)), at(1_100));
    }

    #[test]
    fn a_chatty_partner_gets_at_most_three_lacpdus_a_second() {
        let cfg = LacpConfig {
            lacp_rate: LacpRate::Fast,
            ..LacpConfig::default()
        };
        let mut l = script::bond(cfg, 1);
        let p = PortId(0);
        l.handle_link(at(0), p, true, 10_000, true);
        // Every 50 ms a LACPDU whose view of us is wrong: each one asks for an answer.
        let mut sent = Vec::new();
        for k in 0..60u64 {
            let t = at(k * 50);
            let mut pdu = partner_pdu(1, PortState(0x07), None);
            pdu.partner.key = u16::try_from(k).unwrap();
            l.handle_frame(t, p, &script::frame(&pdu));
            sent.extend(script::drain(&mut l, t).into_iter().map(|_| t.as_millis()));
        }
        // Any 1 s window holds at most three.
        for (i, &t0) in sent.iter().enumerate() {
            let n = sent[i..].iter().take_while(|&&t| t < t0 + 1_000).count();
            assert!(n <= 3, "{n} LACPDUs in the second from {t0} ms: {sent:?}");
        }
        // The answers change none of our state bits: spaced by a third of a second (sent at the
        // first drain after it), and two a second at most (the third slot waits for news).
        assert_eq!(&sent[..4], [0, 350, 1_000, 1_350], "{sent:?}");
        let c = l.snapshot().ports[0].counters;
        assert!(c.lacpdu_suppressed > 0, "{c:?}");
        // NTT was kept while limited: poll_timeout tells when the next may go.
        assert_eq!(l.poll_timeout(), Some(at(3_000)));
    }

    #[test]
    fn lacpdu_carries_actor_and_partner_oper_values() {
        let cfg = LacpConfig {
            lacp_rate: LacpRate::Fast,
            ad_actor_sys_prio: 100,
            ad_user_port_key: 2,
            ..LacpConfig::default()
        };
        let mut l = script::bond(cfg, 1);
        let p = PortId(0);
        l.handle_link(at(0), p, true, 1_000, true);
        let sent = script::drain(&mut l, at(0));
        let (port, pdu) = &sent[0];
        assert_eq!(*port, p);
        let expect = LacpRepr {
            actor: LacpInfo {
                system_priority: 100,
                system: A_SYS,
                key: 2 << 6 | 9,
                port_priority: 255,
                port: 1,
                state: PortState(0x47 | 0x80),
            },
            partner: LacpInfo {
                state: PortState::TIMEOUT,
                ..crate::lacp::PARTNER_ADMIN
            },
            ..LacpRepr::default()
        };
        assert_eq!(pdu, &expect);
    }

    #[test]
    fn farewell_clears_sync_collecting_distributing_and_aggregation() {
        let mut l = script::bond(LacpConfig::default(), 1);
        let p = PortId(0);
        l.handle_link(at(0), p, true, 10_000, true);
        script::drain(&mut l, at(0));
        l.remove_port(at(10), p);
        let sent = script::drain(&mut l, at(10));
        assert_eq!(sent.len(), 1);
        assert_eq!(sent[0].1.actor.state.0 & 0x3c, 0);
        assert!(sent[0].1.actor.state.contains(PortState::ACTIVITY));
        // A port that never talked (link down) says no farewell.
        let mut l = script::bond(LacpConfig::default(), 1);
        l.remove_port(at(10), p);
        assert!(script::drain(&mut l, at(10)).is_empty());
    }
}
