#!/usr/bin/env bash
# The kernel bond as the reference, in the kernels people run (issue 25, item 5): in each
# user-mode-Linux guest of tools/uml.py (5.10, 6.1, 6.12), side by side in the same guest run,
#
#   direct     2 veth links, one address pair per link, no bond
#   bond-xor   the kernel bond, mode balance-xor xmit_hash_policy layer3+4 miimon 100
#   bond-lacp  the kernel bond, mode 802.3ad xmit_hash_policy layer3+4 lacp_rate fast
#   lagd-xor   lagd at both ends, mode=balance-xor xmit_hash_policy=layer3+4 fastpath=on
#   lagd-lacp  lagd at both ends, mode=802.3ad xmit_hash_policy=layer3+4 lacp_rate=fast
#              fastpath=on
#   bond-bcast / lagd-bcast  mode broadcast (every frame on both links)
#   bond-tlb / lagd-tlb      mode balance-tlb xmit_hash_policy layer3+4 at host A, towards a
#                            Linux bridge at host B (tlb is made for a switch)
#   bond-rr / lagd-rr        mode balance-rr packets_per_slave 1
#
# The last six are the modes issue 27 measures against direct veth on this machine; here the
# kernel bond of the same mode is beside them, for what the mode itself costs.
# between two network namespaces joined by 2 unshaped veth links inside the guest.
# fastpath=on makes lagd refuse to start without its kernel path (fastpath_attach=auto: clsact
# filters where the kernel has no tcx), so every lagd figure is the programs'; lagd's status
# (`lagctl show --json`, both ends) is kept after each run as the proof: program counters, and
# lagd's member sockets reading no data.
#
# Tests: TCP 1 stream (iperf3 -l 1M); TCP 8 streams (2 x iperf3 -P 4 -l 1M, one server per link
# address for direct, two ports on the bond's address otherwise); UDP 64 B from a batched sender
# (bench/tools/mmsg.c: sendmmsg/recvmmsg, one flow, each datagram counted once); failover gap:
# a datagram every ms, and FAIL_AT s in the link that carries it is cut (its far end set
# down); the longest silence at the receiver and the datagrams lost (direct: nothing to fail
# over to, so the same probe runs without a cut, giving the guest's own scheduling jitter).
# Each round runs every setup once, the order rotating from round to round; medians over the
# rounds, ratios to the kernel bond of the same mode in the same guest.
#
# Usage, as root from the repository:  bash bench/kernels.sh
# Environment: KERNELS ("5.10 6.1 6.12"), ROUNDS (3), DURATION (seconds per test, 3), SETUPS
# (a subset of the eleven, in the first round's order; default: direct and the xor and 802.3ad
# pairs),
# OUT (bench/kernels.md: the section between the kernels.sh markers is replaced, the rest kept),
# KEEP (set: keep the work directory with every guest's raw results and lagd's logs),
# LAGD_EXTRA (more lagd options for every lagd setup, e.g. fastpath_attach=tc),
# LAGD_NICE (-10: lagd runs at the priority its systemd unit gives it, dist/lagd@.service; 0
# for the default), TESTS (a subset of "tcp1 tcp8 udp64 gap", all by default), MMSG_READER
# (block, the default, or poll: the UDP reader spins on non-blocking reads and is never woken;
# only where a CPU is to spare for it, as in bench/attach.sh on this host, never in a one-CPU
# guest, where it would take the sender's time).
# Needs: python3, cargo, cc, iperf3, jq, iproute2, ping; tools/uml.py's needs.
set -euo pipefail

cd "$(dirname "$0")/.."
KERNELS="${KERNELS:-5.10 6.1 6.12}"
ROUNDS="${ROUNDS:-3}"
DURATION="${DURATION:-3}"
FAIL_AT="${FAIL_AT:-1.5}"
TESTS="${TESTS:-tcp1 tcp8 udp64 gap}"
MMSG_READER="${MMSG_READER:-block}"
OUT="${OUT:-bench/kernels.md}"
read -ra SETUPS <<<"${SETUPS:-direct bond-xor bond-lacp lagd-xor lagd-lacp}"

# ---------------------------------------------------------------- inside a guest
ns_cleanup() {
    local ns
    for ns in kbA kbB; do
        ip netns pids "$ns" 2>/dev/null | xargs -r kill 2>/dev/null || true
    done
    sleep 0.5
    for ns in kbA kbB; do
        ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
        ip netns del "$ns" 2>/dev/null || true
    done
}

