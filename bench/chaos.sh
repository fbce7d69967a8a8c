#!/usr/bin/env bash
# Chaos benchmarks (long versions of crates/lagd/tests/chaos.rs): slow-protocol floods on a
# member under TCP load, with a same-run baseline. Writes bench/reliability.md. Needs root,
# iproute2 and iperf3.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --release -p lagd --test chaos -- --ignored --nocapture --test-threads=1 bench_chaos
