//! The scenarios of issue 4, in virtual time, with the invariant checked after every event.
//! Links have 1 ms latency; times are asserted exactly (the simulation is deterministic) and
//! against the standard's bounds.

use core::time::Duration;

use super::script::at;
use super::{End, Fate, LATENCY, Sim};
use crate::lacp::{
    AGGREGATE_WAIT_TIME, ActorChurnState, AdSelect, CHURN_DETECTION_TIME, FAST_PERIODIC_TIME,
    LONG_TIMEOUT_TIME, LacpConfig, LacpEvent, LacpRate, MuxState, PartnerChurnState, PortId,
    RxState, SHORT_TIMEOUT_TIME, SLOW_PERIODIC_TIME, Selected,
};
use crate::time::Instant;
use crate::wire::EthernetAddress;
use crate::wire::slow::{LacpInfo, MarkerKind, MarkerRepr, PortState, SlowPdu};

fn cfg(rate: LacpRate, active: bool) -> LacpConfig {
    LacpConfig {
        lacp_rate: rate,
        lacp_active: active,
        ..LacpConfig::default()
    }
}

fn fast() -> LacpConfig {
    cfg(LacpRate::Fast, true)
}

fn slow() -> LacpConfig {
    cfg(LacpRate::Slow, true)
}

fn both_distributing(s: &Sim) -> bool {
    s.all_distributing(0) && s.all_distributing(1)
}

/// The time from link-up (t=0) to both ends distributing on every port.
fn formation_time(a: LacpConfig, b: LacpConfig, links: u16) -> (Sim, Instant) {
    let mut sim = Sim::pair(a, b, links);
    sim.all_links_up();
    let t = sim
        .run_until_cond(at(120_000), both_distributing)
        .expect("aggregation forms");
    (sim, t)
}

/// Forms a fast pair of `links` links and returns it at t=10 s.
fn formed_fast(links: u16) -> Sim {
    let (mut sim, _) = formation_time(fast(), fast(), links);
    sim.run_until(at(10_000));
    assert!(both_distributing(&sim));
    sim
}

#[test]
fn aggregation_forms_at_fast_rate() {
    let (mut sim, t) = formation_time(fast(), fast(), 2);
    // Both ends wait Aggregate_Wait_Time after selecting (1 ms after link-up, on the first
    // LACPDU), attach, tell each other (1 ms), enter COLLECTING_DISTRIBUTING and tell that
    // (1 ms): each sends once it hears the other collects, 2 s + 3 × latency.
    assert_eq!(t, Instant::ZERO + AGGREGATE_WAIT_TIME + 3 * LATENCY);
    assert!(t <= Instant::ZERO + AGGREGATE_WAIT_TIME + FAST_PERIODIC_TIME);
    // From attaching (end of the wait) to distributing: two latencies, well within the
    // Fast_Periodic_Time bound.
    let attached = Instant::ZERO + LATENCY + AGGREGATE_WAIT_TIME;
    assert!(t - attached <= FAST_PERIODIC_TIME);
    // Let the last LACPDUs (saying we distribute) arrive.
    sim.run_until(t + LATENCY);
    for b in 0..2 {
        let s = sim.snap(b);
        let other = Sim::system_of(1 - b);
        let agg = s.active_aggregator_info().expect("an active aggregator");
        assert_eq!(agg.ports, [PortId(0), PortId(1)]);
        assert_eq!(agg.enabled_ports, 2);
        assert_eq!((agg.actor_key, agg.partner_key), (15, 15));
        assert_eq!(agg.partner_system, other);
        assert!(s.carrier);
        for p in &s.ports {
            assert_eq!(
                p.actor.state,
                PortState(0x3f),
                "active fast aggregating in sync"
            );
            assert_eq!(p.partner.state, PortState(0x3f));
            assert_eq!(p.mux, MuxState::CollectingDistributing);
            assert_eq!(p.rx, RxState::Current);
            assert_eq!(p.selected, Selected::Selected);
        }
    }
    let evs: Vec<_> = sim.take_events(0);
    assert!(evs.contains(&LacpEvent::CarrierChanged { up: true }));
    assert!(evs.contains(&LacpEvent::DistributionChanged));
    // Steady state: one LACPDU a second per port.
    sim.run_until(at(20_500));
    let in_10s = |sim: &Sim| {
        sim.lacpdus_sent(0, 0)
            .into_iter()
            .filter(|t| (at(10_000)..at(20_000)).contains(t))
            .count()
    };
    assert_eq!(in_10s(&sim), 10);
}

#[test]
fn aggregation_forms_at_slow_rate() {
    let (mut sim, t) = formation_time(slow(), slow(), 2);
    // Formation is driven by NTT, not by the periodic rate: the same 2 s + 3 × latency.
    assert_eq!(t, Instant::ZERO + AGGREGATE_WAIT_TIME + 3 * LATENCY);
    sim.run_until(t + LATENCY);
    for p in &sim.snap(0).ports {
        assert_eq!(p.actor.state, PortState(0x3d));
        assert_eq!(p.partner.state, PortState(0x3d));
    }
    // Steady state: one LACPDU every 30 s per port.
    sim.run_until(at(400_000));
    let n = sim
        .lacpdus_sent(0, 0)
        .into_iter()
        .filter(|t| (at(100_000)..at(400_000)).contains(t))
        .count();
    assert_eq!(n, (300 / SLOW_PERIODIC_TIME.as_secs()) as usize);
    assert!(both_distributing(&sim));
}

