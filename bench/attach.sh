#!/usr/bin/env bash
# The kernel fast path attached two ways on the running kernel, in pairs: tcx links against
# direct-action cls_bpf filters on the clsact qdisc (issue 25: attach without tcx; goal:
# clsact >= 0.97x tcx, same run).
#
#   tcx  lagd at both ends, mode=balance-xor xmit_hash_policy=layer3+4 fastpath=on
#        fastpath_attach=tcx
#   tc   the same with fastpath_attach=tc
#
# fastpath=on makes lagd refuse to start without the kernel path, and fastpath_attach=tcx|tc
# without that attachment, so every figure is the programs' under the named attachment.
# Tests: TCP 1 stream, TCP 8 streams (2 x iperf3 -P 4), UDP 64 B (one flow). Two unshaped veth
# links. The two setups run back to back in pairs (which one first alternates), as in
# bench/fastpath.sh, and the report gives the pair ratios (tc / tcx).
#
# Usage, as root from anywhere:  bash bench/attach.sh
# Environment: RUNS (8), DURATION (seconds per measurement, 6), OUT (bench/attach.md),
# TESTS (a subset of "tcp1 tcp8 udp64").
# Needs: iproute2, iperf3, jq, python3, cargo.
set -euo pipefail

cd "$(dirname "$0")/.."
RUNS="${RUNS:-8}"
DURATION="${DURATION:-6}"
OUT="${OUT:-bench/attach.md}"
read -ra TESTS <<<"${TESTS:-tcp1 tcp8 udp64}"

# shellcheck source=bench/lib.sh
. bench/lib.sh
bench_start attach.sh lgat ip iperf3 jq python3

measure() { # setup test run
    local file="$work/$1.$2.$3.json"
    # shellcheck disable=SC2046 # the test's argument list is meant to split
    if "$LAGCTL" lab --links 2 --rate 0 --mode balance-xor --policy layer3+4 --json --quiet \
        --duration "$DURATION" --lagd "$LAGD" --bond-opts "fastpath=on fastpath_attach=$1" \
        $(lab_test_args "$2") >"$file" 2>"$work/err"; then
        printf '  %-4s %-5s run %2s: %s\n' "$1" "$2" "$3" \
            "$(jq -r 'if .udp_pps then "\(.udp_pps) datagrams/s" else "\(.aggregate_gbps) Gbit/s" end' "$file")"
    else
        rm -f "$file"
        printf '  %-4s %-5s run %2s: FAILED: %s\n' "$1" "$2" "$3" "$(tail -1 "$work/err")"
    fi
}

echo "attachment benchmark: $RUNS pairs of runs per test, ${DURATION} s each"
for run in $(seq 1 "$RUNS"); do
    for test in "${TESTS[@]}"; do
        if [ $((run % 2)) = 1 ]; then order=(tcx tc); else order=(tc tcx); fi
        for setup in "${order[@]}"; do
            measure "$setup" "$test" "$run"
        done
    done
done

python3 - "$work" "$RUNS" "$DURATION" "$OUT" "$(machine_line)" "$(git rev-parse --short HEAD)" \
    "$(iperf3 --version | head -1 | cut -d' ' -f1-2)" "${TESTS[*]}" <<'EOF'
import sys, time

sys.path.insert(0, "bench/tools")
from pairs import pair_tables  # noqa: E402

work, runs, duration, out, machine, commit, iperf, chosen = sys.argv[1:9]
runs = int(runs)
goal = 0.97
tests = [
    t for t in [
        ("tcp1", "TCP, 1 stream", "Gbit/s", goal),
        ("tcp8", "TCP, 8 streams, 2 × iperf3 -P 4", "Gbit/s", goal),
        ("udp64", "UDP 64 B, 1 flow", "datagrams/s", goal),
    ] if t[0] in chosen.split()
]

rows, details = pair_tables(work, runs, tests, "tcx", "tc", False)

with open(out, "w") as f:
    w = lambda s="": f.write(s + "\n")
    w("# The kernel fast path: tcx links against clsact filters, in pairs")
    w()
    w(f"Written by `bench/attach.sh` on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
      f"lagd {commit}.")
    w(f"Machine: {machine}; {iperf}. The machine is shared: other work may have run at the same time.")
    w()
    w("Two network namespaces joined by 2 unshaped veth links, lagd at both ends with")
    w("`mode=balance-xor xmit_hash_policy=layer3+4 fastpath=on` and *tcx*: `fastpath_attach=tcx`")
    w("(tcx links), *tc*: `fastpath_attach=tc` (direct-action cls_bpf filters on the clsact")
    w(f"qdisc). Each test ran {runs} times per setup, {duration} s each, the two setups back to")
    w("back (which one first alternates). *pair ratio*: tc / tcx within a pair; *reach*: the")
    w(f"pairs at or above {goal:.2f}x (issue 25's goal).")
    w()
    w("| test | tcx (median) | tc (median) | ratio of medians | pair ratio, median "
      "| pair ratio, quartiles | pairs ≥ 0.97x |")
    w("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        w(r)
    w()
    w("Every run, in order (pair 1 first):")
    w()
    w("| test | setup | runs |")
    w("| --- | --- | --- |")
    for r in details:
        w(r)
print(open(out).read())
EOF
echo "wrote $OUT"
