//! Per-frame cost of parse + hash + member choice for every policy on representative frames.
//!
//! Run with `cargo bench -p lagd-proto --bench hash`; figures go to `bench/hash.md`.

#![allow(missing_docs)] // criterion_group! generates an undocumented public function

use criterion::{BenchmarkId, Criterion, Throughput, black_box, criterion_group, criterion_main};
use lagd_proto::bond::{Bond, BondOptions, HostFrame, NoDataplane, PortInfo, TX_HEADROOM};
use lagd_proto::hash::{HashPolicy, MemberMod, hasher};
use lagd_proto::stripe::segment::GsoInfo;
use lagd_proto::time::Instant;
use lagd_proto::wire::EthernetAddress;

fn frame(ethertype: u16, l3: &[u8], total: usize) -> Vec<u8> {
    let mut f = vec![0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0, 0x01];
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.extend_from_slice(l3);
    f.resize(total.max(f.len()), 0);
    f
}

fn ipv4(proto: u8, total: u16, sport: u16, dport: u16) -> Vec<u8> {
    let mut h = vec![0x45, 0];
    h.extend_from_slice(&total.to_be_bytes());
    h.extend_from_slice(&[0, 0, 0x40, 0, 64, proto, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2]);
    h.extend_from_slice(&sport.to_be_bytes());
    h.extend_from_slice(&dport.to_be_bytes());
    h
}

fn frames() -> Vec<(&'static str, Vec<u8>)> {
    let tcp64 = frame(0x0800, &ipv4(6, 50, 40000, 5201), 64);
    let udp1500 = frame(0x0800, &ipv4(17, 1486, 40000, 4789), 1500);
    let mut vlan = tcp64.clone();
    vlan.splice(12..12, [0x81, 0x00, 0x00, 0x64]);
    let mut v6 = vec![0x60, 0, 0, 0, 0, 20, 6, 64];
    v6.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8]);
    v6.extend_from_slice(&[0; 11]);
    v6.push(1);
    v6.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8]);
    v6.extend_from_slice(&[0; 11]);
    v6.push(2);
    v6.extend_from_slice(&[0x9c, 0x40, 0x14, 0x51]);
    let ipv6 = frame(0x86dd, &v6, 78);
    vec![
        ("ipv4-tcp-64B", tcp64),
        ("ipv4-udp-1500B", udp1500),
        ("vlan-ipv4-tcp-68B", vlan),
        ("ipv6-tcp-78B", ipv6),
    ]
}

fn bench(c: &mut Criterion) {
    let frames = frames();
    // The dataplane prepares the member modulo once per distribution change.
    let members = MemberMod::new(2).expect("two members");
    let mut group = c.benchmark_group("hash");
    group.throughput(Throughput::Elements(1));
    for policy in HashPolicy::ALL {
        let hash = hasher(policy);
        for (name, f) in &frames {
            group.bench_with_input(BenchmarkId::new(policy.name(), name), f, |b, f| {
                b.iter(|| black_box(members).index(hash(black_box(f))))
            });
        }
    }
    // What the loop, black_box and the call cost without any hashing: the floor under every
    // figure above.
    for (name, f) in &frames {
        group.bench_with_input(BenchmarkId::new("baseline-len", name), f, |b, f| {
            b.iter(|| black_box(members).index(black_box(f).len() as u32))
        });
    }
    group.finish();

    // The whole per-frame call the dataplane makes, Bond::transmit (learning, choice, fix-up,
    // verdict), against the bare hash and member choice above, in the same run.
    let mut group = c.benchmark_group("transmit");
    group.throughput(Throughput::Elements(1));
    let mac = EthernetAddress([0x02, 0, 0, 0, 0, 0x10]);
    for opts in [
        "mode=balance-xor xmit_hash_policy=layer3+4",
        "mode=balance-xor xmit_hash_policy=layer3+4 distribution=buckets",
        "mode=active-backup",
    ] {
        let (o, _) = BondOptions::parse_opts(opts).expect("valid options");
        let mut bond = Bond::new(o, mac);
        for i in 0..2u8 {
            let info = PortInfo {
                name: format!("eth{i}"),
                perm_mac: EthernetAddress([0x02, 0, 0, 0, 1, i]),
                speed_mbps: Some(10_000),
                full_duplex: Some(true),
            };
            bond.add_port(Instant::ZERO, info, true);
        }
        let (name, f) = &frames[0];
        let mut buf = vec![0u8; TX_HEADROOM + f.len()];
        buf[TX_HEADROOM..].copy_from_slice(f);
        let label = opts.replace("mode=", "").replace(" xmit_hash_policy=", " ");
        group.bench_function(BenchmarkId::new(label, name), |b| {
            b.iter(|| {
                let mut host = HostFrame::new(&mut buf, f.len(), GsoInfo::default())
                    .expect("room for the frame");
                black_box(bond.transmit(Instant::ZERO, &mut host, &mut NoDataplane))
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