#[test]
fn mixed_rates_each_side_gets_what_it_asked_for() {
    let (mut sim, _) = formation_time(fast(), slow(), 1);
    sim.run_until(at(100_000));
    let sent_in = |sim: &Sim, b| {
        sim.lacpdus_sent(b, 0)
            .into_iter()
            .filter(|t| (at(40_000)..at(100_000)).contains(t))
            .count()
    };
    // Bond 0 asked for fast: bond 1 sends every second. Bond 1 asked for slow.
    assert_eq!(sent_in(&sim, 1), 60);
    assert_eq!(sent_in(&sim, 0), 2);
}

#[test]
fn active_passive_forms_and_the_passive_side_speaks_only_when_spoken_to() {
    let (sim, t) = formation_time(fast(), cfg(LacpRate::Fast, false), 2);
    // A speaks at 0; B answers at 1 ms; A selects at 2 ms, attaches at 2.002 s as B's
    // in-sync LACPDU arrives; B collects and distributes on A's answer 1 ms later, A sends
    // once B's Collecting arrives, 1 ms after that.
    assert_eq!(t, Instant::ZERO + AGGREGATE_WAIT_TIME + 4 * LATENCY);
    assert_eq!(
        sim.lacpdus_sent(1, 0).first(),
        Some(&(Instant::ZERO + LATENCY))
    );
    let (_, t) = formation_time(cfg(LacpRate::Slow, false), slow(), 1);
    assert_eq!(t, Instant::ZERO + AGGREGATE_WAIT_TIME + 4 * LATENCY);
}

#[test]
fn passive_passive_never_forms() {
    let mut sim = Sim::pair(cfg(LacpRate::Fast, false), cfg(LacpRate::Fast, false), 2);
    sim.all_links_up();
    sim.run_until(at(300_000));
    assert!(sim.sent.is_empty(), "passive bonds stay silent");
    for b in 0..2 {
        let s = sim.snap(b);
        assert!(!s.carrier);
        assert!(
            s.ports
                .iter()
                .all(|p| !p.distributing && p.rx == RxState::Defaulted)
        );
    }
}

/// Loss on link 0 (both directions) from `loss_at`: port 0 expires exactly one timeout after
/// its last LACPDU, defaults a short timeout later, and port 1 never stops distributing.
fn loss_on_one_link(rate: LacpRate, timeout: Duration) {
    let c = cfg(rate, true);
    let (mut sim, _) = formation_time(c.clone(), c, 2);
    let loss_at = at(200_000);
    sim.run_until(loss_at);
    sim.set_loss(0, true);
    let expired = sim
        .run_until_cond(at(400_000), |s| {
            assert!(s.bonds[0].is_distributing(PortId(1)), "port 1 unaffected");
            assert!(s.bonds[1].is_distributing(PortId(1)), "port 1 unaffected");
            s.snap(0).ports[0].rx == RxState::Expired
        })
        .unwrap();
    // (A LACPDU sent just before the loss started may still have been in flight.)
    let last = *sim.lacpdus_received(0, 0).last().unwrap();
    assert!(last <= loss_at + LATENCY);
    assert_eq!(expired, last + timeout);
    assert!(!sim.bonds[0].is_distributing(PortId(0)));
    assert_eq!(sim.distributing(0), [1]);
    let defaulted = sim
        .run_until_cond(at(400_000), |s| s.snap(0).ports[0].rx == RxState::Defaulted)
        .unwrap();
    assert_eq!(defaulted, expired + SHORT_TIMEOUT_TIME);
    let lost = |sim: &Sim, bond| {
        sim.sent
            .iter()
            .filter(|s| {
                s.from
                    == End {
                        bond,
                        port: PortId(0),
                    }
                    && s.fate == Fate::Lost
            })
            .count()
    };
    assert!(
        lost(&sim, 0) > 0 && lost(&sim, 1) > 0,
        "both directions lose"
    );
    let s = sim.snap(0);
    assert_eq!(s.ports[0].partner.system, EthernetAddress::ZERO);
    assert!(s.carrier);
    // The loss stops: the port rejoins (both sides are defaulted, so they speak every 30 s).
    let clear = at(300_000);
    sim.run_until(clear);
    sim.set_loss(0, false);
    let back = sim
        .run_until_cond(at(400_000), both_distributing)
        .expect("port 0 rejoins");
    assert!(back - clear <= SLOW_PERIODIC_TIME + AGGREGATE_WAIT_TIME + 2 * LATENCY);
    eprintln!(
        "{rate:?}: last LACPDU {last}, EXPIRED {expired}, DEFAULTED {defaulted}, \
         loss cleared {clear}, distributing again {back}"
    );
}

#[test]
fn lacpdu_loss_on_one_link_at_fast_rate() {
    loss_on_one_link(LacpRate::Fast, SHORT_TIMEOUT_TIME);
}

#[test]
fn lacpdu_loss_on_one_link_at_slow_rate() {
    loss_on_one_link(LacpRate::Slow, LONG_TIMEOUT_TIME);
}

#[test]
fn link_flap_leaves_distribution_at_once_and_rejoins_after_the_wait() {
    let mut sim = formed_fast(2);
    sim.link_down(0);
    assert_eq!(sim.distributing(0), [1]);
    assert_eq!(sim.distributing(1), [1]);
    sim.run_until(at(12_000));
    sim.link_up(0);
    let t = sim.run_until_cond(at(20_000), both_distributing).unwrap();
    // Both ends remember the partner across the flap (EXPIRED keeps it), select at once at
    // link-up and wait 2 s; their in-sync LACPDUs cross in one latency, the ones saying they
    // collect in a second.
    assert_eq!(t, at(12_000) + AGGREGATE_WAIT_TIME + 2 * LATENCY);
}

