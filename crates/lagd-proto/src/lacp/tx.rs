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
//! A port removed from the bond sends a last LACPDU with Synchronization, Collecting,
//! Distributing and Aggregation cleared ([`farewell`]), as Linux does, so the partner stops
//! distributing to it at once instead of after its timeout.

use super::port::{Actor, Port};
use super::state::PeriodicState;
use crate::wire::slow::{LacpRepr, PortState};

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
        assert_eq!(&sent[..4], [0, 50, 100, 1_000]);
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
