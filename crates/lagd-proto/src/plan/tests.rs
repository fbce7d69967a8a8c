//! Planner tests: every figure is recomputed here frame by frame with the hash code itself.

use super::flow::{BuildKeyHasher, FlowKey, FlowRecord, Tunnel, extract, parse_flow_spec};
use super::planner::Entry;
use super::report::Plan;
use super::sample::*;
use super::switch::SwitchHash;
use super::*;
use crate::balance::BalanceConfig;
use crate::capture::{LINKTYPE_ETHERNET, LINKTYPE_RAW, PcapNgWriter, PcapWriter, TsResolution};
use crate::hash::{HashPolicy, member_index, xmit_hash};
use crate::time::Instant;
use crate::wire::EthernetAddress;
use core::time::Duration;
use std::collections::HashMap;

/// Per-member (packets, bytes) computed frame by frame with the hash code.
fn expected(frames: &[Vec<u8>], policy: HashPolicy, n: usize) -> Vec<(u64, u64)> {
    let mut v = vec![(0u64, 0u64); n];
    for f in frames {
        let m = member_index(xmit_hash(policy, f), n).unwrap();
        v[m].0 += 1;
        v[m].1 += f.len() as u64;
    }
    v
}

fn loads(d: &report::Distribution) -> Vec<(u64, u64)> {
    d.members.iter().map(|m| (m.packets, m.bytes)).collect()
}

/// Per member (packets, bytes, flows).
fn loads_and_flows(d: &report::Distribution) -> Vec<(u64, u64, u64)> {
    d.members
        .iter()
        .map(|m| (m.packets, m.bytes, m.flows))
        .collect()
}

/// Per member (index, packets, bytes): after a failure, the survivors keep their indices.
fn indexed_loads(d: &report::Distribution) -> Vec<(usize, u64, u64)> {
    d.members
        .iter()
        .map(|m| (m.index, m.packets, m.bytes))
        .collect()
}

/// How many members carry any bytes.
fn busy_members(d: &report::Distribution) -> usize {
    d.members.iter().filter(|m| m.bytes > 0).count()
}

/// The default configuration for `n` members, evaluating only `policies`.
fn config_for(policies: Vec<PlanPolicy>, n: usize) -> PlanConfig {
    PlanConfig {
        policies,
        ..PlanConfig::new(n)
    }
}

#[test]
fn per_member_counts_match_the_hash_code_for_every_policy() {
    let frames = mixed_frames(7, 5000);
    for n in [2, 3, 4, 5, 8] {
        let plan = plan_of(&frames, PlanConfig::new(n));
        assert_eq!(plan.input.packets, 5000);
        for h in HashPolicy::ALL {
            let p = plan.policy(PlanPolicy::Hash(h)).unwrap();
            assert_eq!(
                loads(&p.dist),
                expected(&frames, h, n),
                "{h} with {n} members"
            );
            // Flows per member: each distinct key on the member of its first frame.
            let mut firsts: Vec<(FlowKey, usize)> = Vec::new();
            for f in &frames {
                let k = extract(f).key;
                if !firsts.iter().any(|(x, _)| *x == k) {
                    firsts.push((k, member_index(xmit_hash(h, f), n).unwrap()));
                }
            }
            let mut flows = vec![0u64; n];
            for (_, m) in &firsts {
                flows[*m] += 1;
            }
            let got: Vec<u64> = p.dist.members.iter().map(|m| m.flows).collect();
            assert_eq!(got, flows, "{h} flows with {n} members");
            assert_eq!(plan.flows, firsts.len() as u64);
        }
    }
}

#[test]
fn hashing_every_frame_gives_the_same_plan() {
    let frames = mixed_frames(11, 4000);
    let fast = plan_of(&frames, PlanConfig::new(3));
    let slow = plan_of(
        &frames,
        PlanConfig {
            reuse_hashes: false,
            ..PlanConfig::new(3)
        },
    );
    assert_eq!(fast, slow);
}

#[test]
fn sweep_and_imbalance_follow_the_loads() {
    let frames = mixed_frames(3, 3000);
    let plan = plan_of(&frames, PlanConfig::new(2));
    for h in HashPolicy::ALL {
        let p = plan.policy(PlanPolicy::Hash(h)).unwrap();
        assert_eq!(
            p.sweep.iter().map(|s| s.members).collect::<Vec<_>>(),
            [2, 3, 4, 8]
        );
        for s in &p.sweep {
            let e = expected(&frames, h, s.members);
            let total: u64 = e.iter().map(|x| x.1).sum();
            let max = e.iter().map(|x| x.1).max().unwrap();
            let want = max as f64 / (total as f64 / s.members as f64);
            assert!((s.imbalance - want).abs() < 1e-9, "{h} x{}", s.members);
            // Equal speeds: the bound is total / (max / 10).
            let bound = total as f64 / (max as f64 / 10.0);
            assert!((s.throughput_bound_gbps - bound).abs() < 1e-6);
        }
    }
}

#[test]
fn throughput_bound_weighs_member_speeds() {
    // Two flows that layer3+4 puts on different members; sizes 3:1.
    let a = frame_of("tcp 10.0.0.1:1234 > 10.0.0.2:80");
    let mut b = frame_of("tcp 10.0.0.1:1235 > 10.0.0.2:80");
    let ma = member_index(xmit_hash(HashPolicy::Layer34, &a), 2).unwrap();
    let mb = member_index(xmit_hash(HashPolicy::Layer34, &b), 2).unwrap();
    if ma == mb {
        b = frame_of("tcp 10.0.0.1:1236 > 10.0.0.2:80");
    }
    let mb = member_index(xmit_hash(HashPolicy::Layer34, &b), 2).unwrap();
    assert_ne!(ma, mb, "pick ports that split");
    let mut frames = vec![a.clone(); 3];
    frames.push(b.clone());
    let mut speeds = vec![0.0; 2];
    speeds[ma] = 25.0;
    speeds[mb] = 10.0;
    let cfg = PlanConfig {
        speeds_gbps: speeds,
        policies: vec![PlanPolicy::Hash(HashPolicy::Layer34)],
        ..PlanConfig::new(2)
    };
    let plan = plan_of(&frames, cfg);
    let p = &plan.policies[0];
    // Member ma carries 3 parts at 25G (0.12 time units), mb 1 part at 10G (0.1): ma limits,
    // so 4 parts go in 3/25 -> 33.33 Gbit/s.
    assert!((p.dist.throughput_bound_gbps - 4.0 / (3.0 / 25.0)).abs() < 1e-9);
    assert!((p.dist.imbalance - 1.5).abs() < 1e-9);
}

#[test]
fn round_robin_stripes_packets_and_counts_reordering() {
    // Flow A: 4 packets back to back; flow B interleaved every other packet.
    let a = frame_of("tcp 10.0.0.1:1 > 10.0.0.2:2");
    let b = frame_of("udp 10.0.0.3:1 > 10.0.0.4:2");
    let frames = vec![
        a.clone(),
        a.clone(),
        b.clone(),
        a.clone(),
        b.clone(),
        a.clone(),
    ];
    let cfg = config_for(vec![PlanPolicy::RoundRobin], 2);
    let plan = plan_of(&frames, cfg);
    let p = &plan.policies[0];
    assert_eq!(
        loads(&p.dist),
        vec![
            (3, a.len() as u64 + b.len() as u64 * 2),
            (3, a.len() as u64 * 3)
        ]
    );
    // Positions: a0 a1 b2 a3 b4 a5: member 0 gets a0 b2 b4, member 1 a1 a3 a5. Gaps within flows: a 1,2,2 (odd: 1 risk), b 2 (none).
    let r = p.reorder.unwrap();
    assert_eq!((r.packets, r.tcp_packets), (1, 1));
    assert!(p.has_reorder_risk());
    // With three members the sweep's imbalance is 1.0 for equal frames.
    assert_eq!(p.sweep[1].members, 3);
}

#[test]
fn failures_move_flows_as_the_kernel_and_ovs_do() {
    let frames = mixed_frames(5, 3000);
    let n = 4;
    let plan = plan_of(&frames, PlanConfig::new(n));
    for h in [HashPolicy::Layer34, HashPolicy::OvsTcp] {
        let ovs = h == HashPolicy::OvsTcp;
        let p = plan.policy(PlanPolicy::Hash(h)).unwrap();
        assert_eq!(p.failures.len(), n);
        for f in &p.failures {
            let survivors: Vec<usize> = (0..n).filter(|&i| i != f.failed).collect();
            let mut want = vec![(0u64, 0u64); n];
            let mut moved = 0;
            let mut collateral = 0;
            for fr in &frames {
                let hv = xmit_hash(h, fr);
                let before = hv as usize % n;
                let after = if ovs && before != f.failed {
                    before
                } else if ovs {
                    survivors[(hv & 0xff) as usize % (n - 1)]
                } else {
                    survivors[hv as usize % (n - 1)]
                };
                want[after].0 += 1;
                want[after].1 += fr.len() as u64;
                if after != before {
                    moved += fr.len() as u64;
                    if before != f.failed {
                        collateral += fr.len() as u64;
                    }
                }
            }
            let got = indexed_loads(&f.dist);
            let want: Vec<(usize, u64, u64)> = survivors
                .iter()
                .map(|&i| (i, want[i].0, want[i].1))
                .collect();
            assert_eq!(got, want, "{h} m{} down", f.failed);
            assert_eq!((f.bytes_moved, f.collateral_bytes), (moved, collateral));
            if ovs {
                assert_eq!(
                    f.collateral_flows, 0,
                    "OVS moves only the failed member's buckets"
                );
            }
            // The largest flows that move, judged from one of their frames.
            let mut want_moved = Vec::new();
            for (i, el) in plan.elephants.iter().enumerate() {
                let fr = frames.iter().find(|fr| extract(fr).key == el.key).unwrap();
                let hv = xmit_hash(h, fr);
                let before = hv as usize % n;
                let after = if ovs && before != f.failed {
                    before
                } else if ovs {
                    survivors[(hv & 0xff) as usize % (n - 1)]
                } else {
                    survivors[hv as usize % (n - 1)]
                };
                if after != before {
                    want_moved.push(i);
                }
            }
            assert_eq!(f.elephants_moved, want_moved, "{h} m{} down", f.failed);
        }
    }
}

#[test]
fn flows_beyond_the_cap_are_counted_exactly_but_not_tracked() {
    let frames = mixed_frames(9, 3000);
    let full = plan_of(&frames, PlanConfig::new(3));
    let capped = plan_of(
        &frames,
        PlanConfig {
            max_flows: 5,
            ..PlanConfig::new(3)
        },
    );
    assert_eq!(capped.flows, 5);
    assert!(capped.input.untracked.packets > 0);
    for (a, b) in full.policies.iter().zip(&capped.policies) {
        assert_eq!(a.policy, b.policy);
        assert_eq!(loads(&a.dist), loads(&b.dist), "{}", a.policy);
    }
    for (a, b) in full.return_path.iter().zip(&capped.return_path) {
        assert_eq!(loads(&a.dist), loads(&b.dist), "{}", a.hash);
    }
}