#[test]
fn partner_reboot_with_a_new_system_id() {
    let mut sim = formed_fast(2);
    let new_id = EthernetAddress([0x02, 0xcc, 0, 0, 0, 9]);
    sim.reboot(1, fast(), new_id);
    // The new system speaks from new port addresses while the old partner is current: its
    // first LACPDU on each port is held off (a flood naming random partners must not take a
    // port over), its second, naming the same system and port, takes over.
    sim.run_until(at(10_001));
    let s = sim.snap(0);
    assert!(s.ports.iter().all(|p| p.partner.system != new_id));
    assert!(s.ports.iter().all(|p| p.counters.foreign_rx == 1));
    let t = sim
        .run_until_cond(at(11_000), |s| {
            s.snap(0)
                .ports
                .iter()
                .all(|p| !p.distributing && p.partner.system == new_id)
        })
        .expect("the new partner takes over within a second");
    let t = sim
        .run_until_cond(t + Duration::from_secs(5), both_distributing)
        .unwrap();
    assert!(
        t <= at(11_000) + AGGREGATE_WAIT_TIME + 2 * LATENCY,
        "formed again at {t}"
    );
    let s = sim.snap(0);
    let agg = s.active_aggregator_info().unwrap();
    assert_eq!(agg.partner_system, new_id);
    assert_eq!(agg.ports, [PortId(0), PortId(1)]);
}

/// Bond 0 with ports 0, 1 to bond 1 and port 2 to bond 2; `speeds` of the three links.
fn split(select: AdSelect, speeds: [u32; 3]) -> Sim {
    let mut sim = Sim::new();
    sim.add_bond(LacpConfig {
        ad_select: select,
        ..fast()
    });
    sim.add_bond(fast());
    sim.add_bond(fast());
    sim.connect((0, 0), (1, 0), speeds[0]);
    sim.connect((0, 1), (1, 1), speeds[1]);
    sim.connect((0, 2), (2, 0), speeds[2]);
    sim
}

#[test]
fn members_split_across_two_partner_systems() {
    let mut sim = split(AdSelect::Bandwidth, [10_000; 3]);
    sim.all_links_up();
    sim.run_until(at(10_000));
    let s = sim.snap(0);
    assert_eq!(s.aggregators.len(), 2);
    let active = s.active_aggregator_info().unwrap();
    assert_eq!(active.ports, [PortId(0), PortId(1)]);
    assert_eq!(active.partner_system, Sim::system_of(1));
    let other = s.aggregators.iter().find(|a| !a.active).unwrap();
    assert_eq!(other.ports, [PortId(2)]);
    assert_eq!(other.partner_system, Sim::system_of(2));
    assert_eq!(s.ports[2].selected, Selected::Standby);
    assert_eq!(s.ports[2].mux, MuxState::Waiting);
    assert_eq!(sim.distributing(0), [0, 1]);
    assert!(sim.bonds[1].carrier());
    // Bond 2's partner port is out of sync: bond 2 never distributes.
    assert!(!sim.bonds[2].carrier());
    assert!(sim.distributing(2).is_empty());
}

#[test]
fn ad_select_count_and_bandwidth_disagree() {
    // Two 10G links to bond 1, one 100G link to bond 2.
    for (select, want) in [
        (AdSelect::Bandwidth, vec![2]),
        (AdSelect::Count, vec![0, 1]),
    ] {
        let mut sim = split(select, [10_000, 10_000, 100_000]);
        sim.all_links_up();
        sim.run_until(at(10_000));
        assert_eq!(sim.distributing(0), want, "{select}");
    }
}

#[test]
fn ad_select_actor_port_prio_follows_the_priorities() {
    // Three equal links: two to bond 1, one to bond 2. Count and bandwidth choose bond 1;
    // actor_port_prio chooses the larger sum of priorities.
    let mut sim = split(AdSelect::ActorPortPrio, [10_000; 3]);
    sim.bonds[0].set_port_priority(sim.now, PortId(2), 1000);
    sim.all_links_up();
    sim.run_until(at(10_000));
    assert_eq!(sim.distributing(0), [2], "1000 beats 255 + 255");
    // The default priorities: 510 against 255.
    let mut sim = split(AdSelect::ActorPortPrio, [10_000; 3]);
    sim.all_links_up();
    sim.run_until(at(10_000));
    assert_eq!(sim.distributing(0), [0, 1]);
    // Changed at run time: the new priority is sent at once and the choice follows it, with
    // no link event (the kernel waits for its next selection).
    let t = sim.now;
    sim.bonds[0].set_port_priority(t, PortId(2), 600);
    sim.run_until(t + LATENCY);
    assert!(
        sim.lacpdus_sent(0, 2).contains(&t),
        "a LACPDU with the new priority at once"
    );
    sim.run_until(at(20_000));
    assert_eq!(sim.distributing(0), [2], "600 beats 510");
    assert_eq!(sim.snap(0).ports[2].actor.port_priority, 600);
    // Not sticky (unlike stable): the other aggregator takes over again when it leads.
    sim.bonds[0].set_port_priority(sim.now, PortId(0), 400);
    sim.run_until(at(30_000));
    assert_eq!(sim.distributing(0), [0, 1], "400 + 255 beats 600");
    // Ties go to the port count: 600 against 345 + 255.
    sim.bonds[0].set_port_priority(sim.now, PortId(0), 345);
    sim.run_until(at(40_000));
    assert_eq!(sim.distributing(0), [0, 1]);
    // Only ports with carrier count: link 1 lost leaves 345 against 600.
    sim.link_down(1);
    sim.run_until(at(50_000));
    assert_eq!(sim.distributing(0), [2]);
}

