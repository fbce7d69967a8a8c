#!/usr/bin/env bash
# The balancing benchmark (issue 6), on the lab's topology: two hosts (network namespaces)
# joined by 2 veth links shaped to 1 Gbit/s each (tc tbf, burst 256kb).
#
#   1 stream   one TCP stream: lagd stripe, lagd balance-rr, and MPTCP with two subflows over
#              the same two links (no bond; the kernel's MPTCP, one address pair per link)
#   8 streams  8 TCP streams, layer3+4: balance-xor as the kernel maps hashes (hash % 2), and
#              with lagd's bucket table rebalanced every 2 s
#   skewed mix 2 elephant TCP streams whose hashes share a member + 50 mice (32 KB bursts every
#              100-300 ms): each member's share of the bytes in the first 2 s and in the last
#              4 s of a 14 s run, without and with rebalancing (busiest / mean)
#
# Every throughput figure is the median of RUNS runs (default 3), runs interleaved. Writes
# bench/balance.md.
#
# Usage, as root from anywhere:  bash bench/balance.sh
# Environment: RUNS (3), DURATION (seconds per throughput measurement, 10), OUT.
# Needs: iproute2, iperf3, python3, jq, cargo.
set -euo pipefail

cd "$(dirname "$0")/.."
RUNS="${RUNS:-3}"
DURATION="${DURATION:-10}"
OUT="${OUT:-bench/balance.md}"
MIX_SECONDS=14

# shellcheck source=bench/lib.sh
. bench/lib.sh
PREFIX="lagdbench-$$"
bench_start balance.sh "$PREFIX" ip tc iperf3 python3 jq cargo

lab() { # name run args...
    local name=$1 run=$2
    shift 2
    if "$LAGCTL" lab --links 2 --rate 1gbit --json --quiet --lagd "$LAGD" "$@" \
        >"$work/$name.$run.json" 2>"$work/$name.$run.err"; then
        printf '  %-12s run %s: %s Gbit/s, retransmits %s\n' "$name" "$run" \
            "$(jq -r .aggregate_gbps "$work/$name.$run.json")" \
            "$(jq -r .retransmits "$work/$name.$run.json")"
    else
        rm -f "$work/$name.$run.json"
        printf '  %-12s run %s: FAILED: %s\n' "$name" "$run" "$(tail -1 "$work/$name.$run.err")"
    fi
}

# Two namespaces joined by 2 veth links shaped to 1 Gbit/s; prints nothing.
topology() { # tag
    bench_topology "$PREFIX-$1-a" "$PREFIX-$1-b" 2 1gbit
}

untopology() { # tag
    bench_untopology "$PREFIX-$1-a" "$PREFIX-$1-b"
}

mptcp() { # run
    local tag="mp$1" a b
    topology "$tag"
    a="$PREFIX-$tag-a"
    b="$PREFIX-$tag-b"
    for i in 0 1; do
        ip -n "$a" addr add "10.77.$i.1/24" dev "m$i"
        ip -n "$b" addr add "10.77.$i.2/24" dev "m$i"
    done
    for ns in "$a" "$b"; do
        ip netns exec "$ns" sysctl -qw net.mptcp.enabled=1
        ip -n "$ns" mptcp limits set subflow 2 add_addr_accepted 2
    done
    ip -n "$a" mptcp endpoint add 10.77.1.1 dev m1 subflow
    ip -n "$b" mptcp endpoint add 10.77.1.2 dev m1 signal
    ip netns exec "$b" python3 bench/tools/stream.py server mptcp 10.77.0.2 5600 \
        >"$work/mptcp.$1.out" &
    local server=$!
    sleep 0.5
    ip netns exec "$a" python3 bench/tools/stream.py client mptcp 10.77.0.2 5600 "$DURATION"
    wait "$server"
    local bps
    bps=$(jq -r .bits_per_s "$work/mptcp.$1.out")
    echo "{\"aggregate_gbps\": $(awk -v b="$bps" 'BEGIN {printf "%.3f", b / 1e9}'), \"retransmits\": null}" \
        >"$work/mptcp.$1.json"
    printf '  %-12s run %s: %s Gbit/s\n' mptcp "$1" "$(jq -r .aggregate_gbps "$work/mptcp.$1.json")"
    untopology "$tag"
}

mix() { # name opts
    local tag="mix$1" a b i
    topology "$tag"
    a="$PREFIX-$tag-a"
    b="$PREFIX-$tag-b"
    for side in a b; do
        local ns="$PREFIX-$tag-$side"
        ip netns exec "$ns" "$LAGD" --bond "bond$side" --members m0,m1 \
            --opts "mode=balance-xor xmit_hash_policy=layer3+4 miimon=100 $2" \
            --control "$work/$tag-$side.sock" >"$work/$tag-$side.log" 2>&1 &
    done
    for _ in $(seq 50); do
        [ -S "$work/$tag-a.sock" ] && [ -S "$work/$tag-b.sock" ] && break
        sleep 0.1
    done
    ip -n "$a" addr add 10.78.0.1/24 dev bonda
    ip -n "$b" addr add 10.78.0.2/24 dev bondb
    ip -n "$a" link set bonda up
    ip -n "$b" link set bondb up
    sleep 1
    ip netns exec "$b" python3 bench/tools/mix.py server 10.78.0.2 6000 52 &
    sleep 0.5
    # shellcheck disable=SC2086 # two port numbers
    ip netns exec "$a" python3 bench/tools/mix.py client 10.78.0.2 6000 2 50 "$MIX_SECONDS" \
        $ELEPHANTS &
    local client=$! t
    : >"$work/$tag.samples"
    for t in $(seq 0 "$MIX_SECONDS"); do
        "$LAGCTL" show --control "$work/$tag-a.sock" --json |
            jq -c --arg t "$t" '{t: ($t | tonumber), tx: [.members[].tx_bytes]}' >>"$work/$tag.samples"
        sleep 1
    done
    wait "$client" || true
    "$LAGCTL" show --control "$work/$tag-a.sock" --json >"$work/$tag.status.json"
    untopology "$tag"
}

