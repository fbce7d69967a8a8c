#!/usr/bin/env bash
# The dataplane benchmark (issue 3): lagd against its two references, measured in one run on one
# topology shape, two hosts (network namespaces) joined by 2 unshaped veth links:
#
#   direct  no bond, an address pair on each veth (streams spread over the links)
#   lagd    lagd at both ends, mode=balance-xor xmit_hash_policy=layer3+4
#   ovs     Open vSwitch userspace bond at both ends (datapath_type=netdev, userspace TSO),
#           balance-tcp with LACP (OVS runs balance-tcp only with LACP)
#   relay   the bare TAP <-> AF_PACKET relay (crates/lagd/examples/bare_relay.rs) at both ends:
#           lagd's sockets and options with a layer3+4 hash and nothing else, the floor under
#           lagd on this machine (what any userspace dataplane of this shape costs)
#
# For each: TCP goodput with 1 and 8 streams (8 streams twice: two iperf3 pairs of -P 4, one per
# link as the direct baseline needs and the same for the bonds, each iperf3 serving its four
# sockets from one thread; and one iperf3 process per stream), 64-byte UDP datagrams per second
# (iperf3 -u -l 64 -b 0, one flow), and for the bonds the traffic gap after one member loses
# carrier mid-run (built-in generator, 8 streams, the busiest member's peer set down). Every
# figure is the median of RUNS runs (default 3); the runs are interleaved (run 1 of every
# configuration, then run 2, ...; within a run each test goes through every setup before the
# next test) so that a noisy moment on the machine does not hit one configuration only.
# Writes bench/dataplane.md.
#
# Usage, as root from anywhere:  bash bench/dataplane.sh
# Environment: RUNS (3), DURATION (seconds per measurement, 8), OUT (bench/dataplane.md),
# REPORT_FROM (a directory of measurements a failed run kept: write the report from it).
# Needs: iproute2, iperf3, Open vSwitch (openvswitch-switch), jq, cargo.
set -euo pipefail

cd "$(dirname "$0")/.."
RUNS="${RUNS:-3}"
DURATION="${DURATION:-8}"
OUT="${OUT:-bench/dataplane.md}"
FAIL_AT=3
# shellcheck source=bench/lib.sh
. bench/lib.sh

[ "$(id -u)" = 0 ] || { echo "dataplane.sh: run as root (network namespaces)" >&2; exit 1; }
for tool in ip tc iperf3 ovs-vswitchd ovsdb-tool jq cargo bc pgrep; do
    command -v "$tool" >/dev/null || { echo "dataplane.sh: $tool is missing" >&2; exit 1; }
done

cargo build --release -q -p lagd --bin lagd --bin lagctl --example bare_relay
work=$(mktemp -d /tmp/lagd-bench.XXXXXX)
# The measurements are kept if the script fails after them (REPORT_FROM=DIR writes the report
# from such a directory without measuring again).
trap 'status=$?; if [ "$status" != 0 ]; then echo "measurements kept in $work" >&2; elif [ -z "${REPORT_FROM:-}" ]; then rm -rf "$work"; fi' EXIT
if [ -n "${REPORT_FROM:-}" ]; then
    rmdir "$work"
    work=$REPORT_FROM
fi
# Copies, so that a rebuild during the run cannot change the binaries under test.
cp target/release/lagd target/release/lagctl target/release/examples/bare_relay "$work/"
LAGCTL="$work/lagctl"
LAGD="$work/lagd"

SETUPS=(direct kernel lagd ovs relay)
TESTS=(tcp1 tcp8 tcp8e udp64 failover)