#[test]
fn ad_select_stable_keeps_the_active_aggregator() {
    for (select, want) in [
        (AdSelect::Stable, vec![2]),
        (AdSelect::Bandwidth, vec![0, 1]),
    ] {
        let mut sim = split(select, [10_000; 3]);
        sim.link_up(2);
        sim.run_until(at(10_000));
        assert_eq!(sim.distributing(0), [2]);
        sim.link_up(0);
        sim.link_up(1);
        sim.run_until(at(20_000));
        assert_eq!(sim.distributing(0), want, "{select}");
    }
    // Stable fails over when the active aggregator loses its last port; the standby ports
    // have waited already, so they take over within a few latencies.
    let mut sim = split(AdSelect::Stable, [10_000; 3]);
    sim.link_up(2);
    sim.run_until(at(10_000));
    sim.link_up(0);
    sim.link_up(1);
    sim.run_until(at(20_000));
    sim.link_down(2);
    let t = sim
        .run_until_cond(at(30_000), |s| {
            s.distributing(0) == [0, 1] && s.all_distributing(1)
        })
        .unwrap();
    // Bond 0's standby ports already saw bond 1 in sync: they collect and distribute at
    // once, bond 1 (seeing that) one latency later, and bond 0 sends once bond 1's
    // Collecting arrives, a second latency later.
    assert_eq!(t, at(20_000) + 2 * LATENCY);
}

#[test]
fn key_mismatch_makes_separate_aggregators() {
    let mut sim = Sim::pair(fast(), fast(), 2);
    sim.set_speed(1, 1_000);
    sim.all_links_up();
    sim.run_until(at(10_000));
    for b in 0..2 {
        let s = sim.snap(b);
        assert_eq!(s.aggregators.len(), 2, "bond {b}");
        let keys: Vec<u16> = s.aggregators.iter().map(|a| a.actor_key).collect();
        assert_eq!(keys, [15, 9]);
        assert_eq!(sim.distributing(b), [0]);
        assert_eq!(s.ports[1].selected, Selected::Standby);
    }
}

#[test]
fn tampered_sync_flip_stops_distribution_on_that_port_and_churns() {
    let mut sim = formed_fast(2);
    sim.tamper = Some(Box::new(|f, pdu| {
        if f.link == 0 && f.from_bond == 1 {
            pdu.actor.state.remove(PortState::SYNCHRONIZATION);
        }
    }));
    let t = sim
        .run_until_cond(at(20_000), |s| !s.bonds[0].is_distributing(PortId(0)))
        .unwrap();
    assert!(t <= at(10_000) + FAST_PERIODIC_TIME + LATENCY);
    assert_eq!(sim.snap(0).ports[0].mux, MuxState::Attached);
    assert!(sim.bonds[0].is_distributing(PortId(1)));
    // 60 s without partner sync: partner churn, counted once.
    let churned = sim
        .run_until_cond(at(200_000), |s| {
            s.snap(0).ports[0].partner_churn == PartnerChurnState::PartnerChurn
        })
        .unwrap();
    assert_eq!(churned, t + CHURN_DETECTION_TIME);
    let s = sim.snap(0);
    assert_eq!(s.ports[0].partner_churn_count, 1);
    assert_eq!(s.ports[0].actor_churn, ActorChurnState::NoActorChurn);
    assert_eq!(s.ports[1].partner_churn_count, 0);
    // The tampering stops: back within a periodic interval.
    sim.run_until(at(100_000));
    sim.tamper = None;
    let t = sim.run_until_cond(at(110_000), both_distributing).unwrap();
    assert!(t <= at(100_000) + FAST_PERIODIC_TIME + 2 * LATENCY);
    assert_eq!(
        sim.snap(0).ports[0].partner_churn,
        PartnerChurnState::NoPartnerChurn
    );
}

#[test]
fn tampered_key_moves_the_port_out_of_the_aggregator() {
    let mut sim = formed_fast(2);
    sim.tamper = Some(Box::new(|f, pdu| {
        if f.link == 0 && f.from_bond == 1 {
            pdu.actor.key += 1;
        }
    }));
    sim.run_until(at(11_100));
    let s = sim.snap(0);
    assert_eq!(s.ports[0].partner.key, 16);
    assert_eq!(s.ports[0].selected, Selected::Standby);
    assert_ne!(s.ports[0].aggregator, s.ports[1].aggregator);
    assert_eq!(sim.distributing(0), [1]);
    // Our LACPDUs on link 0 are now out of sync: the partner stops too.
    assert_eq!(sim.distributing(1), [1]);
    sim.run_until(at(20_000));
    sim.tamper = None;
    let t = sim.run_until_cond(at(30_000), both_distributing).unwrap();
    assert!(t <= at(20_000) + FAST_PERIODIC_TIME + AGGREGATE_WAIT_TIME + 3 * LATENCY);
}

#[test]
fn min_links_carrier_follows() {
    let a = LacpConfig {
        min_links: 2,
        ..fast()
    };
    let mut sim = Sim::pair(a, fast(), 3);
    sim.all_links_up();
    let up = sim
        .run_until_cond(at(10_000), |s| s.bonds[0].carrier())
        .unwrap();
    assert_eq!(up, at(2_003));
    sim.run_until(at(10_000));
    sim.link_down(0);
    assert!(sim.bonds[0].carrier());
    sim.take_events(0);
    sim.run_until(at(11_000));
    sim.link_down(1);
    assert!(!sim.bonds[0].carrier());
    assert!(sim.bonds[1].carrier(), "min_links 0 on bond 1");
    let evs: Vec<_> = sim.take_events(0);
    assert!(evs.contains(&LacpEvent::CarrierChanged { up: false }));
    sim.run_until(at(20_000));
    sim.link_up(1);
    let t = sim
        .run_until_cond(at(30_000), |s| s.bonds[0].carrier())
        .unwrap();
    assert_eq!(t, at(20_000) + AGGREGATE_WAIT_TIME + 2 * LATENCY);
}

