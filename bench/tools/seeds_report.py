#!/usr/bin/env python3
"""Writes bench/seeds.md from the JSON files bench/seeds.sh collected (NAME.RUN.json).

Usage: seeds_report.py DIR RUNS DURATION RATE KERNEL
"""

import glob
import json
import os
import statistics
import sys

work, runs, duration, rate, kernel = sys.argv[1:6]


def load(name):
    out = []
    for path in sorted(glob.glob(os.path.join(work, f"{name}.*.json"))):
        with open(path) as f:
            out.append(json.load(f))
    return out


def median(name, key=lambda r: r["aggregate_gbps"]):
    values = [key(r) for r in load(name)]
    return statistics.median(values) if values else None


def shares(name):
    """The first run's tx and rx shares per member, as `tx 50/50, rx 100/0`."""
    rs = load(name)
    if not rs:
        return "–"
    m = rs[0]["members"]
    tx = "/".join(f"{x['share'] * 100:.0f}" for x in m)
    rx = "/".join(f"{x['rx_share'] * 100:.0f}" for x in m)
    return f"tx {tx}, rx {rx}"


def retransmits(name):
    v = median(name, lambda r: r.get("retransmits") or 0)
    return "–" if v is None else f"{v:.0f}"


link = median("one-link")


def ratio(name):
    v = median(name)
    if v is None or not link:
        return None
    return v / link


def fmt(x):
    return "–" if x is None else f"{x:.2f}"


def n_runs(name):
    return len(load(name))


def row(label, name, seed):
    return (
        f"| {label} | {seed} | {fmt(ratio(name))} | "
        f"{fmt(median(name))} | {shares(name)} | {retransmits(name)} | {n_runs(name)}/{runs} |"
    )


HEADER = (
    "| experiment | seed (× one link) | lab (× one link) | lab Gbit/s | member shares "
    "(host A, first run) | retransmits | runs |\n| --- | ---: | ---: | ---: | --- | ---: | ---: |"
)


def plan_row(seed):
    """The planner's recommendation for a seed, applied, as a table row."""
    path = os.path.join(work, f"{seed}.plan.json")
    if not os.path.exists(path):
        return "| planner's recommendation | – | – | – | no capture or plan | – | – |"
    with open(path) as f:
        plan = json.load(f)
    rec = (plan.get("recommendation") or {}).get("policy", "none")
    return row(f"lagd: the planner's recommendation applied ({rec})", f"{seed}-plan", "–")


def plan_reason(seed):
    path = os.path.join(work, f"{seed}.plan.json")
    if not os.path.exists(path):
        return ""
    with open(path) as f:
        rec = json.load(f).get("recommendation") or {}
    if not rec:
        return ""
    return f"\nThe planner, on one run's capture of host A's bond: \"{rec.get('reason', '')}\"\n"


def adds(name, what, base, base_what, why):
    """A sentence comparing what lagd adds with the seed's configuration, from the figures."""
    a, b = ratio(name), ratio(base)
    if a is None or b is None:
        return f"\nWhat lagd adds: {what} was not measured.\n"
    if a > b * 1.05:
        cmp = "more than"
    elif a < b * 0.95:
        cmp = "less than"
    else:
        cmp = "about as much as"
    return (
        f"\nWhat lagd adds: {what} carried {a:.2f}× one link, {cmp} {base_what} "
        f"({b:.2f}×), retransmits {retransmits(name)} against {retransmits(base)}. {why}\n"
    )


def verdict(ok, text):
    if ok is None:
        return f"**Not measured** ({text})."
    return f"**{'Reproduced' if ok else 'Not reproduced'}**: {text}."


def lt(a, b):
    return None if a is None or b is None else a < b


def both(*xs):
    if any(x is None for x in xs):
        return None
    return all(xs)


out = []
w = out.append
w("# The seeds' experiments in the lab (issue 17)\n")
w(
    f"Made by `bash bench/seeds.sh` (lagctl lab, release build). Links shaped to {rate} each "
    f"(tc tbf); every figure is the median of {runs} runs of {duration} s, runs interleaved. "
    f"Linux {kernel}, {os.cpu_count()} CPUs shared with other engineers compiling at the same "
    "time: the runs are short and the machine is noisy, so read the ratios, not the third "
    "digit. The lab's links are far slower than the seeds' (1, 10 and 100 Gbit/s), so every "
    "figure is a ratio to one link: the one-link reference is a single direct veth at the same "
    f"rate, measured in the same run: **{fmt(link)} Gbit/s**.\n"
)
w(
    "A switch in the lab is a Linux bridge in a namespace of its own; the kernel here has no "
    "bonding driver, so its port-channels towards the hosts are lagd instances (802.3ad with "
    "LACP for an 802.3ad host, static balance-xor for balance-rr), hashing with the switch's own "
    "policy (`--switch-policy`, layer2+3 unless said). Member shares are host A's: tx is what "
    "host A's bond chose, rx is what the switch (or host B) chose for the way back.\n"
)

