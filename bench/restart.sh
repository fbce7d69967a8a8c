#!/usr/bin/env bash
# The restart benchmark (issue 12 item 6): how long the bond stops carrying traffic when lagd
# is killed with SIGKILL and started again at once (what a service manager does, without its
# RestartSec), and that the host's TCP connections survive it (tests/netns_lifecycle.rs
# asserts that; this script measures the outage).
#
# Two hosts (network namespaces) joined by 2 unshaped veth links, lagd at both ends
# (mode=balance-xor xmit_hash_policy=layer3+4), on the kernel fast path (fastpath=on) and
# through lagd (fastpath=off); and 802.3ad at the fast rate on the kernel path, the new lagd
# resuming its members' partners from the state file, against the same with the partners cut
# from the file before the restart (what lagd did before it kept them). Each host sends the other a UDP datagram every 5 ms for 4 s
# (bench/tools/udp_gap.py: unlike ping -i 0.01, which slows down while answers are missing, it
# keeps its pace; 7 s for 802.3ad); 1.5 s in, host A's lagd gets SIGKILL, is reaped, and a new lagd is started
# for the same bond. The outage is the longest interval between two consecutive arrivals after
# the kill, per direction; "across the restart" the longest one that ends after the kill (an
# upgrade: the old lagd's hand-over) and starts within 50 ms of it, the restart's own silence;
# the baseline, measured in the same run, is the longest interval
# before it (the probes' own jitter on this machine). Every
# figure is the median of RUNS runs (default 5), the two paths interleaved. Writes
# bench/restart.md.
#
# Usage, as root from anywhere:  bash bench/restart.sh
# The rows ending in -up are a planned upgrade instead: at the same moment `lagctl upgrade`
# starts a new lagd beside host A's, which takes the bond over and the old one exits.
# Environment: RUNS (5), OUT (bench/restart.md), PATHS (the rows to run, all by default; the table
# lists only those), LAGD and LAGCTL (binaries to use instead of building
# the release ones), KEEP_PING (a path prefix: keep host A's lagd logs there).
# Needs: iproute2, iputils-ping, python3, jq, awk, cargo.
set -euo pipefail

cd "$(dirname "$0")/.."
RUNS="${RUNS:-5}"
OUT="${OUT:-bench/restart.md}"

[ "$(id -u)" = 0 ] || { echo "restart.sh: run as root (network namespaces)" >&2; exit 1; }
for tool in ip ping python3 jq awk cargo; do
    command -v "$tool" >/dev/null || { echo "restart.sh: $tool is missing" >&2; exit 1; }
done
# shellcheck source=bench/lib.sh
. bench/lib.sh

if [ -z "${LAGD:-}" ] || [ -z "${LAGCTL:-}" ]; then
    cargo build --release -q -p lagd --bin lagd --bin lagctl
    LAGD="${LAGD:-${CARGO_TARGET_DIR:-target}/release/lagd}"
    LAGCTL="${LAGCTL:-${CARGO_TARGET_DIR:-target}/release/lagctl}"
fi

# stop_pid PID: SIGTERM, and waits until it has exited (also a lagd an upgrade started, which is
# not this shell's child), so that its clean stop runs before the namespaces go.
stop_pid() {
    kill -TERM "$1" 2>/dev/null || true
    wait "$1" 2>/dev/null || true
    for _ in $(seq 500); do
        kill -0 "$1" 2>/dev/null || return 0
        sleep 0.02
    done
}

TAG="rs$$"
NS_A="lagdbench-$TAG-a"
NS_B="lagdbench-$TAG-b"
WORK=$(mktemp -d)
PIDS=()