# wait_for SECONDS CMD...: runs CMD every 0.2 s until it succeeds (1) or SECONDS pass (0).
wait_for() {
    local end=$((SECONDS + $1))
    shift
    while [ "$SECONDS" -lt "$end" ]; do
        "$@" >/dev/null 2>&1 && return 0
        sleep 0.2
    done
    return 1
}

lacp_ports() { # ns: true when the bond's active aggregator has both ports
    ip netns exec "$1" grep -q 'Number of ports: 2' /proc/net/bonding/bond0
}

lagd_up() { # ns: true when lagd answers with every member up (and, for 802.3ad, both distributing)
    ip netns exec "$1" "$BIN/lagctl" show lg0 --json >"$R/status.tmp" 2>/dev/null || return 1
    [ "$(jq '[.members[] | select(.mii_status == "up")] | length' "$R/status.tmp")" = 2 ]
}

# kernel_mode KIND: the mode and its options as `ip link add ... type bond` takes them (lagd's
# options are the same words joined by `=`).
kernel_mode() {
    case $1 in
        xor) echo "mode balance-xor xmit_hash_policy layer3+4" ;;
        lacp) echo "mode 802.3ad xmit_hash_policy layer3+4 lacp_rate fast" ;;
        bcast) echo "mode broadcast" ;;
        tlb) echo "mode balance-tlb xmit_hash_policy layer3+4" ;;
        rr) echo "mode balance-rr packets_per_slave 1" ;;
        *) echo "kernels.sh: no setup kind $1" >&2; return 1 ;;
    esac
}

# bond_ends SETUP: the namespaces that run the bond. balance-tlb is made for a switch (the
# kernel's documentation: its members keep their own MACs, and only the current one receives
# for the bond's), so its far end is a Linux bridge over the link ends, for both the kernel
# bond and lagd; the other modes run a bond at both ends.
bond_ends() {
    case $1 in
        *-tlb) echo kbA ;;
        *) echo kbA kbB ;;
    esac
}

# switch_end SETUP: for the setups bond_ends gives one end, the bridge at host B with its address.
switch_end() {
    case $1 in
        *-tlb)
            ip -n kbB link add br0 type bridge
            for i in 0 1; do
                ip -n kbB link set "m$i" master br0
                ip -n kbB link set "m$i" up
            done
            ip -n kbB link set br0 up
            ip -n kbB addr add 10.0.0.2/24 dev br0
            ;;
    esac
}

# setup NAME: the namespaces and links, then NAME's configuration; sets DST1, DST2.
setup() {
    local s=$1 i ns n mode opts
    ip netns add kbA
    ip netns add kbB
    for i in 0 1; do
        ip -n kbA link add "m$i" type veth peer name "m$i" netns kbB
    done
    for ns in kbA kbB; do ip -n "$ns" link set lo up; done
    case $s in
        direct)
            for i in 0 1; do
                ip -n kbA addr add "10.$((i + 1)).0.1/24" dev "m$i"
                ip -n kbB addr add "10.$((i + 1)).0.2/24" dev "m$i"
                ip -n kbA link set "m$i" up
                ip -n kbB link set "m$i" up
            done
            DST1=10.1.0.2 DST2=10.2.0.2
            ;;
        bond-*)
            mode=$(kernel_mode "${s#bond-}")
            n=1
            for ns in $(bond_ends "$s"); do
                # shellcheck disable=SC2086 # the mode and its options are several words
                ip -n "$ns" link add bond0 type bond $mode miimon 100
                for i in 0 1; do ip -n "$ns" link set "m$i" master bond0; done
                ip -n "$ns" link set bond0 up
                ip -n "$ns" addr add "10.0.0.$n/24" dev bond0
                n=2
            done
            if [ "$s" = bond-lacp ]; then
                wait_for 20 lacp_ports kbA && wait_for 5 lacp_ports kbB ||
                    echo "$s: the aggregator did not get both ports" >&2
            fi
            switch_end "$s"
            DST1=10.0.0.2 DST2=10.0.0.2
            ;;
        lagd-*)
            opts="$(kernel_mode "${s#lagd-}" | sed 's/ \([a-z_0-9]*\) \([^ ]*\)/ \1=\2/g; s/^mode /mode=/') miimon=100 fastpath=on ${LAGD_EXTRA:-}"
            switch_end "$s" # its ports up first: lagd waits for its members' carrier
            n=1
            for ns in $(bond_ends "$s"); do
                for i in 0 1; do ip -n "$ns" link set "m$i" up; done
                ip netns exec "$ns" nice -n "${LAGD_NICE:--10}" "$BIN/lagd" --bond lg0 --members m0,m1 --opts "$opts" \
                    >>"$R/$s.$round.$ns.log" 2>&1 &
            done
            for ns in $(bond_ends "$s"); do
                if ! wait_for 20 lagd_up "$ns"; then
                    echo "$s: lagd in $ns not ready; its log:" >&2
                    sed 's/^/    /' "$R/$s.$round.$ns.log" >&2
                    return 1
                fi
                ip -n "$ns" addr add "10.0.0.$n/24" dev lg0
                ip -n "$ns" link set lg0 up
                n=2
            done
            DST1=10.0.0.2 DST2=10.0.0.2
            ;;
    esac
    if ! wait_for 20 ip netns exec kbA ping -c1 -W1 "$DST1" ||
        ! wait_for 10 ip netns exec kbA ping -c1 -W1 "$DST2"; then
        echo "$s: no ping through" >&2
        return 1
    fi
    if [ "$s" = lagd-lacp ]; then sleep 1; fi # both ends distributing (the ping may go first)
}