# cpu_watch OUT: until killed, writes to OUT the CPU seconds (user + system) that the lagd
# processes started from $LAGD have used, summed over processes, each at its last sample
# (every 0.2 s; a process's figure stays after it exits).
cpu_watch() {
    local out=$1 tick
    tick=$(getconf CLK_TCK)
    declare -A seen
    while true; do
        for d in /proc/[0-9]*; do
            [ "$(readlink "$d/exe" 2>/dev/null)" = "$LAGD" ] || continue
            read -r -a f <"$d/stat" 2>/dev/null || continue
            # Fields 14 and 15 (utime, stime), counted after the ') ' that ends the name.
            seen[${d#/proc/}]=$((f[13] + f[14]))
        done
        local total=0
        for v in "${seen[@]}"; do total=$((total + v)); done
        echo "scale=3; $total / $tick" | bc >"$out"
        sleep 0.2
    done
}

# idle_watch OUT: waits for the run's first iperf3 client, then writes to OUT the share of
# the machine's CPU time (all CPUs) that was idle from 1 s after it started until 2 s before
# the run's end: whether the CPUs or something else bounded the figure.
idle_watch() {
    local out=$1 a b
    until pgrep -f -- 'iperf3 -c .* -J' >/dev/null; do
        sleep 0.05
    done
    sleep 1
    read -r -a a < <(grep '^cpu ' /proc/stat)
    sleep $((DURATION - 3))
    read -r -a b < <(grep '^cpu ' /proc/stat)
    # Fields after "cpu": user nice system idle iowait irq softirq steal.
    local total=0 idle i
    for i in 1 2 3 4 5 6 7 8; do total=$((total + b[i] - a[i])); done
    idle=$((b[4] - a[4] + b[5] - a[5]))
    echo "scale=1; 100 * $idle / $total" | bc >"$out"
}

measure() { # setup test run
    local setup=$1 test=$2 run=$3 file="$work/$1.$2.$3.json"
    cpu_watch "$work/$1.$2.$3.cpu" &
    local watcher=$!
    local idler=
    case "$test" in tcp1 | tcp8 | tcp8e) idle_watch "$work/$1.$2.$3.idle" & idler=$! ;; esac
    # shellcheck disable=SC2046 # the argument lists are meant to split
    if "$LAGCTL" lab --links 2 --rate 0 --mode balance-xor --policy layer3+4 --json --quiet \
        --duration "$DURATION" $(lab_setup_args "$setup") $(lab_test_args "$test") >"$file" 2>"$work/$1.$2.$3.err"; then
        printf '  %-7s %-9s run %s: %s\n' "$setup" "$test" "$run" "$(summary "$file" "$test")"
    else
        rm -f "$file"
        printf '  %-7s %-9s run %s: FAILED: %s\n' "$setup" "$test" "$run" \
            "$(tail -1 "$work/$1.$2.$3.err")"
    fi
    kill "$watcher" 2>/dev/null || true
    wait "$watcher" 2>/dev/null || true
    if [ -n "$idler" ]; then
        kill "$idler" 2>/dev/null || true
        wait "$idler" 2>/dev/null || true
    fi
}

summary() { # file test
    case "$2" in
        udp64) jq -r '"\(.udp_pps) pps"' "$1" ;;
        failover) jq -r '"gap \(.failover.gap_ms) ms, recovered \(.failover.recovered)"' "$1" ;;
        *) jq -r '"\(.aggregate_gbps) Gbit/s, shares \([.members[].share * 100 | round] | map(tostring) | join("/")), retransmits \(.retransmits)"' "$1" ;;
    esac
}

if [ -z "${REPORT_FROM:-}" ]; then
    echo "dataplane benchmark: $RUNS runs × ${#SETUPS[@]} setups, ${DURATION} s per measurement"
    for run in $(seq 1 "$RUNS"); do
        # Setups inner: the figures a ratio compares are taken close together.
        for test in "${TESTS[@]}"; do
            for setup in "${SETUPS[@]}"; do
                # No failover without link monitoring: direct and the relay have none.
                case "$setup.$test" in direct.failover | relay.failover) continue ;; esac
                measure "$setup" "$test" "$run"
            done
        done
    done
fi

# median SETUP TEST JQ-EXPR: the median of EXPR over the runs that succeeded, or "–".
median() { median_of "$work/$1.$2.*.json" "$3"; }

count() { # setup test
    local n=0
    for f in "$work/$1.$2".*.json; do [ -e "$f" ] && n=$((n + 1)); done
    echo "$n"
}

shares() { # setup test: member shares of every run
    for f in "$work/$1.$2".*.json; do
        [ -e "$f" ] && jq -r '[.members[].share * 100 | round] | map(tostring) | join("/")' "$f"
    done | paste -sd ' ' -
}