#[test]
fn actor_churn_on_a_port_that_never_gets_in_sync() {
    // Port 1 is 1G, port 0 10G: port 1 waits in STANDBY forever.
    let mut sim = Sim::pair(fast(), fast(), 2);
    sim.set_speed(1, 1_000);
    sim.all_links_up();
    let t = sim
        .run_until_cond(at(100_000), |s| {
            s.snap(0).ports[1].actor_churn == ActorChurnState::ActorChurn
        })
        .unwrap();
    assert_eq!(t, Instant::ZERO + CHURN_DETECTION_TIME);
    sim.run_until(at(200_000));
    let s = sim.snap(0);
    assert_eq!(
        (s.ports[1].actor_churn_count, s.ports[1].partner_churn_count),
        (1, 1)
    );
    assert_eq!(s.ports[1].actor_churn.proc_name(), "churned");
    assert_eq!(
        (s.ports[0].actor_churn_count, s.ports[0].partner_churn_count),
        (0, 0)
    );
    assert_eq!(s.ports[0].actor_churn.proc_name(), "none");
}

#[test]
fn marker_information_is_answered_across_the_link() {
    let mut sim = formed_fast(2);
    let info = MarkerRepr {
        kind: MarkerKind::Information,
        requester_port: 1,
        requester_system: Sim::system_of(1),
        transaction_id: 42,
    };
    let mut frame = vec![0; info.frame_len()];
    info.emit_frame(EthernetAddress([0x02, 0xa1, 0, 0, 1, 0]), &mut frame);
    sim.inject(0, 0, frame);
    sim.run_until(at(10_010));
    let responses: Vec<_> = sim
        .received
        .iter()
        .filter(|r| r.to.bond == 1 && matches!(r.pdu, SlowPdu::Marker(_)))
        .collect();
    assert_eq!(responses.len(), 1);
    assert_eq!(responses[0].at, at(10_000) + 2 * LATENCY);
    assert_eq!(responses[0].pdu, SlowPdu::Marker(info.to_response()));
    assert_eq!(sim.snap(1).ports[0].counters.marker_response_rx, 1);
    assert_eq!(sim.snap(0).ports[0].counters.marker_rx, 1);
}

#[test]
fn fallback_when_the_partner_never_speaks_and_back_to_lacp_when_it_does() {
    let a = LacpConfig {
        fallback: Some(Duration::from_secs(5)),
        ..fast()
    };
    let mut sim = Sim::pair(a, fast(), 2);
    for l in 0..2 {
        sim.set_loss_from(l, 1, true);
    }
    sim.all_links_up();
    let t = sim
        .run_until_cond(at(60_000), |s| s.bonds[0].fallback_active().is_some())
        .unwrap();
    assert_eq!(t, at(5_000));
    assert_eq!(sim.bonds[0].fallback_active(), Some(PortId(0)));
    assert!(sim.bonds[0].carrier());
    assert_eq!(sim.distributing(0), [0]);
    // The partner's LACPDUs get through from 20 s.
    sim.run_until(at(20_000));
    assert_eq!(sim.bonds[0].fallback_active(), Some(PortId(0)));
    for l in 0..2 {
        sim.set_loss_from(l, 1, false);
    }
    // The partner defaulted long ago (it never heard us in sync), so it speaks every 30 s.
    let heard = sim
        .run_until_cond(at(60_000), |s| s.bonds[0].fallback_active().is_none())
        .unwrap();
    let first_rx = [0, 1]
        .into_iter()
        .filter_map(|p| sim.lacpdus_received(0, p).first().copied())
        .min();
    assert_eq!(
        Some(heard),
        first_rx,
        "the fallback ends on the first LACPDU"
    );
    assert!(heard <= at(20_000) + SLOW_PERIODIC_TIME + LATENCY);
    let t = sim.run_until_cond(at(60_000), both_distributing).unwrap();
    assert!(t <= heard + AGGREGATE_WAIT_TIME + 2 * LATENCY);
    eprintln!("fallback at 5 s, partner heard at {heard}, LACP distributing at {t}");
}

#[test]
fn ovs_like_partner_does_not_make_us_distribute_before_we_are_in_sync() {
    // The partner claims Synchronization, Collecting and Distributing in every LACPDU, from
    // its very first one (sent before it heard us, so with an all-zero partner).
    let mut sim = Sim::pair(fast(), fast(), 2);
    sim.tamper = Some(Box::new(|f, pdu| {
        if f.from_bond == 1 {
            pdu.actor.state.insert(
                PortState::SYNCHRONIZATION | PortState::COLLECTING | PortState::DISTRIBUTING,
            );
        }
    }));
    sim.all_links_up();
    sim.run_until(Instant::ZERO + LATENCY);
    let s = sim.snap(0);
    assert_eq!(s.ports[0].partner.state.0 & 0x38, 0x30, "sync not believed");
    let first = sim
        .run_until_cond(at(10_000), |s| s.bonds[0].distributing_ports().count() > 0)
        .unwrap();
    // Only once we attached ourselves (2 s after selecting on the first LACPDU).
    assert_eq!(first, Instant::ZERO + AGGREGATE_WAIT_TIME + LATENCY);
    assert!(
        sim.snap(0)
            .ports
            .iter()
            .all(|p| p.actor.state.contains(PortState::SYNCHRONIZATION))
    );
}