#[test]
fn flow_lists_weigh_each_flow_by_its_counters() {
    let text = "src_ip,dst_ip,proto,src_port,dst_port,packets,bytes\n\
                10.0.0.1,10.0.0.2,tcp,1000,80,10,15000\n\
                10.0.0.1,10.0.0.2,tcp,1001,80,5,500\n\
                10.0.0.1,10.0.0.2,tcp,1000,80,10,15000\n";
    let plan = plan_flows(text.as_bytes(), PlanConfig::new(2)).unwrap();
    assert_eq!(plan.input.packets, 25);
    assert_eq!(plan.input.bytes, 30500);
    assert_eq!(plan.flows, 2);
    assert_eq!(plan.input.rows, 3);
    for h in HashPolicy::ALL {
        let mut want = vec![(0u64, 0u64); 2];
        for (sp, p, b) in [(1000, 20, 30000), (1001, 5, 500)] {
            let f = frame_of(&format!("tcp 10.0.0.1:{sp} > 10.0.0.2:80"));
            // The flow list has no MACs: zero them as the planner does.
            let mut f = f;
            f[..12].fill(0);
            let m = member_index(xmit_hash(h, &f), 2).unwrap();
            want[m].0 += p;
            want[m].1 += b;
        }
        let got = loads(&plan.policy(PlanPolicy::Hash(h)).unwrap().dist);
        assert_eq!(got, want, "{h}");
    }
    let rr = plan.policy(PlanPolicy::RoundRobin).unwrap();
    assert_eq!(rr.dist.members[0].packets + rr.dist.members[1].packets, 25);
    assert_eq!(rr.dist.bytes(), 30500);
    assert!(plan.findings.iter().any(|f| f.kind == "no-macs"));
    let e = plan_flows(
        "src_ip,dst_ip,proto,bytes\n1.1.1.1,2.2.2.2,tcp,x\n".as_bytes(),
        PlanConfig::new(2),
    )
    .unwrap_err();
    assert!(e.to_string().contains("line 2, column bytes"), "{e}");
}

#[test]
fn captures_in_both_formats_and_other_link_types_are_read() {
    let frames = mixed_frames(21, 500);
    let mut w = PcapWriter::new(Vec::new(), LINKTYPE_ETHERNET).unwrap();
    for (i, f) in frames.iter().enumerate() {
        w.write_packet(1_000_000_000 + i as u64, f).unwrap();
    }
    let pcap = w.into_inner();
    let mut calls = 0;
    let a = plan_capture(&pcap[..], PlanConfig::new(2), &mut |_, _| calls += 1).unwrap();
    assert!(calls >= 1);
    let direct = plan_of(&frames, PlanConfig::new(2));
    assert_eq!(a.policies, direct.policies);
    assert_eq!((a.input.packets, a.input.bytes), (500, direct.input.bytes));
    assert_eq!(a.input.time_span, Some((1_000_000_000, 1_000_000_499)));

    // pcapng, two Ethernet interfaces and a raw-IP one.
    let mut w = PcapNgWriter::new(Vec::new()).unwrap();
    let e0 = w
        .add_interface(LINKTYPE_ETHERNET, 0, Some("eth0"), TsResolution::MICROS)
        .unwrap();
    let e1 = w
        .add_interface(LINKTYPE_ETHERNET, 0, Some("eth1"), TsResolution::NANOS)
        .unwrap();
    let raw = w
        .add_interface(LINKTYPE_RAW, 0, None, TsResolution::NANOS)
        .unwrap();
    for (i, f) in frames.iter().enumerate() {
        // 30 ms apart: equal frames on the two interfaces are not one frame seen twice.
        let t = 5_000_000_000 + i as u64 * 30_000_000;
        w.write_packet(if i % 2 == 0 { e0 } else { e1 }, t, f)
            .unwrap();
    }
    let ip = frame_of("udp 10.0.0.1:1 > 10.0.0.2:2");
    w.write_packet(raw, 5_000_000_000, &ip[14..]).unwrap();
    w.write_block_raw(0x0bad_cafe, &[1, 2, 3]).unwrap();
    let ng = w.into_inner();
    let b = plan_capture(&ng[..], PlanConfig::new(2), &mut |_, _| {}).unwrap();
    let mut with_raw = frames.clone();
    let mut rebuilt = vec![0u8; 12];
    rebuilt.extend_from_slice(&ip[12..]);
    with_raw.push(rebuilt);
    let c = plan_of(&with_raw, PlanConfig::new(2));
    assert_eq!(b.policies, c.policies);
    assert_eq!(b.input.rebuilt_ethernet, 1);
}

#[test]
fn corrupt_captures_are_errors_naming_the_offset() {
    let mut w = PcapWriter::new(Vec::new(), LINKTYPE_ETHERNET).unwrap();
    for f in mixed_frames(1, 10) {
        w.write_packet(0, &f).unwrap();
    }
    let pcap = w.into_inner();
    let cut = &pcap[..pcap.len() - 5];
    let e = plan_capture(cut, PlanConfig::new(2), &mut |_, _| {}).unwrap_err();
    assert!(matches!(e, PlanError::Capture(_)));
    assert!(e.to_string().contains("at byte "), "{e}");
    let e = plan_capture(&b"hello world"[..], PlanConfig::new(2), &mut |_, _| {}).unwrap_err();
    assert!(e.to_string().contains("at byte 0"), "{e}");
}

#[test]
fn bad_configurations_are_refused() {
    let bad = [
        PlanConfig::new(0),
        PlanConfig::new(MAX_MEMBERS + 1),
        PlanConfig {
            speeds_gbps: vec![10.0, f64::NAN],
            ..PlanConfig::new(2)
        },
        PlanConfig {
            speeds_gbps: vec![10.0, -1.0],
            ..PlanConfig::new(2)
        },
        PlanConfig {
            sweep: vec![0],
            ..PlanConfig::new(2)
        },
        config_for(vec![], 2),
        PlanConfig {
            max_flows: 0,
            ..PlanConfig::new(2)
        },
    ];
    for c in bad {
        assert!(matches!(Planner::new(c), Err(PlanError::Config(_))));
    }
    assert_eq!("rr".parse::<PlanPolicy>(), Ok(PlanPolicy::RoundRobin));
    assert!(
        "layer5"
            .parse::<PlanPolicy>()
            .unwrap_err()
            .contains("balance-rr")
    );
}

fn mac(b: [u8; 6]) -> EthernetAddress {
    EthernetAddress(b)
}

fn rec(src_mac: [u8; 6], dst_mac: [u8; 6], spec: &str, bytes: u64) -> FlowRecord {
    FlowRecord {
        src_mac: mac(src_mac),
        dst_mac: mac(dst_mac),
        packets: bytes / 1000 + 1,
        bytes,
        ..parse_flow_spec(spec).unwrap()
    }
}

/// A 1 MB flow `spec` between the MACs 02:00:00:00:00:01 and 02:00:00:00:00:02.
fn one_pair(spec: &str) -> FlowRecord {
    rec([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2], spec, 1_000_000)
}

fn plan_recs(recs: &[FlowRecord], n: usize) -> Plan {
    let mut p = Planner::new(PlanConfig::new(n)).unwrap();
    for r in recs {
        p.add_flow(r);
    }
    p.finish()
}

#[test]
fn predictable_macs_collapse_layer2_3() {
    // OVN-Kubernetes style: pod 10.128.0.x has MAC 0a:58:0a:80:00:xx.
    let mut recs = Vec::new();
    for a in 2..12u8 {
        for b in 20..24u8 {
            recs.push(rec(
                [0x0a, 0x58, 0x0a, 0x80, 0, a],
                [0x0a, 0x58, 0x0a, 0x80, 0, b],
                &format!("tcp 10.128.0.{a}:40000 > 10.128.0.{b}:8080"),
                1_000_000,
            ));
        }
    }
    let plan = plan_recs(&recs, 2);
    let l23 = plan.policy(PlanPolicy::Hash(HashPolicy::Layer23)).unwrap();
    // Every flow on one member.
    assert_eq!(busy_members(&l23.dist), 1);
    let f = plan
        .findings
        .iter()
        .find(|f| f.kind == "macs-follow-ips")
        .expect("the predictable-MAC finding");
    assert!(f.policies.contains(&PlanPolicy::Hash(HashPolicy::Layer23)));
    assert!(f.field.contains("MAC"));
    assert_ne!(
        plan.recommendation.as_ref().unwrap().policy,
        PlanPolicy::Hash(HashPolicy::Layer23)
    );
}

#[test]
fn macs_that_differ_only_in_ignored_bytes_and_one_peer_are_flagged() {
    // Ten hosts whose MACs differ only in byte 3, all talking to one gateway.
    let mut recs = Vec::new();
    for i in 0..10u8 {
        recs.push(rec(
            [0x02, 0, 0, i, 0, 0x10],
            [0x02, 0, 0, 0, 0, 0x01],
            &format!("tcp 10.0.0.{}:1000 > 192.0.2.1:443", i + 1),
            2_000_000,
        ));
    }
    let plan = plan_recs(&recs, 2);
    let kinds: Vec<&str> = plan.findings.iter().map(|f| f.kind).collect();
    assert!(kinds.contains(&"mac-bytes-ignored"), "{kinds:?}");
    let l2 = plan.policy(PlanPolicy::Hash(HashPolicy::Layer2)).unwrap();
    assert!((l2.dist.imbalance - 2.0).abs() < 1e-9);

    // One MAC pair (the gateway) carrying many flows.
    let recs: Vec<FlowRecord> = (0..10u16)
        .map(|i| {
            rec(
                [0x02, 0, 0, 0, 0, 0x10],
                [0x02, 0, 0, 0, 0, 0x01],
                &format!("tcp 10.0.0.1:{} > 192.0.2.{}:443", 1000 + i, i + 1),
                1_000_000,
            )
        })
        .collect();
    let plan = plan_recs(&recs, 2);
    assert!(plan.findings.iter().any(|f| f.kind == "one-peer"));
    assert!(plan.findings.iter().any(|f| f.kind == "one-source"));
}