declare -A M
for setup in "${SETUPS[@]}"; do
    M[$setup.tcp1]=$(median "$setup" tcp1 .aggregate_gbps)
    M[$setup.tcp8]=$(median "$setup" tcp8 .aggregate_gbps)
    M[$setup.tcp8e]=$(median "$setup" tcp8e .aggregate_gbps)
    M[$setup.udp64]=$(median "$setup" udp64 .udp_pps)
    M[$setup.rt1]=$(median "$setup" tcp1 .retransmits)
    M[$setup.rt8]=$(median "$setup" tcp8 .retransmits)
    M[$setup.rt8e]=$(median "$setup" tcp8e .retransmits)
    for t in tcp1 tcp8 tcp8e; do
        M[$setup.idle.$t]=$(for f in "$work/$setup.$t".*.idle; do
            if [ -s "$f" ]; then cat "$f"; fi
        done | sort -n | awk '{v[NR]=$1} END {if (NR) print v[int((NR+1)/2)]; else print "–"}')
    done
    M[$setup.gap]=$(median "$setup" failover .failover.gap_ms)
    # lagd's CPU, both ends together, as % of one core over the traffic time.
    M[$setup.cpu8]=$(for f in "$work/$setup.tcp8".*.cpu; do
        if [ -s "$f" ]; then echo "scale=2; 100 * $(cat "$f") / $DURATION" | bc; fi
    done | sort -n | awk '{v[NR]=$1} END {if (NR) print v[int((NR+1)/2)]}')
done

