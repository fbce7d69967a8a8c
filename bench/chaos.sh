#!/usr/bin/env bash
# Chaos benchmarks (long versions of crates/lagd/tests/chaos.rs): flap storms in every mode,
# kill -9 and restart, SIGSTOP, garbage, slow-protocol floods at 100k frames/s and control
# socket abuse under eight TCP connections with a 10 ms ping train, each against a same-run
# fault-free baseline; the 802.3ad storm in turn; a soak. Writes bench/reliability.md. Needs
# root, iproute2, ping and Open vSwitch.
#   CHAOS_ROUNDS (3)        fault/fault-free rounds per scenario
#   CHAOS_WINDOW (6)        seconds per run
#   CHAOS_SOAK_SECS (1800)  the soak's length
#   CHAOS_TURN_SECS (12)    the 802.3ad storm in turn's length
#   CHAOS_ONLY              run only scenarios whose name contains this (prints, writes nothing)
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --release -p lagd --test chaos -- --ignored --nocapture --test-threads=1 bench_chaos
