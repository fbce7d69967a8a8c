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
import json, os, statistics, sys, time

work, runs, duration, out, machine, commit, iperf, chosen = sys.argv[1:9]
runs = int(runs)
goal = 0.97
tests = [
    t for t in [
        ("tcp1", "TCP, 1 stream", "Gbit/s"),
        ("tcp8", "TCP, 8 streams, 2 × iperf3 -P 4", "Gbit/s"),
        ("udp64", "UDP 64 B, 1 flow", "datagrams/s"),
    ] if t[0] in chosen.split()
]


def value(setup, test, run):
    path = os.path.join(work, f"{setup}.{test}.{run}.json")
    if not os.path.exists(path):
        return None
    d = json.load(open(path))
    return d["udp_pps"] if test == "udp64" else d["aggregate_gbps"]


def quartiles(xs):
    if len(xs) < 4:
        return min(xs), max(xs)
    q = statistics.quantiles(xs, n=4)
    return q[0], q[2]


def num(x, unit):
    return f"{x:,.0f}" if unit == "datagrams/s" else f"{x:.2f}"


rows, details = [], []
for test, label, unit in tests:
    pairs = [(value("tcx", test, r), value("tc", test, r)) for r in range(1, runs + 1)]
    tcx = [a for a, _ in pairs if a is not None]
    tc = [b for _, b in pairs if b is not None]
    ratios = [b / a for a, b in pairs if a and b is not None]
    if not tcx or not tc or not ratios:
        rows.append(f"| {label} | – | – | – | – | – | – |")
        continue
    ma, mb = statistics.median(tcx), statistics.median(tc)
    lo, hi = quartiles(ratios)
    reach = sum(1 for r in ratios if r >= goal)
    rows.append(
        f"| {label} ({unit}) | {num(ma, unit)} | {num(mb, unit)} | {mb / ma:.2f}x "
        f"| {statistics.median(ratios):.2f}x | {lo:.2f}x – {hi:.2f}x | {reach} of {len(ratios)} |"
    )
    details.append(f"| {label} | tcx | " + " ".join(
        num(a, unit) if a is not None else "–" for a, _ in pairs) + " |")
    details.append(f"| | tc | " + " ".join(
        num(b, unit) if b is not None else "–" for _, b in pairs) + " |")
    details.append(f"| | ratio | " + " ".join(
        f"{b / a:.2f}" if a and b is not None else "–" for a, b in pairs) + " |")

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
