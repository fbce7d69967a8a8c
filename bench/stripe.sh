#!/usr/bin/env bash
# Stripe at link speed: one TCP stream through a lagd stripe bond against one direct link,
# MPTCP with one subflow per link, and lagd balance-rr, over the same links.
#
#   2 links, for each rate in RATES (0 = unshaped veth; others tc tbf): direct single link,
#            MPTCP (2 subflows, no bond), lagd stripe and lagd balance-rr (both ends), and the
#            links' sum: two streams at once, one per link, no bond
#   4 links at 1 Gbit/s, stripe, one member taken down half-way through: goodput before and
#            after against the links' sum, and the longest time the receiver read nothing
#
# Every row reports the sender's TCP retransmissions and the receiving host's out-of-order
# queueing (TcpExt TCPOFOQueue; MPTCP's own in MPTcpExt OFOQueue), and for lagd the
# receiver's resequencer counters. Figures are medians of RUNS runs (default 3) of DURATION
# seconds (default 8), setups interleaved within each run. Writes bench/stripe.md.
#
# Usage, as root from anywhere:  bash bench/stripe.sh
# Environment: RUNS, DURATION, RATES ("0 1gbit 2500mbit 5gbit"), OUT.
# Needs: iproute2, python3, jq, cargo.
set -euo pipefail

cd "$(dirname "$0")/.."
RUNS="${RUNS:-3}"
DURATION="${DURATION:-8}"
RATES="${RATES:-0 1gbit 2500mbit 5gbit}"
OUT="${OUT:-bench/stripe.md}"

# shellcheck source=bench/lib.sh
. bench/lib.sh
PREFIX="lagdstr-$$"
bench_start stripe.sh "$PREFIX" ip tc python3 jq cargo
A="$PREFIX-a"
B="$PREFIX-b"

# Two namespaces joined by LINKS veth links, shaped to RATE (0: unshaped).
topology() { # links rate
    bench_topology "$A" "$B" "$1" "$2"
}

untopology() {
    bench_untopology "$A" "$B"
}

# "retransmitted-segments tcp-ofo mptcp-ofo" as NS's kernel counts them now.
counters() { # ns
    ip netns exec "$1" awk '
        FNR == 1 { hdr = "" }
        /^(Tcp|TcpExt|MPTcpExt):/ {
            if (!($1 in names)) { names[$1] = $0; next }
            n = split(names[$1], k); split($0, v)
            for (i = 2; i <= n; i++) val[$1 k[i]] = v[i]
        }
        END { printf "%d %d %d\n", val["Tcp:RetransSegs"], val["TcpExt:TCPOFOQueue"], val["MPTcpExt:OFOQueue"] }
    ' /proc/net/snmp /proc/net/netstat
}

# deltas "BEFORE" "AFTER": how much each of counters' numbers grew, as a JSON array.
deltas() {
    awk -v a="$1" -v b="$2" 'BEGIN {
        n = split(a, x); split(b, y); printf "["
        for (i = 1; i <= n; i++) printf "%s%d", (i > 1 ? "," : ""), y[i] - x[i]
        print "]" }'
}

# One stream from A to ADDR; writes NAME.json. FAIL=1: member m1 goes down half-way.
stream() { # name proto addr
    local name=$1 before_a before_b after_a after_b server failer=
    before_a=$(counters "$A")
    before_b=$(counters "$B")
    ip netns exec "$B" python3 bench/tools/stream.py server "$2" "$3" 5600 >"$work/$name.recv" &
    server=$!
    if [ "${FAIL:-0}" = 1 ]; then
        (sleep "$(awk -v d="$DURATION" 'BEGIN {print d / 2}')" && ip -n "$A" link set m1 down) &
        failer=$!
    fi
    local cpu0 cpu1
    cpu0=$(grep '^cpu ' /proc/stat)
    ip netns exec "$A" python3 bench/tools/stream.py client "$2" "$3" 5600 "$DURATION"
    cpu1=$(grep '^cpu ' /proc/stat)
    wait "$server"
    [ -n "$failer" ] && wait "$failer"
    after_a=$(counters "$A")
    after_b=$(counters "$B")
    jq -n --slurpfile r "$work/$name.recv" \
        --argjson da "$(deltas "$before_a" "$after_a")" \
        --argjson db "$(deltas "$before_b" "$after_b")" \
        --argjson busy "$(busy_share "$cpu0" "$cpu1")" \
        --argjson half "$(awk -v d="$DURATION" 'BEGIN {print d / 2}')" '
        $r[0] as $r
        | def rate(from; to): ($r.slots[(from / $r.slot_s | floor):(to / $r.slot_s | floor)])
            | if length == 0 then null else (add * 8 / (length * $r.slot_s) / 1e9) end;
        {
            gbps: ($r.bits_per_s / 1e9),
            retransmits: $da[0],
            ofo: $db[1],
            mptcp_ofo: $db[2],
            longest_gap_ms: $r.longest_gap_ms,
            busy: $busy,
            before_gbps: rate(0.5; $half),
            after_gbps: rate($half + 0.5; $r.seconds),
            tcp: null
        }' >"$work/$name.json"
    printf '  %-24s %6.3f Gbit/s, retransmits %s, receiver out-of-order %s\n' "$name" \
        "$(jq -r .gbps "$work/$name.json")" "$(jq -r .retransmits "$work/$name.json")" \
        "$(jq -r .ofo "$work/$name.json")"
}

