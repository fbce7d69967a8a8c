#!/usr/bin/env bash
# Where the sender's CPU goes under each attachment of the fast path (issue 25: clsact against
# tcx): bench/kernels.sh's batched 64-byte UDP on this host (its guest part, lagd-xor, the
# reader that spins, so the sender's CPU is the bottleneck), once with fastpath_attach=tcx and
# once with =tc per round (which one first alternates), and `perf record -a -g` over the middle
# of each run. For each run: datagrams/s, and the share of the sender's samples (its process,
# with the receive work the kernel does in its context) in
#   clsact    the functions only the clsact hooks run: tc_run, tcf_classify, __tcf_classify,
#             cls_bpf_classify
#   programs  lagd's programs (bpf_prog_*_lagd_*)
#   hooks     the functions both attachments run the hooks from: __netif_receive_skb_core,
#             sch_handle_ingress/egress, __dev_queue_xmit
# and a markdown table of them on stdout.
#
# Usage, as root from anywhere:  bash bench/attach_profile.sh
# Environment: ROUNDS (3), DURATION (seconds per run, 22), PERF_SECONDS (10).
# Needs: iproute2, jq, perf (linux-perf), cc.
set -euo pipefail

cd "$(dirname "$0")/.."
ROUNDS="${ROUNDS:-3}"
DURATION="${DURATION:-22}"
PERF_SECONDS="${PERF_SECONDS:-10}"

# shellcheck source=bench/lib.sh
. bench/lib.sh
bench_start attach_profile.sh kb ip jq perf cc
kb="$work/kernels"
mkdir -p "$kb"
cp "$LAGD" "$LAGCTL" "$kb/"
cc -O2 -Wall -o "$kb/mmsg" bench/tools/mmsg.c

# profile ATTACH ROUND: one run, its line of figures on stdout.
profile() {
    local att=$1 round=$2 results="$kb/$(uname -r | cut -d. -f1-2)" run sender="" p i pps
    rm -rf "$results"
    ROUNDS=1 DURATION="$DURATION" SETUPS=lagd-xor TESTS=udp64 MMSG_READER=poll \
        LAGD_EXTRA="fastpath_attach=$att" bash bench/kernels.sh --guest "$kb" \
        >"$work/run-$att-$round.log" 2>&1 &
    run=$!
    # The sender: the mmsg process whose command line says `send`.
    for i in $(seq 1 600); do
        for p in $(pgrep -x mmsg || true); do
            tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -q ' send ' && sender=$p
        done
        [ -n "$sender" ] && break
        sleep 0.1
    done
    [ -n "$sender" ] || { echo "no sender in run $att $round" >&2; wait "$run" || true; return 1; }
    sleep 4
    perf record -a -g -F 997 -o "$work/perf.data" -- sleep "$PERF_SECONDS" >/dev/null 2>&1
    wait "$run"
    pps=$(awk -F'\t' '$3 == "udp64" {print $4}' "$results/results.tsv")
    perf report -i "$work/perf.data" --no-children --pid "$sender" --sort symbol --stdio \
        -g none --percentage relative 2>/dev/null | grep '%' | grep -v '^#' |
        awk -v att="$att" -v round="$round" -v pps="${pps:-–}" '
            { p = $1; sub("%", "", p); sym = $3 }
            sym ~ /^(tc_run|tcf_classify|__tcf_classify|cls_bpf_classify)/ { c += p }
            sym ~ /^bpf_prog_.*lagd/ { g += p }
            sym ~ /^(__netif_receive_skb_core|sch_handle_|__dev_queue_xmit)/ { h += p }
            END { printf "%s\t%s\t%s\t%.2f\t%.2f\t%.2f\n", round, att, pps, c, g, h }'
}

echo "attachment profile: $ROUNDS rounds, ${DURATION} s runs, perf over ${PERF_SECONDS} s of each" >&2
rows="$work/rows.tsv"
for round in $(seq 1 "$ROUNDS"); do
    if [ $((round % 2)) = 1 ]; then order=(tcx tc); else order=(tc tcx); fi
    for att in "${order[@]}"; do
        profile "$att" "$round" | tee -a "$rows" >&2
    done
done

echo "| round | attachment | datagrams/s | clsact's functions | lagd's programs | hooks (both) | tc / tcx |"
echo "| ---: | --- | ---: | ---: | ---: | ---: | ---: |"
sort -k1,1n -k2,2r "$rows" | awk -F'\t' '
    { pps[$1, $2] = $3 }
    { printf "| %s | %s | %s | %.2f %% | %.2f %% | %.2f %% |", $1, $2, $3, $4, $5, $6 }
    $2 == "tc" && pps[$1, "tcx"] > 0 { printf " %.3fx |\n", $3 / pps[$1, "tcx"]; next }
    { print " |" }'
