#!/usr/bin/env bash
# Every bonding mode on the kernel path against direct veth, in one run (issue 27, "Figures":
# TCP 1 stream and 8 streams >= 0.9x direct veth, UDP 64 B >= 0.8x, lagd under 2 % of a core, in
# every mode; balance-rr's one stream over two links at least balance-xor's figure, with its
# retransmits).
#
#   direct   no bond, an address pair on each veth (the baseline)
#   bridge   the same address pairs, host B's ends on a Linux bridge over its link ends: the
#            switch tlb and alb face below, without lagd (their second baseline)
#   xor      lagd at both ends, balance-xor layer3+4 fastpath=on (the reference)
#   encap34  balance-xor encap3+4          encap23  balance-xor encap2+3
#   rr       balance-rr (packets_per_slave=1)
#   ab       active-backup                 lacp     802.3ad layer3+4
#   tlb      balance-tlb layer3+4          alb      balance-alb layer3+4
#   bcast    broadcast (the receiving lagd hands its host one copy of each frame)
#   bcastdup broadcast with broadcast_dedup=off (every copy reaches the host, as from the
#            kernel bond; not in the default list: SETUPS="direct xor bcast bcastdup")
#   stripe   stripe (TCP striped over both links, ordered in the kernel; other frames one link
#            per flow)
#   (every lagd with fastpath=on and miimon=100; tlb and alb: lagd on host A only, host B a
#   Linux bridge over its link ends, as `lagctl lab` sets these modes up)
#
# Tests: TCP 1 stream, TCP 8 streams (two iperf3 pairs of -P 4), UDP 64 B (one flow). Two
# unshaped veth links. Each round runs every test through every setup back to back, the setups'
# order rotating from round to round, so the ratios to direct and to balance-xor can be taken
# within a round (the machine's state of the moment shared). While a lagd setup's traffic runs,
# bench/tools/lagd_watch.py asks every lagd for its status twice (the path it reports, and the
# member frames that went through lagd's own sockets rather than the kernel programs) and
# measures lagd's CPU between the two.
#
# Usage, as root from anywhere:  bash bench/modes.sh
# Environment: RUNS (4), DURATION (seconds per measurement, 8), OUT (bench/modes.md),
# SETUPS (space-separated, default all of the above), KEEP (a directory to keep the
# measurements in; bench/tools/modes_report.py writes the report from them again).
# Needs: iproute2, iperf3, jq, python3, cargo.
set -euo pipefail

cd "$(dirname "$0")/.."
RUNS="${RUNS:-4}"
DURATION="${DURATION:-8}"
OUT="${OUT:-bench/modes.md}"
read -r -a SETUPS <<<"${SETUPS:-direct bridge xor encap34 encap23 rr ab lacp tlb alb bcast stripe}"
TESTS=(tcp1 tcp8 udp64)

# shellcheck source=bench/lib.sh
. bench/lib.sh
bench_start modes.sh lgmd ip iperf3 jq python3

setup_args() { # setup: one argument a line
    local lagd=(--lagd "$LAGD" --bond-opts fastpath=on)
    case "$1" in
        direct) printf '%s\n' --baseline direct --mode balance-xor --policy layer3+4 ;;
        bridge) printf '%s\n' --baseline bridge --mode balance-xor --policy layer3+4 ;;
        xor) printf '%s\n' "${lagd[@]}" --mode balance-xor --policy layer3+4 ;;
        encap34) printf '%s\n' "${lagd[@]}" --mode balance-xor --policy encap3+4 ;;
        encap23) printf '%s\n' "${lagd[@]}" --mode balance-xor --policy encap2+3 ;;
        rr) printf '%s\n' "${lagd[@]}" --mode balance-rr --policy layer3+4 ;;
        ab) printf '%s\n' "${lagd[@]}" --mode active-backup --policy layer3+4 ;;
        lacp) printf '%s\n' "${lagd[@]}" --mode 802.3ad --policy layer3+4 ;;
        tlb) printf '%s\n' "${lagd[@]}" --mode balance-tlb --policy layer3+4 ;;
        alb) printf '%s\n' "${lagd[@]}" --mode balance-alb --policy layer3+4 ;;
        bcast) printf '%s\n' "${lagd[@]}" --mode broadcast --policy layer3+4 ;;
        bcastdup)
            printf '%s\n' --lagd "$LAGD" --bond-opts "fastpath=on broadcast_dedup=off" \
                --mode broadcast --policy layer3+4
            ;;
        stripe) printf '%s\n' "${lagd[@]}" --mode stripe --policy layer3+4 ;;
        *) echo "modes.sh: unknown setup $1" >&2; return 1 ;;
    esac
}

measure() { # setup test run
    local base="$work/$1.$2.$3" watcher=
    cut -d' ' -f1 /proc/loadavg >"$base.load"
    if [ "$1" != direct ] && [ "$1" != bridge ]; then
        python3 bench/tools/lagd_watch.py "$LAGD" "$LAGCTL" "$base.watch" "$DURATION" &
        watcher=$!
    fi
    local args
    mapfile -t args < <(setup_args "$1")
    # shellcheck disable=SC2046 # the test's argument list is meant to split
    if "$LAGCTL" lab --links 2 --rate 0 --json --quiet --duration "$DURATION" \
        "${args[@]}" $(lab_test_args "$2") >"$base.json" 2>"$base.err"; then
        printf '  %-7s %-5s run %s: %s\n' "$1" "$2" "$3" "$(jq -r 'if .udp_pps then "\(.udp_pps) datagrams/s" else "\(.aggregate_gbps) Gbit/s, retransmits \(.retransmits)" end + ", shares \([.members[].share * 100 | round] | map(tostring) | join("/"))"' "$base.json")"
    else
        rm -f "$base.json"
        printf '  %-7s %-5s run %s: FAILED: %s\n' "$1" "$2" "$3" "$(tail -1 "$base.err")"
    fi
    if [ -n "$watcher" ]; then
        kill "$watcher" 2>/dev/null || true
        wait "$watcher" 2>/dev/null || true
    fi
}

started=$(date +%s)
echo "modes benchmark: $RUNS rounds × ${#SETUPS[@]} setups × ${#TESTS[@]} tests, ${DURATION} s each"
for run in $(seq 1 "$RUNS"); do
    n=${#SETUPS[@]}
    for test in "${TESTS[@]}"; do
        for i in $(seq 0 $((n - 1))); do
            measure "${SETUPS[$(((i + run - 1) % n))]}" "$test" "$run"
        done
    done
done
echo "measured in $((($(date +%s) - started) / 60)) min"
if [ -n "${KEEP:-}" ]; then
    mkdir -p "$KEEP"
    cp "$work"/*.json "$work"/*.watch "$work"/*.err "$work"/*.load "$KEEP/" 2>/dev/null || true
    echo "measurements kept in $KEEP"
fi

python3 bench/tools/modes_report.py "$work" "$RUNS" "$DURATION" "$OUT" "$(machine_line)" \
    "$(git rev-parse --short HEAD)" "$(iperf3 --version | head -1 | cut -d' ' -f1-2)" "${SETUPS[@]}"
cat "$OUT"
echo "wrote $OUT"