# busy_share "cpu ..." "cpu ...": the share of all CPUs' time between two /proc/stat cpu lines
# that was not idle (idle and iowait), in percent.
busy_share() {
    awk -v a="$1" -v b="$2" 'BEGIN {
        n = split(a, x); split(b, y); total = 0
        for (i = 2; i <= 9 && i <= n; i++) total += y[i] - x[i]
        idle = (y[5] - x[5]) + (y[6] - x[6])
        printf "%.1f\n", (total > 0 ? 100 * (total - idle) / total : 0) }'
}

direct() { # name links rate
    topology "$2" "$3"
    ip -n "$A" addr add 10.79.0.1/24 dev m0
    ip -n "$B" addr add 10.79.0.2/24 dev m0
    stream "$1" tcp 10.79.0.2
    untopology
}

# Two streams at once, one per link, no bond: what the two links carry together on this
# machine. One stream over both links does the same work and more (ordering), so this is its
# ceiling; on unshaped veth it measures the CPUs, not the links.
links_sum() { # name rate
    local name=$1 i servers=() clients=() before_a before_b cpu0 cpu1
    topology 2 "$2"
    for i in 0 1; do
        ip -n "$A" addr add "10.79.$i.1/24" dev "m$i"
        ip -n "$B" addr add "10.79.$i.2/24" dev "m$i"
    done
    before_a=$(counters "$A")
    before_b=$(counters "$B")
    for i in 0 1; do
        ip netns exec "$B" python3 bench/tools/stream.py server tcp "10.79.$i.2" 5600 >"$work/$name.recv$i" &
        servers+=($!)
    done
    cpu0=$(grep '^cpu ' /proc/stat)
    for i in 0 1; do
        ip netns exec "$A" python3 bench/tools/stream.py client tcp "10.79.$i.2" 5600 "$DURATION" &
        clients+=($!)
    done
    wait "${clients[@]}"
    cpu1=$(grep '^cpu ' /proc/stat)
    wait "${servers[@]}"
    # Both streams ran the same DURATION, started together: their rates add up.
    jq -s --argjson da "$(deltas "$before_a" "$(counters "$A")")" \
        --argjson db "$(deltas "$before_b" "$(counters "$B")")" \
        --argjson busy "$(busy_share "$cpu0" "$cpu1")" '
        { gbps: (map(.bits_per_s) | add / 1e9), retransmits: $da[0], ofo: $db[1], busy: $busy }
        ' "$work/$name.recv0" "$work/$name.recv1" >"$work/$name.json"
    printf '  %-24s %6.3f Gbit/s\n' "$name" "$(jq -r .gbps "$work/$name.json")"
    untopology
}

mptcp() { # name links rate
    local i ns
    topology "$2" "$3"
    for i in $(seq 0 $(($2 - 1))); do
        ip -n "$A" addr add "10.79.$i.1/24" dev "m$i"
        ip -n "$B" addr add "10.79.$i.2/24" dev "m$i"
    done
    for ns in "$A" "$B"; do
        ip netns exec "$ns" sysctl -qw net.mptcp.enabled=1
        ip -n "$ns" mptcp limits set subflow "$2" add_addr_accepted "$2"
    done
    for i in $(seq 1 $(($2 - 1))); do
        ip -n "$A" mptcp endpoint add "10.79.$i.1" dev "m$i" subflow
        ip -n "$B" mptcp endpoint add "10.79.$i.2" dev "m$i" signal
    done
    stream "$1" mptcp 10.79.0.2
    untopology
}

