//! Property tests: random event sequences on two bonds joined by three links.
//!
//! Under any sequence of link up/down, speed changes, loss on/off, tampering and time
//! advances, no port is ever Distributing while its partner is out of sync in our view (the
//! [`Sim`] checks this, and more, after every event), nothing panics, and once the network is
//! left alone with healthy links of one speed and active ends, the aggregation forms.

use core::time::Duration;

use proptest::prelude::*;

use super::Sim;
use super::script::at;
use crate::lacp::{AdSelect, LacpConfig, LacpRate};
use crate::wire::EthernetAddress;
use crate::wire::slow::PortState;

#[derive(Debug, Clone, Copy)]
enum Tampering {
    /// Clear the Synchronization bit.
    ClearSync,
    /// Claim Synchronization, Collecting and Distributing.
    ClaimAll,
    /// Change the actor key.
    Key,
    /// Forget who the partner is.
    ZeroPartner,
    /// Clear the Aggregation bit.
    Individual,
    /// Flip the Expired and Defaulted bits.
    Flags,
}

#[derive(Debug, Clone)]
enum Op {
    Up(usize),
    Down(usize),
    Speed(usize, u32),
    Loss(usize, usize, bool),
    Tamper(usize, usize, Tampering),
    NoTamper,
    Wait(u64),
}

fn op() -> impl Strategy<Value = Op> {
    let link = 0..3usize;
    let tampering = prop_oneof![
        Just(Tampering::ClearSync),
        Just(Tampering::ClaimAll),
        Just(Tampering::Key),
        Just(Tampering::ZeroPartner),
        Just(Tampering::Individual),
        Just(Tampering::Flags),
    ];
    prop_oneof![
        3 => link.clone().prop_map(Op::Up),
        2 => link.clone().prop_map(Op::Down),
        1 => (link.clone(), prop_oneof![Just(1_000u32), Just(10_000), Just(100)])
            .prop_map(|(l, s)| Op::Speed(l, s)),
        2 => (link.clone(), 0..2usize, any::<bool>()).prop_map(|(l, d, on)| Op::Loss(l, d, on)),
        1 => (link, 0..2usize, tampering).prop_map(|(l, d, t)| Op::Tamper(l, d, t)),
        1 => Just(Op::NoTamper),
        4 => prop_oneof![0..1_500u64, 0..100_000u64].prop_map(Op::Wait),
    ]
}

fn config() -> impl Strategy<Value = LacpConfig> {
    (
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
        prop_oneof![
            Just(AdSelect::Stable),
            Just(AdSelect::Bandwidth),
            Just(AdSelect::Count),
            Just(AdSelect::ActorPortPrio)
        ],
        0..3u32,
        prop_oneof![Just(None), Just(Some(Duration::from_secs(4)))],
    )
        .prop_map(
            |(fast, active, coupled, select, min_links, fallback)| LacpConfig {
                lacp_rate: if fast { LacpRate::Fast } else { LacpRate::Slow },
                lacp_active: active,
                coupled_control: coupled,
                ad_select: select,
                min_links,
                fallback,
                ..LacpConfig::default()
            },
        )
}

fn apply(sim: &mut Sim, op: &Op) {
    match *op {
        Op::Up(l) => sim.link_up(l),
        Op::Down(l) => sim.link_down(l),
        Op::Speed(l, s) => {
            sim.set_speed(l, s);
            if sim.links[l].up {
                sim.link_up(l);
            }
        }
        Op::Loss(l, d, on) => sim.set_loss_from(l, d, on),
        Op::Tamper(link, from, t) => {
            sim.tamper = Some(Box::new(move |f, pdu| {
                if f.link != link || f.from_bond != from {
                    return;
                }
                match t {
                    Tampering::ClearSync => pdu.actor.state.remove(PortState::SYNCHRONIZATION),
                    Tampering::ClaimAll => pdu.actor.state.insert(PortState(0x38)),
                    Tampering::Key => pdu.actor.key ^= 0x40,
                    Tampering::ZeroPartner => pdu.partner = Default::default(),
                    Tampering::Individual => pdu.actor.state.remove(PortState::AGGREGATION),
                    Tampering::Flags => pdu.actor.state.0 ^= 0xc0,
                }
            }));
        }
        Op::NoTamper => sim.tamper = None,
        Op::Wait(ms) => {
            let t = sim.now + Duration::from_millis(ms);
            sim.run_until(t);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(192))]

    #[test]
    fn never_distributing_while_partner_out_of_sync(
        a in config(),
        b in config(),
        ops in prop::collection::vec(op(), 1..40),
    ) {
        let mut sim = Sim::pair(a.clone(), b.clone(), 3);
        for op in &ops {
            apply(&mut sim, op);
        }
        // Heal the network: same speed everywhere, no loss, no tampering, links up.
        sim.tamper = None;
        for l in 0..3 {
            sim.set_loss(l, false);
            sim.set_speed(l, 10_000);
            sim.link_down(l);
        }
        let healed = sim.now + Duration::from_secs(1);
        sim.run_until(healed);
        sim.all_links_up();
        // Within a slow periodic interval, the 2 s wait and a few latencies (one end may
        // still be on the slow rate), both ends distribute on every link, unless both are
        // passive.
        sim.run_until(healed + Duration::from_secs(40));
        let forms = a.lacp_active || b.lacp_active;
        prop_assert_eq!(sim.all_distributing(0) && sim.all_distributing(1), forms);
        if forms {
            let expect = |cfg: &LacpConfig| cfg.min_links <= 3;
            prop_assert_eq!(sim.bonds[0].carrier(), expect(&a));
            prop_assert_eq!(sim.bonds[1].carrier(), expect(&b));
        }
    }

    #[test]
    fn arbitrary_lacpdus_never_break_the_invariant(
        cfg in config(),
        pdus in prop::collection::vec(
            (0..2u16, any::<u8>(), any::<bool>(), 0..3u8, any::<u16>(), 0..3_000u64),
            1..60,
        ),
    ) {
        // One bond, scripted partner LACPDUs with random state bits, sometimes describing us
        // correctly, sometimes from our own system id, at random times.
        let mut sim = Sim::new();
        sim.add_bond(cfg);
        sim.add_bond(LacpConfig::default());
        sim.connect((0, 0), (1, 0), 10_000);
        sim.connect((0, 1), (1, 1), 10_000);
        sim.all_links_up();
        // Bond 1 is only a placeholder for the far ends: it never gets to speak.
        sim.set_loss_from(0, 1, true);
        sim.set_loss_from(1, 1, true);
        for (port, state, describe_us, system, key, wait) in pdus {
            let s = sim.snap(0);
            let us = s.ports[usize::from(port)].actor;
            let mut pdu = super::script::partner_pdu(port + 1, PortState(state), describe_us.then_some(us));
            pdu.actor.system = match system {
                0 => super::script::B_SYS,
                1 => Sim::system_of(0),
                _ => EthernetAddress([0x02, 0xbb, 0, 0, 0, 2]),
            };
            pdu.actor.key = if key % 4 == 0 { key } else { 15 };
            let frame = super::script::frame(&pdu);
            sim.inject(usize::from(port), 0, frame);
            let t = sim.now + Duration::from_millis(wait);
            sim.run_until(t);
        }
        sim.run_until(sim.now + Duration::from_secs(200));
        // With nobody speaking any more, every partner has timed out.
        prop_assert!(sim.distributing(0).len() <= 1);
        prop_assert!(sim.snap(0).ports.iter().all(|p| !p.actor.state.contains(PortState::DISTRIBUTING)));
        let _ = at(0);
    }
}