#[test]
fn ports_that_vary_only_in_dropped_bits_are_flagged() {
    // layer3+4 drops the lowest bit of the fold: ports that differ only in bit 0 (of the
    // source and destination alike, which XOR-cancel in bit 0) land together. Search ports
    // whose variation the fold loses, with the hash code itself as judge.
    let base = |sp: u16, dp: u16| format!("tcp 10.0.0.1:{sp} > 10.0.0.2:{dp}");
    let mut recs = Vec::new();
    for k in 0..16u16 {
        // Source and destination both step by 0x0101: every byte of the ports word moves
        // together, and the XOR of the four bytes stays put.
        let sp = 0x4000 + k * 0x0101;
        let dp = 0x1000 + k * 0x0101;
        recs.push(one_pair(&base(sp, dp)));
    }
    let plan = plan_recs(&recs, 2);
    let l34 = plan.policy(PlanPolicy::Hash(HashPolicy::Layer34)).unwrap();
    assert_eq!(
        busy_members(&l34.dist),
        1,
        "the chosen ports collapse under layer3+4"
    );
    let f = plan
        .findings
        .iter()
        .find(|f| f.kind == "port-bits")
        .expect("port finding");
    assert_eq!(f.field, "TCP/UDP ports");
    assert!(f.policies.contains(&PlanPolicy::Hash(HashPolicy::Layer34)));
    // ovs-tcp mixes: no finding for it, and it spreads the flows.
    assert!(!f.policies.contains(&PlanPolicy::Hash(HashPolicy::OvsTcp)));
    let ovs = plan.policy(PlanPolicy::Hash(HashPolicy::OvsTcp)).unwrap();
    assert!(ovs.dist.imbalance < l34.dist.imbalance);
}

#[test]
fn tunnels_hiding_flows_and_single_elephants_are_flagged() {
    // GRE between two routers carrying many inner flows.
    let mut frames = Vec::new();
    for i in 0..40u16 {
        let mut gre = frame_of("gre 192.0.2.1 > 192.0.2.2");
        gre.extend_from_slice(&[0, 0, 0x08, 0x00]);
        let inner = frame_of(&format!("udp 10.66.0.1:{} > 10.66.0.2:5678", 1000 + i));
        gre.extend_from_slice(&inner[14..]);
        let l = (gre.len() - 14) as u16;
        gre[16..18].copy_from_slice(&l.to_be_bytes());
        // Three packets each: enough packets to judge (and 40 inner flows).
        frames.extend([gre.clone(), gre.clone(), gre]);
    }
    let plan = plan_of(&frames, PlanConfig::new(2));
    assert!(plan.sample.too_small.is_empty(), "{:?}", plan.sample);
    assert_eq!(plan.tunnels.len(), 1);
    assert_eq!(plan.tunnels[0].inner_flows, 40);
    assert_eq!(plan.tunnels[0].outer_flows, 1);
    let t = plan.findings.iter().find(|f| f.kind == "tunnel").unwrap();
    assert!(t.advice.contains("encap"), "{}", t.advice);
    // The encap policies see inside GRE: the finding names the others, not them.
    let blind: Vec<PlanPolicy> = [
        HashPolicy::Layer2,
        HashPolicy::Layer23,
        HashPolicy::Layer34,
        HashPolicy::VlanSrcMac,
        HashPolicy::OvsSlb,
        HashPolicy::OvsTcp,
    ]
    .into_iter()
    .map(PlanPolicy::Hash)
    .collect();
    assert_eq!(t.policies, blind);
    // Planned under the encap policies (and balance-rr) alone, the tunnel hides nothing.
    let only_encap = plan_of(
        &frames,
        config_for(
            vec![
                PlanPolicy::Hash(HashPolicy::Encap23),
                PlanPolicy::Hash(HashPolicy::Encap34),
                PlanPolicy::RoundRobin,
            ],
            2,
        ),
    );
    assert!(!only_encap.findings.iter().any(|f| f.kind == "tunnel"));
    // encap3+4 sees the inner ports; layer3+4 sees one flow.
    let l34 = plan.policy(PlanPolicy::Hash(HashPolicy::Layer34)).unwrap();
    let e34 = plan.policy(PlanPolicy::Hash(HashPolicy::Encap34)).unwrap();
    assert!((l34.dist.imbalance - 2.0).abs() < 1e-9);
    assert!(e34.dist.imbalance < 1.5);
    assert!(plan.findings.iter().any(|f| f.kind == "elephant"));
    // encap3+4 is the best hash policy here.
    let rec = plan.recommendation.unwrap();
    assert!(
        matches!(
            rec.policy,
            PlanPolicy::Hash(HashPolicy::Encap34 | HashPolicy::Encap23)
        ),
        "{rec:?}"
    );
    assert!(rec.reason.contains("Gbit/s"));
}

#[test]
fn recommendation_prefers_no_reordering_and_reports_elephant_collisions() {
    // Many flows that layer3+4 spreads evenly.
    let mut frames = Vec::new();
    for i in 0..400u16 {
        frames.push(frame_of(&format!(
            "tcp 10.0.0.1:{} > 10.0.0.2:80",
            20000 + i * 7
        )));
    }
    let plan = plan_of(&frames, PlanConfig::new(2));
    let r = plan.recommendation.as_ref().unwrap();
    assert_ne!(r.policy, PlanPolicy::RoundRobin);
    assert_eq!(plan.policies[0].rank, 1);
    let ranks: Vec<usize> = plan.policies.iter().map(|p| p.rank).collect();
    assert_eq!(ranks, (1..=PlanPolicy::ALL.len()).collect::<Vec<_>>());
    // Ranking is by throughput bound first.
    for w in plan.policies.windows(2) {
        let (a, b) = (&w[0], &w[1]);
        assert!(
            a.dist.throughput_bound_gbps >= b.dist.throughput_bound_gbps - 0.1,
            "{} before {}",
            a.policy,
            b.policy
        );
    }
    // Two big flows: under layer2 (same MACs) they collide.
    let mut frames = vec![frame_of("tcp 10.0.0.1:1 > 10.0.0.2:2"); 50];
    frames.extend(vec![frame_of("tcp 10.0.0.3:1 > 10.0.0.4:2"); 50]);
    let plan = plan_of(&frames, PlanConfig::new(2));
    let l2 = plan.policy(PlanPolicy::Hash(HashPolicy::Layer2)).unwrap();
    assert_eq!(l2.collisions.len(), 1);
    assert_eq!(l2.collisions[0].elephants, vec![0, 1]);
}

#[test]
fn round_robin_is_exact_for_any_member_counts() {
    // 997 members (prime) and a sweep whose common period is far above one group's limit.
    let frames = mixed_frames(13, 3000);
    let cfg = PlanConfig {
        policies: vec![PlanPolicy::RoundRobin],
        sweep: vec![2, 3, 8, 1000, 999],
        ..PlanConfig::new(997)
    };
    let plan = plan_of(&frames, cfg);
    let p = &plan.policies[0];
    let direct = |n: usize| {
        let mut v = vec![(0u64, 0u64); n];
        for (i, f) in frames.iter().enumerate() {
            v[i % n].0 += 1;
            v[i % n].1 += f.len() as u64;
        }
        v
    };
    assert_eq!(loads(&p.dist), direct(997));
    for s in &p.sweep {
        let d = direct(s.members);
        let total: u64 = d.iter().map(|x| x.1).sum();
        let max = d.iter().map(|x| x.1).max().unwrap();
        let want = max as f64 * s.members as f64 / total as f64;
        assert!((s.imbalance - want).abs() < 1e-9, "{} members", s.members);
    }
    // Reordering: a packet whose flow's previous packet is not a multiple of 997 back.
    let mut last: Vec<(FlowKey, usize)> = Vec::new();
    let mut risky = 0;
    for (i, f) in frames.iter().enumerate() {
        let k = extract(f).key;
        match last.iter_mut().find(|(x, _)| *x == k) {
            Some((_, prev)) => {
                if (i - *prev) % 997 != 0 {
                    risky += 1;
                }
                *prev = i;
            }
            None => last.push((k, i)),
        }
    }
    assert_eq!(p.reorder.unwrap().packets, risky);
}

#[test]
fn source_ports_in_strides_of_four_collapse_layer3_4() {
    // A client that allocates source ports 4 apart, within one 256-port block: layer3+4 folds
    // the port bytes with XOR and drops the lowest bit, so with two members the choice rests
    // on bit 1 of the low port byte, which never changes. Every connection takes one member.
    let recs: Vec<FlowRecord> = (0..32u16)
        .map(|k| one_pair(&format!("tcp 10.0.0.1:{} > 10.0.0.2:443", 40_000 + 4 * k)))
        .collect();
    let plan = plan_recs(&recs, 2);
    let l34 = plan.policy(PlanPolicy::Hash(HashPolicy::Layer34)).unwrap();
    assert_eq!(busy_members(&l34.dist), 1);
    let f = plan
        .findings
        .iter()
        .find(|f| f.kind == "port-bits")
        .unwrap();
    assert!(f.message.contains("lowest 2 bits"), "{}", f.message);
    assert!(f.message.contains("even-port pattern"), "{}", f.message);
    assert!(
        f.message.contains("every source port 0 mod 4"),
        "{}",
        f.message
    );
}

// Bucket policies: the daemon's bucket table over timed traffic.