result() { # setup test value
    printf '%s\t%s\t%s\t%s\n' "$round" "$1" "$2" "$3" >>"$R/results.tsv"
    printf '  %-5s round %s %-9s %-6s %s\n' "$(uname -r | cut -d. -f1-2)" "$round" "$1" "$2" "$3"
}

iperf_gbps() { # json file -> Gbit/s or nothing
    jq -r '(.end.sum_received.bits_per_second // empty) / 1e9' "$1" 2>/dev/null || true
}

wants() { [[ " $TESTS " == *" $1 "* ]]; } # test: whether TESTS names it

measure() { # setup
    local s=$1 t=$((DURATION + 15))
    if wants tcp1 || wants tcp8; then
        ip netns exec kbB iperf3 -s -p 5201 >/dev/null 2>&1 &
        ip netns exec kbB iperf3 -s -p 5202 >/dev/null 2>&1 &
        sleep 1
    fi
    if wants tcp1; then
        timeout "$t" ip netns exec kbA iperf3 -c "$DST1" -p 5201 -t "$DURATION" -l 1M -J \
            >"$R/i1.json" 2>&1 || true
        result "$s" tcp1 "$(iperf_gbps "$R/i1.json")"
        sleep 0.5
    fi
    wants tcp8 && measure_tcp8 "$s"
    wants udp64 && measure_udp64 "$s"
    wants gap && measure_gap "$s"
    return 0
}

measure_tcp8() { # setup
    local s=$1 t=$((DURATION + 15)) a b
    timeout "$t" ip netns exec kbA iperf3 -c "$DST1" -p 5201 -t "$DURATION" -l 1M -P 4 -J \
        >"$R/i81.json" 2>&1 &
    a=$!
    timeout "$t" ip netns exec kbA iperf3 -c "$DST2" -p 5202 -t "$DURATION" -l 1M -P 4 -J \
        >"$R/i82.json" 2>&1 &
    b=$!
    wait "$a" "$b" || true
    a=$(iperf_gbps "$R/i81.json")
    b=$(iperf_gbps "$R/i82.json")
    if [ -n "$a" ] && [ -n "$b" ]; then
        result "$s" tcp8 "$(awk -v a="$a" -v b="$b" 'BEGIN {print a + b}')"
    else
        result "$s" tcp8 ""
    fi
}

measure_udp64() { # setup
    local s=$1 t=$((DURATION + 15)) a reader=
    [ "$MMSG_READER" = poll ] && reader=poll
    # shellcheck disable=SC2086 # no argument when the reader blocks
    timeout "$t" ip netns exec kbB "$BIN/mmsg" recv 9000 $((DURATION + 5)) $reader >"$R/u.json" 2>&1 &
    a=$!
    sleep 0.5
    timeout "$t" ip netns exec kbA "$BIN/mmsg" send "$DST1" 9000 "$DURATION" 64 >/dev/null || true
    wait "$a" || true
    result "$s" udp64 "$(jq -r '.pps // empty' "$R/u.json" 2>/dev/null || true)"
}

