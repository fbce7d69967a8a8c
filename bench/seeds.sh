#!/usr/bin/env bash
# The seeds' experiments re-run in the lab (issue 17), and the same with what lagd adds.
#
#   000 OpenShift   802.3ad through a switch, streams inside a tunnel (VXLAN: this kernel has no
#                   Geneve), layer2 / layer2+3 / layer3+4, 1 and 8 streams; lagd adds
#                   layer3+4 with the bucket table rebalanced
#   001 storage     4 clients to a bonded server (fan-in) and back (fan-out) through a switch,
#                   802.3ad layer2, against 1 client; lagd adds buckets on the fan-out
#   003 DRBD        two hosts back to back, 1 stream: 802.3ad, balance-rr at MTU 1500 and 9000;
#                   lagd adds stripe at MTU 1500
#   004 two switch  1 stream, balance-rr through one switch's port-channel and through one switch
#                   per link; lagd adds stripe through one switch per link
#
# Every figure is the median of RUNS runs (default 3) of DURATION seconds (default 4), runs
# interleaved, next to a one-link reference measured in the same run (direct veth, 1 link, same
# rate). The links are slow (RATE, default 200mbit) because the machine this is written for has
# 2 cores shared with other work and the switch adds two lagd instances of its own.
#
# Usage, as root from anywhere:  bash bench/seeds.sh      (writes bench/seeds.md)
# Environment: RUNS, DURATION, RATE, OUT.
# Needs: iproute2, iperf3, ping, python3, jq, cargo.
set -euo pipefail

cd "$(dirname "$0")/.."
RUNS="${RUNS:-3}"
DURATION="${DURATION:-4}"
RATE="${RATE:-200mbit}"
OUT="${OUT:-bench/seeds.md}"

[ "$(id -u)" = 0 ] || { echo "seeds.sh: run as root (network namespaces)" >&2; exit 1; }
for tool in ip tc iperf3 ping python3 jq cargo; do
    command -v "$tool" >/dev/null || { echo "seeds.sh: $tool is missing" >&2; exit 1; }
done

cargo build --release -q -p lagd --bin lagd --bin lagctl
work=$(mktemp -d /tmp/lagd-seeds.XXXXXX)
trap 'rm -rf "$work"' EXIT
cp target/release/lagd target/release/lagctl "$work/"

# name|arguments (the lab cleans up after itself, also on failure)
experiments=(
    "one-link|--baseline direct --links 1 --streams 1"
    "000-l2-1|--switch bridge --mode 802.3ad --policy layer2 --overlay vxlan --streams 1"
    "000-l2-8|--switch bridge --mode 802.3ad --policy layer2 --overlay vxlan --streams 8"
    "000-l23-8|--switch bridge --mode 802.3ad --policy layer2+3 --overlay vxlan --streams 8"
    "000-l34-1|--switch bridge --mode 802.3ad --policy layer3+4 --overlay vxlan --streams 1"
    "000-l34-8|--switch bridge --mode 802.3ad --policy layer3+4 --overlay vxlan --streams 8"
    "000-bkt-8|--switch bridge --mode 802.3ad --policy layer3+4 --overlay vxlan --streams 8 --bond-opts distribution=buckets rebalance_interval=1000"
    "001-one-in|--clients 1 --mode 802.3ad --policy layer2 --switch-policy layer2 --direction fan-in --streams 1"
    "001-four-in|--clients 4 --mode 802.3ad --policy layer2 --switch-policy layer2 --direction fan-in --streams 1"
    "001-four-out|--clients 4 --mode 802.3ad --policy layer2 --switch-policy layer2 --direction fan-out --streams 1"
    "001-bkt-out|--clients 4 --mode 802.3ad --policy layer2 --switch-policy layer2 --direction fan-out --streams 1 --bond-opts distribution=buckets rebalance_interval=1000"
    "003-lacp|--mode 802.3ad --policy layer2 --streams 1"
    "003-rr-1500|--mode balance-rr --streams 1"
    "003-rr-9000|--mode balance-rr --streams 1 --mtu 9000"
    "003-stripe|--mode stripe --streams 1"
    "004-one-sw|--switch bridge --mode balance-rr --streams 1"
    "004-two-sw|--switches 2 --mode balance-rr --streams 1"
    "004-stripe|--switches 2 --mode stripe --streams 1"
)

for run in $(seq 1 "$RUNS"); do
    for e in "${experiments[@]}"; do
        name=${e%%|*}
        # shellcheck disable=SC2206 # the arguments are meant to split (bond-opts stays one)
        args=(${e#*|})
        # --bond-opts takes the rest of the line as one argument.
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
    done
done

python3 bench/tools/seeds_report.py "$work" "$RUNS" "$DURATION" "$RATE" "$(uname -r)" >"$OUT"
echo "wrote $OUT"
