//! Bond decisions in virtual time.

use super::*;
use crate::hash::{HashPolicy, member_index, xmit_hash};
use crate::wire::arp::{ArpPacket, ArpRepr};
use crate::wire::ethernet::{EtherType, EthernetFrame};
use crate::wire::ip::Ipv4Address;

const BOND_MAC: EthernetAddress = EthernetAddress([2, 0xb0, 0, 0, 0, 1]);

pub(crate) fn info(name: &str, last: u8, speed: u32) -> PortInfo {
    PortInfo {
        name: name.to_owned(),
        perm_mac: EthernetAddress([2, 0, 0, 0, 0, last]),
        speed_mbps: Some(speed),
        full_duplex: Some(true),
    }
}

/// A bond with `ports` 10 Gbit/s ports, eth0, eth1, …, all up, its events taken.
pub(crate) fn bond(opts: &str, ports: usize) -> Bond {
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

/// The driver's side of the new API, for these tests.
trait Drive {
    /// A host frame through [`Bond::transmit`] (fix-ups discarded).
    fn host_tx(&mut self, now: Instant, frame: &[u8]) -> TxVerdict;
    /// A host frame through [`Bond::transmit`], fixed up in place.
    fn host_tx_fixed(&mut self, now: Instant, frame: &mut Vec<u8>) -> TxVerdict;
    /// A member's frame through [`Bond::receive`] (fix-ups discarded).
    fn member_rx(&mut self, now: Instant, port: PortId, frame: &[u8]) -> RxVerdict;
    /// A member's frame through [`Bond::receive`], fixed up in place.
    fn member_rx_fixed(&mut self, now: Instant, port: PortId, frame: &mut [u8]) -> RxVerdict;
    /// A member's frame through [`Bond::receive`] at `now`, for what the bond hears in it.
    fn heard(&mut self, now: Instant, port: PortId, frame: &[u8]);
    /// What is due at `now`.
    fn tick(&mut self, now: Instant);
    /// What is due at `now`, then the next frame the bond sends.
    fn poll_at(&mut self, now: Instant, buf: &mut [u8]) -> Option<Transmit>;
}

impl Drive for Bond {
    fn host_tx(&mut self, now: Instant, frame: &[u8]) -> TxVerdict {
        self.host_tx_fixed(now, &mut frame.to_vec())
    }

    fn host_tx_fixed(&mut self, now: Instant, frame: &mut Vec<u8>) -> TxVerdict {
        let mut buf = vec![0u8; TX_HEADROOM + frame.len()];
        buf[TX_HEADROOM..].copy_from_slice(frame);
        let len = frame.len();
        let mut host = HostFrame::new(&mut buf, len, Default::default()).unwrap();
        let v = self.transmit(now, &mut host, &mut NoDataplane);
        frame.copy_from_slice(host.frame());
        v
    }

    fn member_rx(&mut self, now: Instant, port: PortId, frame: &[u8]) -> RxVerdict {
        self.member_rx_fixed(now, port, &mut frame.to_vec())
    }

    fn member_rx_fixed(&mut self, now: Instant, port: PortId, frame: &mut [u8]) -> RxVerdict {
        self.receive(now, port, frame, &mut NoDataplane)
    }

    fn heard(&mut self, now: Instant, port: PortId, frame: &[u8]) {
        self.member_rx_fixed(now, port, &mut frame.to_vec());
    }

    fn tick(&mut self, now: Instant) {
        self.handle_timeout(now, &mut NoDataplane);
    }

    fn poll_at(&mut self, now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        self.handle_timeout(now, &mut NoDataplane);
        self.poll_transmit(now, buf)
    }
}

#[test]
fn balance_xor_follows_the_hash_over_usable_members() {
    let mut b = bond("mode=balance-xor xmit_hash_policy=layer3+4 miimon=100", 3);
    for sport in 1000..1100 {
        let f = tcp(sport);
        let want = member_index(xmit_hash(HashPolicy::Layer34, &f), 3).unwrap();
        assert_eq!(
            b.host_tx(Instant::ZERO, &f),
            TxVerdict::Port(PortId(want as u16))
        );
    }
    // eth1 fails: the hash now picks among [eth0, eth2], in enslave order.
    b.handle_carrier(at(5), PortId(1), false);
    for sport in 1000..1100 {
        let f = tcp(sport);
        let i = member_index(xmit_hash(HashPolicy::Layer34, &f), 2).unwrap();
        assert_eq!(
            b.host_tx(Instant::ZERO, &f),
            TxVerdict::Port([PortId(0), PortId(2)][i])
        );
    }
    // All receive paths deliver.
    assert_eq!(b.member_rx(at(5), PortId(2), &tcp(1)), RxVerdict::Deliver);
}

#[test]
fn round_robin_spreads_evenly_and_skips_failed_members() {
    let mut b = bond("mode=balance-rr miimon=100", 3);
    let mut counts = [0; 3];
    for _ in 0..300 {
        let TxVerdict::Port(p) = b.host_tx(Instant::ZERO, &tcp(1)) else {
            panic!()
        };
        counts[p.index()] += 1;
    }
    assert_eq!(counts, [100, 100, 100]);
    b.handle_carrier(at(1), PortId(1), false);
    let mut counts = [0; 3];
    for _ in 0..300 {
        let TxVerdict::Port(p) = b.host_tx(Instant::ZERO, &tcp(1)) else {
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
        .map(|_| match b.host_tx(Instant::ZERO, &tcp(1)) {
            TxVerdict::Port(p) => p.0,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(seq, [0, 0, 0, 1, 1, 1, 0, 0, 0, 1, 1, 1]);
    let mut igmp = tcp(1);
    igmp[23] = 2;
    for _ in 0..5 {
        assert_eq!(b.host_tx(Instant::ZERO, &igmp), TxVerdict::Port(PortId(0)));
    }
    let mut random = bond("mode=balance-rr packets_per_slave=0", 2);
    let mut counts = [0; 2];
    for _ in 0..1000 {
        let TxVerdict::Port(p) = random.host_tx(Instant::ZERO, &tcp(1)) else {
            panic!()
        };
        counts[p.index()] += 1;
    }
    assert!(counts[0] > 400 && counts[1] > 400, "{counts:?}");
}

/// The distribution table's balance-rr rule (what a kernel program follows) names, for frame
/// `k`, the member the bond itself sends it on: turn `k / packets_per_slave`, and the walk
/// from a failed member's turn to the next usable one.
#[test]
fn round_robin_table_gives_the_bonds_own_members_turn_by_turn() {
    for pps in [1u16, 3] {
        let mut b = bond(
            &format!("mode=balance-rr miimon=100 packets_per_slave={pps}"),
            4,
        );
        b.handle_carrier(at(1), PortId(1), false);
        b.tick(at(1000));
        let table = b.distribution();
        assert_eq!(
            table.tx,
            TxRule::RoundRobin {
                packets_per_slave: pps
            }
        );
        assert_eq!(table.usable, [PortId(0), PortId(2), PortId(3)]);
        assert_eq!(table.rx.len(), 4);
        for k in 0..120u32 {
            let TxVerdict::Port(p) = b.host_tx(at(1000), &tcp(1)) else {
                panic!("balance-rr sends frame {k}")
            };
            assert_eq!(Some(p), table.rr_member(k / u32::from(pps)), "frame {k}");
        }
        // Member 1's turn falls to member 2.
        assert_eq!(table.rr_member(1), Some(PortId(2)));
        assert_eq!(table.rr_member(5), Some(PortId(2)));
    }
    let b = bond("mode=balance-rr packets_per_slave=0", 2);
    assert_eq!(
        b.distribution().tx,
        TxRule::RoundRobin {
            packets_per_slave: 0
        }
    );
    assert_eq!(b.distribution().kernel_refusal(16), None);
}

#[test]
fn broadcast_uses_all_and_drops_when_none() {
    let mut b = bond("mode=broadcast miimon=100", 2);
    assert_eq!(b.host_tx(Instant::ZERO, &tcp(1)), TxVerdict::All);
    b.handle_carrier(at(1), PortId(0), false);
    b.handle_carrier(at(1), PortId(1), false);
    assert_eq!(
        b.host_tx(Instant::ZERO, &tcp(1)),
        TxVerdict::Drop(TxDrop::NoMember)
    );
    assert!(!b.carrier());
}

#[test]
fn broadcast_delivers_one_copy_of_each_frame_unless_told_otherwise() {
    let mut b = bond("mode=broadcast miimon=100", 2);
    assert_eq!(b.distribution().dedup, Some(0));
    // The daemon's key reaches the table (the kernel path sums with it) and changes it.
    let generation = b.distribution_generation();
    b.set_dedup_seed(0xfeed);
    assert_eq!(b.distribution().dedup, Some(0xfeed));
    assert_ne!(b.distribution_generation(), generation);
    // The far end's two copies of each frame: the first delivered, the other not.
    for (n, frame) in [tcp(1), tcp(2), tcp(1)].iter().enumerate() {
        let t = at(n as u64);
        assert_eq!(b.member_rx(t, PortId(1), frame), RxVerdict::Deliver, "{n}");
        assert_eq!(
            b.member_rx(t, PortId(0), frame),
            RxVerdict::Drop(DropReason::Duplicate),
            "{n}"
        );
    }
    // With one member left, every frame comes once: none is taken for a copy.
    b.handle_carrier(at(10), PortId(0), false);
    for _ in 0..2 {
        assert_eq!(b.member_rx(at(11), PortId(1), &tcp(3)), RxVerdict::Deliver);
    }
    let mut kernel_like = bond("mode=broadcast miimon=100 broadcast_dedup=off", 2);
    assert_eq!(kernel_like.distribution().dedup, None);
    for port in [PortId(0), PortId(1)] {
        assert_eq!(
            kernel_like.member_rx(at(0), port, &tcp(1)),
            RxVerdict::Deliver
        );
    }
    // Other modes never drop a frame for being a copy.
    let mut xor = bond("mode=balance-xor miimon=100", 2);
    assert_eq!(xor.distribution().dedup, None);
    for port in [PortId(0), PortId(1)] {
        assert_eq!(xor.member_rx(at(0), port, &tcp(1)), RxVerdict::Deliver);
    }
}

#[test]
fn active_backup_failover_and_inactive_receive() {
    let mut b = bond("mode=active-backup miimon=100", 2);
    assert_eq!(b.active(), Some(PortId(0)));
    assert_eq!(
        b.host_tx(Instant::ZERO, &tcp(1)),
        TxVerdict::Port(PortId(0))
    );
    assert_eq!(b.member_rx(at(0), PortId(0), &tcp(1)), RxVerdict::Deliver);
    assert_eq!(
        b.member_rx(at(0), PortId(1), &tcp(1)),
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
    let snap = b.snapshot(at(20));
    assert_eq!(snap.ports[0].link_failures, 1);
    assert_eq!(snap.active.as_deref(), Some("eth1"));
    assert_eq!(snap.failovers, 1, "the first choice is no failover");
    b.handle_carrier(at(30), PortId(1), false);
    assert_eq!(b.active(), Some(PortId(0)));
    assert_eq!(b.snapshot(at(30)).failovers, 2);
    let mut all = bond("mode=active-backup all_slaves_active=1", 2);
    assert_eq!(all.member_rx(at(0), PortId(1), &tcp(1)), RxVerdict::Deliver);
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

/// The options selftest's `prio` sequence (bond_options.sh): three members with prio 0, 10 and
/// 11, eth1 the primary; members lost and returned, the active member checked after each step,
/// under each `primary_reselect`, in each mode that has `prio`.
#[test]
fn prio_follows_the_drivers_rules_under_each_primary_reselect() {
    for mode in ["active-backup", "balance-tlb", "balance-alb"] {
        for reselect in ["always", "better", "failure"] {
            let what = format!("{mode}, primary_reselect={reselect}");
            let mut b = bond(
                &format!(
                    "mode={mode} miimon=100 primary=eth1 primary_reselect={reselect} \
                     prio=eth0:0,eth1:10,eth2:11"
                ),
                3,
            );
            let active = |b: &Bond| b.active().map(|p| p.index());
            assert_eq!(active(&b), Some(1), "{what}: the primary at the start");
            b.handle_carrier(at(10), PortId(1), false);
            assert_eq!(
                active(&b),
                Some(2),
                "{what}: the highest prio when it fails"
            );
            b.handle_carrier(at(20), PortId(2), false);
            assert_eq!(active(&b), Some(0), "{what}: the only member left");
            // A member with a higher prio than the active one's comes back: it takes over as
            // primary_reselect allows (equal speeds: `better` keeps the active member).
            b.handle_carrier(at(30), PortId(2), true);
            let want = if reselect == "always" { 2 } else { 0 };
            assert_eq!(active(&b), Some(want), "{what}: a higher prio back");
            // The primary comes back.
            b.handle_carrier(at(40), PortId(1), true);
            let want = if reselect == "always" { 1 } else { want };
            assert_eq!(active(&b), Some(want), "{what}: the primary back");
            if reselect == "failure" {
                b.handle_carrier(at(50), PortId(want as u16), false);
                assert_eq!(active(&b), Some(1), "{what}: the primary after a failure");
            }
            if reselect == "always" {
                // New prios while a primary is set: nothing moves until the next failure,
                // which picks the highest prio.
                b.change_options(
                    at(60),
                    &[("prio".into(), "eth0:1000000,eth1:0,eth2:-50".into())],
                )
                .unwrap();
                assert_eq!(active(&b), Some(1), "{what}: prio changed under a primary");
                b.handle_carrier(at(70), PortId(1), false);
                assert_eq!(active(&b), Some(0), "{what}: the new highest prio");
            }
        }
    }
}

#[test]
fn prio_without_a_primary() {
    // Ties go to the first member in enslave order; a member back with the same prio as the
    // active one's does not take over.
    let mut b = bond("mode=active-backup miimon=100 prio=eth1:5,eth2:5", 3);
    assert_eq!(
        b.active(),
        Some(PortId(1)),
        "eth1 came up with a higher prio"
    );
    b.handle_carrier(at(10), PortId(1), false);
    assert_eq!(b.active(), Some(PortId(2)));
    b.handle_carrier(at(20), PortId(1), true);
    assert_eq!(
        b.active(),
        Some(PortId(2)),
        "an equal prio does not take over"
    );
    b.handle_carrier(at(30), PortId(0), false);
    b.handle_carrier(at(40), PortId(0), true);
    assert_eq!(
        b.active(),
        Some(PortId(2)),
        "a lower prio does not take over"
    );
    // Set at run time without a primary, prio reselects at once (the driver's rule).
    b.change_options(at(50), &[("prio".into(), "eth0:7".into())])
        .unwrap();
    assert_eq!(b.active(), Some(PortId(0)));
    // Negative prios rank below the default 0.
    let mut b = bond("mode=active-backup miimon=100 prio=eth0:-1,eth1:-2", 3);
    assert_eq!(b.active(), Some(PortId(2)));
    b.handle_carrier(at(10), PortId(2), false);
    assert_eq!(b.active(), Some(PortId(0)));
    // `better` keeps a faster active member against a slower one with a higher prio.
    let (o, _) = BondOptions::parse_opts(
        "mode=active-backup miimon=100 primary_reselect=better prio=slow:9",
    )
    .unwrap();
    let mut b = Bond::new(o, BOND_MAC);
    b.add_port(at(0), info("fast", 1, 10_000), true);
    b.add_port(at(0), info("slow", 2, 1_000), false);
    assert_eq!(b.active(), Some(PortId(0)));
    b.handle_carrier(at(10), PortId(1), true);
    assert_eq!(b.active(), Some(PortId(0)), "slower: not better");
    // Without prio a member's return never moves the active member (kernels before 6.0
    // alike), and in modes without an active member prio does nothing.
    let mut b = bond("mode=active-backup miimon=100", 2);
    b.handle_carrier(at(10), PortId(0), false);
    b.handle_carrier(at(20), PortId(0), true);
    assert_eq!(b.active(), Some(PortId(1)));
    let b = bond("mode=balance-xor miimon=100 prio=eth1:9", 2);
    assert_eq!(
        b.active(),
        Some(PortId(0)),
        "prio only where there is an active member"
    );
}

#[test]
fn downdelay_and_updelay() {
    let mut b = bond("mode=balance-xor miimon=100 downdelay=200 updelay=500", 2);
    b.handle_carrier(at(1000), PortId(0), false);
    assert_eq!(b.snapshot(at(1000)).ports[0].mii, MiiStatus::GoingDown);
    assert_eq!(
        b.usable(),
        &[PortId(0), PortId(1)],
        "still used while going down"
    );
    assert_eq!(b.poll_timeout(), Some(at(1200)));
    b.tick(at(1199));
    assert_eq!(b.snapshot(at(1199)).ports[0].mii, MiiStatus::GoingDown);
    b.tick(at(1200));
    assert_eq!(b.snapshot(at(1200)).ports[0].mii, MiiStatus::Down);
    assert_eq!(b.usable(), &[PortId(1)]);
    assert_eq!(b.snapshot(at(1200)).ports[0].link_failures, 1);
    // Back: going back for updelay, not used meanwhile.
    b.handle_carrier(at(2000), PortId(0), true);
    assert_eq!(b.snapshot(at(2000)).ports[0].mii, MiiStatus::GoingBack);
    assert_eq!(b.usable(), &[PortId(1)]);
    assert_eq!(b.poll_timeout(), Some(at(2500)));
    b.tick(at(2500));
    assert_eq!(b.usable(), &[PortId(0), PortId(1)]);
    // A flap shorter than downdelay costs nothing.
    b.handle_carrier(at(3000), PortId(1), false);
    b.handle_carrier(at(3100), PortId(1), true);
    b.tick(at(3300));
    assert_eq!(b.snapshot(at(3300)).ports[1].mii, MiiStatus::Up);
    assert_eq!(b.snapshot(at(3300)).ports[1].link_failures, 0);
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
        assert_eq!(b.snapshot(at(200)).ports[0].mii, MiiStatus::GoingBack);
    }
}

#[test]
fn slow_protocols_and_runts_never_reach_the_host() {
    let mut b = bond("mode=balance-xor", 2);
    let mut lacpdu = vec![
        0x01, 0x80, 0xc2, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x88, 0x09, 1, 1,
    ];
    lacpdu.resize(124, 0);
    assert_eq!(
        b.member_rx(at(0), PortId(0), &lacpdu),
        RxVerdict::Drop(DropReason::SlowProtocols)
    );
    assert_eq!(
        b.member_rx(at(0), PortId(0), &[0; 13]),
        RxVerdict::Drop(DropReason::Runt)
    );
}

#[test]
fn removed_member_goes_down_and_counts() {
    let mut b = bond("mode=active-backup miimon=100", 2);
    b.remove_port(at(5), PortId(0));
    assert_eq!(b.active(), Some(PortId(1)));
    assert_eq!(b.snapshot(at(5)).ports[0].mii, MiiStatus::Down);
    assert_eq!(b.snapshot(at(5)).ports[0].link_failures, 1);
}

#[test]
fn member_without_carrier_at_start() {
    let (o, _) = BondOptions::parse_opts("mode=balance-xor miimon=100").unwrap();
    let mut b = Bond::new(o, BOND_MAC);
    b.add_port(at(0), info("eth0", 1, 10_000), false);
    assert!(!b.carrier());
    assert_eq!(
        b.host_tx(Instant::ZERO, &tcp(1)),
        TxVerdict::Drop(TxDrop::NoMember)
    );
    b.add_port(at(0), info("eth1", 2, 10_000), true);
    assert_eq!(
        b.host_tx(Instant::ZERO, &tcp(1)),
        TxVerdict::Port(PortId(1))
    );
    b.handle_carrier(at(50), PortId(0), true);
    assert_eq!(b.usable(), &[PortId(0), PortId(1)]);
}

#[test]
fn snapshot_shows_policy_only_for_hash_modes() {
    let b = bond("mode=balance-xor xmit_hash_policy=layer2+3", 2);
    assert_eq!(
        b.snapshot(at(0)).xmit_hash_policy,
        Some(HashPolicy::Layer23)
    );
    assert_eq!(b.snapshot(at(0)).active, None);
    let b = bond("mode=active-backup", 2);
    assert_eq!(b.snapshot(at(0)).xmit_hash_policy, None);
    assert_eq!(b.snapshot(at(0)).active.as_deref(), Some("eth0"));
}

mod props {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The distribution as plain data decides as the bond does: for every mode a table can
        /// describe, the member the table gives a frame's hash is the member `transmit` chose,
        /// and a member's frames reach the host exactly when the table says they do. The
        /// generation changes whenever the table does.
        #[test]
        fn the_distribution_table_decides_as_the_bond(
            events in proptest::collection::vec((0u16..3, any::<bool>(), 0u64..400), 0..40),
            sports in proptest::collection::vec(any::<u16>(), 1..8),
            opts in prop::sample::select(vec![
                "mode=balance-xor xmit_hash_policy=layer3+4",
                "mode=balance-xor xmit_hash_policy=layer2 distribution=buckets",
                "mode=balance-slb",
                "mode=active-backup",
                "mode=active-backup all_slaves_active=1",
                "mode=broadcast",
                "mode=balance-rr",
                "mode=balance-tlb",
                "mode=balance-tlb tlb_dynamic_lb=0 xmit_hash_policy=layer3+4",
                "mode=balance-alb",
            ]),
        ) {
            let mut b = bond(&format!("{opts} miimon=100 updelay=200 downdelay=100"), 3);
            let mut now = 0;
            let mut last = b.distribution();
            let mut probe = 0u16;
            for (port, carrier, dt) in events {
                now += dt;
                b.handle_carrier(at(now), PortId(port), carrier);
                b.tick(at(now));
                let table = b.distribution();
                if table.generation == last.generation {
                    prop_assert_eq!(&table, &last, "same generation, same table");
                }
                last = table;
                for &sport in &sports {
                    let f = tcp(sport);
                    let v = b.host_tx(at(now), &f);
                    let table = b.distribution();
                    let policy = match &table.tx {
                        TxRule::Modulo(p) | TxRule::Buckets { policy: p, .. } | TxRule::Tlb { policy: p, alb: false, .. } => Some(*p),
                        _ => None,
                    };
                    // balance-alb hashes these unicast TCP frames by their destination.
                    let alb = matches!(table.tx, TxRule::Tlb { alb: true, .. });
                    match (&table.tx, v) {
                        // balance-tlb: these unicast TCP frames are balanced.
                        (TxRule::Modulo(_) | TxRule::Buckets { .. } | TxRule::Active | TxRule::Tlb { .. }, TxVerdict::Port(p)) => {
                            let hash = if alb {
                                mode::alb::alb_hash(&f).unwrap()
                            } else {
                                policy.map_or(0, |p| xmit_hash(p, &f))
                            };
                            prop_assert_eq!(table.member_for_hash(hash), Some(p));
                        }
                        // Without a stripe peer the frame goes on the active member; with one,
                        // on a member the slots name.
                        (TxRule::Stripe { slots }, TxVerdict::Port(p)) => {
                            prop_assert!(slots.iter().all(Option::is_none) || slots.contains(&Some(p)));
                        }
                        (TxRule::RoundRobin { .. }, TxVerdict::Port(p)) => {
                            prop_assert!(table.usable.contains(&p));
                        }
                        (TxRule::All, TxVerdict::All) => {}
                        (_, TxVerdict::Drop(TxDrop::NoMember)) => {
                            prop_assert!(table.usable.is_empty() || table.active.is_none());
                        }
                        (rule, v) => prop_assert!(false, "{rule:?} but {v:?}"),
                    }
                }
                let table = b.distribution();
                for rx in &table.rx {
                    // A frame of its own each time: broadcast's dedup takes none for a copy.
                    probe = probe.wrapping_add(1);
                    let mut bcast = tcp(probe);
                    bcast[..6].copy_from_slice(&[0xff; 6]);
                    let uni = b.member_rx(at(now), rx.port, &tcp(probe)) == RxVerdict::Deliver;
                    let multi = b.member_rx(at(now), rx.port, &bcast) == RxVerdict::Deliver;
                    prop_assert_eq!((uni, multi), (rx.unicast, rx.multicast), "{:?}", rx.port);
                }
            }
        }

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
                b.tick(at(now));
                let f = tcp(now as u16);
                match b.host_tx(Instant::ZERO, &f) {
                    TxVerdict::Port(p) => prop_assert!(b.snapshot(at(now)).ports[p.index()].mii.usable()),
                    TxVerdict::All => prop_assert!(!b.usable().is_empty()),
                    TxVerdict::Drop(TxDrop::NoMember) => prop_assert!(b.usable().is_empty()),
                    other => prop_assert!(false, "{other:?} in {mode}"),
                }
                if mode == "balance-xor" {
                    prop_assert_eq!(b.host_tx(Instant::ZERO, &f), b.host_tx(Instant::ZERO, &f));
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
    assert_eq!(b.poll_at(at(0), &mut buf), None);
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
        while let Some(tx) = b.poll_at(at(t), &mut buf) {
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
    assert_eq!(b.poll_at(at(10), &mut [0u8; 64]), None);
    let mut x = bond("mode=balance-xor miimon=100", 2);
    x.learn_from_host(&host_arp());
    x.handle_carrier(at(10), PortId(0), false);
    assert_eq!(x.poll_at(at(10), &mut [0u8; 64]), None);
    // num_grat_arp=0 turns announcements off.
    let mut z = bond("mode=active-backup miimon=100 num_grat_arp=0", 2);
    z.learn_from_host(&host_arp());
    z.handle_carrier(at(10), PortId(0), false);
    assert_eq!(z.poll_at(at(10), &mut [0u8; 64]), None);
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
    while let Some(tx) = b.poll_at(now, &mut buf) {
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
        b.tick(at(t));
        assert_eq!(
            probes(&mut b, at(t)),
            [(PortId(0), [10, 0, 0, 9]), (PortId(1), [10, 0, 0, 9])]
        );
        // Only member 0 hears anything (member 1's traffic is dropped on the wire).
        b.heard(at(t), PortId(0), &tcp(1));
    }
    let s = b.snapshot(at(1000));
    assert_eq!(s.ports[0].mii, MiiStatus::Up);
    assert_eq!(
        s.ports[1].mii,
        MiiStatus::Down,
        "silent for more than 2 intervals"
    );
    assert_eq!(s.ports[1].link_failures, 1);
    assert_eq!(b.usable(), &[PortId(0)]);
    // It keeps probing on the silent member; hearing from it brings it back.
    b.heard(at(1050), PortId(1), &tcp(1));
    b.tick(at(1100));
    assert_eq!(b.usable(), &[PortId(0), PortId(1)]);
}

#[test]
fn arp_validate_counts_only_arp_from_targets() {
    let mut b = bond(
        "mode=active-backup arp_interval=100 arp_ip_target=10.0.0.9,10.0.0.10 arp_validate=all",
        2,
    );
    for t in (0..=600).step_by(100) {
        b.tick(at(t));
        // The active member probes both targets; backups do not probe.
        let p = probes(&mut b, at(t));
        if b.active() == Some(PortId(0)) {
            assert_eq!(p, [(PortId(0), [10, 0, 0, 9]), (PortId(0), [10, 0, 0, 10])]);
        }
        b.heard(at(t), PortId(0), &tcp(1)); // not ARP: does not count
        b.heard(at(t), PortId(1), &arp_reply_from([10, 0, 0, 10]));
    }
    // Member 0 heard no ARP from a target: taken out; member 1 heard target 2 (any target
    // suffices with arp_all_targets=any).
    assert_eq!(b.active(), Some(PortId(1)));
    assert_eq!(b.snapshot(at(600)).ports[0].mii, MiiStatus::Down);

    let mut all = bond(
        "mode=balance-xor arp_interval=100 arp_ip_target=10.0.0.9,10.0.0.10 arp_validate=all arp_all_targets=all",
        1,
    );
    for t in (0..=600).step_by(100) {
        all.tick(at(t));
        all.heard(at(t), PortId(0), &arp_reply_from([10, 0, 0, 10]));
    }
    assert!(
        !all.carrier(),
        "with arp_all_targets=all one silent target takes the member out"
    );
}

/// The active member's probe for `target` from the bond's address 10.0.0.1, as a backup hears
/// it through the switch (broadcast).
fn arp_probe_for(target: [u8; 4]) -> Vec<u8> {
    let mut f = vec![0xff; 6];
    f.extend_from_slice(&BOND_MAC.0);
    f.extend_from_slice(&[0x08, 0x06, 0, 1, 8, 0, 6, 4, 0, 1]);
    f.extend_from_slice(&BOND_MAC.0);
    f.extend_from_slice(&[10, 0, 0, 1]);
    f.extend_from_slice(&[0; 6]);
    f.extend_from_slice(&target);
    f
}

#[test]
fn arp_validate_validates_only_the_states_it_names() {
    // Member 0 is active, member 1 a backup; each hears `heard(port)` every round. Returns
    // which members the first round that takes any out leaves in (all, if none is taken out in
    // 600 ms): after it the roles swap and the new active member is judged as one, as in the
    // kernel.
    let run = |validate: &str, heard: &dyn Fn(PortId) -> Vec<Vec<u8>>| -> [bool; 2] {
        let mut b = bond(
            &format!(
                "mode=active-backup arp_interval=100 arp_ip_target=10.0.0.9 arp_validate={validate}"
            ),
            2,
        );
        assert_eq!(b.active(), Some(PortId(0)));
        for t in (0..=600).step_by(100) {
            b.tick(at(t));
            let s = b.snapshot(at(t));
            if s.ports.iter().any(|p| p.link_failures > 0) {
                return [s.ports[0].link_failures == 0, s.ports[1].link_failures == 0];
            }
            probes(&mut b, at(t));
            for port in [PortId(0), PortId(1)] {
                for f in heard(port) {
                    b.heard(at(t), port, &f);
                }
            }
        }
        [true, true]
    };
    // Data only: a member not validated (without filter) stays up, a validated one goes.
    let data = |_: PortId| vec![tcp(1)];
    assert_eq!(run("none", &data), [true, true]);
    assert_eq!(run("active", &data), [false, true]);
    assert_eq!(run("backup", &data), [true, false]);
    // The active member hearing the target, the backup data only: validated backups go.
    let mixed = |port: PortId| {
        if port == PortId(0) {
            vec![arp_reply_from([10, 0, 0, 9])]
        } else {
            vec![tcp(1)]
        }
    };
    assert_eq!(run("active", &mixed), [true, true]);
    assert_eq!(run("backup", &mixed), [true, false]);
    assert_eq!(run("all", &mixed), [true, false]);
    // With filter, only ARP counts where nothing is validated: data does not, a stranger's ARP
    // does.
    assert_eq!(run("filter", &mixed), [true, false]);
    assert_eq!(run("filter_active", &mixed), [true, false]);
    let stranger = |_: PortId| vec![arp_reply_from([10, 0, 0, 77])];
    assert_eq!(run("filter", &stranger), [true, true]);
    assert_eq!(run("filter_active", &stranger), [false, true]);
    assert_eq!(run("filter_backup", &stranger), [true, false]);
    // Neighbour discovery counts as ARP does under filter (the kernel's IPv6 half).
    let nd = |_: PortId| vec![na_from("2001:db8::77", "2001:db8::77", "2001:db8::1", 255)];
    assert_eq!(run("filter", &nd), [true, true]);
    // A validated backup counts the active member's probe for a target (heard through the
    // switch); the active member needs the target's own ARP.
    let switch = |port: PortId| {
        if port == PortId(0) {
            vec![arp_reply_from([10, 0, 0, 9])]
        } else {
            vec![arp_probe_for([10, 0, 0, 9])]
        }
    };
    assert_eq!(run("all", &switch), [true, true]);
    let probe_only = |_: PortId| vec![arp_probe_for([10, 0, 0, 9])];
    assert_eq!(run("all", &probe_only), [false, true]);
}

#[test]
fn arp_monitor_off_without_targets_or_interval() {
    assert!(!bond("mode=balance-xor miimon=100", 2).arp_monitoring());
    assert!(!bond("mode=balance-xor arp_interval=100", 2).arp_monitoring());
}

fn v6(text: &str) -> Ipv6Address {
    Ipv6Address(text.parse::<std::net::Ipv6Addr>().unwrap().octets())
}

/// A neighbour advertisement from `src` answering for `target`, to the bond's `dst`, with hop
/// limit `hops` (255 unless a router forwarded it).
fn na_from(src: &str, target: &str, dst: &str, hops: u8) -> Vec<u8> {
    let mut f = BOND_MAC.0.to_vec();
    f.extend_from_slice(&[2, 0, 0, 0, 0, 0x77, 0x86, 0xdd]);
    f.extend_from_slice(&[0x60, 0, 0, 0, 0, 32, 58, hops]);
    f.extend_from_slice(&v6(src).0);
    f.extend_from_slice(&v6(dst).0);
    f.extend_from_slice(&[136, 0, 0, 0, 0x60, 0, 0, 0]);
    f.extend_from_slice(&v6(target).0);
    f.extend_from_slice(&[2, 1, 2, 0, 0, 0, 0, 0x77]);
    f
}

/// The solicitations the bond sends at `now`: (member, IPv6 source, target), each checked
/// against RFC 4861: solicited-node destination (IPv6 and Ethernet), hop limit 255, a valid
/// checksum, the source link-layer option exactly when the source is not `::`.
fn solicitations(b: &mut Bond, now: Instant) -> Vec<(PortId, Ipv6Address, Ipv6Address)> {
    use crate::wire::ipv6::Ipv6Packet;
    use crate::wire::l4::IcmpPacket;
    let mut buf = [0u8; 128];
    let mut out = Vec::new();
    while let Some(tx) = b.poll_at(now, &mut buf) {
        let f = &buf[..tx.len];
        let eth = EthernetFrame::new_checked(f).unwrap();
        assert_eq!(
            eth.ethertype(),
            EtherType::Ipv6,
            "only solicitations: {f:02x?}"
        );
        assert_eq!(eth.src_addr(), BOND_MAC);
        let ip = Ipv6Packet::new_checked(eth.payload()).unwrap();
        assert_eq!(ip.hop_limit(), 255);
        let icmp = IcmpPacket::new_checked(ip.payload()).unwrap();
        assert_eq!(icmp.msg_type(), 135);
        assert!(icmp.verify_checksum_v6(ip.src_addr(), ip.dst_addr()));
        let target = Ipv6Address::from_bytes(&icmp.quoted()[..16]);
        let mut solicited = v6("ff02::1:ff00:0");
        solicited.0[13..].copy_from_slice(&target.0[13..]);
        assert_eq!(ip.dst_addr(), solicited);
        assert_eq!(eth.dst_addr().0[..3], [0x33, 0x33, 0xff]);
        assert_eq!(eth.dst_addr().0[3..], target.0[13..]);
        let option = &icmp.quoted()[16..];
        if ip.src_addr().is_unspecified() {
            assert!(option.is_empty(), "no link-layer option from ::");
        } else {
            assert_eq!(option[..2], [1, 1]);
            assert_eq!(option[2..8], BOND_MAC.0);
        }
        out.push((tx.port, ip.src_addr(), target));
    }
    out.sort();
    out
}

/// A neighbour solicitation the host sends from `src` (how the bond learns its addresses).
fn host_ns_from(src: &str) -> Vec<u8> {
    let mut buf = [0u8; 128];
    let len = monitor::emit_solicitation(BOND_MAC, v6(src), v6("2001:db8::99"), &mut buf);
    buf[..len].to_vec()
}

#[test]
fn ns_monitor_solicits_each_target_from_an_address_in_its_scope() {
    let mut b = bond(
        "mode=balance-xor arp_interval=100 ns_ip6_target=2001:db8::9,fe80::9",
        2,
    );
    assert!(b.arp_monitoring(), "ns_ip6_target alone runs the monitor");
    // No address of the bond known yet: solicitations from ::, on every member.
    b.tick(at(0));
    let unspecified = Ipv6Address::UNSPECIFIED;
    assert_eq!(
        solicitations(&mut b, at(0)),
        [
            (PortId(0), unspecified, v6("2001:db8::9")),
            (PortId(0), unspecified, v6("fe80::9")),
            (PortId(1), unspecified, v6("2001:db8::9")),
            (PortId(1), unspecified, v6("fe80::9")),
        ]
    );
    // Once the host has used its addresses, each target is solicited from the one in its
    // scope.
    b.host_tx(at(50), &host_ns_from("fe80::1"));
    b.host_tx(at(50), &host_ns_from("2001:db8::1"));
    b.tick(at(100));
    let p = solicitations(&mut b, at(100));
    assert_eq!(p.len(), 4, "{p:?}");
    for (_, src, target) in p {
        let want = if target.is_link_local() {
            "fe80::1"
        } else {
            "2001:db8::1"
        };
        assert_eq!(src, v6(want), "solicitation for {target}");
    }
}

#[test]
fn ns_monitor_takes_out_a_member_whose_targets_fall_silent() {
    // Without validation any frame is a sign of life, as for ARP targets.
    let mut b = bond(
        "mode=balance-xor arp_interval=100 ns_ip6_target=2001:db8::9 arp_missed_max=2",
        2,
    );
    for t in (0..=1000).step_by(100) {
        b.tick(at(t));
        assert_eq!(solicitations(&mut b, at(t)).len(), 2);
        b.heard(at(t), PortId(0), &tcp(1));
    }
    assert_eq!(b.usable(), &[PortId(0)]);
    let s = b.snapshot(at(1000));
    assert_eq!(s.ports[1].mii, MiiStatus::Down);
    assert_eq!(s.ports[1].link_failures, 1);
    let m = s.arp_monitor.expect("the monitor runs");
    assert_eq!(
        m.ns_targets,
        ["2001:db8::9".parse::<std::net::Ipv6Addr>().unwrap()]
    );
    assert!(m.ip_targets.is_empty());
    // Hearing the member again brings it back at the next round.
    b.heard(at(1050), PortId(1), &tcp(1));
    b.tick(at(1100));
    assert_eq!(b.usable(), &[PortId(0), PortId(1)]);
}

#[test]
fn ns_validate_counts_only_neighbour_discovery_from_targets() {
    let mut b = bond(
        "mode=active-backup arp_interval=100 ns_ip6_target=2001:db8::9,2001:db8::a arp_validate=all",
        2,
    );
    assert_eq!(b.active(), Some(PortId(0)));
    for t in (0..=600).step_by(100) {
        b.tick(at(t));
        // The active member solicits both targets; backups do not.
        let p = solicitations(&mut b, at(t));
        if b.active() == Some(PortId(0)) {
            assert!(p.iter().all(|(port, ..)| *port == PortId(0)), "{p:?}");
            assert_eq!(p.len(), 2);
        }
        // Member 0 hears data, an advertisement from a stranger and one a router forwarded
        // (hop limit 64): none counts.
        b.heard(at(t), PortId(0), &tcp(1));
        b.heard(
            at(t),
            PortId(0),
            &na_from("2001:db8::77", "2001:db8::77", "2001:db8::1", 255),
        );
        b.heard(
            at(t),
            PortId(0),
            &na_from("2001:db8::9", "2001:db8::9", "2001:db8::1", 64),
        );
        // Member 1 hears the second target answer (from another of its addresses: the
        // advertised target counts).
        b.heard(
            at(t),
            PortId(1),
            &na_from("fe80::a", "2001:db8::a", "2001:db8::1", 255),
        );
    }
    assert_eq!(b.active(), Some(PortId(1)));
    assert_eq!(b.snapshot(at(600)).ports[0].mii, MiiStatus::Down);

    // arp_all_targets=all over IPv4 and IPv6 targets together: the silent IPv6 target takes
    // the member out although the IPv4 one answers.
    let mut all = bond(
        "mode=balance-xor arp_interval=100 arp_ip_target=10.0.0.9 ns_ip6_target=2001:db8::9 arp_validate=all arp_all_targets=all",
        1,
    );
    for t in (0..=600).step_by(100) {
        all.tick(at(t));
        all.heard(at(t), PortId(0), &arp_reply_from([10, 0, 0, 9]));
    }
    assert!(!all.carrier(), "the IPv6 target is silent");
    // Both answering keeps it.
    let mut both = bond(
        "mode=balance-xor arp_interval=100 arp_ip_target=10.0.0.9 ns_ip6_target=2001:db8::9 arp_validate=all arp_all_targets=all",
        1,
    );
    for t in (0..=600).step_by(100) {
        both.tick(at(t));
        both.heard(at(t), PortId(0), &arp_reply_from([10, 0, 0, 9]));
        both.heard(
            at(t),
            PortId(0),
            &na_from("2001:db8::9", "2001:db8::9", "ff02::1", 255),
        );
    }
    assert!(both.carrier());
}

#[test]
fn ns_ip6_target_options_and_the_kernel_path() {
    for bad in [
        "ns_ip6_target=::",
        "ns_ip6_target=::1",
        "ns_ip6_target=ff02::1",
        "ns_ip6_target=10.0.0.1",
        "ns_ip6_target=2001:db8::1,2001:db8::1",
    ] {
        let e = BondOptions::parse_opts(bad).unwrap_err();
        assert_eq!(e.key, "ns_ip6_target", "{bad}: {e}");
    }
    let seventeen: Vec<String> = (1..=17).map(|i| format!("2001:db8::{i:x}")).collect();
    assert!(BondOptions::parse_opts(&format!("ns_ip6_target={}", seventeen.join(","))).is_err());
    // Refused in the LACP modes as every ARP monitor is.
    assert!(
        BondOptions::parse_opts("mode=802.3ad arp_interval=100 ns_ip6_target=2001:db8::1").is_err()
    );
    // Printed back with the monitor.
    let (o, w) =
        BondOptions::parse_opts("mode=active-backup arp_interval=100 ns_ip6_target=fe80::9")
            .unwrap();
    assert!(
        w.iter().all(|w| !w.contains("ARP monitoring is off")),
        "{w:?}"
    );
    assert!(
        o.to_opts().contains("ns_ip6_target=fe80::9"),
        "{}",
        o.to_opts()
    );
    assert!(!o.to_opts().contains("arp_ip_target"));
    // The kernel path takes both; a fast path hands lagd the members' neighbour discovery
    // with validation only (without it, any frame counts).
    let quiet = bond(
        "mode=active-backup arp_interval=100 ns_ip6_target=fe80::9",
        2,
    );
    assert_eq!(quiet.kernel_refusal(32), None);
    assert!(!quiet.wants_member_ndisc());
    let validating = bond(
        "mode=active-backup arp_interval=100 ns_ip6_target=fe80::9 arp_validate=active",
        2,
    );
    assert_eq!(validating.kernel_refusal(32), None);
    assert!(validating.wants_member_ndisc());
    let v4_only = bond(
        "mode=active-backup arp_interval=100 arp_ip_target=10.0.0.1 arp_validate=all",
        2,
    );
    assert!(!v4_only.wants_member_ndisc());
    // A live change of the targets restarts the monitor with the new ones.
    let mut b = bond("mode=balance-xor arp_interval=100 ns_ip6_target=fe80::9", 1);
    b.change_options(at(10), &[("ns_ip6_target".into(), "fe80::a".into())])
        .unwrap();
    b.tick(at(10));
    assert_eq!(
        solicitations(&mut b, at(10)),
        [(PortId(0), Ipv6Address::UNSPECIFIED, v6("fe80::a"))]
    );
}

/// Two 802.3ad bonds wired together in memory, port i to port i; `lossy[i]` drops link i.
fn exchange(a: &mut Bond, b: &mut Bond, now: Instant, lossy: &[bool]) {
    fn deliver(from: &mut Bond, to: &mut Bond, now: Instant, lossy: &[bool]) -> bool {
        let mut buf = [0u8; 128];
        let mut moved = false;
        while let Some(tx) = from.poll_at(now, &mut buf) {
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
        a.tick(at(t));
        b.tick(at(t));
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
    assert_eq!(
        a.host_tx(Instant::ZERO, &tcp(1)),
        TxVerdict::Drop(TxDrop::NoMember)
    );
    assert!(!a.carrier());
    assert_eq!(
        a.member_rx(at(0), PortId(0), &tcp(1)),
        RxVerdict::Drop(DropReason::NotCollecting)
    );
    run_pair(&mut a, &mut b, 0, 3000, &[false, false]);
    assert!(a.carrier() && b.carrier());
    assert_eq!(a.usable(), &[PortId(0), PortId(1)]);
    for sport in 1000..1050 {
        let f = tcp(sport);
        let want = member_index(xmit_hash(HashPolicy::Layer34, &f), 2).unwrap();
        assert_eq!(
            a.host_tx(Instant::ZERO, &f),
            TxVerdict::Port(PortId(want as u16))
        );
    }
    assert_eq!(
        a.member_rx(at(3000), PortId(1), &tcp(1)),
        RxVerdict::Deliver
    );
    let snap = a.snapshot(at(3000)).lacp.unwrap();
    assert_eq!(snap.active_aggregator_info().unwrap().enabled_ports, 2);
    // LACPDUs lost on link 1 (fast rate): that member leaves after 3 s, the other stays.
    run_pair(&mut a, &mut b, 3010, 7000, &[false, true]);
    assert_eq!(a.usable(), &[PortId(0)]);
    assert_eq!(
        a.member_rx(at(7000), PortId(1), &tcp(1)),
        RxVerdict::Drop(DropReason::NotCollecting)
    );
    assert!(a.carrier());
    // Carrier loss takes a member out at once.
    a.handle_carrier(at(7010), PortId(0), false);
    assert!(a.usable().is_empty());
    assert!(!a.carrier());
    assert_eq!(
        a.host_tx(Instant::ZERO, &tcp(1)),
        TxVerdict::Drop(TxDrop::NoMember)
    );
}

#[test]
fn actor_port_prio_reaches_the_lacpdus() {
    let mut b = bond("mode=802.3ad lacp_rate=fast actor_port_prio=eth1:7", 2);
    let snap = b.snapshot(at(0)).lacp.unwrap();
    assert_eq!(snap.ports[0].actor.port_priority, 255);
    assert_eq!(snap.ports[1].actor.port_priority, 7);
    // And on the wire.
    b.tick(at(0));
    let mut buf = [0u8; 128];
    let mut seen = false;
    while let Some(tx) = b.poll_at(at(0), &mut buf) {
        let pdu = crate::wire::slow::LacpRepr::parse_frame(&buf[..tx.len]).unwrap();
        let want = if tx.port == PortId(1) { 7 } else { 255 };
        assert_eq!(pdu.actor.port_priority, want);
        seen = true;
    }
    assert!(seen, "LACPDUs were sent");
}

#[test]
fn actor_port_prio_changes_at_run_time() {
    let mut b = bond("mode=802.3ad lacp_rate=fast actor_port_prio=eth1:7", 2);
    b.tick(at(0));
    let mut buf = [0u8; 128];
    while b.poll_at(at(0), &mut buf).is_some() {}
    let kv = |v: &str| vec![("actor_port_prio".to_owned(), v.to_owned())];
    // A member that is not the bond's is refused, and nothing changes.
    let e = b.change_options(at(100), &kv("eth9:5")).unwrap_err();
    assert_eq!(e.key, "actor_port_prio");
    assert!(e.reason.contains("eth9"), "{e}");
    assert_eq!(
        b.snapshot(at(100)).lacp.unwrap().ports[1]
            .actor
            .port_priority,
        7
    );
    // eth0 named, eth1 no longer: eth1 goes back to 255; both sent at once.
    let done = b.change_options(at(1500), &kv("eth0:1000")).unwrap();
    b.tick(at(1500));
    assert_eq!(done.changed, ["actor_port_prio=eth0:1000"]);
    assert_eq!(b.options().actor_port_prio, [("eth0".to_owned(), 1000)]);
    let snap = b.snapshot(at(1500)).lacp.unwrap();
    assert_eq!(snap.ports[0].actor.port_priority, 1000);
    assert_eq!(snap.ports[1].actor.port_priority, 255);
    let mut sent = Vec::new();
    while let Some(tx) = b.poll_at(at(1500), &mut buf) {
        let pdu = crate::wire::slow::LacpRepr::parse_frame(&buf[..tx.len]).unwrap();
        sent.push((tx.port, pdu.actor.port_priority));
    }
    sent.sort();
    assert_eq!(sent, [(PortId(0), 1000), (PortId(1), 255)]);
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
        while let Some(tx) = b.poll_at(at(t), &mut buf) {
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
    // num_unsol_na=2 given last sets num_grat_arp too (one value in the driver): two rounds
    // of both.
    assert_eq!(
        kinds,
        [(1000, "arp"), (1000, "na"), (1100, "arp"), (1100, "na")]
    );
}

/// Every frame the bond wants sent at `now`: (member, frame).
fn sent_at(b: &mut Bond, now: Instant) -> Vec<(PortId, Vec<u8>)> {
    let mut buf = [0u8; 1600];
    core::iter::from_fn(|| {
        b.poll_at(now, &mut buf)
            .map(|tx| (tx.port, buf[..tx.len].to_vec()))
    })
    .collect()
}

#[test]
fn balance_tlb_and_balance_alb_are_tables_the_kernel_path_holds() {
    for (opts, dynamic) in [
        ("mode=balance-tlb xmit_hash_policy=layer3+4", true),
        (
            "mode=balance-tlb tlb_dynamic_lb=0 xmit_hash_policy=layer3+4",
            false,
        ),
    ] {
        let mut b = bond(opts, 2);
        let d = b.distribution();
        assert_eq!(d.kernel_refusal(16), None, "{opts}");
        assert_eq!(b.kernel_refusal(16), None, "{opts}");
        let TxRule::Tlb {
            policy, buckets, ..
        } = &d.tx
        else {
            panic!("{opts}: {:?}", d.tx)
        };
        assert_eq!(*policy, HashPolicy::Layer34);
        assert_eq!(buckets.is_some(), dynamic, "{opts}");
        assert_eq!(b.bucket_sample_interval().is_some(), dynamic, "{opts}");
        let mut seen = [0; 2];
        for sport in 1000..1100 {
            let f = tcp(sport);
            let TxVerdict::Port(p) = b.host_tx(at(0), &f) else {
                panic!("{opts}: frame {sport}")
            };
            assert_eq!(
                d.member_for_hash(xmit_hash(HashPolicy::Layer34, &f)),
                Some(p),
                "{opts}: frame {sport}"
            );
            seen[p.index()] += 1;
        }
        assert!(seen.iter().all(|&n| n > 0), "{opts}: {seen:?}");
    }
    // balance-alb: the destination's byte-XOR, through the buckets.
    let mut alb = bond("mode=balance-alb", 2);
    let d = alb.distribution();
    assert!(
        matches!(
            d.tx,
            TxRule::Tlb {
                alb: true,
                buckets: Some(_),
                ..
            }
        ),
        "{:?}",
        d.tx
    );
    assert_eq!(alb.kernel_refusal(16), None);
    assert!(alb.wants_member_arp());
    assert!(!bond("mode=balance-tlb", 2).wants_member_arp());
    let f = tcp(1000);
    let TxVerdict::Port(p) = alb.host_tx(at(0), &f) else {
        panic!("alb sends")
    };
    let hash = mode::alb::alb_hash(&f).unwrap();
    assert_eq!(d.member_for_hash(hash), Some(p));
    // What alb does not balance (here a broadcast) goes on the active member, not dropped.
    let mut bcast = tcp(1000);
    bcast[..6].copy_from_slice(&[0xff; 6]);
    assert_eq!(
        alb.host_tx(at(0), &bcast),
        TxVerdict::Port(alb.active().unwrap())
    );
}

#[test]
fn balance_tlb_balances_unicast_ip_and_rewrites_the_source_off_the_active_member() {
    let mut b = bond(
        "mode=balance-tlb tlb_dynamic_lb=0 xmit_hash_policy=layer3+4",
        2,
    );
    assert_eq!(b.active(), Some(PortId(0)));
    let mut counts = [0; 2];
    for sport in 1000..1200 {
        let f = tcp(sport);
        let want = member_index(xmit_hash(HashPolicy::Layer34, &f), 2).unwrap();
        let mut out = f.clone();
        out[6..12].copy_from_slice(&BOND_MAC.0);
        let TxVerdict::Port(p) = b.host_tx_fixed(at(0), &mut out) else {
            panic!()
        };
        assert_eq!(
            p.index(),
            want,
            "tlb_dynamic_lb=0: hash over usable members"
        );
        counts[p.index()] += 1;
        let src = if p == PortId(0) {
            BOND_MAC.0
        } else {
            [2, 0, 0, 0, 0, 2]
        };
        assert_eq!(
            out[6..12],
            src,
            "the member's own MAC off the active member"
        );
    }
    assert!(counts[0] > 50 && counts[1] > 50, "{counts:?}");
    // ARP and broadcast leave through the active member.
    assert_eq!(b.host_tx(at(0), &host_arp()), TxVerdict::Port(PortId(0)));
    let mut bcast = tcp(1);
    bcast[..6].copy_from_slice(&[0xff; 6]);
    assert_eq!(b.host_tx(at(0), &bcast), TxVerdict::Port(PortId(0)));
    // Unicast is taken on every member (a peer tlb bond sends to the bond's MAC over whichever
    // member its hash picks); broadcast only on the active member.
    assert_eq!(b.member_rx(at(0), PortId(0), &tcp(1)), RxVerdict::Deliver);
    assert_eq!(b.member_rx(at(0), PortId(1), &tcp(1)), RxVerdict::Deliver);
    let mut bcast_in = tcp(1);
    bcast_in[..6].copy_from_slice(&[0xff; 6]);
    assert_eq!(b.member_rx(at(0), PortId(0), &bcast_in), RxVerdict::Deliver);
    assert_eq!(
        b.member_rx(at(0), PortId(1), &bcast_in),
        RxVerdict::Drop(DropReason::InactiveMember)
    );
    // Failover: everything on the survivor, with the bond's MAC.
    b.handle_carrier(at(10), PortId(0), false);
    assert_eq!(b.active(), Some(PortId(1)));
    for sport in 1000..1050 {
        assert_eq!(b.host_tx(at(10), &tcp(sport)), TxVerdict::Port(PortId(1)));
    }
    let mut out = tcp(1);
    out[6..12].copy_from_slice(&BOND_MAC.0);
    assert_eq!(
        b.host_tx_fixed(at(10), &mut out),
        TxVerdict::Port(PortId(1))
    );
    assert_eq!(out[6..12], BOND_MAC.0);
    let snap = b.snapshot(at(10));
    assert_eq!(snap.active.as_deref(), Some("eth1"));
    assert_eq!(snap.xmit_hash_policy, Some(HashPolicy::Layer34));
}

#[test]
fn tlb_and_alb_send_learning_packets_every_lp_interval() {
    let mut b = bond("mode=balance-tlb lp_interval=2", 2);
    let first = sent_at(&mut b, at(0));
    let macs: Vec<_> = first
        .iter()
        .map(|(p, f)| (p.0, f[6..12].to_vec()))
        .collect();
    assert_eq!(
        macs,
        [(1, vec![2, 0, 0, 0, 0, 2]), (0, BOND_MAC.0.to_vec())],
        "each member announces the MAC it sends with"
    );
    assert!(
        first
            .iter()
            .all(|(_, f)| f.len() == 60 && f[12..14] == [0x90, 0])
    );
    assert!(sent_at(&mut b, at(1999)).is_empty());
    assert_eq!(b.poll_timeout(), Some(at(2000)));
    assert_eq!(sent_at(&mut b, at(2000)).len(), 2);
}

/// The member whose own MAC is the bond's never shows it while another member is active.
#[test]
fn the_bond_mac_is_never_on_two_members() {
    let (o, _) = BondOptions::parse_opts("mode=balance-tlb miimon=100").unwrap();
    let mut b = Bond::new(o, BOND_MAC);
    b.add_port(
        at(0),
        PortInfo {
            perm_mac: BOND_MAC,
            ..info("eth0", 0, 1000)
        },
        true,
    );
    b.add_port(at(0), info("eth1", 2, 1000), true);
    assert_eq!(b.wire_mac(PortId(0)), BOND_MAC);
    assert_eq!(b.wire_mac(PortId(1)), EthernetAddress([2, 0, 0, 0, 0, 2]));
    b.handle_carrier(at(10), PortId(0), false);
    b.handle_carrier(at(20), PortId(0), true);
    assert_eq!(b.active(), Some(PortId(1)));
    assert_eq!(b.wire_mac(PortId(1)), BOND_MAC);
    assert_eq!(
        b.wire_mac(PortId(0)),
        EthernetAddress([2, 0, 0, 0, 0, 2]),
        "swapped, as the driver swaps"
    );
}

/// An ARP frame between the bond (10.0.0.1) and client 10.0.0.(10+i) at 02:c0::i.
fn alb_arp(op: u16, from_bond: bool, i: u8) -> Vec<u8> {
    let client_mac = [2, 0xc0, 0, 0, 0, i];
    let client_ip = [10, 0, 0, 10 + i];
    let (smac, sip, tmac, tip) = if from_bond {
        (BOND_MAC.0, [10, 0, 0, 1], client_mac, client_ip)
    } else {
        (client_mac, client_ip, BOND_MAC.0, [10, 0, 0, 1])
    };
    let dst = if op == 1 { [0xff; 6] } else { tmac };
    let mut f = dst.to_vec();
    f.extend_from_slice(&smac);
    f.extend_from_slice(&[0x08, 0x06, 0, 1, 8, 0, 6, 4]);
    f.extend_from_slice(&op.to_be_bytes());
    f.extend_from_slice(&smac);
    f.extend_from_slice(&sip);
    f.extend_from_slice(if op == 1 { &[0; 6] } else { &tmac });
    f.extend_from_slice(&tip);
    f
}

#[test]
fn balance_alb_teaches_each_client_a_member_and_receives_on_all() {
    let mut b = bond("mode=balance-alb miimon=100", 2);
    b.learn_from_host(&host_arp());
    let mut ports = Vec::new();
    for i in 0..4 {
        // The host answers client i: the reply leaves on the client's member, with its MAC.
        let mut reply = alb_arp(2, true, i);
        let TxVerdict::Port(p) = b.host_tx_fixed(at(0), &mut reply) else {
            panic!()
        };
        let mac = b.wire_mac(p).0;
        assert_eq!(reply[6..12], mac);
        assert_eq!(reply[22..28], mac, "the ARP sender hardware address too");
        ports.push(p.0);
    }
    assert_eq!(ports, [0, 1, 0, 1], "clients spread over the members");
    // Member 1 receives its clients' unicast, for its MAC: the host gets it for the bond's MAC.
    let mut to_member = tcp(1);
    to_member[..6].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
    assert_eq!(
        b.member_rx_fixed(at(0), PortId(1), &mut to_member),
        RxVerdict::Deliver
    );
    assert_eq!(to_member[..6], BOND_MAC.0);
    // Broadcast only on the active member.
    let mut bcast = tcp(1);
    bcast[..6].copy_from_slice(&[0xff; 6]);
    assert_eq!(
        b.member_rx(at(0), PortId(1), &bcast),
        RxVerdict::Drop(DropReason::InactiveMember)
    );
    assert_eq!(b.member_rx(at(0), PortId(0), &bcast), RxVerdict::Deliver);
    // The host broadcasts a request: clients on member 1 are taught again after a moment.
    assert_eq!(b.host_tx(at(1000), &host_arp()), TxVerdict::Port(PortId(0)));
    assert!(
        sent_at(&mut b, at(1000))
            .iter()
            .all(|(_, f)| f[12..14] != [0x08, 0x06])
    );
    let arp_at = |b: &mut Bond, t| -> Vec<_> {
        sent_at(b, at(t))
            .into_iter()
            .filter(|(_, f)| f[12..14] == [0x08, 0x06])
            .map(|(p, f)| (p.0, f[..6].to_vec(), f[22..28].to_vec(), f[41]))
            .collect()
    };
    assert!(
        arp_at(&mut b, 1199).is_empty(),
        "after the host's request has gone"
    );
    let m1 = vec![2, 0, 0, 0, 0, 2];
    let want = [
        (1, vec![2, 0xc0, 0, 0, 0, 1], m1.clone(), 11),
        (1, vec![2, 0xc0, 0, 0, 0, 3], m1.clone(), 13),
    ];
    assert_eq!(arp_at(&mut b, 1200), want);
    assert_eq!(arp_at(&mut b, 1400), want, "and once more");
    // Member 1 fails: its clients move to member 0 and are told the bond's MAC.
    b.handle_carrier(at(5000), PortId(1), false);
    let moved: Vec<_> = sent_at(&mut b, at(5000))
        .into_iter()
        .filter(|(_, f)| f[12..14] == [0x08, 0x06] && f[20..22] == [0, 1])
        .map(|(p, f)| (p.0, f[22..28].to_vec()))
        .collect();
    assert_eq!(moved.len(), 2, "{moved:?}");
    assert!(
        moved
            .iter()
            .all(|(p, mac)| *p == 0 && mac[..] == BOND_MAC.0)
    );
}

#[test]
fn balance_alb_learns_clients_that_ask_for_the_bond() {
    let mut b = bond("mode=balance-alb miimon=100", 2);
    b.learn_from_host(&host_arp());
    for i in 0..2 {
        let mut req = alb_arp(1, false, i);
        assert_eq!(
            b.member_rx_fixed(at(0), PortId(0), &mut req),
            RxVerdict::Deliver
        );
    }
    // Client 1 is given member 1 and taught its MAC right after the exchange, twice.
    let taught: Vec<_> = [0, 200, 400]
        .into_iter()
        .flat_map(|t| sent_at(&mut b, at(t)))
        .filter(|(_, f)| f[12..14] == [0x08, 0x06])
        .map(|(p, f)| (p.0, f[41]))
        .collect();
    assert_eq!(taught, [(1, 11), (1, 11)]);
}

#[test]
fn fail_over_mac_active_moves_the_bond_mac_and_follow_swaps_member_macs() {
    let mut b = bond("mode=active-backup miimon=100 fail_over_mac=active", 2);
    b.handle_carrier(at(10), PortId(0), false);
    let evs: Vec<_> = core::iter::from_fn(|| b.poll_event()).collect();
    let mac1 = EthernetAddress([2, 0, 0, 0, 0, 2]);
    assert!(
        evs.contains(&BondEvent::MacChanged { mac: mac1 }),
        "{evs:?}"
    );
    assert_eq!(b.mac(), mac1);
    // Gratuitous ARPs now come from the new MAC.
    b.learn_from_host(&{
        let mut f = host_arp();
        f[6..12].copy_from_slice(&mac1.0);
        f[22..28].copy_from_slice(&mac1.0);
        f
    });
    assert_eq!(b.host_ipv4(), Some(Ipv4Address([10, 0, 0, 1])));

    let (o, _) =
        BondOptions::parse_opts("mode=active-backup miimon=100 fail_over_mac=follow").unwrap();
    let mut f = Bond::new(o, BOND_MAC);
    f.add_port(
        at(0),
        PortInfo {
            perm_mac: BOND_MAC,
            ..info("eth0", 0, 1000)
        },
        true,
    );
    f.add_port(at(0), info("eth1", 2, 1000), true);
    let macs = |f: &mut Bond| -> Vec<_> {
        core::iter::from_fn(|| f.poll_event())
            .filter_map(|e| match e {
                BondEvent::MemberMac { port, mac } => Some((port.0, mac)),
                _ => None,
            })
            .collect()
    };
    assert_eq!(macs(&mut f), [], "member 0 already carries the bond's MAC");
    f.handle_carrier(at(10), PortId(0), false);
    assert_eq!(macs(&mut f), [(0, mac1), (1, BOND_MAC)]);
    assert_eq!(f.mac(), BOND_MAC, "follow keeps the bond's MAC");
}

/// An IGMPv2 membership report for 239.1.1.`g` from the bond.
fn igmp_report(g: u8) -> Vec<u8> {
    let mut f = vec![1, 0, 0x5e, 1, 1, g];
    f.extend_from_slice(&BOND_MAC.0);
    f.extend_from_slice(&[8, 0, 0x46, 0, 0, 32, 0, 0, 0, 0, 1, 2, 0, 0, 10, 0, 0, 1]);
    f.extend_from_slice(&[239, 1, 1, g, 0x94, 4, 0, 0, 0x16, 0, 0, 0, 239, 1, 1, g]);
    f
}

#[test]
fn resend_igmp_replays_the_hosts_reports_on_the_new_active_member() {
    let mut b = bond(
        "mode=active-backup miimon=100 resend_igmp=3 num_grat_arp=0",
        2,
    );
    b.learn_from_host(&igmp_report(7));
    b.learn_from_host(&igmp_report(8));
    assert!(sent_at(&mut b, at(0)).is_empty(), "no failover, no replay");
    b.handle_carrier(at(1000), PortId(0), false);
    let mut got = Vec::new();
    for t in (1000..2000).step_by(50) {
        for (p, f) in sent_at(&mut b, at(t)) {
            assert_eq!(p, PortId(1));
            got.push((t, f[5]));
            assert!(f == igmp_report(f[5]));
        }
    }
    assert_eq!(
        got,
        [
            (1000, 7),
            (1000, 8),
            (1200, 7),
            (1200, 8),
            (1400, 7),
            (1400, 8)
        ]
    );
    // resend_igmp=0: nothing.
    let mut z = bond(
        "mode=active-backup miimon=100 resend_igmp=0 num_grat_arp=0",
        2,
    );
    z.learn_from_host(&igmp_report(7));
    z.handle_carrier(at(1000), PortId(0), false);
    assert!(sent_at(&mut z, at(1000)).is_empty());
    // balance-xor has no single IGMP member: nothing either.
    let mut x = bond("mode=balance-xor miimon=100", 2);
    x.learn_from_host(&igmp_report(7));
    x.handle_carrier(at(1000), PortId(0), false);
    assert!(sent_at(&mut x, at(1000)).is_empty());
}

/// Frames the bond delivered to the host; `drained` says whether the members were read dry.
struct Host {
    up: Vec<u8>,
    drained: bool,
}

impl Dataplane for Host {
    fn send(&mut self, _: PortId, _: &mut [u8], _: usize, _: usize) -> bool {
        true
    }

    fn deliver(&mut self, frame: &[u8]) {
        self.up.push(frame[14]);
    }

    fn drained(&self) -> bool {
        self.drained
    }
}

/// In stripe mode the bond's one deadline covers stripe's reorder holes too: it wakes for the
/// hole before the next hello, and gives the hole up only once the members were read dry.
#[test]
fn stripe_bond_wakes_for_a_reorder_hole_and_gives_it_up_when_drained() {
    use crate::stripe::{Stripe, StripeConfig, header::HELLO_FRAME_LEN};
    let peer_mac = EthernetAddress([2, 0, 0, 0, 0, 0x99]);
    let mut b = bond("mode=stripe miimon=100", 2);
    let mut peer = Stripe::new(StripeConfig::default(), peer_mac, 7, Instant::ZERO);
    let ports = [(PortId(0), 10_000), (PortId(1), 10_000)];
    peer.set_members(Instant::ZERO, &ports);
    let mut buf = [0u8; 1600];
    let mut host = Host {
        up: Vec::new(),
        drained: true,
    };
    // Hellos both ways for 300 ms: both ends two-way.
    for ms in (0..300).step_by(10) {
        let t = at(ms);
        while let Some(tx) = b.poll_at(t, &mut buf) {
            peer.handle_frame(t, tx.port, &mut buf[..tx.len], &mut |_| ())
                .unwrap();
        }
        while let Some((port, h)) = peer.poll_transmit(t) {
            let mut f = vec![0u8; HELLO_FRAME_LEN];
            h.emit_frame(peer_mac, &mut f).unwrap();
            assert_eq!(b.receive(t, port, &mut f, &mut host), RxVerdict::Consumed);
        }
    }
    assert!(peer.is_striping());
    assert!(b.mode.stripe().unwrap().engine.is_striping());
    // Three frames from the peer; the second is lost, so the third waits behind a hole.
    let t = at(300);
    let mut frames = Vec::new();
    for n in 0..3u8 {
        let mut f = vec![0u8; 8 + 60];
        f[8..14].copy_from_slice(&BOND_MAC.0);
        f[14..20].copy_from_slice(&peer_mac.0);
        f[20..22].copy_from_slice(&[0x08, 0x00]);
        f[22] = n;
        let (port, start) = peer.transmit(&mut f, 8, 60).unwrap();
        frames.push((port, f[start..].to_vec()));
    }
    for i in [0, 2] {
        let (port, f) = &mut frames[i];
        assert_eq!(b.receive(t, *port, f, &mut host), RxVerdict::Consumed);
    }
    assert_eq!(host.up, vec![0], "frame 2 waits for frame 1");
    let engine = &b.mode.stripe().unwrap().engine;
    let hole = engine.poll_timeout().unwrap();
    let hello = engine.transmit_timeout().unwrap();
    assert!(hole < hello, "hole {hole:?}, hello {hello:?}");
    assert_eq!(b.poll_timeout(), Some(hole), "the bond wakes for the hole");
    // Frames still waiting in a member's socket: the hole is kept.
    host.drained = false;
    b.handle_timeout(hole, &mut host);
    assert_eq!(host.up, vec![0]);
    host.drained = true;
    b.handle_timeout(hole, &mut host);
    assert_eq!(host.up, vec![0, 2], "the hole given up, frame 2 delivered");
}

#[test]
fn a_fast_path_hands_the_bond_what_its_mode_and_monitors_read() {
    use crate::wire::EtherType;
    let n = |t: EtherType| u16::from(t);
    let plain = bond("mode=balance-xor miimon=100", 2).fast_path_reads();
    assert_eq!(plain.protocols, &[] as &[u16]);
    assert!(!plain.member_arp && !plain.ordered_tcp);
    for opts in [
        "mode=active-backup arp_interval=100 arp_ip_target=10.0.0.1",
        "mode=balance-alb miimon=100",
    ] {
        let r = bond(opts, 2).fast_path_reads();
        assert_eq!(
            r.protocols,
            [n(EtherType::Arp), n(EtherType::Ipv6)],
            "{opts}"
        );
        assert!(r.member_arp && !r.ordered_tcp, "{opts}");
    }
    let stripe = bond("mode=stripe miimon=100", 2).fast_path_reads();
    assert_eq!(
        stripe.protocols,
        [
            n(EtherType::Ipv4),
            n(EtherType::Ipv6),
            n(EtherType::Arp),
            n(crate::stripe::header::ETHERTYPE)
        ]
    );
    assert!(stripe.ordered_tcp && !stripe.member_arp);
}

/// The bond's own ARP probe for `target` (from the bond's learned 10.0.0.1), as a member hears
/// it when the switch floods it from the member that sent it.
fn own_probe(target: [u8; 4]) -> Vec<u8> {
    let mut f = vec![0xff; 6];
    f.extend_from_slice(&BOND_MAC.0);
    f.extend_from_slice(&[0x08, 0x06, 0, 1, 8, 0, 6, 4, 0, 1]);
    f.extend_from_slice(&BOND_MAC.0);
    f.extend_from_slice(&[10, 0, 0, 1, 0, 0, 0, 0, 0, 0]);
    f.extend_from_slice(&target);
    f
}

#[test]
fn arp_validate_on_a_backup_trusts_only_the_bonds_own_probes() {
    for v in options::ArpValidate::ALL.iter().map(|v| v.name()) {
        // The target answers the active member's probes; the switch copies its replies to the
        // backup too (a bond in broadcast mode at the far end does the same).
        let run = |backup_hears: &dyn Fn() -> Vec<u8>| {
            let mut b = bond(
                &format!(
                    "mode=active-backup arp_interval=100 arp_ip_target=10.0.0.9 arp_validate={v}"
                ),
                2,
            );
            b.learn_from_host(&host_arp());
            for t in (0..=1500).step_by(50) {
                b.tick(at(t));
                b.heard(at(t), PortId(0), &arp_reply_from([10, 0, 0, 9]));
                b.heard(at(t), PortId(1), &backup_hears());
            }
            assert_eq!(b.active(), Some(PortId(0)), "arp_validate={v}");
            b.snapshot(at(1500)).ports[1].mii
        };
        // Replies to the active member's probes prove nothing to a validating backup (the
        // target spoke to the bond, not through the backup's path to it).
        let validating = matches!(v, "backup" | "all" | "filter_backup");
        let expected = if validating {
            MiiStatus::Down
        } else {
            MiiStatus::Up
        };
        assert_eq!(
            run(&|| arp_reply_from([10, 0, 0, 9])),
            expected,
            "arp_validate={v}: backup hearing the target's replies"
        );
        // The bond's own probes, heard on the backup, prove its path to the switch.
        assert_eq!(
            run(&|| own_probe([10, 0, 0, 9])),
            MiiStatus::Up,
            "arp_validate={v}: backup hearing the bond's probes"
        );
        // A probe of the bond for another address proves nothing either.
        if validating {
            assert_eq!(
                run(&|| own_probe([10, 0, 0, 77])),
                MiiStatus::Down,
                "arp_validate={v}: probe for a non-target"
            );
        }
    }
}

#[test]
fn arp_validate_filter_counts_only_arp_where_it_does_not_validate() {
    for v in options::ArpValidate::ALL.iter().map(|v| v.name()) {
        // balance-xor: every member is active; both hear only TCP, and nothing is validated.
        let mut b = bond(
            &format!("mode=balance-xor arp_interval=100 arp_ip_target=10.0.0.9 arp_validate={v}"),
            2,
        );
        b.learn_from_host(&host_arp());
        for t in (0..=1500).step_by(50) {
            b.tick(at(t));
            b.heard(at(t), PortId(0), &tcp(1));
            // Member 1's frames pass a kernel fast path: only its counters are seen.
            b.note_received_elsewhere(at(t), PortId(1));
        }
        let s = b.snapshot(at(1500));
        let failures: Vec<u32> = s.ports.iter().map(|p| p.link_failures).collect();
        match v {
            // Any frame counts on an active member.
            "none" | "backup" => assert_eq!(failures, [0, 0], "arp_validate={v}"),
            // Only ARP counts (filter), or only validated ARP (active): taken out. A member
            // taken out is a backup: with `active` any frame brings it back, so it may flap.
            _ => assert!(
                failures.iter().all(|&f| f >= 1),
                "arp_validate={v}: {failures:?}"
            ),
        }
        if matches!(v, "filter" | "filter_backup" | "all" | "filter_active") {
            assert!(
                s.ports.iter().all(|p| p.mii == MiiStatus::Down),
                "arp_validate={v}: no ARP, members stay out"
            );
        }
        // With filter, any ARP counts where nothing validates (here, on the backups).
        if matches!(v, "filter" | "filter_active") {
            // (Back in the active state, `filter_active` validates it again: it may leave.)
            let mut back = false;
            for t in (1550..=1800).step_by(50) {
                b.tick(at(t));
                back |= b.snapshot(at(t)).ports[0].mii == MiiStatus::Up;
                b.heard(at(t), PortId(0), &arp_reply_from([10, 0, 0, 200]));
            }
            assert!(
                back,
                "arp_validate={v}: an unvalidated ARP brings a member back"
            );
        }
    }
}

#[test]
fn arp_validate_in_balance_xor_a_member_taken_out_validates_as_a_backup() {
    for v in options::ArpValidate::ALL.iter().map(|v| v.name()) {
        let mut b = bond(
            &format!("mode=balance-xor arp_interval=100 arp_ip_target=10.0.0.9 arp_validate={v}"),
            2,
        );
        b.learn_from_host(&host_arp());
        // Both hear the target's replies; member 1 then goes silent and is taken out.
        for t in (0..=600).step_by(50) {
            b.tick(at(t));
            b.heard(at(t), PortId(0), &arp_reply_from([10, 0, 0, 9]));
            if t < 200 {
                b.heard(at(t), PortId(1), &arp_reply_from([10, 0, 0, 9]));
            }
        }
        assert_eq!(b.usable(), &[PortId(0)], "arp_validate={v}");
        // The replies reach it again: enough where a backup does not validate.
        for t in (650..=1200).step_by(50) {
            b.tick(at(t));
            b.heard(at(t), PortId(0), &arp_reply_from([10, 0, 0, 9]));
            b.heard(at(t), PortId(1), &arp_reply_from([10, 0, 0, 9]));
        }
        let back = !matches!(v, "backup" | "all" | "filter_backup");
        assert_eq!(
            b.usable().len() == 2,
            back,
            "arp_validate={v}: back on the target's replies"
        );
        // The bond's probes from member 0, flooded to member 1, bring it back in every case.
        for t in (1250..=1600).step_by(50) {
            b.tick(at(t));
            b.heard(at(t), PortId(0), &arp_reply_from([10, 0, 0, 9]));
            b.heard(at(t), PortId(1), &own_probe([10, 0, 0, 9]));
        }
        assert_eq!(b.usable(), &[PortId(0), PortId(1)], "arp_validate={v}");
    }
}

#[test]
fn arp_validate_backup_trusts_the_bonds_probes_only_once_the_active_member_heard() {
    // The active member hears no valid ARP since it became active: the probes it sends prove
    // nothing to a backup that hears them (as the driver: the active member may be cut off).
    let mut b = bond(
        "mode=active-backup arp_interval=100 arp_ip_target=10.0.0.9 arp_validate=all",
        2,
    );
    b.learn_from_host(&host_arp());
    for t in (0..=1500).step_by(50) {
        b.tick(at(t));
        b.heard(at(t), PortId(0), &tcp(1));
        b.heard(at(t), PortId(1), &own_probe([10, 0, 0, 9]));
    }
    let s = b.snapshot(at(1500));
    assert_eq!(s.ports[1].mii, MiiStatus::Down, "{:?}", s.ports);
    assert!(!b.carrier());
}