#[test]
fn single_member_individual_partner_still_forms() {
    // A single-member Open vSwitch bond advertises Individual: we make an Individual
    // aggregator and distribute once attached and the partner collects. (The partner here is
    // a lagd whose LACPDUs lose the Aggregation bit on the way; ours have it put back in our
    // view of it, so that it sees itself as we echo it, as a really Individual partner would.)
    let mut sim = Sim::pair(fast(), fast(), 1);
    sim.tamper = Some(Box::new(|f, pdu| {
        if f.from_bond == 1 {
            pdu.actor.state.remove(PortState::AGGREGATION);
        } else {
            pdu.partner.state.insert(PortState::AGGREGATION);
        }
    }));
    sim.all_links_up();
    let t = sim
        .run_until_cond(at(10_000), |s| s.all_distributing(0))
        .unwrap();
    assert_eq!(t, Instant::ZERO + AGGREGATE_WAIT_TIME + 3 * LATENCY);
    assert!(sim.snap(0).active_aggregator_info().unwrap().individual);
}

#[test]
fn removed_port_says_farewell_and_the_partner_stops_at_once() {
    let mut sim = formed_fast(2);
    sim.bonds[0].remove_port(sim.now, PortId(0));
    sim.step_at(sim.now);
    let farewell = sim
        .sent
        .iter()
        .rev()
        .find(|s| s.from.bond == 0 && s.from.port == PortId(0))
        .expect("a farewell LACPDU");
    assert_eq!(farewell.at, at(10_000));
    let SlowPdu::Lacp(pdu) = &farewell.pdu else {
        panic!("not a LACPDU: {:?}", farewell.pdu)
    };
    assert_eq!(pdu.actor.state.0 & 0x3c, 0);
    let t = sim
        .run_until_cond(at(20_000), |s| !s.bonds[1].is_distributing(PortId(0)))
        .unwrap();
    assert_eq!(t, at(10_000) + LATENCY);
    let s = sim.snap(1);
    assert!(!s.ports[0].partner.state.contains(PortState::AGGREGATION));
    assert!(sim.bonds[1].is_distributing(PortId(1)));
    assert_eq!(sim.distributing(0), [1]);
}

/// `aggregate_wait` shortens WAITING: with 100 ms both ends distribute well within 1 s of
/// link-up (the standard's 2 s wait is the default).
#[test]
fn shorter_aggregate_wait_forms_within_one_second() {
    let quick = LacpConfig {
        aggregate_wait: Duration::from_millis(100),
        ..fast()
    };
    let (_, t) = formation_time(quick.clone(), quick, 2);
    assert!(t <= Instant::from_millis(1000), "{t}");
    assert!(
        t >= Instant::from_millis(100),
        "{t}: the wait still applies"
    );
    let (_, standard) = formation_time(fast(), fast(), 2);
    assert!(standard >= Instant::from_millis(2000), "{standard}");
}

/// A LACPDU from a foreign system `sys` (port `port`), sent from `src`, that knows nothing of us.
fn foreign_frame(src: EthernetAddress, sys: EthernetAddress, port: u16) -> Vec<u8> {
    let pdu = crate::wire::slow::LacpRepr {
        actor: LacpInfo {
            system_priority: 1,
            system: sys,
            key: 7,
            port_priority: 1,
            port,
            state: PortState::ACTIVITY | PortState::AGGREGATION | PortState::SYNCHRONIZATION,
        },
        ..Default::default()
    };
    let mut f = vec![0; pdu.frame_len()];
    pdu.emit_frame(src, &mut f);
    f
}

fn partner_changes(events: &[LacpEvent], port: PortId) -> Vec<EthernetAddress> {
    events
        .iter()
        .filter_map(|e| match *e {
            LacpEvent::PartnerChanged {
                port: p, system, ..
            } if p == port => Some(system),
            _ => None,
        })
        .collect()
}

#[test]
fn a_foreign_partner_taking_a_port_over_and_leaving_is_reported_both_ways() {
    let mut sim = formed_fast(2);
    sim.take_events(0);
    let foreign = EthernetAddress([0x02, 0xee, 0, 0, 0, 1]);
    // The foreign system speaks on link 0 for 3 s (a LACPDU every 300 ms, naming the port it
    // hears as its partner) while the real partner is cut off in that direction.
    sim.set_loss_from(0, 1, true);
    let us = sim.snap(0).ports[0].actor;
    let mut frame = foreign_frame(EthernetAddress([2, 0xee, 0, 0, 1, 1]), foreign, 3);
    let mut pdu = match SlowPdu::parse_frame(&frame) {
        Ok(SlowPdu::Lacp(pdu)) => pdu,
        other => panic!("{other:?}"),
    };
    pdu.partner = us;
    pdu.emit_frame(EthernetAddress([2, 0xee, 0, 0, 1, 1]), &mut frame);
    for k in 0..10u64 {
        sim.inject(0, 0, frame.clone());
        sim.run_until(at(10_000 + 300 * (k + 1)));
    }
    assert_eq!(sim.snap(0).ports[0].partner.system, foreign);
    sim.set_loss_from(0, 1, false);
    sim.run_until(at(16_000));
    let b = Sim::system_of(1);
    assert_eq!(sim.snap(0).ports[0].partner.system, b);
    let changes = partner_changes(&sim.take_events(0), PortId(0));
    assert_eq!(changes, [foreign, b], "one event per change, in order");
}