{
    echo "# Dataplane benchmark"
    echo
    echo "Written by \`bench/dataplane.sh\` on $(date -u '+%Y-%m-%d %H:%M UTC'), lagd $(git rev-parse --short HEAD 2>/dev/null || echo '?')."
    echo "Machine: $(machine_line); $(iperf3 --version | head -1 | cut -d' ' -f1-2),"
    echo "Open vSwitch $(ovs-vswitchd --version | head -1 | awk '{print $NF}')."
    echo
    echo "Topology: two network namespaces joined by 2 veth links, no shaping. Every figure is the"
    echo "median of $RUNS runs of ${DURATION} s (runs interleaved across configurations); the"
    echo "column n says how many runs succeeded."
    echo
    echo "- **direct**: no bond, one address pair per veth; streams spread over the links (1 stream"
    echo "  uses one link, 8 streams put 4 on each)."
    echo "- Every setup runs the same iperf3 processes: with 8 streams, two pairs of \`-P 4\` (one"
    echo "  per link, as direct needs, and on the bond's one address pair for the bonds), or one pair"
    echo "  per stream; iperf3 3.12 serves a process's streams from one thread."
    echo "- **kernel**: lagd with its kernel fast path (\`fastpath=on\`): tcx programs on the TAP and"
    echo "  the members forward as the bond decided; lagd keeps the table and sees no data frame."
    echo "- **lagd**: \`mode=balance-xor xmit_hash_policy=layer3+4 miimon=100 fastpath=off\` at both"
    echo "  ends: every frame through lagd."
    echo "- **ovs**: Open vSwitch 'netdev' (userspace) bridge with \`userspace-tso-enable=true\`,"
    echo "  \`bond_mode=balance-tcp lacp=active lacp-time=fast\` at both ends (balance-tcp needs LACP)."
    echo "- **relay**: the bare TAP ↔ AF_PACKET relay (\`crates/lagd/examples/bare_relay.rs\`) at both"
    echo "  ends: lagd's TAP and member sockets with the same options, member = layer3+4 hash % 2,"
    echo "  and no bonding logic. It is the floor under lagd: what the four user/kernel crossings"
    echo "  of this shape cost here, whatever the software around them."
    echo
    echo "| measurement | direct | kernel | lagd | ovs | relay | kernel / direct | kernel / ovs | lagd / direct | ovs / direct | relay / direct | lagd / ovs | lagd / relay |"
    echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
    row() { # label key decimals
        local d=${M[direct.$2]} k=${M[kernel.$2]} l=${M[lagd.$2]} o=${M[ovs.$2]} r=${M[relay.$2]}
        echo "| $1 | $(fmt "$d" "$3") | $(fmt "$k" "$3") | $(fmt "$l" "$3") | $(fmt "$o" "$3") | $(fmt "$r" "$3") | $(ratio "$k" "$d") | $(ratio "$k" "$o") | $(ratio "$l" "$d") | $(ratio "$o" "$d") | $(ratio "$r" "$d") | $(ratio "$l" "$o") | $(ratio "$l" "$r") |"
    }
    row "TCP, 1 stream (Gbit/s)" tcp1 2
    row "TCP, 8 streams, 2 × iperf3 -P 4 (Gbit/s)" tcp8 2
    row "TCP, 8 streams, one iperf3 per stream (Gbit/s)" tcp8e 2
    row "UDP 64 B, 1 flow (datagrams/s received)" udp64 0
    echo "| lagd's CPU, both ends, TCP 8 streams (% of one core) | – | $(fmt "${M[kernel.cpu8]}" 1) | $(fmt "${M[lagd.cpu8]}" 1) | – | – | | | | | | | |"
    for t in tcp1 tcp8 tcp8e; do
        case $t in tcp1) l="TCP 1 stream" ;; tcp8) l="TCP 8, 2 × iperf3 -P 4" ;; tcp8e) l="TCP 8, one iperf3 each" ;; esac
        echo "| CPUs idle during $l (% of both) | $(fmt "${M[direct.idle.$t]}" 1) | $(fmt "${M[kernel.idle.$t]}" 1) | $(fmt "${M[lagd.idle.$t]}" 1) | $(fmt "${M[ovs.idle.$t]}" 1) | $(fmt "${M[relay.idle.$t]}" 1) | | | | | | | |"
    done
    echo "| longest TCP stall after carrier loss (ms) | – | $(fmt "${M[kernel.gap]}" 1) | $(fmt "${M[lagd.gap]}" 1) | $(fmt "${M[ovs.gap]}" 1) | – | | | | | | $(ratio "${M[lagd.gap]}" "${M[ovs.gap]}") | |"
    echo
    echo "| setup | test | n | member shares per run (%) | retransmits (median) |"
    echo "| --- | --- | ---: | --- | ---: |"
    for setup in "${SETUPS[@]}"; do
        echo "| $setup | TCP 1 | $(count "$setup" tcp1) | $(shares "$setup" tcp1) | $(fmt "${M[$setup.rt1]}" 0) |"
        echo "| $setup | TCP 8 | $(count "$setup" tcp8) | $(shares "$setup" tcp8) | $(fmt "${M[$setup.rt8]}" 0) |"
        echo "| $setup | TCP 8, one iperf3 each | $(count "$setup" tcp8e) | $(shares "$setup" tcp8e) | $(fmt "${M[$setup.rt8e]}" 0) |"
        echo "| $setup | UDP 64 B | $(count "$setup" udp64) | $(shares "$setup" udp64) | |"
        if [ "$setup" = lagd ] || [ "$setup" = kernel ] || [ "$setup" = ovs ]; then
            rec=$(for f in "$work/$setup.failover".*.json; do
                [ -e "$f" ] && jq -r .failover.recovered "$f"
            done | grep -c true || true)
            echo "| $setup | failover | $(count "$setup" failover) | recovered in $rec of $(count "$setup" failover) runs | |"
        fi
    done
    echo
    echo "Failover: 8 TCP streams (built-in generator, which timestamps every read); ${FAIL_AT} s in,"
    echo "the peer end of the member that carried the most bytes is set down, so the sender's member"
    echo "loses carrier. The stall is the longest time any stream then received nothing: TCP's own"
    echo "recovery of what was in flight on the failed link (retransmission timers) is in it; the"
    echo "bond's own gap, measured with a probe train, is in bench/failover.md. UDP: iperf3 is"
    echo "single-threaded and bounds the direct figure (see shared research, dataplane limits)."
    failed=$(find "$work" -name '*.err' -size +0 -exec grep -l 'lagctl:' {} + 2>/dev/null | wc -l)
    if [ "$failed" -gt 0 ]; then
        echo
        echo "Failed measurements ($failed):"
        echo
        for f in $(find "$work" -name '*.err' -size +0 -exec grep -l 'lagctl:' {} + | sort); do
            echo "- $(basename "$f" .err): $(grep 'lagctl:' "$f" | tail -1)"
        done
    fi
} >"$OUT"
echo "wrote $OUT"
cat "$OUT"
