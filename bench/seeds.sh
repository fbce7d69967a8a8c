#!/usr/bin/env bash
# The seeds' experiments re-run in the lab (issue 17), and the same with what lagd adds.
#
#   000 OpenShift   802.3ad through a switch, 8 streams inside a tunnel (VXLAN: this kernel has
#                   no Geneve), layer2 / layer2+3 / layer3+4; lagd adds layer3+4 with the
#                   bucket table rebalanced
#   001 storage     4 clients to a bonded server (fan-in) and back (fan-out) through a switch,
#                   802.3ad layer2, against 1 client; lagd adds buckets on the fan-out
#   003 DRBD        two hosts back to back, 1 stream: 802.3ad, balance-rr at MTU 1500 and 9000;
#                   lagd adds stripe at MTU 1500
#   004 two switch  1 stream, balance-rr through one switch's port-channel and through one switch
#                   per link; lagd adds stripe through one switch per link
#
# Every experiment through one switch runs with Open vSwitch as the switch as well (--switch
# ovs); seed 000's buckets also through lagd's userspace path (fastpath=off).
#
# and for each seed the planner's recommendation applied: one run with --capture, `lagctl plan`
# on the capture, the recommended policy measured like the rest.
#
# Every figure is the median of RUNS runs (default 5) of DURATION seconds (default 3), runs
# interleaved, next to a one-link reference measured in the same run (direct veth, 1 link, same
# rate). The links are slow (RATE, default 200mbit) because the machine this is written for has
# 2 cores shared with other work and the switch adds two lagd instances of its own.
#
# Usage, as root from anywhere:  bash bench/seeds.sh      (writes bench/seeds.md)
# Environment: RUNS, DURATION, RATE, OUT, KEEP (a directory to keep every run's JSON, the
# captures and the plans in).
# Needs: iproute2, iperf3, ping, tcpdump, Open vSwitch, python3, jq, cargo.
set -euo pipefail

cd "$(dirname "$0")/.."
RUNS="${RUNS:-5}"
DURATION="${DURATION:-3}"
RATE="${RATE:-200mbit}"
OUT="${OUT:-bench/seeds.md}"

[ "$(id -u)" = 0 ] || { echo "seeds.sh: run as root (network namespaces)" >&2; exit 1; }
for tool in ip tc iperf3 ping tcpdump ovs-vswitchd python3 jq cargo; do
    command -v "$tool" >/dev/null || { echo "seeds.sh: $tool is missing" >&2; exit 1; }
done

cargo build --release -q -p lagd --bin lagd --bin lagctl
work=$(mktemp -d /tmp/lagd-seeds.XXXXXX)
finish() {
    if [ -n "${KEEP:-}" ]; then
        mkdir -p "$KEEP" && cp -r "$work"/. "$KEEP"/ && rm -f "$KEEP/lagd" "$KEEP/lagctl"
    fi
    rm -rf "$work"
}
trap finish EXIT
cp target/release/lagd target/release/lagctl "$work/"

# name|arguments (the lab cleans up after itself, also on failure). Seed 000's switch hashes
# layer3+4 (a ToR switch's src-dst-port), so that the way to host B does not hide what host A's
# policy does; seed 001's hashes MACs (layer2), as the seed's LACP does.
S000="--switch bridge --switch-policy layer3+4 --mode 802.3ad --overlay vxlan --streams 8"
S001="--clients 4 --mode 802.3ad --policy layer2 --switch-policy layer2 --streams 1"
experiments=(
    "one-link|--baseline direct --links 1 --streams 1"
    "000-l2-8|$S000 --policy layer2"
    "000-l23-8|$S000 --policy layer2+3"
    "000-l34-8|$S000 --policy layer3+4"
    "000-bkt-8|$S000 --policy layer3+4 --bond-opts distribution=buckets rebalance_interval=1000"
    "001-one-in|--clients 1 --mode 802.3ad --policy layer2 --switch-policy layer2 --direction fan-in --streams 1"
    "001-four-in|$S001 --direction fan-in"
    "001-four-out|$S001 --direction fan-out"
    "001-bkt-out|$S001 --direction fan-out --bond-opts distribution=buckets rebalance_interval=1000"
    "003-lacp|--mode 802.3ad --policy layer2 --streams 1"
    "003-rr-1500|--mode balance-rr --streams 1"
    "003-rr-9000|--mode balance-rr --streams 1 --mtu 9000"
    "003-stripe|--mode stripe --streams 1"
    "004-one-sw|--switch bridge --mode balance-rr --streams 1"
    "004-two-sw|--switches 2 --mode balance-rr --streams 1"
    "004-stripe|--switches 2 --mode stripe --streams 1"
    # The same through Open vSwitch as the switch (LACP towards an 802.3ad host: balance-tcp
    # for a layer3+4 switch policy, balance-slb otherwise; a static LAG is balance-slb).
    "000-l2-8-ovs|${S000/bridge/ovs} --policy layer2"
    "000-l34-8-ovs|${S000/bridge/ovs} --policy layer3+4"
    "000-bkt-8-ovs|${S000/bridge/ovs} --policy layer3+4 --bond-opts distribution=buckets rebalance_interval=1000"
    "001-one-in-ovs|--switch ovs --clients 1 --mode 802.3ad --policy layer2 --switch-policy layer2 --direction fan-in --streams 1"
    "001-four-in-ovs|--switch ovs $S001 --direction fan-in"
    "001-four-out-ovs|--switch ovs $S001 --direction fan-out"
    "004-one-sw-ovs|--switch ovs --mode balance-rr --streams 1"
    # Seed 000 with lagd's userspace path (no kernel fast path): what buckets ran on before the
    # fast path took them (the earlier ~1x one link of buckets through the switch).
    "000-l34-8-user|$S000 --policy layer3+4 --bond-opts fastpath=off"
    "000-bkt-8-user|$S000 --policy layer3+4 --bond-opts distribution=buckets rebalance_interval=1000 fastpath=off"
)

