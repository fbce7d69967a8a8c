//! Bond decisions in virtual time.

use super::*;
use crate::hash::{member_index, xmit_hash};
use crate::wire::arp::{ArpPacket, ArpRepr};
use crate::wire::ip::Ipv4Address;

const BOND_MAC: EthernetAddress = EthernetAddress([2, 0xb0, 0, 0, 0, 1]);

fn info(name: &str, last: u8, speed: u32) -> PortInfo {
    PortInfo {
        name: name.to_owned(),
        perm_mac: EthernetAddress([2, 0, 0, 0, 0, last]),
        speed_mbps: Some(speed),
        full_duplex: Some(true),
    }
}

fn bond(opts: &str, ports: usize) -> Bond {
    let (o, _) = BondOptions::parse_opts(opts).unwrap();
    let mut b = Bond::new(o, BOND_MAC);
    for i in 0..ports {
        b.add_port(
            Instant::ZERO,
            info(&format!("eth{i}"), i as u8 + 1, 10_000),
            true,
        );
    }
    while b.poll_event().is_some() {}
    b
}

fn at(ms: u64) -> Instant {
    Instant::from_millis(ms)
}

fn tcp(sport: u16) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 9, 2, 0, 0, 0, 0, 8, 8, 0];
    f.extend_from_slice(&[
        0x45, 0, 0, 40, 0, 0, 0x40, 0, 64, 6, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
    ]);
    f.extend_from_slice(&sport.to_be_bytes());
    f.extend_from_slice(&[0, 80]);
    f.resize(54, 0);
    f
}

#[test]
fn balance_xor_follows_the_hash_over_usable_members() {
    let mut b = bond("mode=balance-xor xmit_hash_policy=layer3+4 miimon=100", 3);
    for sport in 1000..1100 {
        let f = tcp(sport);
        let want = member_index(xmit_hash(HashPolicy::Layer34, &f), 3).unwrap();
        assert_eq!(b.tx_choice(&f), TxChoice::Port(PortId(want as u16)));
    }
    // eth1 fails: the hash now picks among [eth0, eth2], in enslave order.
    b.handle_carrier(at(5), PortId(1), false);
    for sport in 1000..1100 {
        let f = tcp(sport);
        let i = member_index(xmit_hash(HashPolicy::Layer34, &f), 2).unwrap();
        assert_eq!(b.tx_choice(&f), TxChoice::Port([PortId(0), PortId(2)][i]));
    }
    // All receive paths deliver.
    assert_eq!(b.rx_verdict(PortId(2), &tcp(1)), RxVerdict::Deliver);
}

#[test]
fn round_robin_spreads_evenly_and_skips_failed_members() {
    let mut b = bond("mode=balance-rr miimon=100", 3);
    let mut counts = [0; 3];
    for _ in 0..300 {
        let TxChoice::Port(p) = b.tx_choice(&tcp(1)) else {
            panic!()
        };
        counts[p.index()] += 1;
    }
    assert_eq!(counts, [100, 100, 100]);
    b.handle_carrier(at(1), PortId(1), false);
    let mut counts = [0; 3];
    for _ in 0..300 {
        let TxChoice::Port(p) = b.tx_choice(&tcp(1)) else {
            panic!()
        };
        counts[p.index()] += 1;
    }
    // The failed member's turn falls to the next usable one, as in the driver.
    assert_eq!(counts, [100, 0, 200]);
}