#[test]
fn rebalancing_evens_out_elephants_that_start_on_one_member() {
    let t = skewed(60, 1, 1500, true);
    let plan = plan_timed(
        &t,
        bucket_config(vec![L34, L34_BUCKETS], 10_000, vec![10.0; 2]),
    );
    let modulo = plan.policy(L34).unwrap();
    let b = plan.policy(L34_BUCKETS).unwrap();
    assert_eq!(b.dist.bytes(), plan.input.bytes);
    assert_eq!(modulo.dist.bytes(), plan.input.bytes);
    // hash % 2: all three elephants on member 0.
    assert!(modulo.dist.imbalance > 1.9, "{}", modulo.dist.imbalance);
    let r = b.rebalancing.as_ref().unwrap();
    // One rebalance every 10 s of a 60 s capture (the last frame is just before 60 s).
    assert_eq!(r.counters.rebalances, 5);
    assert_eq!(r.intervals, 5);
    assert!(r.load_moves() >= 1, "{r:?}");
    // The busy elephants move only in their pauses.
    assert!(r.counters.deferred >= 1, "{r:?}");
    let (first, last) = (
        r.first_interval_imbalance.unwrap(),
        r.last_interval_imbalance.unwrap(),
    );
    // First interval: the table as assigned, like hash % 2. Last: one elephant moved over
    // (2 against 1 is the best three equal elephants allow: 2 / 1.5 = 1.33).
    assert!(first > 1.9, "{first}");
    assert!(last < 1.4, "{last}");
    assert!(
        b.dist.imbalance < modulo.dist.imbalance - 0.3,
        "{} vs {}",
        b.dist.imbalance,
        modulo.dist.imbalance
    );
    assert!(b.dist.throughput_bound_gbps > modulo.dist.throughput_bound_gbps + 3.0);
    assert_eq!(
        r.counters.forced, 0,
        "the elephants pause: no move is forced"
    );
    // Hashing every frame gives the same plan (the bucket tables see the same hashes).
    let slow = plan_timed(
        &t,
        PlanConfig {
            reuse_hashes: false,
            ..bucket_config(vec![L34, L34_BUCKETS], 10_000, vec![10.0; 2])
        },
    );
    assert_eq!(plan, slow);

    // Rebalancing off: no bucket moves for load, and with two equal members bucket b stays on
    // member b % 2, which is hash % 2.
    let off = plan_timed(&t, bucket_config(vec![L34, L34_BUCKETS], 0, vec![10.0; 2]));
    let b0 = off.policy(L34_BUCKETS).unwrap();
    let r0 = b0.rebalancing.as_ref().unwrap();
    assert_eq!(r0.counters.rebalances, 0);
    assert_eq!(r0.counters.planned, 0);
    assert_eq!(r0.counters.moves(), 0);
    assert_eq!(r0.load_moves(), 0);
    assert_eq!(loads(&b0.dist), loads(&off.policy(L34).unwrap().dist));

    // Elephants that never pause: once the mice are moved, no flowlet-safe move relieves
    // member 0, so after `force_after` (3) stuck passes the table moves a busy bucket at once,
    // and counts it (every 5 s, so that intervals after the forced move end in the capture).
    let t = skewed(60, 1, 1500, false);
    let plan = plan_timed(
        &t,
        bucket_config(vec![L34, L34_BUCKETS], 5_000, vec![10.0; 2]),
    );
    let b = plan.policy(L34_BUCKETS).unwrap();
    let r = b.rebalancing.as_ref().unwrap();
    assert!(r.counters.forced >= 1, "{r:?}");
    assert!(r.first_interval_imbalance.unwrap() > 1.9, "{r:?}");
    assert!(r.last_interval_imbalance.unwrap() < 1.4, "{r:?}");
}

#[test]
fn bucket_shares_follow_member_speeds() {
    // 4000 one-frame flows of equal size: bytes follow the bucket shares.
    let frames: Vec<Vec<u8>> = (0..4000u32)
        .map(|i| {
            frame_of(&format!(
                "tcp 10.{}.{}.1:{} > 10.9.0.1:443",
                i / 250,
                i % 250,
                1024 + i
            ))
        })
        .collect();
    for interval in [0, 10_000] {
        let cfg = bucket_config(vec![L34, L34_BUCKETS], interval, vec![10.0, 1.0]);
        let plan = plan_of(&frames, cfg);
        let b = plan.policy(L34_BUCKETS).unwrap();
        let r = b.rebalancing.as_ref().unwrap();
        // 256 * 10/11 = 232.7 and 256 * 1/11 = 23.3, by largest remainder: 233 and 23.
        assert_eq!(r.buckets, vec![233, 23]);
        let share = b.dist.members[1].bytes as f64 / b.dist.bytes() as f64;
        assert!((share - 23.0 / 256.0).abs() < 0.02, "{share}");
        // hash % 2 gives the 1G member half the traffic: it saturates at 2 Gbit/s.
        let modulo = plan.policy(L34).unwrap();
        assert!(
            modulo.dist.throughput_bound_gbps < 2.5,
            "{}",
            modulo.dist.throughput_bound_gbps
        );
        assert!(b.dist.throughput_bound_gbps > 9.0);
        assert!(b.rank < modulo.rank);
    }
    // Per unit of speed the shares are even: a 10G and a 1G member carrying 10:1.
    assert_eq!(
        buckets::speed_imbalance(&[1000, 100], &[10.0, 1.0]),
        Some(1.0)
    );
    assert_eq!(buckets::weight_mbps(10.0), 10_000);
    assert_eq!(buckets::weight_mbps(1e-6), 1);
}

/// Per member (packets, bytes) and the counters of a `Buckets` driven here frame by frame, as
/// the daemon drives it: members `PortId(i)` weighted by speed in Mb/s from time 0 (`failed`
/// leaving right away), rebalances when due, the hash of each frame.
fn drive_buckets(
    frames: &[(u64, Vec<u8>)],
    h: HashPolicy,
    config: BalanceConfig,
    speeds: &[f64],
    failed: Option<usize>,
) -> (Vec<(u64, u64)>, crate::balance::BalanceCounters) {
    use crate::balance::Buckets;
    use crate::port::PortId;
    let mut members: Vec<(PortId, u32)> = speeds
        .iter()
        .enumerate()
        .map(|(i, s)| (PortId(i as u16), (s * 1000.0) as u32))
        .collect();
    let mut b = Buckets::new(config);
    b.set_members(Instant::ZERO, &members);
    if let Some(f) = failed {
        members.remove(f);
        b.set_members(Instant::ZERO, &members);
    }
    let start = frames[0].0;
    let mut out = vec![(0u64, 0u64); speeds.len()];
    for (ts, f) in frames {
        let now = Instant::from_micros((ts - start) / 1000);
        while let Some(t) = b.poll_timeout().filter(|&t| t <= now) {
            b.handle_timeout(t);
        }
        let m = usize::from(
            b.member_for(now, xmit_hash(h, f), f.len() as u32)
                .unwrap()
                .0,
        );
        out[m].0 += 1;
        out[m].1 += f.len() as u64;
    }
    (out, *b.counters())
}

#[test]
fn bucket_policies_match_a_table_driven_frame_by_frame() {
    // A real capture file of skewed traffic, 20 s, rebalanced every 2 s.
    let t = skewed(20, 2, 600, true);
    let frames: Vec<(u64, Vec<u8>)> = t
        .events
        .iter()
        .map(|&(ts, f)| {
            let (fr, len) = &t.flows[f];
            let mut fr = fr.clone();
            fr.resize(*len as usize, 0);
            (T0 + ts, fr)
        })
        .collect();
    let mut w = PcapWriter::new(Vec::new(), LINKTYPE_ETHERNET).unwrap();
    for (ts, f) in &frames {
        w.write_packet(*ts, f).unwrap();
    }
    let pcap = w.into_inner();
    let balance = BalanceConfig {
        rebalance_interval: Duration::from_secs(2),
        ..BalanceConfig::default()
    };
    for speeds in [vec![10.0, 10.0], vec![10.0, 25.0]] {
        let cfg = PlanConfig {
            policies: PlanPolicy::BUCKETED.to_vec(),
            speeds_gbps: speeds.clone(),
            sweep: vec![3],
            balance,
            ..PlanConfig::new(2)
        };
        let plan = plan_capture(&pcap[..], cfg, &mut |_, _| {}).unwrap();
        for p in PlanPolicy::BUCKETED {
            let h = p.hash().unwrap();
            let got = plan.policy(p).unwrap();
            let (want, counters) = drive_buckets(&frames, h, balance, &speeds, None);
            assert_eq!(loads(&got.dist), want, "{p} {speeds:?}");
            let r = got.rebalancing.as_ref().unwrap();
            assert_eq!(r.counters, counters, "{p} {speeds:?}");
            if p == L34_BUCKETS && speeds[0] == speeds[1] {
                assert!(counters.moves() > 0, "the comparison moved nothing");
            }
            // The sweep's three members (the third at the first one's speed).
            let three = [speeds[0], speeds[1], speeds[0]];
            let (want3, _) = drive_buckets(&frames, h, balance, &three, None);
            let total: u64 = want3.iter().map(|x| x.1).sum();
            let max = want3.iter().map(|x| x.1).max().unwrap();
            let imbalance = max as f64 / (total as f64 / 3.0);
            assert_eq!(got.sweep[0].members, 3);
            assert_eq!(got.dist.bytes(), total);
            assert!((got.sweep[0].imbalance - imbalance).abs() < 1e-12, "{p}");
            // Each member failing at the start.
            assert_eq!(got.failures.len(), 2);
            for f in &got.failures {
                let (want, _) = drive_buckets(&frames, h, balance, &speeds, Some(f.failed));
                let want: Vec<(u64, u64)> =
                    (0..2).filter(|&i| i != f.failed).map(|i| want[i]).collect();
                assert_eq!(loads(&f.dist), want, "{p} m{} down", f.failed);
                assert_eq!((f.collateral_flows, f.collateral_bytes), (0, 0));
            }
        }
    }
}

#[test]
fn flow_lists_are_replayed_until_the_table_settles() {
    let text = skewed_flow_list();
    let cfg = bucket_config(vec![L34, L34_BUCKETS], 10_000, vec![10.0; 2]);
    let plan = plan_flows(text.as_bytes(), cfg).unwrap();
    let b = plan.policy(L34_BUCKETS).unwrap();
    let r = b.rebalancing.as_ref().unwrap();
    assert!(r.replayed);
    assert!(r.intervals >= 2, "{r:?}");
    assert!(r.load_moves() >= 1);
    // The report is one interval's worth: the whole list, as the table settled.
    assert_eq!(b.dist.bytes(), plan.input.bytes);
    assert_eq!(
        b.dist.members.iter().map(|m| m.packets).sum::<u64>(),
        plan.input.packets
    );
    assert_eq!(
        b.dist.members.iter().map(|m| m.flows).sum::<u64>(),
        plan.flows
    );
    let (first, last) = (
        r.first_interval_imbalance.unwrap(),
        r.last_interval_imbalance.unwrap(),
    );
    assert!(first > 1.9 && last < 1.4, "{first} -> {last}");
    assert!((b.dist.imbalance - last).abs() < 1e-9);
    assert!(b.dist.imbalance < plan.policy(L34).unwrap().dist.imbalance);
    // Off: one interval, the table as first assigned.
    let off = plan_flows(
        text.as_bytes(),
        bucket_config(vec![L34, L34_BUCKETS], 0, vec![10.0; 2]),
    )
    .unwrap();
    let b0 = off.policy(L34_BUCKETS).unwrap();
    assert_eq!(b0.rebalancing.as_ref().unwrap().intervals, 1);
    assert_eq!(loads(&b0.dist), loads(&off.policy(L34).unwrap().dist));
}

#[test]
fn bucket_policy_names_parse_and_print() {
    for h in HashPolicy::ALL {
        let p = PlanPolicy::Buckets(h);
        assert_eq!(p.name().parse::<PlanPolicy>(), Ok(p), "{p}");
        assert_eq!(format!("{h}+buckets").parse::<PlanPolicy>(), Ok(p));
        assert_eq!(p.hash(), Some(h));
    }
    assert_eq!(
        "balance-tcp".parse::<PlanPolicy>(),
        Ok(PlanPolicy::Buckets(HashPolicy::OvsTcp))
    );
    assert_eq!(
        "balance-slb".parse::<PlanPolicy>(),
        Ok(PlanPolicy::Buckets(HashPolicy::OvsSlb))
    );
    assert_eq!(L34_BUCKETS.name(), "layer3+4+buckets");
    assert!("layer9+buckets".parse::<PlanPolicy>().is_err());
    assert!(
        !PlanConfig::new(2).policies.contains(&L34_BUCKETS),
        "opt-in"
    );
    assert!(PlanPolicy::ALL_WITH_BUCKETS.contains(&L34_BUCKETS));
}

