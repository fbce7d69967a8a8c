#!/usr/bin/env bash
# balance-rr on the kernel path against direct veth and against the kernel path's balance-xor
# (issue 27: "balance-rr with one stream over two links at least the kernel path's balance-xor
# figure, no collapse from reordering: report retransmits").
#
#   direct  no bond, an address pair on each veth (one stream uses one link)
#   xor     lagd at both ends, mode=balance-xor xmit_hash_policy=layer3+4 fastpath=on
#   rr      lagd at both ends, mode=balance-rr fastpath=on (packets_per_slave=1): one stream's
#           frames alternate over both links, so they may arrive out of order
#
# One TCP stream, two unshaped veth links; the three setups back to back in each round (the
# order rotates from round to round), so each round's figures share the machine's state of the
# moment. Reports goodput, retransmits and the member shares per run, and the medians.
#
# Usage, as root from anywhere:  bash bench/rr.sh
# Environment: RUNS (6), DURATION (seconds per measurement, 8), OUT (bench/rr.md).
# Needs: iproute2, iperf3, jq, python3, cargo.
set -euo pipefail

cd "$(dirname "$0")/.."
RUNS="${RUNS:-6}"
DURATION="${DURATION:-8}"
OUT="${OUT:-bench/rr.md}"
SETUPS=(direct xor rr)

# shellcheck source=bench/lib.sh
. bench/lib.sh
bench_start rr.sh lgrr ip iperf3 jq python3

setup_args() { # setup
    case "$1" in
        direct) echo "--baseline direct --mode balance-xor --policy layer3+4" ;;
        xor) echo "--lagd $LAGD --bond-opts fastpath=on --mode balance-xor --policy layer3+4" ;;
        rr) echo "--lagd $LAGD --bond-opts fastpath=on --mode balance-rr" ;;
    esac
}

measure() { # setup run
    local file="$work/$1.$2.json"
    # shellcheck disable=SC2046 # the argument lists are meant to split
    if "$LAGCTL" lab --links 2 --rate 0 --json --quiet --duration "$DURATION" --streams 1 \
        $(setup_args "$1") >"$file" 2>"$work/err"; then
        printf '  %-6s run %2s: %s\n' "$1" "$2" \
            "$(jq -r '"\(.aggregate_gbps) Gbit/s, retransmits \(.retransmits), shares \([.members[].share * 100 | round] | map(tostring) | join("/"))"' "$file")"
    else
        rm -f "$file"
        printf '  %-6s run %2s: FAILED: %s\n' "$1" "$2" "$(tail -1 "$work/err")"
    fi
}

echo "balance-rr benchmark: $RUNS rounds of ${#SETUPS[@]} setups, ${DURATION} s each"
for run in $(seq 1 "$RUNS"); do
    n=${#SETUPS[@]}
    for i in $(seq 0 $((n - 1))); do
        measure "${SETUPS[$(((i + run) % n))]}" "$run"
    done
done

python3 - "$work" "$RUNS" "$DURATION" "$OUT" "$(machine_line)" "$(git rev-parse --short HEAD)" \
    "$(iperf3 --version | head -1 | cut -d' ' -f1-2)" <<'EOF'
import json, os, statistics, sys, time

work, runs, duration, out, machine, commit, iperf = sys.argv[1:8]
runs = int(runs)
setups = [
    ("direct", "direct veth"),
    ("xor", "kernel path, balance-xor layer3+4"),
    ("rr", "kernel path, balance-rr"),
]


def result(setup, run):
    path = os.path.join(work, f"{setup}.{run}.json")
    return json.load(open(path)) if os.path.exists(path) else None


def med(xs):
    return statistics.median(xs) if xs else None


data = {s: [result(s, r) for r in range(1, runs + 1)] for s, _ in setups}
gbps = {s: [d["aggregate_gbps"] for d in data[s] if d] for s, _ in setups}
direct = med(gbps["direct"])
xor = med(gbps["xor"])
rows, details = [], []
for s, label in setups:
    done = [d for d in data[s] if d]
    g, rt = med(gbps[s]), med([d["retransmits"] for d in done])
    if g is None:
        rows.append(f"| {label} | 0 | – | – | – | – |")
        continue
    rows.append(
        f"| {label} | {len(done)} | {g:.2f} | {g / direct:.2f}x | {g / xor:.2f}x | {rt:.0f} |"
        if direct and xor else f"| {label} | {len(done)} | {g:.2f} | – | – | {rt:.0f} |"
    )
    details.append(f"| {label} | " + " ".join(
        f"{d['aggregate_gbps']:.2f}" if d else "–" for d in data[s]) + " | " + " ".join(
        str(d["retransmits"]) if d else "–" for d in data[s]) + " | " + " ".join(
        "/".join(str(round(m["share"] * 100)) for m in d["members"]) if d else "–"
        for d in data[s]) + " |")

with open(out, "w") as f:
    w = lambda s="": f.write(s + "\n")
    w("# balance-rr on the kernel path, one TCP stream")
    w()
    w(f"Written by `bench/rr.sh` on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
      f"lagd {commit}.")
    w(f"Machine: {machine}; {iperf}. The machine is shared: other work may have run at the same time.")
    w()
    w("Two network namespaces joined by 2 unshaped veth links, one TCP stream (iperf3). *direct*:")
    w("no bond (the stream uses one link). *balance-xor*: lagd at both ends, `mode=balance-xor")
    w("xmit_hash_policy=layer3+4 fastpath=on` (the stream on one member). *balance-rr*: lagd at")
    w("both ends, `mode=balance-rr fastpath=on` (packets_per_slave=1: the stream's frames")
    w(f"alternate over both members). {runs} rounds of {duration} s per setup, the setups back to")
    w("back in each round (the order rotating). Retransmits: the sender's, per run.")
    w()
    w("| setup | runs | Gbit/s (median) | / direct | / balance-xor | retransmits (median) |")
    w("| --- | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        w(r)
    w()
    w("Every run, in order (round 1 first): Gbit/s, retransmits, member shares (%):")
    w()
    w("| setup | Gbit/s | retransmits | shares |")
    w("| --- | --- | --- | --- |")
    for r in details:
        w(r)
print(open(out).read())
EOF
echo "wrote $OUT"