w("## 000: OpenShift pod traffic in a tunnel (2 × 100 Gbit/s, one switch)\n")
w(
    "The lab's switch hashes layer3+4 here (a ToR switch's src-dst-port); with layer2+3 it "
    "sends the one outer address pair to host B on one link and hides what host A does. "
    "The seed's pod network runs Geneve; this kernel has no Geneve (`lagctl lab --overlay "
    "geneve` says so and exits 1), so the lab runs VXLAN, which the kernel encapsulates the "
    "same way for the bond: an outer UDP header whose source port is a hash of the inner flow, "
    "inner MACs 0a:58 + the inner IPv4 address as OVN-Kubernetes makes them. One pod pair, "
    "8 streams.\n"
)
w(HEADER)
w(row("layer2, 8 streams", "000-l2-8", "0.90"))
w(row("layer2+3, 8 streams", "000-l23-8", "≈ layer2"))
w(row("layer3+4, 8 streams", "000-l34-8", "1.60 (24 streams)"))
w(row("lagd: layer3+4 + buckets, rebalanced every 1 s, 8 streams", "000-bkt-8", "–"))
w(plan_row("000"))
w("")
l2, l23, l34 = ratio("000-l2-8"), ratio("000-l23-8"), ratio("000-l34-8")
w(
    verdict(
        both(lt(l2, 1.15), lt(l23, 1.15), lt(1.3, l34)),
        "layer2 and layer2+3 keep one pod pair's streams on one member (at most one link), "
        "layer3+4 spreads them over both once there are several streams, because the tunnel's "
        "outer source port carries the inner flow",
    )
)
w(
    adds(
        "000-bkt-8",
        "layer3+4 with the bucket table",
        "000-l34-8",
        "plain layer3+4",
        "Buckets move by load only at a rebalancing (every 1 s here) and a busy bucket only "
        "after overloaded rebalancings in a row, so in 3-s runs the shares stay near where the "
        "first assignment put the eight streams; the bucket table is for long-lived skew, "
        "which these runs are too short to show.",
    )
)

w("## 001: many clients to one storage server (10 Gbit/s, LACP layer2)\n")
w(
    "Client hosts with one link each on the switch, host A the bonded server (802.3ad, "
    "layer2), the switch hashing layer2 (source and destination MAC) towards it. One stream "
    "per client. The seed's single client reached about 850 MB/s of a 10 GbE link over NFS.\n"
)
w(HEADER)
w(row("1 client → server (fan-in)", "001-one-in", "0.68"))
w(row("4 clients → server (fan-in)", "001-four-in", "uses every member"))
w(row("server → 4 clients (fan-out)", "001-four-out", "–"))
w(row("lagd: buckets, rebalanced every 1 s, fan-out", "001-bkt-out", "–"))
w(plan_row("001"))
w("")
one, four = ratio("001-one-in"), ratio("001-four-in")
w(
    verdict(
        both(lt(one, 1.15), lt(1.3, four)),
        "one client gets at most one link, four clients' sessions are spread by MAC over both "
        "members of the server's bond (when their MACs hash apart; the clients' MACs are random "
        "per run, so a run where they all hash alike is possible and shows in the shares)",
    )
)
w(
    adds(
        "001-bkt-out",
        "buckets on the fan-out",
        "001-four-out",
        "the kernel's layer2 modulo",
        "As in seed 000, 3-s runs leave the rebalancing little time. The planner's "
        "recommendation (below) comes from a simulation that rebalances; applied for 3 s, the "
        "shares show whether it had the time to.",
    )
)
w(plan_reason("001"))

w("## 003: DRBD replication link (2 × 1 Gbit/s, back to back, one stream)\n")
w(HEADER)
w(row("802.3ad (layer2)", "003-lacp", "0.94"))
w(row("balance-rr, MTU 1500", "003-rr-1500", "0.72"))
w(row("balance-rr, MTU 9000", "003-rr-9000", "1.96"))
w(row("lagd: stripe (ordered round-robin), MTU 1500", "003-stripe", "–"))
w(plan_row("003"))
w("")
lacp, rr15, rr90 = ratio("003-lacp"), ratio("003-rr-1500"), ratio("003-rr-9000")
w(
    verdict(
        both(lt(lacp, 1.15), lt(1.3, rr90)),
        "802.3ad gives one stream one link; balance-rr with jumbo frames gives it about two",
    )
)
w(
    verdict(
        lt(rr15, 1.0),
        "balance-rr at MTU 1500 is slower than one link (the seed's reordering and "
        f"retransmissions). The reordering is there in the lab ({retransmits('003-rr-1500')} "
        f"retransmissions at MTU 1500 against {retransmits('003-rr-9000')} at 9000, median per "
        "run), but on links this slow it does not cost the stream its second link",
    )
)
w(
    adds(
        "003-stripe",
        "stripe at MTU 1500",
        "003-rr-1500",
        "balance-rr at MTU 1500",
        "Stripe numbers the frames and puts them back in order at the other end (no "
        "retransmissions from reordering), and segments in software, which costs CPU on these "
        "2 cores.",
    )
)
w(plan_reason("003"))

w("## 004: one stream through one switch, and through one switch per link (2 × 10 Gbit/s)\n")
w(HEADER)
w(row("balance-rr through one switch's port-channel", "004-one-sw", "≤ 1 (switch hash)"))
w(row("balance-rr, one switch per link", "004-two-sw", "1.81"))
w(row("lagd: stripe, one switch per link", "004-stripe", "–"))
w(plan_row("004"))
w("")
one_sw, two_sw = ratio("004-one-sw"), ratio("004-two-sw")
w(
    verdict(
        both(lt(one_sw, 1.15), lt(1.3, two_sw)),
        "through one switch the return path is the switch's hash (one member: see the rx "
        "shares), so one stream stays within one link; with one switch per link each switch "
        "has one way to go and round-robin from the host carries one stream on both",
    )
)
w(
    adds(
        "004-stripe",
        "stripe through one switch per link",
        "004-two-sw",
        "balance-rr",
        "The switches forward stripe's frames like any other (their ports take the members' "
        "larger MTU for stripe's header).",
    )
)
w(plan_reason("004"))
w("## Not done here\n")
w(
    "- `--switch ovs` (Open vSwitch as the switch) is in the lab and tested, but not in this "
    "table: its userspace datapath on these 2 cores would measure the CPU, not the hashing.\n"
    "- Geneve: this kernel has none; `--overlay geneve` says so and exits 1.\n"
)
print("\n".join(out))