#[test]
fn a_random_partner_flood_on_one_member_is_bounded_and_stops_no_member() {
    let mut sim = formed_fast(2);
    let before = sim.snap(0).ports[0].counters;
    // 1000 LACPDUs a second for 10 s, each naming a new random partner, from one address.
    let src = EthernetAddress([2, 0xee, 0, 0, 1, 1]);
    let mut seed = 0x2545_f491_u32;
    for ms in 1..=10_000u64 {
        seed ^= seed << 13;
        seed ^= seed >> 17;
        seed ^= seed << 5;
        let [a, b, c, d] = seed.to_be_bytes();
        let sys = EthernetAddress([2, a, b, c, d, 1]);
        sim.inject(0, 0, foreign_frame(src, sys, (seed & 0xff) as u16));
        sim.run_until(at(10_000 + ms));
        // Neither member stops: the flood never takes the port from its confirmed partner.
        assert!(
            both_distributing(&sim),
            "a member stopped at {ms} ms into the flood"
        );
    }
    let c = sim.snap(0).ports[0].counters;
    let flood = 10_000;
    let parsed = c.lacpdu_rx - before.lacpdu_rx;
    let refused = c.rate_limited_rx - before.rate_limited_rx;
    // The real partner's ~10 LACPDUs a second all pass; of the flood, at most OTHER_RATE a
    // second (and the first burst).
    let partner_max = 35;
    assert!(
        parsed <= 11 * u64::from(crate::lacp::limit::OTHER_RATE) + partner_max,
        "{parsed} parsed"
    );
    assert!(refused >= flood - 11 * u64::from(crate::lacp::limit::OTHER_RATE));
    // Every parsed flood LACPDU was held off (none repeats its system and port).
    let held = c.foreign_rx - before.foreign_rx;
    assert!(
        held + partner_max >= parsed,
        "{held} held of {parsed} parsed"
    );
    // After the flood the member is back with its partner.
    let t = sim
        .run_until_cond(at(40_000), both_distributing)
        .expect("back to distributing after the flood");
    assert!(t <= at(20_000) + AGGREGATE_WAIT_TIME * 2, "{t}");
}

/// Every LACPDU of every port in `sim`, in order: (time, bond, port, PDU).
fn lacpdus(sim: &Sim) -> Vec<(Instant, usize, PortId, crate::wire::slow::LacpRepr)> {
    sim.sent
        .iter()
        .filter_map(|s| match &s.pdu {
            SlowPdu::Lacp(p) => Some((s.at, s.from.bond, s.from.port, p.clone())),
            _ => None,
        })
        .collect()
}

/// No port repeats its last LACPDU within CROSSING_TIME: a LACPDU carries news, or is a
/// periodic one (or an answer to a partner that lacks our information) well after the last.
fn assert_no_repeats(sim: &Sim, what: &str) {
    let all = lacpdus(sim);
    for (i, (t, b, p, pdu)) in all.iter().enumerate() {
        let prev = all[..i]
            .iter()
            .rev()
            .find(|(_, pb, pp, _)| pb == b && pp == p);
        if let Some((t0, _, _, last)) = prev {
            assert!(
                last != pdu || *t - *t0 >= crate::lacp::tx::CROSSING_TIME,
                "{what}: bond {b} port {p} repeated its LACPDU {} ms after the last, at {t}",
                (*t - *t0).as_millis()
            );
        }
    }
}

#[test]
fn every_lacpdu_carries_news_or_is_due() {
    let quick = LacpConfig {
        aggregate_wait: Duration::from_millis(100),
        ..fast()
    };
    for (what, a, b) in [
        ("fast", fast(), fast()),
        ("fast, 100 ms wait", quick.clone(), quick.clone()),
        ("slow", slow(), slow()),
        ("fast against slow", fast(), slow()),
    ] {
        for latency_us in [1_000u64, 100, 0] {
            let mut sim = Sim::pair(a.clone(), b.clone(), 3);
            for l in &mut sim.links {
                l.latency = Duration::from_micros(latency_us);
            }
            sim.all_links_up();
            sim.run_until_cond(at(120_000), both_distributing)
                .unwrap_or_else(|| panic!("{what}: forms"));
            // A member flaps, the partner's LACPDUs are lost for a while, all comes back.
            let t = sim.now;
            sim.link_down(1);
            sim.run_until(t + Duration::from_millis(500));
            sim.link_up(1);
            sim.set_loss_from(2, 1, true);
            sim.run_until(t + Duration::from_secs(5));
            sim.set_loss_from(2, 1, false);
            sim.run_until(t + Duration::from_secs(70));
            assert!(both_distributing(&sim), "{what}: back together");
            assert_no_repeats(&sim, &format!("{what}, latency {latency_us} µs"));
        }
    }
}

#[test]
fn the_lacpdu_announcing_distributing_is_not_held_back() {
    let quick = LacpConfig {
        aggregate_wait: Duration::from_millis(100),
        ..fast()
    };
    for port in [PortId(0), PortId(1)] {
        let mut sim = Sim::pair(quick.clone(), quick.clone(), 2);
        sim.all_links_up();
        // The Mux machine's COLLECTING_DISTRIBUTING (the dataplane sends once the partner
        // answers that it collects).
        let started = sim
            .run_until_cond(at(10_000), |s| {
                s.snap(0).ports[usize::from(port.0)]
                    .actor
                    .state
                    .contains(PortState::DISTRIBUTING)
            })
            .expect("distributing");
        // Whatever else happens at that instant (the frames it sends).
        sim.run_until(started + Duration::from_micros(1));
        let told = lacpdus(&sim)
            .into_iter()
            .find(|(_, b, p, pdu)| {
                *b == 0 && *p == port && pdu.actor.state.contains(PortState::DISTRIBUTING)
            })
            .map(|(t, ..)| t);
        assert_eq!(
            told,
            Some(started),
            "port {port}: distributing at {started}, told at {told:?}"
        );
    }
}