#[test]
fn long_idle_stretches_and_huge_flow_lists_stay_cheap() {
    // A second of traffic, then none for 11.6 days, then another frame: 100,000 rebalances
    // are due by then; the planner runs the first few and the last, and counts them all.
    let a = frame_of("tcp 10.0.0.1:1 > 10.0.0.2:2");
    let b = frame_of("tcp 10.0.0.3:1 > 10.0.0.4:2");
    let mut p = Planner::new(bucket_config(vec![L34_BUCKETS], 10_000, vec![10.0; 2])).unwrap();
    for ms in 0..1000u64 {
        p.set_time(T0 + ms * 1_000_000);
        p.add_frame(&a, 1500);
    }
    p.set_time(T0 + 1_000_000 * 1_000_000_000);
    p.add_frame(&b, 1500);
    // Time never goes back: an older timestamp counts as the latest.
    p.set_time(T0);
    p.add_frame(&b, 1500);
    let plan = p.finish();
    let r = plan.policies[0].rebalancing.as_ref().unwrap();
    assert_eq!(r.counters.rebalances, 100_000);
    assert_eq!(r.intervals, 1);
    assert_eq!(plan.policies[0].dist.bytes(), 1002 * 1500);

    // Rows of a terabyte each, all in one bucket: the table is fed a scaled-down mix, the
    // report keeps the exact counts.
    let mut text = String::from("src_ip,dst_ip,proto,src_port,dst_port,packets,bytes\n");
    for _ in 0..300 {
        text.push_str("10.0.0.1,10.0.0.2,tcp,1000,80,1099511627776,1099511627776\n");
    }
    text.push_str("10.0.0.5,10.0.0.6,udp,1000,53,1,100\n");
    let mut cfg = PlanConfig::new(3);
    cfg.policies = PlanPolicy::ALL_WITH_BUCKETS.to_vec();
    let plan = plan_flows(text.as_bytes(), cfg).unwrap();
    for p in PlanPolicy::BUCKETED {
        let d = &plan.policy(p).unwrap().dist;
        assert_eq!(d.bytes(), 300 * (1 << 40) + 100, "{p}");
    }
}

// balance-rr with a member down, against the daemon's own `Bond`.

/// A balance-rr bond of `n` 10G members with member `down` (if any) failed, as the daemon
/// runs it.
fn rr_bond(n: usize, down: Option<usize>) -> crate::bond::Bond {
    use crate::bond::{Bond, BondOptions, PortId, PortInfo};
    let (opts, _) = BondOptions::parse_opts("mode=balance-rr miimon=100").unwrap();
    let mut b = Bond::new(opts, EthernetAddress([2, 0xb0, 0, 0, 0, 1]));
    let t0 = Instant::ZERO;
    for i in 0..n {
        let info = PortInfo {
            name: format!("eth{i}"),
            perm_mac: EthernetAddress([2, 0, 0, 0, 0, i as u8 + 1]),
            speed_mbps: Some(10_000),
            full_duplex: Some(true),
        };
        b.add_port(t0, info, true);
    }
    if let Some(d) = down {
        b.handle_carrier(Instant::from_millis(5), PortId(d as u16), false);
    }
    while b.poll_event().is_some() {}
    b
}

/// Per member of `n`: (packets, bytes, distinct flows) of `frames`, each sent on the member
/// `send` picks for it.
fn tally(
    frames: &[Vec<u8>],
    n: usize,
    mut send: impl FnMut(&[u8]) -> usize,
) -> Vec<(u64, u64, u64)> {
    let mut out = vec![(0u64, 0u64, 0u64); n];
    let mut seen: Vec<Vec<FlowKey>> = vec![Vec::new(); n];
    for f in frames {
        let m = send(f);
        out[m].0 += 1;
        out[m].1 += f.len() as u64;
        let k = extract(f).key;
        if !seen[m].contains(&k) {
            seen[m].push(k);
            out[m].2 += 1;
        }
    }
    out
}

/// Per member: (packets, bytes, distinct flows) as the daemon's `Bond` sends `frames`.
fn rr_by_bond(frames: &[Vec<u8>], n: usize, down: Option<usize>) -> Vec<(u64, u64, u64)> {
    use crate::bond::{HostFrame, NoDataplane, TX_HEADROOM, TxVerdict};
    let mut b = rr_bond(n, down);
    tally(frames, n, |f| {
        let mut buf = vec![0u8; TX_HEADROOM + f.len()];
        buf[TX_HEADROOM..].copy_from_slice(f);
        let mut host = HostFrame::new(&mut buf, f.len(), Default::default()).unwrap();
        let TxVerdict::Port(p) = b.transmit(Instant::ZERO, &mut host, &mut NoDataplane) else {
            panic!("balance-rr always has a member here");
        };
        p.index()
    })
}

/// An IGMP membership report (IPv4 protocol 2) from `src`.
fn igmp_frame(src: u8) -> Vec<u8> {
    let mut f = vec![0x01, 0x00, 0x5e, 0, 0, 0x16, 2, 0, 0, 0, 0, src, 0x08, 0x00];
    f.extend_from_slice(&[0x46, 0, 0, 32, 0, 0, 0x40, 0, 1, 2, 0, 0, 10, 0, 0, src]);
    f.extend_from_slice(&[
        224, 0, 0, 22, 0x94, 4, 0, 0, 0x22, 0, 0xf9, 0x01, 0, 0, 0, 0,
    ]);
    f
}

#[test]
fn round_robin_failures_follow_the_daemons_walk_to_the_next_member() {
    // The mixed capture, with IGMP reports that leave on the first usable member.
    let mut frames = mixed_frames(17, 3000);
    for i in 0..40 {
        frames.insert(i * 70 + 3, igmp_frame(i as u8 % 3));
    }
    for n in [2usize, 3, 4, 5] {
        let plan = plan_of(&frames, config_for(vec![PlanPolicy::RoundRobin], n));
        let p = &plan.policies[0];
        let healthy = rr_by_bond(&frames, n, None);
        assert_eq!(loads_and_flows(&p.dist), healthy, "{n} members, none down");
        assert_eq!(p.failures.len(), n);
        for f in &p.failures {
            let want = rr_by_bond(&frames, n, Some(f.failed));
            assert_eq!(want[f.failed], (0, 0, 0), "the bond left m{} out", f.failed);
            let got: Vec<(usize, u64, u64, u64)> = f
                .dist
                .members
                .iter()
                .map(|m| (m.index, m.packets, m.bytes, m.flows))
                .collect();
            let want: Vec<(usize, u64, u64, u64)> = (0..n)
                .filter(|&i| i != f.failed)
                .map(|i| (i, want[i].0, want[i].1, want[i].2))
                .collect();
            assert_eq!(got, want, "{n} members, m{} down", f.failed);
            // What moves is exactly what the healthy bond sent on the failed member.
            assert_eq!(f.bytes_moved, healthy[f.failed].1);
            assert_eq!(f.flows_moved, healthy[f.failed].2);
            assert_eq!((f.collateral_flows, f.collateral_bytes), (0, 0));
        }
    }
    // Three members of equal frames, m0 down: m1 takes its own turns and m0's, m2 only its
    // own: 2/3 against a mean of 1/2, imbalance 1.33 (not the 1.0 of `i % 2` over survivors).
    let frames: Vec<Vec<u8>> = (0..3000u16)
        .map(|i| frame_of(&format!("tcp 10.0.0.1:{} > 10.0.0.2:80", 1000 + i % 50)))
        .collect();
    let plan = plan_of(&frames, config_for(vec![PlanPolicy::RoundRobin], 3));
    let f0 = &plan.policies[0].failures[0];
    assert!(
        (1.33..=1.37).contains(&f0.dist.imbalance),
        "{}",
        f0.dist.imbalance
    );
    assert_eq!(
        f0.dist
            .members
            .iter()
            .map(|m| m.packets)
            .collect::<Vec<_>>(),
        [2000, 1000]
    );
    // Every flow had packets on m0 (50 flows of 60 packets each, 3 members): all 50 move.
    assert_eq!(f0.flows_moved, 50);
    assert!(!f0.elephants_moved.is_empty());
}

#[test]
fn round_robin_flow_lists_record_each_rows_members() {
    // Rows are bursts back to back: 2 packets from position 0 (members 0, 1 of 3), then 1
    // packet at position 2 (member 2), then 4 at 3..7 (all).
    let text = "src_ip,dst_ip,proto,src_port,dst_port,packets,bytes\n\
                10.0.0.1,10.0.0.2,tcp,1000,80,2,2000\n\
                10.0.0.1,10.0.0.2,tcp,1001,80,1,1000\n\
                10.0.0.1,10.0.0.2,udp,1002,53,4,400\n";
    let plan = plan_flows(text.as_bytes(), config_for(vec![PlanPolicy::RoundRobin], 3)).unwrap();
    let p = &plan.policies[0];
    let flows: Vec<u64> = p.dist.members.iter().map(|m| m.flows).collect();
    assert_eq!(flows, [2, 2, 2]);
    // m2 down: its turns go to m0. Flows on m2: the second and the third row.
    let f2 = &p.failures[2];
    assert_eq!(f2.flows_moved, 2);
    let got: Vec<(usize, u64, u64)> = f2
        .dist
        .members
        .iter()
        .map(|m| (m.index, m.packets, m.flows))
        .collect();
    // m0: rows 1 and 3, plus row 2 (on m2 only, moving); m1: rows 1 and 3.
    assert_eq!(got, [(0, 7 - 2, 3), (1, 2, 2)]);
}

// The switch's return path: the replies to the captured frames.

