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
# Tests: TCP 1 stream, TCP 8 streams (2 x iperf3 -P 4), UDP 64 B (one flow, iperf3: a system
# call per datagram), all through `lagctl lab`; and 64-byte UDP from the batched sender of
# bench/kernels.sh (bench/tools/mmsg.c, its guest part run on this host), read by a reader that
# sleeps when it has read everything (udp64b) and by one that spins without sleeping (udp64p:
# the sender's CPU then never wakes the reader, so what differs between the two attachments is
# the frames' path alone). Two unshaped veth links. The two setups run back to back in pairs
# (which one first alternates), as in bench/fastpath.sh, and the report gives the pair ratios
# (tc / tcx).
#
# Usage, as root from anywhere:  bash bench/attach.sh
# Environment: RUNS (8), DURATION (seconds per measurement, 6), OUT (bench/attach.md),
# TESTS (a subset of "tcp1 tcp8 udp64 udp64b udp64p"; the first three by default).
# Needs: iproute2, iperf3, jq, python3, cargo, cc.
set -euo pipefail

cd "$(dirname "$0")/.."
RUNS="${RUNS:-8}"
DURATION="${DURATION:-6}"
OUT="${OUT:-bench/attach.md}"
read -ra TESTS <<<"${TESTS:-tcp1 tcp8 udp64}"
case " ${TESTS[*]} " in *" udp64b "* | *" udp64p "*) batched=1 ;; *) batched= ;; esac

# shellcheck source=bench/lib.sh
. bench/lib.sh
bench_start attach.sh lgat ip iperf3 jq python3 ${batched:+cc}
if [ -n "$batched" ]; then
    # bench/kernels.sh's guest part wants lagd, lagctl and mmsg in one directory.
    kb="$work/kernels"
    mkdir -p "$kb"
    cp "$LAGD" "$LAGCTL" "$kb/"
    cc -O2 -Wall -o "$kb/mmsg" bench/tools/mmsg.c
fi

# measure_batched SETUP TEST FILE: one run of bench/kernels.sh's batched UDP on this host, its
# datagrams/s written to FILE as `lagctl lab --json` would.
measure_batched() {
    local reader=block results="$kb/$(uname -r | cut -d. -f1-2)" pps
    [ "$2" = udp64p ] && reader=poll
    rm -rf "$results"
    ROUNDS=1 DURATION="$DURATION" SETUPS=lagd-xor TESTS=udp64 MMSG_READER=$reader \
        LAGD_EXTRA="fastpath_attach=$1" bash bench/kernels.sh --guest "$kb" \
        >"$work/err" 2>&1 || return 1
    pps=$(awk -F'\t' '$3 == "udp64" && $4 != "" {print $4}' "$results/results.tsv")
    [ -n "$pps" ] || return 1
    echo "{\"udp_pps\": $pps}" >"$3"
}

# measure_lab SETUP TEST FILE: one run of `lagctl lab`, its JSON in FILE.
measure_lab() {
    # shellcheck disable=SC2046 # the test's argument list is meant to split
    "$LAGCTL" lab --links 2 --rate 0 --mode balance-xor --policy layer3+4 --json --quiet \
        --duration "$DURATION" --lagd "$LAGD" --bond-opts "fastpath=on fastpath_attach=$1" \
        $(lab_test_args "$2") >"$3" 2>"$work/err"
}

measure() { # setup test run
    local file="$work/$1.$2.$3.json" how=measure_lab
    [[ $2 == udp64[bp] ]] && how=measure_batched
    if "$how" "$1" "$2" "$file"; then
        printf '  %-4s %-6s run %2s: %s\n' "$1" "$2" "$3" \
            "$(jq -r 'if .udp_pps then "\(.udp_pps) datagrams/s" else "\(.aggregate_gbps) Gbit/s" end' "$file")"
    else
        rm -f "$file"
        printf '  %-4s %-6s run %2s: FAILED: %s\n' "$1" "$2" "$3" "$(tail -1 "$work/err")"
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
import os, sys, time

sys.path.insert(0, "bench/tools")
from pairs import pair_tables, table_lines  # noqa: E402

work, runs, duration, out, machine, commit, iperf, chosen = sys.argv[1:9]
runs = int(runs)
goal = 0.97
tests = [
    t for t in [
        ("tcp1", "TCP, 1 stream", "Gbit/s", goal),
        ("tcp8", "TCP, 8 streams, 2 × iperf3 -P 4", "Gbit/s", goal),
        ("udp64", "UDP 64 B, 1 flow", "datagrams/s", goal),
        ("udp64b", "UDP 64 B, batched, reader sleeps", "datagrams/s", goal),
        ("udp64p", "UDP 64 B, batched, reader spins", "datagrams/s", goal),
    ] if t[0] in chosen.split()
]

rows, details = pair_tables(work, runs, tests, "tcx", "tc", False)

lines = []
w = lambda s="": lines.append(s)
w("<!-- bench/attach.sh: begin -->")
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
if any(t[0] in ("udp64b", "udp64p") for t in tests):
    w()
    w("*batched*: bench/kernels.sh's batched sender (`sendmmsg` of 64 datagrams, one flow) and")
    w("reader (`recvmmsg`, each datagram counted once), its guest part run on this host. *reader")
    w("sleeps*: the reader blocks when it has read everything and the sender's CPU wakes it;")
    w("*reader spins*: it reads without blocking and never sleeps (this host has a CPU to spare")
    w("for it), so no wake-up stands between the two attachments, only the frames' path.")
w()
lines += table_lines(rows, details, ["tcx (median)", "tc (median)", "ratio of medians",
                                     "pair ratio, median", "pair ratio, quartiles",
                                     "pairs ≥ 0.97x"])
w()
w("<!-- bench/attach.sh: end -->")
section = "\n".join(lines)
begin, end = lines[0], lines[-1]
# The section between the markers is replaced; what is written by hand around it stays.
text = open(out).read() if os.path.exists(out) else (
    "# The kernel fast path: tcx links against clsact filters, in pairs\n")
if begin in text and end in text:
    head, rest = text.split(begin, 1)
    text = head + section + rest.split(end, 1)[1]
else:
    text = text.rstrip("\n") + "\n\n" + section + "\n"
open(out, "w").write(text)
print(section)
EOF
echo "wrote $OUT"