# busiest/mean of the per-member byte deltas between samples FROM and TO (seconds)
imbalance() { # tag from to
    jq -s --argjson f "$2" --argjson t "$3" '
        (map(select(.t == $f))[0].tx) as $a | (map(select(.t == $t))[0].tx) as $b
        | [range(0; $a | length) | $b[.] - $a[.]] as $d
        | ($d | add / length) as $mean
        | if $mean == 0 then null else (($d | max) / $mean * 1000 | round / 1000) end' \
        "$work/$1.samples"
}

echo "balance benchmark: $RUNS runs, ${DURATION} s per throughput measurement"
for run in $(seq 1 "$RUNS"); do
    lab stripe "$run" --mode stripe --streams 1 --duration "$DURATION"
    lab rr "$run" --mode balance-rr --streams 1 --duration "$DURATION"
    mptcp "$run"
    lab xor8 "$run" --mode balance-xor --policy layer3+4 --streams 8 --duration "$DURATION"
    lab buckets8 "$run" --mode balance-xor --policy layer3+4 --streams 8 --duration "$DURATION" \
        --bond-opts "distribution=buckets rebalance_interval=2000"
done
ELEPHANTS=$(python3 bench/tools/mix.py ports "$LAGCTL" 10.78.0.1 10.78.0.2 6000)
echo "skewed mix (elephant source ports $ELEPHANTS)"
mix modulo ""
mix rebalanced "distribution=buckets rebalance_interval=2000"

med() { median_of "$work/$1.*.json" "$2"; }
{
    echo "# Balancing benchmark"
    echo
    echo "Written by \`bench/balance.sh\` on $(date -u '+%Y-%m-%d %H:%M UTC'), lagd $(git rev-parse --short HEAD 2>/dev/null || echo '?')."
    echo "Machine: $(machine_line); $(iperf3 --version | head -1 | cut -d' ' -f1-2)."
    echo
    echo "Topology: two network namespaces joined by 2 veth links, each shaped to 1 Gbit/s (tc tbf,"
    echo "burst 256kb, latency 10ms): 1.91 Gbit/s of TCP goodput at most. Throughput figures are"
    echo "medians of $RUNS runs of ${DURATION} s, runs interleaved."
    echo
    echo "## One TCP stream"
    echo
    echo "| setup | Gbit/s | of 2 × 1 Gbit/s | retransmits |"
    echo "| --- | ---: | ---: | ---: |"
    for s in stripe:"lagd stripe (both ends)" rr:"lagd balance-rr" mptcp:"MPTCP, 2 subflows (no bond)"; do
        key=${s%%:*}
        g=$(med "$key" .aggregate_gbps)
        echo "| ${s#*:} | $(fmt "$g" 3) | $(ratio "$g" 2) | $(fmt "$(med "$key" .retransmits)" 0) |"
    done
    echo
    echo "## 8 TCP streams, layer3+4"
    echo
    echo "| setup | Gbit/s | member shares per run (%) |"
    echo "| --- | ---: | --- |"
    for s in xor8:"balance-xor, hash % 2 (the kernel's mapping)" buckets8:"balance-xor, 256 buckets rebalanced every 2 s"; do
        key=${s%%:*}
        shares=$(for f in "$work/$key".*.json; do
            [ -e "$f" ] && jq -r '[.members[].share * 100 | round] | map(tostring) | join("/")' "$f"
        done | paste -sd ' ' -)
        echo "| ${s#*:} | $(fmt "$(med "$key" .aggregate_gbps)" 3) | $shares |"
    done
    echo
    echo "## Skewed mix: 2 elephants on one member + 50 mice"
    echo
    echo "Both elephants' hashes start on the same member (source ports $ELEPHANTS). Imbalance is"
    echo "the busiest member's bytes over the mean, from lagd's per-member transmit counters."
    echo
    echo "| setup | first 2 s | last 4 s | bucket moves |"
    echo "| --- | ---: | ---: | --- |"
    for tag in mixmodulo mixrebalanced; do
        moves=$(jq -r 'if .buckets then "rebalance \(.buckets.moved_rebalance), elephant \(.buckets.moved_elephant); waited for a gap \(.buckets.moves_deferred), forced \(.buckets.moves_forced)" else "–" end' "$work/$tag.status.json")
        label=$([ "$tag" = mixmodulo ] && echo "hash % 2, no rebalancing" || echo "buckets, rebalance every 2 s")
        echo "| $label | $(imbalance "$tag" 0 2) | $(imbalance "$tag" $((MIX_SECONDS - 4)) "$MIX_SECONDS") | $moves |"
    done
    echo
    echo "Recent moves of the rebalanced run, as \`lagctl show\` lists them:"
    echo
    echo '```'
    jq -r '.buckets.recent_moves[]?' "$work/mixrebalanced.status.json" | tail -12
    echo '```'
} >"$OUT"
echo "wrote $OUT"
cat "$OUT"