/// Runs a flap storm from `sim.now` for `secs`: each link of `flapping` goes down for `down`
/// once a second, the links in turn (evenly offset within the second). Samples every 10 ms
/// whether each port of bond 0 distributes at both ends; returns per port the fraction of
/// samples it did, and the fraction of samples where at least one port did.
fn flap_storm(sim: &mut Sim, flapping: &[usize], down: Duration, secs: u64) -> (Vec<f64>, f64) {
    let start = sim.now;
    let links = sim.links.len();
    let mut up_samples = vec![0u32; links];
    let mut any = 0u32;
    let samples = secs * 100;
    for k in 0..samples {
        let t = start + Duration::from_millis(10 * k);
        let within = (10 * k) % 1000;
        for (j, &l) in flapping.iter().enumerate() {
            let offset = 1000 * j as u64 / flapping.len() as u64;
            let should_be_down =
                within >= offset && within < offset + u64::try_from(down.as_millis()).unwrap();
            if should_be_down == sim.links[l].up {
                sim.run_until(t);
                if should_be_down {
                    sim.link_down(l);
                } else {
                    sim.link_up(l);
                }
            }
        }
        sim.run_until(t);
        let mut one = false;
        for (p, n) in up_samples.iter_mut().enumerate() {
            let port = PortId(u16::try_from(p).unwrap());
            if sim.bonds[0].is_distributing(port) && sim.bonds[1].is_distributing(port) {
                *n += 1;
                one = true;
            }
        }
        any += u32::from(one);
    }
    let frac = |n: u32| f64::from(n) / samples as f64;
    (up_samples.into_iter().map(frac).collect(), frac(any))
}

#[test]
fn a_flap_storm_on_some_members_never_stops_the_stable_one() {
    let mut sim = formed_fast(3);
    let (per_port, any) = flap_storm(&mut sim, &[1, 2], Duration::from_millis(200), 20);
    assert_eq!(per_port[0], 1.0, "the stable member stopped: {per_port:?}");
    assert_eq!(any, 1.0);
}

#[test]
fn members_flapping_in_turn_carry_traffic_with_rejoin_hold() {
    let down = Duration::from_millis(100);
    // Without dampening (the default, as the kernel): each member that returns waits the
    // aggregate wait and loses its link again first. Hardly anything is carried.
    let mut sim = formed_fast(2);
    let (_, any) = flap_storm(&mut sim, &[0, 1], down, 20);
    assert!(any < 0.2, "without rejoin_hold: carried {any}");
    // With it, a member back to the partner it had attaches at once.
    let damped = LacpConfig {
        rejoin_hold: Duration::from_secs(2),
        ..fast()
    };
    let (mut sim, _) = formation_time(damped.clone(), damped, 2);
    sim.run_until(at(10_000));
    let (per_port, any) = flap_storm(&mut sim, &[0, 1], down, 20);
    assert!(
        any >= 0.98,
        "with rejoin_hold: carried {any} ({per_port:?})"
    );
    for f in &per_port {
        assert!(*f >= 0.8, "{per_port:?}");
    }
    // After the storm, a member down longer than the hold waits the aggregate wait again.
    let t = sim.now;
    sim.link_down(0);
    sim.run_until(t + Duration::from_secs(3));
    sim.link_up(0);
    let back = sim
        .run_until_cond(t + Duration::from_secs(20), both_distributing)
        .expect("back");
    assert!(
        back >= t + Duration::from_secs(3) + AGGREGATE_WAIT_TIME,
        "{back}: no wait after a long absence"
    );
}

/// One end's daemon restarts (same system, keys and port numbers, every LACP state lost).
/// Resumed with the partners its ports were in sync with, it distributes at once, and the
/// other end, which never saw it leave, never stops distributing; resumed with another partner
/// (the partner's answer corrects it), or not at all, it waits the aggregate wait.
#[test]
fn a_restart_resumed_with_the_same_partner_takes_up_where_it_left() {
    for case in ["none", "same", "other"] {
        let mut sim = formed_fast(2);
        let partners: Vec<LacpInfo> = (0..2)
            .map(|p| sim.bonds[0].synced_partner(PortId(p)).expect("in sync"))
            .collect();
        assert_eq!(partners[1].port, sim.snap(1).ports[1].actor.port);
        let records: Vec<(PortId, LacpInfo)> = match case {
            "none" => Vec::new(),
            "same" => (0..2).map(|p| (PortId(p), partners[p as usize])).collect(),
            _ => (0..2)
                .map(|p| {
                    let mut info = partners[p as usize];
                    info.key ^= 1;
                    (PortId(p), info)
                })
                .collect(),
        };
        let t0 = sim.now;
        sim.reboot_resumed(0, fast(), Sim::system_of(0), &records);
        if case == "same" {
            assert!(sim.all_distributing(0), "distributing before it sends");
            // Bond 1 distributes on both ports all along; bond 0 keeps distributing.
            for ms in 1..=5_000 {
                sim.run_until(t0 + Duration::from_millis(ms));
                assert!(both_distributing(&sim), "{ms} ms after the restart");
            }
            // The partner's LACPDUs confirmed the record; nothing expired.
            let s = sim.snap(0);
            assert!(s.ports.iter().all(|p| p.rx == RxState::Current));
            continue;
        }
        if case == "other" {
            // A stale record: the partner's first answer corrects it within a round trip.
            sim.run_until_cond(t0 + 10 * LATENCY, |s| !both_distributing(s))
                .expect("the partner's answer corrects the record");
        }
        assert!(!both_distributing(&sim));
        let t = sim
            .run_until_cond(at(20_000), both_distributing)
            .expect("formed again");
        assert!(t >= t0 + AGGREGATE_WAIT_TIME, "{case}: formed at {t}");
    }
}
