#!/usr/bin/env bash
# The failover benchmark: how long a bond carries nothing after the member it uses loses
# carrier, measured with a probe train instead of TCP (whose own recovery of the frames lost in
# flight dominates the gap bench/dataplane.sh reports at 10+ Gbit/s).
#
# Two hosts (network namespaces) joined by 2 veth links, lagd at both ends with miimon=1. Host A
# sends a numbered UDP probe to host B every millisecond and host B echoes it
# (bench/tools/probe.py); 1 s in, host B's end of the link host A's probes use is set down, so
# both ends lose carrier on it. The gap is the longest time between two replies; lost is the
# number of probes without a reply. In active-backup, where ping takes the same member, ping
# runs beside it (`ping -D -i 0.001`) to show what ping alone would report: after a send that
# fails, iputils ping waits 10 ms before the next one, so one dropped probe reads as 11 ms.
# Configurations: active-backup and balance-xor (layer3+4), each on the kernel fast path and
# through lagd (fastpath=off). Every figure is the median of RUNS runs (default 5), the runs
# interleaved. Writes bench/failover.md.
#
# Usage, as root from anywhere:  bash bench/failover.sh
# Environment: RUNS (5), OUT (bench/failover.md).
# Needs: iproute2, iputils-ping, python3, jq, cargo.
set -euo pipefail

cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
. bench/lib.sh
RUNS="${RUNS:-5}"
OUT="${OUT:-bench/failover.md}"

[ "$(id -u)" = 0 ] || { echo "failover.sh: run as root (network namespaces)" >&2; exit 1; }
for tool in ip ping python3 jq cargo awk; do
    command -v "$tool" >/dev/null || { echo "failover.sh: $tool is missing" >&2; exit 1; }
done

cargo build --release -q -p lagd --bin lagd --bin lagctl
work=$(mktemp -d /tmp/lagd-failover.XXXXXX)
cp target/release/lagd target/release/lagctl "$work/"
tag="fo$$"
pids=()

cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
    pids=()
    ip netns del "${tag}a" 2>/dev/null || true
    ip netns del "${tag}b" 2>/dev/null || true
    rm -f "$work"/*.sock
}
trap 'cleanup; rm -rf "$work"' EXIT

declare -A OPTS=(
    [ab-kernel]="mode=active-backup miimon=1 fastpath=on"
    [ab-lagd]="mode=active-backup miimon=1 fastpath=off"
    [xor-kernel]="mode=balance-xor xmit_hash_policy=layer3+4 miimon=1 fastpath=on"
    [xor-lagd]="mode=balance-xor xmit_hash_policy=layer3+4 miimon=1 fastpath=off"
)
CONFIGS=(ab-kernel ab-lagd xor-kernel xor-lagd)

# run CONFIG N: one measurement, written to $work/CONFIG.N.json
run() {
    local config=$1 n=$2 a="${tag}a" b="${tag}b" side
    ip netns add "$a"
    ip netns add "$b"
    for i in 0 1; do
        ip link add "${tag}a$i" netns "$a" type veth peer name "${tag}b$i" netns "$b"
        ip -n "$a" link set "${tag}a$i" up
        ip -n "$b" link set "${tag}b$i" up
    done
    for side in a b; do
        ip netns exec "${tag}$side" "$work/lagd" --bond "${tag}B$side" \
            --members "${tag}${side}0,${tag}${side}1" --opts "${OPTS[$config]}" \
            --control "$work/$side.sock" --log-level warn 2>>"$work/lagd.log" &
        pids+=($!)
    done
    for _ in $(seq 200); do
        ip -n "$a" link show "${tag}Ba" >/dev/null 2>&1 && ip -n "$b" link show "${tag}Bb" \
            >/dev/null 2>&1 && [ -S "$work/a.sock" ] && [ -S "$work/b.sock" ] && break
        sleep 0.05
    done
    ip -n "$a" addr add 10.77.0.1/24 dev "${tag}Ba"
    ip -n "$b" addr add 10.77.0.2/24 dev "${tag}Bb"
    ip -n "$a" link set "${tag}Ba" up
    ip -n "$b" link set "${tag}Bb" up
    ip netns exec "$a" ping -q -c 1 -w 10 10.77.0.2 >/dev/null
    ip netns exec "$b" python3 bench/tools/probe.py echo 10.77.0.2 7777 8 &
    local echo=$!
    sleep 0.2
    ip netns exec "$a" python3 bench/tools/probe.py send 10.77.0.2 7777 1 3000 1.0 \
        >"$work/probe.json" &
    local probe=$! ping=
    if [ "${config#ab-}" != "$config" ]; then
        ip netns exec "$a" ping -D -i 0.001 -c 3000 -W 1 10.77.0.2 >"$work/ping.txt" 2>&1 &
        ping=$!
    else
        : >"$work/ping.txt"
    fi
    sleep 1
    # The member host A's probes leave on: the one whose transmit count grows.
    local s1 s2 i busy=0 most=-1
    s1=$(ip netns exec "$a" "$work/lagctl" show --control "$work/a.sock" --json)
    sleep 0.2
    s2=$(ip netns exec "$a" "$work/lagctl" show --control "$work/a.sock" --json)
    for i in 0 1; do
        local d
        d=$(($(jq ".members[$i].tx_packets" <<<"$s2") - $(jq ".members[$i].tx_packets" <<<"$s1")))
        if [ "$d" -gt "$most" ]; then most=$d; busy=$i; fi
    done
    ip -n "$b" link set "${tag}b$busy" down
    wait "$probe"
    [ -z "$ping" ] || wait "$ping" || true
    wait "$echo" || true
    local path
    path=$(jq -r .dataplane.path <<<"$s2")
    awk '
        /bytes from/ {
            t = substr($1, 2, length($1) - 2) + 0
            if (!first) first = t
            if (last) {
                g = (t - last) * 1000
                # The first second (before the failure) is the run'"'"'s own noise floor.
                if (t < first + 1.0) { if (g > before) before = g } else if (g > gap) gap = g
            }
            last = t
            got++
        }
        END { if (got) printf "{\"ping_gap_ms\":%.2f,\"ping_lost\":%d}\n", gap, 3000 - got; else print "{}" }
    ' "$work/ping.txt" >"$work/ping.json"
    jq -c --arg config "$config" --arg path "$path" --slurpfile ping "$work/ping.json" \
        '. + {config: $config, path: $path} + $ping[0]' "$work/probe.json" >"$work/$config.$n.json"
    cleanup
}

for n in $(seq "$RUNS"); do
    for config in "${CONFIGS[@]}"; do
        run "$config" "$n"
        echo "run $n $config: $(cat "$work/$config.$n.json")" >&2
    done
done

{
    echo "# Failover: the gap after the used member loses carrier"
    echo
    echo "Written by \`bash bench/failover.sh\` on $(date -u +%Y-%m-%d). $(machine_line)."
    echo "Host A sends a numbered UDP probe to host B every millisecond and host B echoes it"
    echo "(\`bench/tools/probe.py\`); 1 s in, host B's end of the link the probes use is set down"
    echo "(both ends lose carrier); lagd at both ends with \`miimon=1\`. Gap: the longest time"
    echo "between two replies after the failure (median of $RUNS interleaved runs; every run"
    echo "listed); before: the longest gap in the second before it, the same run's noise floor on"
    echo "this machine; lost: probes without a reply; send errors: probes the sender's own stack"
    echo "refused (medians). Ping gap: \`ping -D -i 0.001\` in the same run (active-backup only,"
    echo "where it takes the probes' member): iputils ping waits 10 ms after a send that fails, so"
    echo "a single dropped probe reads as an 11 ms gap there whatever the bond did."
    echo
    echo "| configuration | path | gap (ms) | runs (ms) | before (ms) | lost probes | send errors | ping gap (ms) |"
    echo "| --- | --- | --- | --- | --- | --- | --- | --- |"
    for config in "${CONFIGS[@]}"; do
        all=$(for f in "$work/$config".*.json; do jq -r .gap_ms "$f"; done | sort -g | paste -sd ' ')
        echo "| ${OPTS[$config]} | $(jq -r .path "$work/$config.1.json") | $(median_of "$work/$config.*.json" .gap_ms) | $all | $(median_of "$work/$config.*.json" .before_ms) | $(median_of "$work/$config.*.json" .lost) | $(median_of "$work/$config.*.json" .send_errors) | $(median_of "$work/$config.*.json" .ping_gap_ms) |"
    done
} >"$OUT"
echo "wrote $OUT" >&2