cleanup() {
    for pid in "${PIDS[@]}"; do
        stop_pid "$pid"
    done
    ip netns del "$NS_A" 2>/dev/null || true
    ip netns del "$NS_B" 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT

# start_lagd NS BOND OPTS [supervised]: starts lagd in NS (a child of this shell, so that
# `wait` works; with "supervised", under bench/tools/supervise.py, a service manager's
# descriptor store) and waits until its control socket and TAP exist; sets STARTED to its pid
# (the supervisor's).
start_lagd() {
    local ns=$1 bond=$2 opts=$3 sup=()
    [ "${4:-}" = supervised ] && sup=(python3 bench/tools/supervise.py "$WORK/$bond.notify" --)
    rm -f "$WORK/$bond.sock"
    ip netns exec "$ns" "${sup[@]}" "$LAGD" --bond "$bond" --members "${TAG}m0,${TAG}m1" --opts "$opts" \
        --control "$WORK/$bond.sock" --log-level info >>"$WORK/$bond.log" 2>&1 &
    STARTED=$!
    for _ in $(seq 200); do
        [ -S "$WORK/$bond.sock" ] && ip -n "$ns" link show "$bond" >/dev/null 2>&1 && break
        sleep 0.01
    done
}

# one_run PATH RUN: one measurement, written to $WORK/PATH-RUN.json.
one_run() {
    local path=$1 run=$2 opts a b kill_at
    case "$path" in
        kernel | kernel-sup | kernel-up) opts="mode=balance-xor xmit_hash_policy=layer3+4 fastpath=on" ;;
        kernel-sup-tc | kernel-up-tc) opts="mode=balance-xor xmit_hash_policy=layer3+4 fastpath=on fastpath_attach=tc" ;;
        ab-sup) opts="mode=active-backup miimon=50 fastpath=on" ;;
        lagd | lagd-sup | lagd-up) opts="mode=balance-xor xmit_hash_policy=layer3+4 fastpath=off" ;;
        lacp | lacp-cold | lacp-sup | lacp-up) opts="mode=802.3ad lacp_rate=fast xmit_hash_policy=layer3+4 fastpath=on" ;;
    esac
    local how=plain
    case "$path" in
        *-sup | *-sup-tc) how=supervised ;;
        *-up | *-up-tc) how=upgrade ;;
    esac
    ip netns add "$NS_A"
    ip netns add "$NS_B"
    for ns in "$NS_A" "$NS_B"; do
        ip -n "$ns" link set lo up
        ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
    done
    for i in 0 1; do
        ip -n "$NS_A" link add "${TAG}m$i" type veth peer name "${TAG}m$i" netns "$NS_B"
        ip -n "$NS_A" link set "${TAG}m$i" up
        ip -n "$NS_B" link set "${TAG}m$i" up
    done
    start_lagd "$NS_A" rsa0 "$opts" "$how"
    a=$STARTED
    start_lagd "$NS_B" rsb0 "$opts"
    b=$STARTED
    PIDS=("$a" "$b")
    ip -n "$NS_A" addr add 10.99.0.1/24 dev rsa0
    ip -n "$NS_B" addr add 10.99.0.2/24 dev rsb0
    ip -n "$NS_A" link set rsa0 up
    ip -n "$NS_B" link set rsb0 up
    # Wait until the bond carries traffic.
    for _ in $(seq 100); do
        ip netns exec "$NS_A" ping -c1 -W1 10.99.0.2 >/dev/null 2>&1 && break
        sleep 0.1
    done
    # Datagrams every 5 ms both ways for 4 s: A -> B (what the host sends through the bond)
    # and B -> A (what it receives).
    # 802.3ad without resume is out for about 3 s: a longer train, so that it ends after that.
    local secs=4
    case "$path" in lacp*) secs=7 ;; esac
    ip netns exec "$NS_B" python3 bench/tools/udp_gap.py recv 10.99.0.2 7001 "$secs.5" >"$WORK/ab" &
    local rb=$!
    ip netns exec "$NS_A" python3 bench/tools/udp_gap.py recv 10.99.0.1 7002 "$secs.5" >"$WORK/ba" &
    local ra=$!
    sleep 0.2
    ip netns exec "$NS_A" python3 bench/tools/udp_gap.py send 10.99.0.2 7001 "$secs" &
    local sa=$!
    ip netns exec "$NS_B" python3 bench/tools/udp_gap.py send 10.99.0.1 7002 "$secs" &
    local sb=$!
    sleep 1.5
    kill_at=$(date +%s.%N)
    if [ "$how" = supervised ]; then
        # The supervisor kills its lagd with SIGKILL and starts it again with the store.
        kill -USR1 "$a"
    elif [ "$how" = upgrade ]; then
        # "upgraded: lagd OLD handed over to lagd NEW"; the old one exits by itself.
        local said
        said=$(ip netns exec "$NS_A" "$LAGCTL" upgrade --control "$WORK/rsa0.sock")
        wait "$a" 2>/dev/null || true
        a=$(sed -n 's/.* to lagd \([0-9][0-9]*\).*/\1/p' <<<"$said")
        [ -n "$a" ] || { echo "restart.sh: lagctl upgrade said: $said" >&2; exit 1; }
    else
        kill -KILL "$a"
        # Reaped before the next one starts, as a service manager does.
        wait "$a" 2>/dev/null || true
    fi
    # lacp-cold: the new lagd does not learn from the state file which partner each member had
    # (as before lagd kept it there), so its members wait the aggregate wait again.
    if [ "$path" = lacp-cold ]; then
        python3 -c 'import json,sys; p=sys.argv[1]; d=json.load(open(p)); d["lacp"]=[]; json.dump(d,open(p,"w"))' \
            "$WORK/rsa0.state"
    fi
    if [ "$how" = plain ]; then
        start_lagd "$NS_A" rsa0 "$opts"
        a=$STARTED
    fi
    PIDS=("$a" "$b")
    wait "$sa" "$sb" "$ra" "$rb" || true
    # gaps FILE: "outage baseline count" of the arrival times in FILE (ms; outage null when
    # nothing arrived after the kill).
    gaps() {
        awk -v kill_at="$kill_at" '
            { t = $1 + 0
              if (n) { d = (t - prev) * 1000
                       if (t < kill_at) { if (d > base) base = d } else if (d > gap) gap = d }
              if (t >= kill_at) after++
              prev = t; n++ }
            END { printf "%s %.1f %d\n", after ? sprintf("%.1f", gap) : "null", base, n }' "$1"
    }
    read -r gab bab nab < <(gaps "$WORK/ab")
    read -r gba bba nba < <(gaps "$WORK/ba")
    # across FILE AT: the longest interval between two arrivals that ends after AT and starts
    # before AT + 50 ms (ms): the silence of the restart itself (the supervisor kills a few ms
    # after AT; a datagram may still arrive in between), where the outage above may be a later
    # stall of a busy machine. AT: the kill, or for an upgrade the moment the old lagd logged
    # that it hands the bond over (its log's UTC timestamp).
    local at=$kill_at
    if [ "$how" = upgrade ]; then
        local stamp
        stamp=$(sed -n 's/^\([0-9T:.-]*Z\).*handing the bond over.*/\1/p' "$WORK/rsa0.log" | tail -1)
        [ -n "$stamp" ] && at=$(date -u -d "$stamp" +%s.%N)
    fi
    across() {
        awk -v at="$2" '{ t = $1 + 0
                          if (n && t > at && prev < at + 0.05) { d = (t - prev) * 1000; if (d > g) g = d; seen = 1 }
                          prev = t; n++ }
                        END { if (seen) printf "%.1f\n", g; else print "null" }' "$1"
    }
    local xab xba
    xab=$(across "$WORK/ab" "$at")
    xba=$(across "$WORK/ba" "$at")
    printf '{"path":"%s","run":%d,"gap_ab_ms":%s,"gap_ba_ms":%s,"across_ab_ms":%s,"across_ba_ms":%s,"baseline_ms":%s,"received":%d}\n' \
        "$path" "$run" "$gab" "$gba" "$xab" "$xba" "$(awk -v a="$bab" -v b="$bba" 'BEGIN {print (a > b ? a : b)}')" \
        $((nab + nba)) >"$WORK/$path-$run.json"
    cat "$WORK/$path-$run.json"
    [ -n "${KEEP_PING:-}" ] && cp "$WORK/rsa0.log" "$KEEP_PING-$path-$run.log"
    for pid in "${PIDS[@]}"; do
        stop_pid "$pid"
    done
    PIDS=()
    ip netns del "$NS_A"
    ip netns del "$NS_B"
    rm -f "$WORK"/*.sock "$WORK"/*.state "$WORK"/*.log "$WORK"/*.notify
}

read -r -a PATHS <<<"${PATHS:-kernel lagd lacp lacp-cold kernel-sup kernel-sup-tc ab-sup lacp-sup lagd-sup kernel-up kernel-up-tc lacp-up lagd-up}"
for run in $(seq "$RUNS"); do
    for path in "${PATHS[@]}"; do
        one_run "$path" "$run"
    done
done

row() {
    local path=$1 ab ba xab xba base
    # Only the rows PATHS ran.
    compgen -G "$WORK/$path-[0-9]*.json" >/dev/null || return 0
    ab=$(median_of "$WORK/$path-[0-9]*.json" .gap_ab_ms)
    ba=$(median_of "$WORK/$path-[0-9]*.json" .gap_ba_ms)
    xab=$(median_of "$WORK/$path-[0-9]*.json" .across_ab_ms)
    xba=$(median_of "$WORK/$path-[0-9]*.json" .across_ba_ms)
    base=$(median_of "$WORK/$path-[0-9]*.json" .baseline_ms)
    echo "| $2 | $(fmt "$ab" 0) ms | $(fmt "$ba" 0) ms | $(fmt "$xab" 0) / $(fmt "$xba" 0) ms | $(fmt "$base" 0) ms |"
}

{
    echo "# Restart outage"
    echo
    echo "\`bash bench/restart.sh\` ($(date -u +%Y-%m-%d), RUNS=$RUNS): lagd at both ends of 2 unshaped"
    echo "veth links (balance-xor, layer3+4, or 802.3ad); each host sends the other a UDP datagram every 5 ms;"
    echo "1.5 s in, host A's lagd gets SIGKILL, is reaped, and a new one is started for the same bond"
    echo "at once. Outage: the longest interval between two arrivals across the restart, per"
    echo "direction; across the restart: the longest interval that ends after the kill (an upgrade:"
    echo "after the old lagd logged its hand-over) and starts within 50 ms of it, the restart's own"
    echo "silence where the outage may be a later stall of a busy machine; baseline: the longest"
    echo "interval before the kill, same run. Medians of $RUNS runs,"
    echo "the rows interleaved. The rows \"under a descriptor store\" run host A's lagd under"
    echo "bench/tools/supervise.py, which keeps what lagd stores (FDSTORE=1: the TAP's descriptor, the"
    echo "programs' tcx links, the members' packet sockets) and starts the new lagd with them (LISTEN_FDS), as systemd's Restart= does"
    echo "after a crash; the rows \"lagctl upgrade\" hand the bond to a new lagd over the control"
    echo "socket instead of killing the old one; the others restart it without a store, as before."
    echo
    echo "Machine: $(machine_line)."
    echo
    echo "| dataplane | outage A → B (host sends) | outage B → A (host receives) | across the restart (A → B / B → A) | baseline (no restart) |"
    echo "|---|---|---|---|---|"
    row kernel "balance-xor, kernel fast path (fastpath=on)"
    row lagd "balance-xor, through lagd (fastpath=off)"
    row lacp "802.3ad (fast rate), kernel fast path: members resumed from the state file"
    row lacp-cold "802.3ad, the same with the partners cut from the state file (no resume)"
    row kernel-sup "balance-xor, kernel path (tcx), under a descriptor store (supervise.py)"
    row kernel-sup-tc "balance-xor, kernel path (clsact), under a descriptor store"
    row ab-sup "active-backup, kernel path (tcx), under a descriptor store"
    row lacp-sup "802.3ad (fast rate), kernel path (tcx), under a descriptor store"
    row lagd-sup "balance-xor, through lagd (fastpath=off), under a descriptor store"
    row kernel-up "balance-xor, kernel path (tcx), \`lagctl upgrade\` instead of the kill"
    row kernel-up-tc "balance-xor, kernel path (clsact), \`lagctl upgrade\`"
    row lacp-up "802.3ad (fast rate), kernel path (tcx), \`lagctl upgrade\`"
    row lagd-up "balance-xor, through lagd (fastpath=off), \`lagctl upgrade\`"
    echo
    echo "Per run (outage A → B / B → A, ms):"
    echo
    for path in "${PATHS[@]}"; do
        printf -- "- %s: %s\n" "$path" "$(jq -s -r 'sort_by(.run) | map("\(.gap_ab_ms)/\(.gap_ba_ms) (across \(.across_ab_ms)/\(.across_ba_ms))") | join(", ")' "$WORK"/$path-[0-9]*.json)"
    done
    echo
    echo "Most restarts cost one to three hundred milliseconds (lagd's start-up, the fast path's"
    echo "programs loading on the kernel path). Runs before lagd re-resolved neighbours showed a"
    echo "silence of about one second in the direction A → B (what host A sends): lagd's death"
    echo "takes the TAP's carrier, the kernel drops host A's neighbour entries, the first datagram"
    echo "sent meanwhile leaves an entry being resolved whose ARP request is lost, and the next"
    echo "request waited for the retransmit timer (1 s). lagd now deletes such entries when the"
    echo "bond's carrier is back, so the next datagram resolves at once"
    echo "(\`tests/netns_lifecycle.rs\`, \`neighbours_resolve_at_once_when_the_bond_carrier_returns\`)."
    echo "In 802.3ad the bond's carrier goes off and on again within the start (the bond forms"
    echo "after it); lagd therefore also deletes the entries when it turns the carrier on itself."
    echo "One 802.3ad restart in about nine still lost a second A → B: the new lagd's first LACPDU"
    echo "said its member was not in sync yet, the partner's bond stopped distributing for about"
    echo "13 ms, and an ARP request sent then was lost. The new lagd now records each member's"
    echo "partner as the last one left it and distributes before it sends, so its first LACPDU"
    echo "tells the partner nothing new (\`tests/chaos.rs\`, host B's bond keeps its carrier)."
    echo
    echo "The host's TCP connections survive the restart (the TAP and its addresses stay; the new"
    echo "lagd takes the same TAP over): \`tests/netns_lifecycle.rs\` sends data across a kill -9"
    echo "and restart on both paths and checks every byte comes back."
} >"$OUT"
cat "$OUT"