/// The reply to `f`, built from its bytes: MACs swapped; after at most one VLAN tag, the IPv4
/// or IPv6 addresses swapped, and the ports too for TCP, UDP, SCTP, DCCP and UDP-Lite (IPv4:
/// not in a later fragment).
fn mirror(f: &[u8]) -> Vec<u8> {
    let mut r = f.to_vec();
    if r.len() < 14 {
        // A runt: whatever MAC bytes there are (the key reads them zero-padded).
        r.resize(12, 0);
        r.rotate_left(6);
        return r;
    }
    r[..6].copy_from_slice(&f[6..12]);
    r[6..12].copy_from_slice(&f[..6]);
    let (ty, nh) = match [f[12], f[13]] {
        [0x81, 0x00] | [0x88, 0xa8] if f.len() >= 18 => ([f[16], f[17]], 18),
        t => (t, 14),
    };
    let swap = |r: &mut Vec<u8>, a: usize, b: usize, len: usize| {
        if b + len <= r.len() {
            for i in 0..len {
                r.swap(a + i, b + i);
            }
        }
    };
    let ports = |p: u8| matches!(p, 6 | 17 | 33 | 132 | 136);
    match ty {
        [0x08, 0x00] if f.len() >= nh + 20 => {
            swap(&mut r, nh + 12, nh + 16, 4);
            let l4 = nh + usize::from(f[nh] & 0x0f) * 4;
            let later = u16::from_be_bytes([f[nh + 6], f[nh + 7]]) & 0x1fff != 0;
            if ports(f[nh + 9]) && !later {
                swap(&mut r, l4, l4 + 2, 2);
            }
        }
        [0x86, 0xdd] if f.len() >= nh + 40 => {
            swap(&mut r, nh + 8, nh + 24, 16);
            if ports(f[nh + 6]) {
                swap(&mut r, nh + 40, nh + 42, 2);
            }
        }
        _ => {}
    }
    r
}

#[test]
fn return_path_hashes_the_replies_under_every_switch_hash() {
    let frames = mixed_frames(29, 3000);
    for n in [2usize, 3, 4] {
        for chosen in SwitchHash::ALL {
            let plan = plan_of(
                &frames,
                PlanConfig {
                    switch_hash: chosen,
                    ..PlanConfig::new(n)
                },
            );
            assert_eq!(plan.return_path.len(), 7);
            assert_eq!(plan.return_path[0].hash, chosen);
            for r in &plan.return_path {
                let mut want = vec![(0u64, 0u64); n];
                let mut first: Vec<(FlowKey, usize)> = Vec::new();
                for f in &frames {
                    let link = r.hash.hash(&extract(&mirror(f)).key) as usize % n;
                    want[link].0 += 1;
                    want[link].1 += f.len() as u64;
                    let k = extract(f).key;
                    if !first.iter().any(|(x, _)| *x == k) {
                        first.push((k, link));
                    }
                }
                assert_eq!(loads(&r.dist), want, "{} over {n} links", r.hash);
                let mut flows = vec![0u64; n];
                for (_, l) in &first {
                    flows[*l] += 1;
                }
                let got: Vec<u64> = r.dist.members.iter().map(|m| m.flows).collect();
                assert_eq!(got, flows, "{} flows over {n} links", r.hash);
            }
        }
    }
    // One client fetching from 64 servers: the replies come from 64 addresses, so src-ip
    // spreads them and dst-ip (the one client) does not; the captured frames would say the
    // opposite.
    let frames: Vec<Vec<u8>> = (0..64u16)
        .map(|i| frame_of(&format!("tcp 10.0.0.1:{} > 10.1.0.{}:443", 40000 + i, i)))
        .collect();
    let plan = plan_of(&frames, PlanConfig::new(2));
    let path = |h: SwitchHash| {
        &plan
            .return_path
            .iter()
            .find(|r| r.hash == h)
            .expect("every switch hash")
            .dist
    };
    assert!((path(SwitchHash::SrcIp).imbalance - 1.0).abs() < 1e-9);
    assert!((path(SwitchHash::DstIp).imbalance - 2.0).abs() < 1e-9);
}

// Pathologies: addresses that differ only in bits the fold cancels; UDP tunnels.

#[test]
fn addresses_that_differ_only_in_cancelled_bits_are_flagged() {
    // 24 client/server pairs whose addresses move together (10.0.0.i > 10.0.1.i): the XOR of
    // source and destination is the same for every pair, so layer2+3 and layer3+4 (and the
    // encap forms) put all of them on one member, behind one MAC pair and one port pair alike.
    let recs: Vec<FlowRecord> = (1..=24u8)
        .map(|i| one_pair(&format!("tcp 10.0.0.{i}:5000 > 10.0.1.{i}:80")))
        .collect();
    let plan = plan_recs(&recs, 2);
    for (h, group) in [
        (HashPolicy::Layer23, "MACs"),
        (HashPolicy::Layer34, "ports"),
        (HashPolicy::Encap23, "MACs"),
        (HashPolicy::Encap34, "ports"),
    ] {
        let p = plan.policy(PlanPolicy::Hash(h)).unwrap();
        assert_eq!(busy_members(&p.dist), 1, "{h} collapses");
        let f = plan
            .findings
            .iter()
            .find(|f| f.kind == "ip-bits" && f.policies == [PlanPolicy::Hash(h)])
            .unwrap_or_else(|| panic!("no ip-bits finding for {h}: {:#?}", plan.findings));
        assert_eq!(f.field, "IP addresses");
        assert!(
            f.message
                .starts_with(&format!("In 1 of 1 groups of flows with the same {group}")),
            "{}",
            f.message
        );
        assert!(f.message.contains("(100% of the bytes)"), "{}", f.message);
        assert!(f.message.contains("its XOR fold cancels"), "{}", f.message);
        assert!(f.advice.contains("ovs-tcp"), "{}", f.advice);
    }
    // ovs-tcp mixes its input: it spreads the same pairs and is not flagged.
    let ovs = plan.policy(PlanPolicy::Hash(HashPolicy::OvsTcp)).unwrap();
    assert!(
        ovs.dist.members.iter().all(|m| m.bytes > 0),
        "{:?}",
        ovs.dist
    );
    assert!(
        !plan
            .findings
            .iter()
            .any(|f| f.kind == "ip-bits"
                && f.policies.contains(&PlanPolicy::Hash(HashPolicy::OvsTcp)))
    );
    // Addresses that vary independently spread under layer2+3: no finding.
    let mut rng = Rng(99);
    let recs: Vec<FlowRecord> = (0..24)
        .map(|_| {
            let (a, b) = (rng.below(250) + 1, rng.below(250) + 1);
            let (c, d) = (rng.below(250) + 1, rng.below(250) + 1);
            one_pair(&format!("tcp 10.0.{a}.{b}:5000 > 10.9.{c}.{d}:80"))
        })
        .collect();
    let plan = plan_recs(&recs, 2);
    assert!(
        !plan.findings.iter().any(|f| f.kind == "ip-bits"),
        "{:#?}",
        plan.findings
    );
}

/// A UDP tunnel frame: outer `udp SRC:sport > DST:port` around an 8-byte VXLAN or Geneve
/// header (`inner_type` 0x6558: Ethernet) and the inner flow's frame.
fn udp_tunnel(outer: &str, header: [u8; 8], inner: &str) -> Vec<u8> {
    let mut f = frame_of(outer);
    f.extend_from_slice(&header);
    f.extend_from_slice(&frame_of(inner));
    let ip_len = (f.len() - 14) as u16;
    f[16..18].copy_from_slice(&ip_len.to_be_bytes());
    f[38..40].copy_from_slice(&(ip_len - 20).to_be_bytes());
    f
}

const VXLAN: [u8; 8] = [0x08, 0, 0, 0, 0, 0, 7, 0];
const GENEVE: [u8; 8] = [0, 0, 0x65, 0x58, 0, 0, 7, 0];

#[test]
fn udp_tunnels_get_advice_about_outer_port_entropy() {
    let tunnel_finding = |plan: &Plan| {
        plan.findings
            .iter()
            .find(|f| f.kind == "tunnel")
            .cloned()
            .unwrap_or_else(|| panic!("no tunnel finding: {:#?}", plan.findings))
    };
    // VXLAN whose encapsulator uses one outer source port for 40 inner flows: nothing but
    // the inner flows varies, and no policy sees them.
    let frames: Vec<Vec<u8>> = (0..40u16)
        .map(|i| {
            udp_tunnel(
                "udp 192.0.2.1:49152 > 192.0.2.2:4789",
                VXLAN,
                &format!("tcp 10.200.0.1:{} > 10.200.0.2:22", 30000 + i),
            )
        })
        .collect();
    let plan = plan_of(&frames, PlanConfig::new(2));
    assert_eq!(plan.tunnels[0].tunnel, Tunnel::Vxlan);
    assert_eq!(
        (plan.tunnels[0].outer_flows, plan.tunnels[0].inner_flows),
        (1, 40)
    );
    let t = tunnel_finding(&plan);
    assert_eq!(t.field, "VXLAN outer headers");
    assert!(
        t.advice.starts_with(
            "Make the encapsulator derive the outer UDP source port from the inner flow"
        ),
        "{}",
        t.advice
    );
    assert!(
        t.advice
            .contains("encap policies do not look inside UDP tunnels")
    );
    // Every hashing policy is blind to the inner flows, the encap ones included (the kernel's
    // dissector does not enter UDP tunnels); balance-rr does not hash.
    let hashing: Vec<PlanPolicy> = HashPolicy::ALL.into_iter().map(PlanPolicy::Hash).collect();
    assert_eq!(t.policies, hashing);
    for h in HashPolicy::ALL {
        let p = plan.policy(PlanPolicy::Hash(h)).unwrap();
        assert!((p.dist.imbalance - 2.0).abs() < 1e-9, "{h} sees one flow");
    }

    // The same inner flows over 8 outer source ports (as Linux derives them): layer3+4 can
    // use that entropy, and the advice says so.
    let frames: Vec<Vec<u8>> = (0..40u16)
        .map(|i| {
            udp_tunnel(
                &format!("udp 192.0.2.1:{} > 192.0.2.2:4789", 49152 + 7 * (i % 8)),
                VXLAN,
                &format!("tcp 10.200.0.1:{} > 10.200.0.2:22", 30000 + i),
            )
        })
        .collect();
    let plan = plan_of(&frames, PlanConfig::new(2));
    assert_eq!(
        (plan.tunnels[0].outer_flows, plan.tunnels[0].inner_flows),
        (8, 40)
    );
    let t = tunnel_finding(&plan);
    assert!(
        t.advice.starts_with(
            "The encapsulator already varies the outer UDP source port over 8 outer flows: use layer3+4"
        ),
        "{}",
        t.advice
    );
    let l34 = plan.policy(PlanPolicy::Hash(HashPolicy::Layer34)).unwrap();
    assert!(l34.dist.members.iter().all(|m| m.bytes > 0));

    // Geneve with a fixed outer port: the same advice as VXLAN, named Geneve.
    let frames: Vec<Vec<u8>> = (0..40u16)
        .map(|i| {
            udp_tunnel(
                "udp 192.0.2.1:50000 > 192.0.2.2:6081",
                GENEVE,
                &format!("udp 10.7.0.{}:4000 > 10.7.1.1:53", i + 1),
            )
        })
        .collect();
    let plan = plan_of(
        &frames,
        config_for(
            vec![
                PlanPolicy::Hash(HashPolicy::Layer34),
                PlanPolicy::Hash(HashPolicy::Encap34),
                PlanPolicy::RoundRobin,
            ],
            2,
        ),
    );
    assert_eq!(plan.tunnels[0].tunnel, Tunnel::Geneve);
    assert_eq!(plan.tunnels[0].inner_flows, 40);
    let t = tunnel_finding(&plan);
    assert_eq!(t.field, "Geneve outer headers");
    assert!(
        t.advice.contains("(Linux Geneve does by default)"),
        "{}",
        t.advice
    );
    assert_eq!(
        t.policies,
        [
            PlanPolicy::Hash(HashPolicy::Layer34),
            PlanPolicy::Hash(HashPolicy::Encap34)
        ]
    );
}