bonded() { # name links rate mode
    local side ns members pids=() sa="$work/$1.a.sock" sb="$work/$1.b.sock"
    topology "$2" "$3"
    members=$(seq -s, -f 'm%g' 0 $(($2 - 1)))
    for side in a b; do
        ns="$PREFIX-$side"
        ip netns exec "$ns" "$LAGD" --bond bond0 --members "$members" \
            --opts "mode=$4 miimon=100" --control "$work/$1.$side.sock" >"$work/$1.$side.log" 2>&1 &
        pids+=($!)
    done
    local ready=0
    for _ in $(seq 200); do
        if [ -S "$sa" ] && [ -S "$sb" ] && ip -n "$A" link show bond0 >/dev/null 2>&1 &&
            ip -n "$B" link show bond0 >/dev/null 2>&1; then
            ready=1
            break
        fi
        sleep 0.05
    done
    if [ "$ready" = 0 ]; then
        # Said and skipped: the medians are over the runs that happened.
        echo "  $1: lagd did not start in 10 s; run skipped:" >&2
        tail -3 "$work/$1.a.log" "$work/$1.b.log" >&2
        kill "${pids[@]}" 2>/dev/null || true
        wait "${pids[@]}" 2>/dev/null || true
        untopology
        return 0
    fi
    ip -n "$A" addr add 10.79.0.1/24 dev bond0
    ip -n "$B" addr add 10.79.0.2/24 dev bond0
    ip -n "$A" link set bond0 up
    ip -n "$B" link set bond0 up
    if [ "$4" = stripe ]; then
        for _ in $(seq 100); do
            "$LAGCTL" show --control "$sa" --json | jq -e .stripe.striping >/dev/null &&
                "$LAGCTL" show --control "$sb" --json | jq -e .stripe.striping >/dev/null &&
                break
            sleep 0.05
        done
    fi
    ip netns exec "$A" ping -c 2 -i 0.2 -q 10.79.0.2 >/dev/null || true
    stream "$1" tcp 10.79.0.2
    "$LAGCTL" show --control "$sb" --json >"$work/$1.status"
    # The receiving lagd's resequencer counters go into the row.
    jq --slurpfile s "$work/$1.status" '.tcp = ($s[0].stripe.tcp // null)' "$work/$1.json" \
        >"$work/$1.json.new" && mv "$work/$1.json.new" "$work/$1.json"
    # Stop both lagd (they restore their members) before the namespaces go.
    kill "${pids[@]}" 2>/dev/null || true
    wait "${pids[@]}" 2>/dev/null || true
    untopology
}

echo "stripe benchmark: $RUNS runs of ${DURATION} s, rates: $RATES"
for run in $(seq 1 "$RUNS"); do
    for rate in $RATES; do
        echo "run $run, 2 links at ${rate/#0/unshaped}"
        direct "direct-$rate.$run" 2 "$rate"
        mptcp "mptcp-$rate.$run" 2 "$rate"
        bonded "stripe-$rate.$run" 2 "$rate" stripe
        bonded "rr-$rate.$run" 2 "$rate" balance-rr
        links_sum "sum-$rate.$run" "$rate"
    done
    echo "run $run, 4 links at 1gbit, m1 down half-way"
    FAIL=1 bonded "fail4.$run" 4 1gbit stripe
done

