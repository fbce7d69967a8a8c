//! The planner's per-packet cost: reading a classic pcap from memory and planning it under
//! every policy (the `lagctl plan` default, bucket policies included), and under the hash
//! policies and `balance-rr` alone, for a few flow mixes.
//!
//! Run with `cargo bench -p lagd-proto --bench plan`; figures and the end-to-end comparison
//! with tcpdump and tshark (on a file this bench writes when `LAGD_PLAN_BENCH_PCAP` is set) go
//! to `bench/plan.md`.

#![allow(missing_docs)] // criterion_group! generates an undocumented public function

use criterion::{BenchmarkId, Criterion, Throughput, black_box, criterion_group, criterion_main};
use lagd_proto::capture::{LINKTYPE_ETHERNET, PcapWriter};
use lagd_proto::plan::flow::parse_flow_spec;
use lagd_proto::plan::{PlanConfig, PlanPolicy, plan_capture};

/// `packets` 64-byte TCP frames over `flows` flows; `burst` frames of a flow back to back.
fn capture(packets: usize, flows: usize, burst: usize) -> Vec<u8> {
    let frames: Vec<Vec<u8>> = (0..flows)
        .map(|i| {
            let spec = format!(
                "tcp 10.{}.{}.{}:{} > 10.200.0.{}:443",
                i >> 16 & 0xff,
                i >> 8 & 0xff,
                i & 0xff,
                1024 + (i * 7919) % 60000,
                i % 13
            );
            let mut f = Vec::new();
            parse_flow_spec(&spec).unwrap().write_frame(&mut f);
            f[11] = i as u8;
            f.resize(64, 0);
            let tot = (64 - 14) as u16;
            f[16..18].copy_from_slice(&tot.to_be_bytes());
            f
        })
        .collect();
    let mut w = PcapWriter::new(Vec::with_capacity(packets * 80 + 24), LINKTYPE_ETHERNET).unwrap();
    // A fixed pseudo-random walk over the flows, skewed toward low-numbered ones.
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut i = 0;
    while i < packets {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let a = (x % flows as u64) as usize;
        let b = ((x >> 32) % flows as u64) as usize;
        for _ in 0..burst.min(packets - i) {
            w.write_packet(i as u64, &frames[a.min(b)]).unwrap();
            i += 1;
        }
    }
    w.into_inner()
}

fn bench(c: &mut Criterion) {
    // `LAGD_PLAN_BENCH_PCAP=FILE` also writes the end-to-end benchmark file of bench/plan.md:
    // 10 million 64-byte frames over 10,000 flows, interleaved.
    if let Some(path) = std::env::var_os("LAGD_PLAN_BENCH_PCAP") {
        std::fs::write(&path, capture(10_000_000, 10_000, 1)).expect("write the benchmark capture");
    }
    let mut group = c.benchmark_group("plan");
    group.sample_size(10);
    let packets = 1_000_000;
    for (name, flows, burst) in [
        ("1k-flows-interleaved", 1_000, 1),
        ("10k-flows-interleaved", 10_000, 1),
        ("10k-flows-bursts-of-8", 10_000, 8),
    ] {
        let file = capture(packets, flows, burst);
        group.throughput(Throughput::Elements(packets as u64));
        group.bench_with_input(BenchmarkId::new("all-policies", name), &file, |b, f| {
            b.iter(|| {
                let plan = plan_capture(&f[..], PlanConfig::new(2), &mut |_, _| {}).unwrap();
                black_box(plan.flows)
            })
        });
        group.bench_with_input(BenchmarkId::new("hash-policies", name), &file, |b, f| {
            b.iter(|| {
                let cfg = PlanConfig {
                    policies: PlanPolicy::ALL.to_vec(),
                    ..PlanConfig::new(2)
                };
                let plan = plan_capture(&f[..], cfg, &mut |_, _| {}).unwrap();
                black_box(plan.flows)
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