// Stripe: the daemon's striping sender.

/// A daemon `Stripe` end on members of `speeds` (Mb/s), two-way with a peer (hellos
/// exchanged both ways, as in `crate::stripe`'s example), ready to transmit.
fn striping(speeds: &[u32]) -> crate::stripe::Stripe {
    use crate::stripe::{Stripe, StripeConfig};
    let now = Instant::ZERO;
    let members: Vec<(crate::bond::PortId, u32)> = speeds
        .iter()
        .enumerate()
        .map(|(i, &s)| (crate::bond::PortId(i as u16), s))
        .collect();
    let mut a = Stripe::new(StripeConfig::default(), mac([2, 0, 0, 0, 0, 1]), 11, now);
    let mut b = Stripe::new(StripeConfig::default(), mac([2, 0, 0, 0, 0, 2]), 22, now);
    a.set_members(now, &members);
    b.set_members(now, &members);
    let hellos = |from: &mut Stripe, to: &mut Stripe| {
        let mut frame = [0u8; 64];
        while let Some((port, hello)) = from.poll_transmit(now) {
            let len = hello
                .emit_frame(mac([2, 0, 0, 0, 0, 9]), &mut frame)
                .unwrap();
            to.handle_frame(now, port, &mut frame[..len], &mut |_| ())
                .unwrap();
        }
    };
    for _ in 0..2 {
        hellos(&mut a, &mut b);
        hellos(&mut b, &mut a);
    }
    assert!(a.is_striping());
    a
}

/// Per member (packets, bytes, distinct flows) as the daemon's `Stripe::transmit` sends
/// `frames` over members of `speeds` (Mb/s).
fn striped_by_daemon(frames: &[Vec<u8>], speeds: &[u32]) -> Vec<(u64, u64, u64)> {
    let mut s = striping(speeds);
    let mut buf = vec![0u8; 8 + 4096];
    tally(frames, speeds.len(), |f| {
        // The daemon reads a host frame 8 bytes into its buffer and encapsulates it in place.
        let mut frame = f.to_vec();
        frame.resize(frame.len().max(14), 0);
        buf[8..8 + frame.len()].copy_from_slice(&frame);
        let (port, _) = s.transmit(&mut buf, 8, frame.len()).unwrap();
        port.index()
    })
}

fn stripe_config(speeds: Vec<f64>) -> PlanConfig {
    PlanConfig {
        speeds_gbps: speeds,
        ..config_for(vec![PlanPolicy::Stripe], 1)
    }
}

#[test]
fn stripe_follows_the_daemons_striping_sender() {
    // No runts: the daemon refuses frames shorter than an Ethernet header.
    let frames: Vec<Vec<u8>> = mixed_frames(31, 3000)
        .into_iter()
        .filter(|f| f.len() >= 14)
        .collect();
    for speeds in [
        vec![10.0, 10.0],
        vec![10.0, 25.0, 1.0],
        vec![10.0, 10.0, 10.0, 10.0],
        vec![40.0, 10.0, 10.0, 2.5, 100.0],
    ] {
        let mbps: Vec<u32> = speeds.iter().map(|s| (s * 1000.0) as u32).collect();
        let n = speeds.len();
        let plan = plan_of(&frames, stripe_config(speeds.clone()));
        let p = &plan.policies[0];
        assert_eq!(p.policy, PlanPolicy::Stripe);
        let want = striped_by_daemon(&frames, &mbps);
        assert_eq!(loads_and_flows(&p.dist), want, "{speeds:?}");
        // Bytes on the wire (each frame with its 8-byte header) follow the speeds to within
        // one frame per member.
        let wire = |m: &report::MemberLoad| (m.bytes + 8 * m.packets) as f64;
        let total: f64 = p.dist.members.iter().map(wire).sum();
        let speed: f64 = speeds.iter().sum();
        let max_frame = frames.iter().map(|f| f.len() + 8).max().unwrap() as f64;
        for (m, s) in p.dist.members.iter().zip(&speeds) {
            let ideal = total * s / speed;
            assert!((wire(m) - ideal).abs() <= max_frame, "{speeds:?}: {m:?}");
        }
        assert!(p.reorder.is_none() && !p.has_reorder_risk());
        // Each member failing: the daemon striping over the survivors.
        assert_eq!(p.failures.len(), n);
        for f in &p.failures {
            let survivors: Vec<usize> = (0..n).filter(|&i| i != f.failed).collect();
            let s_mbps: Vec<u32> = survivors.iter().map(|&i| mbps[i]).collect();
            let by_daemon = striped_by_daemon(&frames, &s_mbps);
            let got = indexed_loads(&f.dist);
            let after: Vec<(usize, u64, u64)> = survivors
                .iter()
                .zip(&by_daemon)
                .map(|(&i, w)| (i, w.0, w.1))
                .collect();
            assert_eq!(got, after, "{speeds:?}, m{} down", f.failed);
            // What moves: the frames and flows the failed member carried.
            assert_eq!(f.bytes_moved, want[f.failed].1);
            assert_eq!(f.flows_moved, want[f.failed].2);
            assert_eq!((f.collateral_flows, f.collateral_bytes), (0, 0));
        }
        // The sweep: each count's members get bytes by speed (the round robin's share).
        for s in &p.sweep {
            let c = s.members;
            let w: Vec<f64> = (0..c)
                .map(|i| *speeds.get(i).unwrap_or(&speeds[0]))
                .collect();
            let max_ratio =
                w.iter().cloned().fold(0.0, f64::max) / (w.iter().sum::<f64>() / c as f64);
            assert!(
                (s.imbalance - max_ratio).abs() < 1e-3,
                "{speeds:?} x{c}: {}",
                s.imbalance
            );
            assert!(
                (s.throughput_bound_gbps - w.iter().sum::<f64>()).abs()
                    < 1e-3 * w.iter().sum::<f64>()
            );
        }
    }
}

#[test]
fn stripe_splits_one_elephant_but_is_recommended_only_without_other_choices() {
    let frames = one_elephant_and_mice();
    let plan = plan_of(&frames, PlanConfig::new(2));
    let stripe = plan.policy(PlanPolicy::Stripe).unwrap();
    assert!(
        (stripe.dist.imbalance - 1.0).abs() < 0.01,
        "{}",
        stripe.dist.imbalance
    );
    assert!(stripe.dist.throughput_bound_gbps > 19.8);
    assert_eq!(stripe.rank, 1, "the best bound, without reordering");
    // Recommended: a policy that works against any peer; stripe in the note.
    let r = plan.recommendation.as_ref().unwrap();
    assert!(r.policy.hash().is_some(), "{r:?}");
    let note = r.note.as_deref().unwrap();
    assert!(
        note.starts_with("With lagd in mode=stripe at both ends, stripe would deliver 20.0 Gbit/s"),
        "{note}"
    );
    // The elephant finding offers striping.
    let e = plan.findings.iter().find(|f| f.kind == "elephant").unwrap();
    assert!(
        e.advice.contains("lagd mode=stripe at both ends"),
        "{}",
        e.advice
    );
    // Asked about stripe (and balance-rr) alone, stripe is recommended, saying what it needs.
    let plan = plan_of(
        &frames,
        config_for(vec![PlanPolicy::RoundRobin, PlanPolicy::Stripe], 2),
    );
    let r = plan.recommendation.unwrap();
    assert_eq!(r.policy, PlanPolicy::Stripe);
    assert!(
        r.reason
            .starts_with("stripe spreads this traffic evenly over all 2 members"),
        "{}",
        r.reason
    );
    assert!(
        r.reason
            .ends_with("; it needs lagd mode=stripe at both ends."),
        "{}",
        r.reason
    );
}

#[test]
fn stripe_splits_flow_list_rows_by_speed() {
    let text = "src_ip,dst_ip,proto,src_port,dst_port,packets,bytes\n\
                10.0.0.1,10.0.0.2,tcp,1000,80,7,7000\n\
                10.0.0.1,10.0.0.2,tcp,1001,80,1,100\n";
    let plan = plan_flows(text.as_bytes(), stripe_config(vec![10.0, 25.0])).unwrap();
    let p = &plan.policies[0];
    // 7 packets 2:5 -> 2 and 5; 7000 bytes -> 2000 and 5000. The 1-packet row goes to the
    // faster member (the larger remainder), its bytes split 28:71 (+1 to m0).
    assert_eq!(
        loads_and_flows(&p.dist),
        [(2, 2000 + 29, 1), (5 + 1, 5000 + 71, 2)]
    );
    assert_eq!("stripe".parse::<PlanPolicy>(), Ok(PlanPolicy::Stripe));
    assert_eq!(PlanPolicy::Stripe.to_string(), "stripe");
    assert!(PlanPolicy::ALL.contains(&PlanPolicy::Stripe));
}

#[test]
fn table_slots_and_the_default_cap_are_as_documented() {
    // The module documentation's memory figures rest on these sizes.
    assert_eq!(size_of::<FlowKey>(), 56);
    assert_eq!(size_of::<Entry>(), 96);
    // The default cap is the most a 2^20-slot table holds (hashbrown: 7/8 full), so the
    // table never doubles for the last few flows.
    assert_eq!(DEFAULT_MAX_FLOWS, (1 << 20) / 8 * 7);
    let mut t: HashMap<FlowKey, Entry, BuildKeyHasher> = HashMap::default();
    t.reserve(DEFAULT_MAX_FLOWS);
    assert!(t.capacity() >= DEFAULT_MAX_FLOWS && t.capacity() < 1 << 20);
}

fn lacpdu(actor_port: u8) -> Vec<u8> {
    let mut f = vec![
        0x01, 0x80, 0xc2, 0, 0, 0x02, 2, 0, 0, 0, 0, actor_port, 0x88, 0x09, 1, 1,
    ];
    f.resize(124, 0);
    f
}