med() { median_of "$work/$1.*.json" "$2"; }
label() { [ "$1" = 0 ] && echo "unshaped veth" || echo "$1 tbf"; }
{
    echo "# Stripe at link speed"
    echo
    echo "Written by \`bench/stripe.sh\` on $(date -u '+%Y-%m-%d %H:%M UTC'), lagd $(git rev-parse --short HEAD 2>/dev/null || echo '?')."
    echo "Machine: $(machine_line). The machine is shared: other work may have run at the same time."
    echo
    echo "One TCP stream (python, 1 MiB writes) from host A to host B, two network namespaces"
    echo "joined by veth links. Medians of $RUNS runs of ${DURATION} s, setups interleaved in each run."
    echo "*direct*: one link, no bond. *MPTCP*: the kernel's MPTCP, one subflow per link, no bond."
    echo "*stripe* and *balance-rr*: lagd at both ends. Retransmits: the sender's TCP (RetransSegs);"
    echo "out-of-order: segments the receiving host's TCP queued out of order (TCPOFOQueue; for"
    echo "MPTCP also its own OFOQueue after the slash). For stripe, the receiving end's TCP"
    echo "segments (super-frames): those the members' program delivered in order itself (kernel"
    echo "fast path; in brackets the rounds it sent segments that had overtaken another back"
    echo "through their member's queue), those lagd's resequencer saw (what followed a hole that"
    echo "lasted, or all of them on lagd's own path), of those held and put back in order, and"
    echo "holes given up on. *CPUs busy*: the share of both CPUs' time (everything on the machine)"
    echo "that was not idle while the stream ran."
    echo
    echo "| links | setup | Gbit/s | × direct | × MPTCP | retransmits | out-of-order | stripe: kernel (rounds held) / lagd / reordered / holes given up | CPUs busy |"
    echo "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- | ---: |"
    for rate in $RATES; do
        d=$(med "direct-$rate" .gbps)
        m=$(med "mptcp-$rate" .gbps)
        for s in direct:"direct, one link" mptcp:"MPTCP, 2 subflows" stripe:"lagd stripe" rr:"lagd balance-rr" sum:"links' sum: 2 streams, one per link"; do
            key="${s%%:*}-$rate"
            g=$(med "$key" .gbps)
            ofo=$(fmt "$(med "$key" .ofo)" 0)
            [ "${s%%:*}" = mptcp ] && ofo="$ofo / $(fmt "$(med "$key" .mptcp_ofo)" 0)"
            tcp="–"
            if [ "${s%%:*}" = stripe ]; then
                tcp="$(fmt "$(med "$key" '.tcp.kernel_segments // 0')" 0) ($(fmt "$(med "$key" '.tcp.kernel_held // 0')" 0)) / $(fmt "$(med "$key" .tcp.segments)" 0) / $(fmt "$(med "$key" .tcp.reordered)" 0) / $(fmt "$(med "$key" '.tcp.skipped_lost + .tcp.skipped_timeout + .tcp.skipped_full')" 0)"
            fi
            echo "| 2 × $(label "$rate") | ${s#*:} | $(fmt "$g" 2) | $(awk -v a="$g" -v b="$d" 'BEGIN { if (a == "–" || b == "–" || b == 0) print "–"; else printf "%.2f", a / b }') | $(awk -v a="$g" -v b="$m" 'BEGIN { if (a == "–" || b == "–" || b == 0) print "–"; else printf "%.2f", a / b }') | $(fmt "$(med "$key" .retransmits)" 0) | $ofo | $tcp | $(fmt "$(med "$key" .busy)" 0) % |"
        done
    done
    sum=$(med "sum-0" .gbps)
    direct=$(med "direct-0" .gbps)
    if [ "$sum" != "–" ] && [ "$direct" != "–" ]; then
        echo
        echo "*links' sum*: two streams at once, one on each link, no bond; one stream over both"
        echo "links does that work and more, so this is its ceiling. On unshaped veth it measures"
        echo "the CPUs, not the links: here $(awk -v a="$sum" -v b="$direct" 'BEGIN { printf "%.2f", a / b }')× one link's single stream, on $(nproc) CPUs."
    fi
    echo
    echo "## 4 links at 1 Gbit/s, one member down half-way"
    echo
    echo "lagd stripe; member m1 of host A is set down after $(awk -v d="$DURATION" 'BEGIN {print d / 2}') s. Goodput in the"
    echo "half before (from 0.5 s) and after (from 0.5 s after the failure) against the links' sum,"
    echo "and the longest time the receiving application read nothing (per run)."
    echo
    echo "| before, Gbit/s | of 4 × 1 Gbit/s | after, Gbit/s | of 3 × 1 Gbit/s | longest stall per run (ms) | retransmits | out-of-order |"
    echo "| ---: | ---: | ---: | ---: | --- | ---: | ---: |"
    b=$(med fail4 .before_gbps)
    a=$(med fail4 .after_gbps)
    stalls=$(for f in "$work"/fail4.*.json; do [ -e "$f" ] && jq -r '.longest_gap_ms | round' "$f"; done | paste -sd ' ' -)
    echo "| $(fmt "$b" 2) | $(ratio "$b" 3.81) | $(fmt "$a" 2) | $(ratio "$a" 2.86) | $stalls | $(fmt "$(med fail4 .retransmits)" 0) | $(fmt "$(med fail4 .ofo)" 0) |"
    echo
    echo "The links' sums are TCP goodput at the shaped rate (1 Gbit/s of tbf carries 0.953"
    echo "Gbit/s of TCP payload with 1500-byte frames)."
} >"$OUT"
echo "wrote $OUT"
cat "$OUT"