#[test]
fn round_robin_packets_per_slave_and_igmp() {
    let mut b = bond("mode=balance-rr packets_per_slave=3", 2);
    let seq: Vec<_> = (0..12)
        .map(|_| match b.tx_choice(&tcp(1)) {
            TxChoice::Port(p) => p.0,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(seq, [0, 0, 0, 1, 1, 1, 0, 0, 0, 1, 1, 1]);
    let mut igmp = tcp(1);
    igmp[23] = 2;
    for _ in 0..5 {
        assert_eq!(b.tx_choice(&igmp), TxChoice::Port(PortId(0)));
    }
    let mut random = bond("mode=balance-rr packets_per_slave=0", 2);
    let mut counts = [0; 2];
    for _ in 0..1000 {
        let TxChoice::Port(p) = random.tx_choice(&tcp(1)) else {
            panic!()
        };
        counts[p.index()] += 1;
    }
    assert!(counts[0] > 400 && counts[1] > 400, "{counts:?}");
}

#[test]
fn broadcast_uses_all_and_drops_when_none() {
    let mut b = bond("mode=broadcast miimon=100", 2);
    assert_eq!(b.tx_choice(&tcp(1)), TxChoice::All);
    b.handle_carrier(at(1), PortId(0), false);
    b.handle_carrier(at(1), PortId(1), false);
    assert_eq!(b.tx_choice(&tcp(1)), TxChoice::Drop);
    assert!(!b.carrier());
}

#[test]
fn active_backup_failover_and_inactive_receive() {
    let mut b = bond("mode=active-backup miimon=100", 2);
    assert_eq!(b.active(), Some(PortId(0)));
    assert_eq!(b.tx_choice(&tcp(1)), TxChoice::Port(PortId(0)));
    assert_eq!(b.rx_verdict(PortId(0), &tcp(1)), RxVerdict::Deliver);
    assert_eq!(
        b.rx_verdict(PortId(1), &tcp(1)),
        RxVerdict::Drop(DropReason::InactiveMember)
    );
    b.handle_carrier(at(10), PortId(0), false);
    assert_eq!(b.active(), Some(PortId(1)));
    assert_eq!(
        b.poll_event(),
        Some(BondEvent::Link {
            port: PortId(0),
            status: MiiStatus::Down
        })
    );
    assert_eq!(
        b.poll_event(),
        Some(BondEvent::ActiveChanged {
            from: Some(PortId(0)),
            to: Some(PortId(1))
        })
    );
    // Without a primary the new active member stays when the old one returns.
    b.handle_carrier(at(20), PortId(0), true);
    assert_eq!(b.active(), Some(PortId(1)));
    let snap = b.snapshot();
    assert_eq!(snap.ports[0].link_failures, 1);
    assert_eq!(snap.active.as_deref(), Some("eth1"));
    let all = bond("mode=active-backup all_slaves_active=1", 2);
    assert_eq!(all.rx_verdict(PortId(1), &tcp(1)), RxVerdict::Deliver);
}

#[test]
fn primary_reselect_policies() {
    let mut always = bond("mode=active-backup miimon=100 primary=eth1", 2);
    assert_eq!(always.active(), Some(PortId(1)));
    always.handle_carrier(at(1), PortId(1), false);
    assert_eq!(always.active(), Some(PortId(0)));
    always.handle_carrier(at(2), PortId(1), true);
    assert_eq!(always.active(), Some(PortId(1)));

    let mut failure = bond(
        "mode=active-backup miimon=100 primary=eth1 primary_reselect=failure",
        2,
    );
    failure.handle_carrier(at(1), PortId(1), false);
    failure.handle_carrier(at(2), PortId(1), true);
    assert_eq!(
        failure.active(),
        Some(PortId(0)),
        "stays until the active fails"
    );
    failure.handle_carrier(at(3), PortId(0), false);
    assert_eq!(failure.active(), Some(PortId(1)));

    // better: the primary returns only if faster than the current active member.
    let (o, _) =
        BondOptions::parse_opts("mode=active-backup primary=fast primary_reselect=better").unwrap();
    let mut b = Bond::new(o.clone(), BOND_MAC);
    b.add_port(at(0), info("slow", 1, 1_000), true);
    b.add_port(at(0), info("fast", 2, 10_000), true);
    b.handle_carrier(at(1), PortId(1), false);
    b.handle_carrier(at(2), PortId(1), true);
    assert_eq!(b.active(), Some(PortId(1)));
    let mut b = Bond::new(o, BOND_MAC);
    b.add_port(at(0), info("other", 1, 25_000), true);
    b.add_port(at(0), info("fast", 2, 10_000), true);
    b.handle_carrier(at(1), PortId(1), false);
    b.handle_carrier(at(2), PortId(1), true);
    assert_eq!(
        b.active(),
        Some(PortId(0)),
        "primary is slower: keep the faster member"
    );
}

#[test]
fn downdelay_and_updelay() {
    let mut b = bond("mode=balance-xor miimon=100 downdelay=200 updelay=500", 2);
    b.handle_carrier(at(1000), PortId(0), false);
    assert_eq!(b.snapshot().ports[0].mii, MiiStatus::GoingDown);
    assert_eq!(
        b.usable(),
        &[PortId(0), PortId(1)],
        "still used while going down"
    );
    assert_eq!(b.poll_timeout(), Some(at(1200)));
    b.handle_timeout(at(1199));
    assert_eq!(b.snapshot().ports[0].mii, MiiStatus::GoingDown);
    b.handle_timeout(at(1200));
    assert_eq!(b.snapshot().ports[0].mii, MiiStatus::Down);
    assert_eq!(b.usable(), &[PortId(1)]);
    assert_eq!(b.snapshot().ports[0].link_failures, 1);
    // Back: going back for updelay, not used meanwhile.
    b.handle_carrier(at(2000), PortId(0), true);
    assert_eq!(b.snapshot().ports[0].mii, MiiStatus::GoingBack);
    assert_eq!(b.usable(), &[PortId(1)]);
    assert_eq!(b.poll_timeout(), Some(at(2500)));
    b.handle_timeout(at(2500));
    assert_eq!(b.usable(), &[PortId(0), PortId(1)]);
    // A flap shorter than downdelay costs nothing.
    b.handle_carrier(at(3000), PortId(1), false);
    b.handle_carrier(at(3100), PortId(1), true);
    b.handle_timeout(at(3300));
    assert_eq!(b.snapshot().ports[1].mii, MiiStatus::Up);
    assert_eq!(b.snapshot().ports[1].link_failures, 0);
}

#[test]
fn updelay_ignored_when_nothing_is_up() {
    // As the driver's mode-1/mode-2 recovery-updelay selftests expect.
    for mode in ["active-backup", "balance-xor"] {
        let mut b = bond(&format!("mode={mode} miimon=100 updelay=10000"), 2);
        b.handle_carrier(at(0), PortId(0), false);
        b.handle_carrier(at(0), PortId(1), false);
        assert!(!b.carrier());
        b.handle_carrier(at(100), PortId(1), true);
        assert!(b.carrier(), "{mode}");
        assert_eq!(b.usable(), &[PortId(1)]);
        // A second member returning now must wait its updelay.
        b.handle_carrier(at(200), PortId(0), true);
        assert_eq!(b.snapshot().ports[0].mii, MiiStatus::GoingBack);
    }
}

#[test]
fn slow_protocols_and_runts_never_reach_the_host() {
    let b = bond("mode=balance-xor", 2);
    let mut lacpdu = vec![
        0x01, 0x80, 0xc2, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x88, 0x09, 1, 1,
    ];
    lacpdu.resize(124, 0);
    assert_eq!(
        b.rx_verdict(PortId(0), &lacpdu),
        RxVerdict::Drop(DropReason::SlowProtocols)
    );
    assert_eq!(
        b.rx_verdict(PortId(0), &[0; 13]),
        RxVerdict::Drop(DropReason::Runt)
    );
}

#[test]
fn removed_member_goes_down_and_counts() {
    let mut b = bond("mode=active-backup miimon=100", 2);
    b.remove_port(at(5), PortId(0));
    assert_eq!(b.active(), Some(PortId(1)));
    assert_eq!(b.snapshot().ports[0].mii, MiiStatus::Down);
    assert_eq!(b.snapshot().ports[0].link_failures, 1);
}

#[test]
fn member_without_carrier_at_start() {
    let (o, _) = BondOptions::parse_opts("mode=balance-xor miimon=100").unwrap();
    let mut b = Bond::new(o, BOND_MAC);
    b.add_port(at(0), info("eth0", 1, 10_000), false);
    assert!(!b.carrier());
    assert_eq!(b.tx_choice(&tcp(1)), TxChoice::Drop);
    b.add_port(at(0), info("eth1", 2, 10_000), true);
    assert_eq!(b.tx_choice(&tcp(1)), TxChoice::Port(PortId(1)));
    b.handle_carrier(at(50), PortId(0), true);
    assert_eq!(b.usable(), &[PortId(0), PortId(1)]);
}

#[test]
fn snapshot_shows_policy_only_for_hash_modes() {
    let b = bond("mode=balance-xor xmit_hash_policy=layer2+3", 2);
    assert_eq!(b.snapshot().xmit_hash_policy, Some(HashPolicy::Layer23));
    assert_eq!(b.snapshot().active, None);
    let b = bond("mode=active-backup", 2);
    assert_eq!(b.snapshot().xmit_hash_policy, None);
    assert_eq!(b.snapshot().active.as_deref(), Some("eth0"));
}

mod props {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Whatever carrier sequence happens, the choice is always a usable member (or Drop
        /// exactly when none is usable), and the same flow keeps its member between changes.
        #[test]
        fn choices_are_always_usable(events in proptest::collection::vec((0u16..3, any::<bool>(), 0u64..400), 0..60),
                                     mode in prop::sample::select(vec!["balance-xor", "active-backup", "balance-rr", "broadcast"])) {
            let mut b = bond(&format!("mode={mode} miimon=100 updelay=200 downdelay=100"), 3);
            let mut now = 0;
            for (port, carrier, dt) in events {
                now += dt;
                b.handle_carrier(at(now), PortId(port), carrier);
                b.handle_timeout(at(now));
                let f = tcp(now as u16);
                match b.tx_choice(&f) {
                    TxChoice::Port(p) => prop_assert!(b.snapshot().ports[p.index()].mii.usable()),
                    TxChoice::All => prop_assert!(!b.usable().is_empty()),
                    TxChoice::Drop => prop_assert!(b.usable().is_empty()),
                }
                if mode == "balance-xor" {
                    prop_assert_eq!(b.tx_choice(&f), b.tx_choice(&f));
                }
            }
        }
    }
}

/// The host's ARP request for a neighbour, from the bond's MAC and address 10.0.0.1.
fn host_arp() -> Vec<u8> {
    let mut f = vec![0xff; 6];
    f.extend_from_slice(&BOND_MAC.0);
    f.extend_from_slice(&[0x08, 0x06, 0, 1, 8, 0, 6, 4, 0, 1]);
    f.extend_from_slice(&BOND_MAC.0);
    f.extend_from_slice(&[10, 0, 0, 1, 0, 0, 0, 0, 0, 0, 10, 0, 0, 2]);
    f
}

#[test]
fn failover_sends_gratuitous_arps_on_the_new_active_member() {
    let mut b = bond(
        "mode=active-backup miimon=100 num_grat_arp=3 peer_notif_delay=200",
        2,
    );
    let mut buf = [0u8; 64];
    // Nothing learned yet, nothing pending.
    assert_eq!(b.poll_transmit(at(0), &mut buf), None);
    b.learn_from_host(&tcp(1));
    assert_eq!(
        b.host_ipv4(),
        None,
        "only ARP from the bond's MAC teaches the address"
    );
    b.learn_from_host(&host_arp());
    assert_eq!(b.host_ipv4(), Some(Ipv4Address([10, 0, 0, 1])));
    b.handle_carrier(at(1000), PortId(0), false);
    let mut sent = Vec::new();
    let mut t = 1000;
    while t <= 2000 {
        while let Some(tx) = b.poll_transmit(at(t), &mut buf) {
            assert_eq!(tx.port, PortId(1));
            let arp = ArpRepr::parse(&ArpPacket::new_checked(&buf[14..tx.len]).unwrap()).unwrap();
            assert!(arp.is_gratuitous());
            assert_eq!(buf[..6], [0xff; 6]);
            assert_eq!(buf[6..12], BOND_MAC.0);
            sent.push(t);
        }
        t += 50;
    }
    assert_eq!(
        sent,
        [1000, 1200, 1400],
        "three announcements, peer_notif_delay apart"
    );
    assert_eq!(b.poll_timeout(), None);
}

#[test]
fn no_announcement_without_address_or_in_other_modes() {
    let mut b = bond("mode=active-backup miimon=100", 2);
    b.handle_carrier(at(10), PortId(0), false);
    assert_eq!(b.poll_transmit(at(10), &mut [0u8; 64]), None);
    let mut x = bond("mode=balance-xor miimon=100", 2);
    x.learn_from_host(&host_arp());
    x.handle_carrier(at(10), PortId(0), false);
    assert_eq!(x.poll_transmit(at(10), &mut [0u8; 64]), None);
    // num_grat_arp=0 turns announcements off.
    let mut z = bond("mode=active-backup miimon=100 num_grat_arp=0", 2);
    z.learn_from_host(&host_arp());
    z.handle_carrier(at(10), PortId(0), false);
    assert_eq!(z.poll_transmit(at(10), &mut [0u8; 64]), None);
}

/// An ARP reply from `ip` (a target) to the bond.
fn arp_reply_from(ip: [u8; 4]) -> Vec<u8> {
    let mut f = BOND_MAC.0.to_vec();
    f.extend_from_slice(&[2, 0, 0, 0, 0, 0x77, 0x08, 0x06, 0, 1, 8, 0, 6, 4, 0, 2]);
    f.extend_from_slice(&[2, 0, 0, 0, 0, 0x77]);
    f.extend_from_slice(&ip);
    f.extend_from_slice(&BOND_MAC.0);
    f.extend_from_slice(&[10, 0, 0, 1]);
    f
}

fn probes(b: &mut Bond, now: Instant) -> Vec<(PortId, [u8; 4])> {
    let mut buf = [0u8; 64];
    let mut out = Vec::new();
    while let Some(tx) = b.poll_transmit(now, &mut buf) {
        let arp = ArpRepr::parse(&ArpPacket::new_checked(&buf[14..tx.len]).unwrap()).unwrap();
        let ArpRepr::EthernetIpv4 {
            target_protocol_addr,
            source_hardware_addr,
            ..
        } = arp;
        assert_eq!(source_hardware_addr, BOND_MAC);
        out.push((tx.port, target_protocol_addr.0));
    }
    out.sort();
    out
}

#[test]
fn arp_monitor_probes_and_takes_out_a_silent_member() {
    let mut b = bond(
        "mode=balance-xor arp_interval=100 arp_ip_target=10.0.0.9 arp_missed_max=2",
        2,
    );
    assert!(b.arp_monitoring());
    b.learn_from_host(&host_arp());
    // Every interval each member probes the target.
    for t in (0..=1000).step_by(100) {
        b.handle_timeout(at(t));
        assert_eq!(
            probes(&mut b, at(t)),
            [(PortId(0), [10, 0, 0, 9]), (PortId(1), [10, 0, 0, 9])]
        );
        // Only member 0 hears anything (member 1's traffic is dropped on the wire).
        b.note_rx(at(t), PortId(0), &tcp(1));
    }
    let s = b.snapshot();
    assert_eq!(s.ports[0].mii, MiiStatus::Up);
    assert_eq!(
        s.ports[1].mii,
        MiiStatus::Down,
        "silent for more than 2 intervals"
    );
    assert_eq!(s.ports[1].link_failures, 1);
    assert_eq!(b.usable(), &[PortId(0)]);
    // It keeps probing on the silent member; hearing from it brings it back.
    b.note_rx(at(1050), PortId(1), &tcp(1));
    b.handle_timeout(at(1100));
    assert_eq!(b.usable(), &[PortId(0), PortId(1)]);
}

#[test]
fn arp_validate_counts_only_arp_from_targets() {
    let mut b = bond(
        "mode=active-backup arp_interval=100 arp_ip_target=10.0.0.9,10.0.0.10 arp_validate=all",
        2,
    );
    for t in (0..=600).step_by(100) {
        b.handle_timeout(at(t));
        // The active member probes both targets; backups do not probe.
        let p = probes(&mut b, at(t));
        if b.active() == Some(PortId(0)) {
            assert_eq!(p, [(PortId(0), [10, 0, 0, 9]), (PortId(0), [10, 0, 0, 10])]);
        }
        b.note_rx(at(t), PortId(0), &tcp(1)); // not ARP: does not count
        b.note_rx(at(t), PortId(1), &arp_reply_from([10, 0, 0, 10]));
    }
    // Member 0 heard no ARP from a target: taken out; member 1 heard target 2 (any target
    // suffices with arp_all_targets=any).
    assert_eq!(b.active(), Some(PortId(1)));
    assert_eq!(b.snapshot().ports[0].mii, MiiStatus::Down);

    let mut all = bond(
        "mode=balance-xor arp_interval=100 arp_ip_target=10.0.0.9,10.0.0.10 arp_validate=all arp_all_targets=all",
        1,
    );
    for t in (0..=600).step_by(100) {
        all.handle_timeout(at(t));
        all.note_rx(at(t), PortId(0), &arp_reply_from([10, 0, 0, 10]));
    }
    assert!(
        !all.carrier(),
        "with arp_all_targets=all one silent target takes the member out"
    );
}

#[test]
fn arp_monitor_off_without_targets_or_interval() {
    assert!(!bond("mode=balance-xor miimon=100", 2).arp_monitoring());
    assert!(!bond("mode=balance-xor arp_interval=100", 2).arp_monitoring());
}

/// Two 802.3ad bonds wired together in memory, port i to port i; `lossy[i]` drops link i.
fn exchange(a: &mut Bond, b: &mut Bond, now: Instant, lossy: &[bool]) {
    fn deliver(from: &mut Bond, to: &mut Bond, now: Instant, lossy: &[bool]) -> bool {
        let mut buf = [0u8; 128];
        let mut moved = false;
        while let Some(tx) = from.poll_transmit(now, &mut buf) {
            moved = true;
            if !lossy[tx.port.index()] {
                to.handle_frame(now, tx.port, &buf[..tx.len]);
            }
        }
        moved
    }
    for _ in 0..16 {
        let ab = deliver(a, b, now, lossy);
        let ba = deliver(b, a, now, lossy);
        if !ab && !ba {
            break;
        }
    }
}

fn run_pair(a: &mut Bond, b: &mut Bond, from_ms: u64, to_ms: u64, lossy: &[bool]) {
    for t in (from_ms..=to_ms).step_by(10) {
        a.handle_timeout(at(t));
        b.handle_timeout(at(t));
        exchange(a, b, at(t), lossy);
    }
}

#[test]
fn ieee8023ad_distributes_over_lacp_members_only() {
    let mut a = bond("mode=802.3ad lacp_rate=fast xmit_hash_policy=layer3+4", 2);
    let (o, _) = BondOptions::parse_opts("mode=802.3ad lacp_rate=fast").unwrap();
    let mut b = Bond::new(o, EthernetAddress([2, 0xb1, 0, 0, 0, 1]));
    for i in 0..2u8 {
        b.add_port(at(0), info(&format!("p{i}"), 0x20 + i, 10_000), true);
    }
    // Before LACP agrees nothing is sent and nothing is collected.
    assert_eq!(a.tx_choice(&tcp(1)), TxChoice::Drop);
    assert!(!a.carrier());
    assert_eq!(
        a.rx_verdict(PortId(0), &tcp(1)),
        RxVerdict::Drop(DropReason::NotCollecting)
    );
    run_pair(&mut a, &mut b, 0, 3000, &[false, false]);
    assert!(a.carrier() && b.carrier());
    assert_eq!(a.usable(), &[PortId(0), PortId(1)]);
    for sport in 1000..1050 {
        let f = tcp(sport);
        let want = member_index(xmit_hash(HashPolicy::Layer34, &f), 2).unwrap();
        assert_eq!(a.tx_choice(&f), TxChoice::Port(PortId(want as u16)));
    }
    assert_eq!(a.rx_verdict(PortId(1), &tcp(1)), RxVerdict::Deliver);
    let snap = a.snapshot().lacp.unwrap();
    assert_eq!(snap.active_aggregator_info().unwrap().enabled_ports, 2);
    // LACPDUs lost on link 1 (fast rate): that member leaves after 3 s, the other stays.
    run_pair(&mut a, &mut b, 3010, 7000, &[false, true]);
    assert_eq!(a.usable(), &[PortId(0)]);
    assert_eq!(
        a.rx_verdict(PortId(1), &tcp(1)),
        RxVerdict::Drop(DropReason::NotCollecting)
    );
    assert!(a.carrier());
    // Carrier loss takes a member out at once.
    a.handle_carrier(at(7010), PortId(0), false);
    assert!(a.usable().is_empty());
    assert!(!a.carrier());
    assert_eq!(a.tx_choice(&tcp(1)), TxChoice::Drop);
}

#[test]
fn actor_port_prio_reaches_the_lacpdus() {
    let mut b = bond("mode=802.3ad lacp_rate=fast actor_port_prio=eth1:7", 2);
    let snap = b.snapshot().lacp.unwrap();
    assert_eq!(snap.ports[0].actor.port_priority, 255);
    assert_eq!(snap.ports[1].actor.port_priority, 7);
    // And on the wire.
    b.handle_timeout(at(0));
    let mut buf = [0u8; 128];
    let mut seen = false;
    while let Some(tx) = b.poll_transmit(at(0), &mut buf) {
        let pdu = crate::wire::slow::LacpRepr::parse_frame(&buf[..tx.len]).unwrap();
        let want = if tx.port == PortId(1) { 7 } else { 255 };
        assert_eq!(pdu.actor.port_priority, want);
        seen = true;
    }
    assert!(seen, "LACPDUs were sent");
}

/// A neighbour solicitation the host sends from the bond's MAC and address 2001:db8::10.
fn host_ns() -> Vec<u8> {
    let src: std::net::Ipv6Addr = "2001:db8::10".parse().unwrap();
    let mut f = vec![0x33, 0x33, 0xff, 0, 0, 0x20];
    f.extend_from_slice(&BOND_MAC.0);
    f.extend_from_slice(&[0x86, 0xdd, 0x60, 0, 0, 0, 0, 32, 58, 255]);
    f.extend_from_slice(&src.octets());
    f.extend_from_slice(&[0xff, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff, 0, 0, 0x20]);
    f.extend_from_slice(&[135, 0, 0, 0, 0, 0, 0, 0]);
    f.resize(14 + 40 + 32, 0);
    f
}

#[test]
fn failover_sends_unsolicited_neighbour_advertisements() {
    use crate::wire::l4::IcmpPacket;
    let mut b = bond(
        "mode=active-backup miimon=100 num_grat_arp=1 num_unsol_na=2 peer_notif_delay=100",
        2,
    );
    b.learn_from_host(&host_arp());
    b.learn_from_host(&host_ns());
    b.learn_from_host(&host_ns());
    let want: std::net::Ipv6Addr = "2001:db8::10".parse().unwrap();
    assert_eq!(b.host_ipv6(), &[Ipv6Address(want.octets())]);
    b.handle_carrier(at(1000), PortId(0), false);
    let mut buf = [0u8; 128];
    let mut kinds = Vec::new();
    for t in [1000, 1050, 1100, 1150, 1200] {
        while let Some(tx) = b.poll_transmit(at(t), &mut buf) {
            assert_eq!(tx.port, PortId(1));
            let f = &buf[..tx.len];
            if f[12..14] == [0x86, 0xdd] {
                assert_eq!(tx.len, 86);
                assert_eq!(f[..6], [0x33, 0x33, 0, 0, 0, 1]);
                assert_eq!(f[6..12], BOND_MAC.0);
                assert_eq!((f[20], f[21]), (58, 255), "ICMPv6, hop limit 255");
                assert_eq!(f[22..38], want.octets());
                let all: std::net::Ipv6Addr = "ff02::1".parse().unwrap();
                assert_eq!(f[38..54], all.octets());
                let icmp = IcmpPacket::new_checked(&f[54..]).unwrap();
                assert_eq!((icmp.msg_type(), icmp.code()), (136, 0));
                assert!(
                    icmp.verify_checksum_v6(Ipv6Address(want.octets()), Ipv6Address(all.octets()))
                );
                assert_eq!(f[58] & 0xe0, 0x20, "Override, not Solicited, not Router");
                assert_eq!(f[62..78], want.octets(), "target");
                assert_eq!(f[78..80], [2, 1], "target link-layer address option");
                assert_eq!(f[80..86], BOND_MAC.0);
                kinds.push((t, "na"));
            } else {
                kinds.push((t, "arp"));
            }
        }
    }
    kinds.sort();
    assert_eq!(kinds, [(1000, "arp"), (1000, "na"), (1100, "na")]);
}