#[test]
fn control_frames_are_counted_apart_and_never_ranked() {
    // LACPDUs alone: no data traffic, no recommendation, no elephant.
    let only: Vec<Vec<u8>> = (0..50).map(|i| lacpdu(i % 2 + 1)).collect();
    let plan = plan_of(&only, PlanConfig::new(2));
    assert_eq!(plan.input.packets, 0);
    assert_eq!(plan.flows, 0);
    assert!(plan.elephants.is_empty());
    assert!(plan.recommendation.is_none());
    let lacp = plan.input.control.get(control::ControlKind::Lacp);
    assert_eq!((lacp.packets, lacp.bytes), (50, 50 * 124));
    // Mixed into data traffic, they change no policy's figures.
    let data = mixed_frames(7, 3000);
    let mut with = Vec::new();
    for (i, f) in data.iter().enumerate() {
        with.push(f.clone());
        if i % 10 == 0 {
            with.push(lacpdu(1));
            let mut lldp = vec![0x01, 0x80, 0xc2, 0, 0, 0x0e, 2, 0, 0, 0, 0, 3, 0x88, 0xcc];
            lldp.resize(60, 0);
            with.push(lldp);
        }
    }
    let a = plan_of(&data, PlanConfig::new(2));
    let b = plan_of(&with, PlanConfig::new(2));
    assert_eq!(a.policies, b.policies);
    assert_eq!(a.elephants, b.elephants);
    assert_eq!(b.input.control.total().packets, 600);
    assert_eq!(a.input.packets, b.input.packets);
}

#[test]
fn a_thin_sample_is_not_judged() {
    // Two ARP frames: too few packets and flows; the best policy is named, not recommended.
    let mut arp = vec![0xff; 6];
    arp.extend_from_slice(&[2, 0, 0, 0, 0, 9, 0x08, 0x06, 0, 1, 8, 0, 6, 4, 0, 1]);
    arp.resize(64, 0);
    let plan = plan_of(&[arp.clone(), arp], PlanConfig::new(2));
    assert!(plan.recommendation.is_none());
    assert!(plan.sample.best_in_sample.is_some());
    let why = plan.sample.too_small.join("; ");
    assert!(why.contains("only 2 data packets"), "{why}");
    assert!(why.contains("only 1 flows"), "{why}");
    // A short capture: 1000 packets of 200 flows within 10 ms.
    let mut p = Planner::new(PlanConfig::new(2)).unwrap();
    for i in 0..1000u64 {
        p.set_time(T0 + i * 10_000);
        let f = frame_of(&format!("udp 10.0.0.1:{} > 10.0.0.2:53", 1000 + i % 200));
        p.add_packet(&crate::capture::Packet {
            ts_nanos: T0 + i * 10_000,
            linktype: LINKTYPE_ETHERNET,
            orig_len: f.len() as u32,
            data: &f,
            interface: 0,
        });
    }
    let plan = p.finish();
    assert_eq!(plan.sample.too_small.len(), 1, "{:?}", plan.sample);
    assert!(plan.sample.too_small[0].contains("spans only 0.010 s"));
    assert!(plan.recommendation.is_none());
}

#[test]
fn confidence_from_halves_of_the_flows() {
    // 400 UDP flows of equal size: layer3+4 spreads any half of them well.
    let mut rng = Rng(11);
    let frames: Vec<Vec<u8>> = (0..400)
        .map(|_| {
            frame_of(&format!(
                "udp 10.0.{}.{}:{} > 10.9.0.1:{}",
                rng.below(256),
                rng.below(256),
                1024 + rng.below(60000),
                1024 + rng.below(60000)
            ))
        })
        .collect();
    let cfg = PlanConfig {
        policies: vec![L34, PlanPolicy::Hash(HashPolicy::Layer2)],
        ..PlanConfig::new(2)
    };
    let plan = plan_of(&frames, cfg.clone());
    let rec = plan.recommendation.as_ref().expect("a recommendation");
    assert_eq!(rec.policy, L34);
    let c = plan.sample.confidence.as_ref().expect("a confidence");
    assert_eq!(c.halves, 8);
    assert_eq!(c.level, "high");
    assert!(c.bound_range.0 > 0.8 && c.bound_range.1 <= 1.0, "{c:?}");
    // Three big flows and many mice: which policy wins depends on which half is looked at.
    let mut frames = Vec::new();
    for i in 0..3u16 {
        let mut f = frame_of(&format!("tcp 10.1.0.{i}:{} > 10.9.0.2:5201", 40000 + i));
        f.resize(1500, 0);
        frames.extend(std::iter::repeat_n(f, 300));
    }
    for i in 0..20u16 {
        frames.push(frame_of(&format!(
            "udp 10.2.0.{i}:{} > 10.9.0.3:53",
            2000 + i
        )));
    }
    let plan = plan_of(&frames, cfg);
    let c = plan.sample.confidence.as_ref().expect("a confidence");
    assert!(c.agreeing <= c.halves);
    assert!(c.bound_range.0 <= c.bound_range.1);
}

/// A Linux cooked (v1) header for `frame`'s payload: packet type, ARPHRD_ETHER, the source
/// MAC, the EtherType.
fn sll1(frame: &[u8], pkttype: u16) -> Vec<u8> {
    let mut h = pkttype.to_be_bytes().to_vec();
    h.extend_from_slice(&[0, 1, 0, 6]);
    h.extend_from_slice(&frame[6..12]);
    h.extend_from_slice(&[0, 0]);
    h.extend_from_slice(&frame[12..]);
    h
}

/// A Linux cooked v2 header on interface `ifindex`.
fn sll2(frame: &[u8], ifindex: u32) -> Vec<u8> {
    let mut h = frame[12..14].to_vec();
    h.extend_from_slice(&[0, 0]);
    h.extend_from_slice(&ifindex.to_be_bytes());
    h.extend_from_slice(&[0, 1, 4, 6]);
    h.extend_from_slice(&frame[6..12]);
    h.extend_from_slice(&[0, 0]);
    h.extend_from_slice(&frame[14..]);
    h
}

#[test]
fn cooked_captures_count_each_frame_once_and_mac_policies_are_not_judged() {
    let mut rng = Rng(5);
    let frames: Vec<Vec<u8>> = (0..300)
        .map(|i| {
            let mut f = frame_of(&format!(
                "udp 10.0.0.{}:{} > 10.1.0.1:{}",
                i % 50,
                1024 + rng.below(60000),
                1000 + i
            ));
            f.resize(100 + i, 0);
            f
        })
        .collect();
    // Every frame on the bond (ifindex 7) and on a member (3 or 4), 1 ms apart; one frame
    // really sent twice on the bond 1 ms apart is two frames.
    let mut w = PcapWriter::new(Vec::new(), crate::capture::LINKTYPE_LINUX_SLL2).unwrap();
    let mut w1 = PcapWriter::new(Vec::new(), crate::capture::LINKTYPE_LINUX_SLL).unwrap();
    let mut t = 1_000_000_000u64;
    for (i, f) in frames.iter().enumerate() {
        w.write_packet(t, &sll2(f, 7)).unwrap();
        w1.write_packet(t, &sll1(f, 4)).unwrap();
        t += 1_000_000;
        w.write_packet(t, &sll2(f, 3 + (i % 2) as u32)).unwrap();
        w1.write_packet(t, &sll1(f, 4)).unwrap();
        t += 10_000_000;
    }
    w.write_packet(t, &sll2(&frames[0], 7)).unwrap();
    w.write_packet(t + 1_000_000, &sll2(&frames[0], 7)).unwrap();
    for (cap, want) in [(w.into_inner(), 302), (w1.into_inner(), 300)] {
        let plan = plan_capture(&cap[..], PlanConfig::new(2), &mut |_, _| {}).unwrap();
        assert_eq!(plan.input.packets, want);
        assert_eq!(plan.input.duplicates, 300);
        assert_eq!(plan.input.rebuilt_ethernet, want);
        // Which copies were kept: cooked v2 by interface index (the bond's first, so its
        // copies stay and the members' go); cooked v1 records no interface.
        let ifs = &plan.input.interfaces;
        if want == 302 {
            assert_eq!(ifs.naming, Some(InterfaceNaming::Ifindex));
            let got: Vec<(u32, u64, u64)> = ifs
                .seen()
                .iter()
                .map(|f| (f.interface, f.kept, f.dropped))
                .collect();
            assert_eq!(got, [(7, 302, 0), (3, 0, 150), (4, 0, 150)]);
        } else {
            assert_eq!(ifs.naming, None);
            assert!(ifs.seen().is_empty());
        }
        for p in &plan.policies {
            let mac_dst = matches!(
                p.policy.hash(),
                Some(HashPolicy::Layer2 | HashPolicy::Layer23 | HashPolicy::Encap23)
            );
            assert_eq!(p.cannot_judge.is_some(), mac_dst, "{}", p.policy);
        }
        // The policies that cannot be judged rank last and are not recommended.
        let n = plan.policies.len();
        assert!(
            plan.policies[n - 3..]
                .iter()
                .all(|p| p.cannot_judge.is_some())
        );
        let rec = plan.recommendation.as_ref().expect("enough to judge");
        assert!(plan.policy(rec.policy).unwrap().cannot_judge.is_none());
    }
}

#[test]
fn a_capture_of_the_bond_and_a_member_counts_each_frame_once() {
    // pcapng with "bond0" and "eth1": every frame on both, 100 µs apart; frames only on the
    // bond (as the other member's) once; a frame repeated on one interface stays twice.
    let frames = mixed_frames(3, 400);
    let mut w = PcapNgWriter::new(Vec::new()).unwrap();
    let bond = w
        .add_interface(LINKTYPE_ETHERNET, 0, Some("bond0"), TsResolution::NANOS)
        .unwrap();
    let member = w
        .add_interface(LINKTYPE_ETHERNET, 0, Some("eth1"), TsResolution::NANOS)
        .unwrap();
    let mut t = 1_000_000_000u64;
    let mut both = 0;
    for (i, f) in frames.iter().enumerate() {
        w.write_packet(bond, t, f).unwrap();
        if i % 2 == 0 {
            w.write_packet(member, t + 100_000, f).unwrap();
            both += 1;
        }
        t += 30_000_000;
    }
    let ng = w.into_inner();
    let plan = plan_capture(&ng[..], PlanConfig::new(2), &mut |_, _| {}).unwrap();
    let direct = plan_of(&frames, PlanConfig::new(2));
    assert_eq!(plan.input.duplicates, both);
    assert_eq!(plan.input.packets, direct.input.packets);
    let ifs = &plan.input.interfaces;
    assert_eq!(ifs.naming, Some(InterfaceNaming::CaptureInterface));
    let got: Vec<(u32, u64, u64)> = ifs
        .seen()
        .iter()
        .map(|f| (f.interface, f.kept, f.dropped))
        .collect();
    assert_eq!(got, [(bond, frames.len() as u64, 0), (member, 0, both)]);
    assert_eq!(
        plan.interface_names,
        [(bond, "bond0".to_string()), (member, "eth1".to_string())]
    );
    assert_eq!(plan.policies, direct.policies);
}