# One run of a configuration: lab NAME RUN ARGS... (--bond-opts takes the rest of the line).
lab() {
    local name=$1 run=$2 i rest
    shift 2
    local args=("$@")
    for i in "${!args[@]}"; do
        if [ "${args[$i]}" = "--bond-opts" ]; then
            rest="${args[*]:$((i + 1))}"
            args=("${args[@]:0:$((i + 1))}" "$rest")
            break
        fi
    done
    if "$work/lagctl" lab --rate "$RATE" --duration "$DURATION" --json --quiet \
        --lagd "$work/lagd" "${args[@]}" >"$work/$name.$run.json" 2>"$work/$name.$run.err"; then
        printf '  %-14s run %s: %s Gbit/s\n' "$name" "$run" \
            "$(jq -r .aggregate_gbps "$work/$name.$run.json")"
    else
        rm -f "$work/$name.$run.json"
        printf '  %-14s run %s: FAILED: %s\n' "$name" "$run" "$(tail -1 "$work/$name.$run.err")"
    fi
}

# The planner's recommendation applied: one run of the seed's configuration with --capture,
# `lagctl plan` on what host A's bond carried, and the recommended policy as lab arguments
# (MODE is the seed's hashing mode, kept for a plain hash policy).
recommend() { # seed mode args...
    local seed=$1 mode=$2 policy
    shift 2
    # shellcheck disable=SC2068 # the seed's arguments are meant to split
    lab "$seed-capture" 0 $@ --capture "$work/$seed.pcap" >/dev/null
    "$work/lagctl" plan --pcap "$work/$seed.pcap" --members 2 --json >"$work/$seed.plan.json" ||
        return 0
    policy=$(jq -r '.recommendation.policy // empty' "$work/$seed.plan.json")
    jq -r '.recommendation.reason // empty' "$work/$seed.plan.json" >"$work/$seed.plan.reason"
    case "$policy" in
        layer2 | layer2+3 | layer3+4 | encap2+3 | encap3+4 | vlan+srcmac)
            echo "--mode $mode --policy $policy" ;;
        ovs-tcp | balance-tcp) echo "--mode balance-tcp --policy layer3+4" ;;
        ovs-slb | balance-slb) echo "--mode balance-slb --policy layer2" ;;
        *+buckets) echo "--mode $mode --policy ${policy%+buckets} --bond-opts distribution=buckets rebalance_interval=1000" ;;
        stripe) echo "--mode stripe" ;;
        balance-rr) echo "--mode balance-rr" ;;
    esac
}

# Drops the options a recommendation replaces from a seed's arguments.
strip_policy() {
    sed -E 's/(^| )--mode [^ ]+/ /; s/(^| )--policy [^ ]+/ /'
}

echo "planning from captures"
plan_000=$(recommend 000 802.3ad "$S000 --policy layer2")
plan_001=$(recommend 001 802.3ad "$S001 --direction fan-out")
plan_003=$(recommend 003 802.3ad --mode 802.3ad --policy layer2 --streams 1)
plan_004=$(recommend 004 balance-xor --switch bridge --mode balance-rr --streams 1)
[ -n "$plan_000" ] && experiments+=("000-plan|$(echo "$S000" | strip_policy) $plan_000")
[ -n "$plan_001" ] && experiments+=("001-plan|$(echo "$S001 --direction fan-out" | strip_policy) $plan_001")
[ -n "$plan_003" ] && experiments+=("003-plan|--streams 1 $plan_003")
[ -n "$plan_004" ] && experiments+=("004-plan|--switch bridge --streams 1 $plan_004")
for p in 000 001 003 004; do
    printf '  %s: %s\n' "$p" "$(jq -r '.recommendation.policy // "none"' "$work/$p.plan.json" 2>/dev/null)"
done

for run in $(seq 1 "$RUNS"); do
    for e in "${experiments[@]}"; do
        # shellcheck disable=SC2046 # the arguments are meant to split
        lab "${e%%|*}" "$run" ${e#*|}
    done
done

python3 bench/tools/seeds_report.py "$work" "$RUNS" "$DURATION" "$RATE" "$(uname -r)" >"$OUT"
echo "wrote $OUT"