measure_gap() { # setup
    local s=$1 t=$((DURATION + 15)) a b m c before0 before1 cut
    # The failover gap: a datagram every ms; FAIL_AT s in, the link that carries it is cut
    # (direct: not cut, the guest's own jitter for reference).
    timeout "$t" ip netns exec kbB "$BIN/mmsg" recv 9001 $((DURATION + 5)) >"$R/f.json" 2>&1 &
    a=$!
    sleep 0.5
    before0=$(ip netns exec kbA cat /sys/class/net/m0/statistics/tx_packets)
    before1=$(ip netns exec kbA cat /sys/class/net/m1/statistics/tx_packets)
    timeout "$t" ip netns exec kbA "$BIN/mmsg" send "$DST1" 9001 "$DURATION" 64 1000 >/dev/null &
    b=$!
    sleep "$FAIL_AT"
    m=$(($(ip netns exec kbA cat /sys/class/net/m0/statistics/tx_packets) - before0))
    c=$(($(ip netns exec kbA cat /sys/class/net/m1/statistics/tx_packets) - before1))
    cut=m0
    [ "$c" -gt "$m" ] && cut=m1
    [ "$s" = direct ] || ip -n kbB link set "$cut" down
    wait "$b" || true
    wait "$a" || true
    result "$s" gap_ms "$(jq -r '.max_gap_ms // empty' "$R/f.json" 2>/dev/null || true)"
    result "$s" lost "$(jq -r '.lost // empty' "$R/f.json" 2>/dev/null || true)"
    echo "$cut" >>"$R/$s.$round.cut"
}

guest() {
    BIN=$1
    R="$BIN/$(uname -r | cut -d. -f1-2)"
    mkdir -p "$R"
    : >"$R/results.tsv"
    {
        echo "kernel=$(uname -r)"
        echo "cpus=$(nproc)"
        echo "bpf_jit_enable=$(cat /proc/sys/net/core/bpf_jit_enable 2>/dev/null ||
            echo 'absent (no BPF JIT: the interpreter)')"
    } >"$R/guest.txt"
    trap ns_cleanup EXIT
    ns_cleanup
    local i s order
    for round in $(seq 1 "$ROUNDS"); do
        order=()
        for i in "${!SETUPS[@]}"; do
            order+=("${SETUPS[$(((i + round - 1) % ${#SETUPS[@]}))]}")
        done
        for s in "${order[@]}"; do
            if setup "$s"; then
                measure "$s"
            else
                result "$s" setup failed
            fi
            if [[ $s == lagd-* ]]; then
                for ns in kbA kbB; do
                    ip netns exec "$ns" "$BIN/lagctl" show lg0 --json \
                        >"$R/$s.$round.$ns.status.json" 2>/dev/null || true
                done
                ip netns exec kbA tc filter show dev m0 ingress >"$R/$s.$round.filters" 2>&1 || true
            fi
            ns_cleanup
        done
    done
}

if [ "${1:-}" = --guest ]; then
    guest "$2"
    exit 0
fi

# ---------------------------------------------------------------- on the host
[ "$(id -u)" = 0 ] || { echo "kernels.sh: run as root" >&2; exit 1; }
for tool in python3 cargo cc iperf3 jq ip ping; do
    command -v "$tool" >/dev/null || { echo "kernels.sh: $tool is missing" >&2; exit 1; }
done
cargo build --release -q -p lagd --bin lagd --bin lagctl
# Outside /tmp: the guest has a /tmp of its own.
work=$(mktemp -d /var/tmp/lagd-kernels.XXXXXX)
[ -n "${KEEP:-}" ] || trap 'rm -rf "$work"' EXIT
cp target/release/lagd target/release/lagctl "$work/"
cc -O2 -Wall -o "$work/mmsg" bench/tools/mmsg.c
started=$(date -u '+%Y-%m-%d %H:%M UTC')
for k in $KERNELS; do
    echo "== $k"
    # ~20 s per setup and round; a guest that hangs is killed.
    python3 tools/uml.py run "$k" --rw "$work" --timeout $((ROUNDS * ${#SETUPS[@]} * 40 + 60)) \
        -e ROUNDS="$ROUNDS" -e DURATION="$DURATION" -e FAIL_AT="$FAIL_AT" -e SETUPS="${SETUPS[*]}" \
        -e LAGD_EXTRA="${LAGD_EXTRA:-}" -e LAGD_NICE="${LAGD_NICE:--10}" -e TESTS="$TESTS" \
        -- bash bench/kernels.sh --guest "$work" 2>&1 | tee "$work/run-$k.log" || true
done

LAGD_NICE="${LAGD_NICE:--10}" python3 bench/tools/kernels_report.py "$work" "$OUT" "$started" "$(git rev-parse --short HEAD)" \
    "$ROUNDS" "$DURATION" "$FAIL_AT" "$KERNELS" "$(uname -r)" \
    "$(iperf3 --version | head -1 | cut -d' ' -f1-2)"
echo "wrote $OUT"
