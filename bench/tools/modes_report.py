#!/usr/bin/env python3
"""Writes bench/modes.md from what bench/modes.sh collected: SETUP.TEST.RUN.json (`lagctl lab
--json`) and, for the lagd setups, SETUP.TEST.RUN.watch (bench/tools/lagd_watch.py).

Usage: modes_report.py DIR RUNS DURATION OUT MACHINE COMMIT IPERF SETUP...
"""

import json
import math
import os
import statistics
import sys
import time

work, runs, duration, out, machine, commit, iperf = sys.argv[1:8]
setups = sys.argv[8:]
runs = int(runs)

LABELS = {
    "direct": "direct veth",
    "bridge": "direct veth towards a bridge",
    "xor": "balance-xor layer3+4",
    "encap34": "balance-xor encap3+4",
    "encap23": "balance-xor encap2+3",
    "rr": "balance-rr",
    "ab": "active-backup",
    "lacp": "802.3ad layer3+4",
    "tlb": "balance-tlb layer3+4",
    "alb": "balance-alb layer3+4",
    "bcast": "broadcast",
    "bcastdup": "broadcast, broadcast_dedup=off",
    "stripe": "stripe",
}
# test, label, unit, goal as a fraction of direct
TESTS = [
    ("tcp1", "TCP, 1 stream", "Gbit/s", 0.9),
    ("tcp8", "TCP, 8 streams (2 × iperf3 -P 4)", "Gbit/s", 0.9),
    ("udp64", "UDP 64 B, 1 flow", "datagrams/s", 0.8),
]
CPU_GOAL = 2.0  # % of one core, per lagd
# The setups without lagd: no goal, CPU or path of their own.
BASELINES = {"direct", "bridge"}
# The setups that run towards host B's bridge, read against the bridge baseline too.
SWITCHED = {"tlb", "alb"}


def load(setup, test, run, ext):
    path = os.path.join(work, f"{setup}.{test}.{run}.{ext}")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        try:
            return json.load(f)
        except ValueError:  # an interrupted run's empty file
            return None


def bonds(w):
    """A watch's lagds, one per control socket. Watches written before lagd_watch.py grouped
    a lagd's processes (lagd and the launcher it forks, same command line) hold one entry
    per process, each with the same status: those are merged, their CPU added."""
    merged = {}
    for lg in w["lagds"]:
        m = merged.get(lg["control"])
        if m is None:
            merged[lg["control"]] = dict(lg)
        elif "cpu_s" in lg:
            m["cpu_s"] = m.get("cpu_s", 0) + lg["cpu_s"]
    return list(merged.values())


def value(d, test):
    if d is None:
        return None
    return d["udp_pps"] if test.startswith("udp") else d["aggregate_gbps"]


def num(x, unit):
    if x is None:
        return "–"
    return f"{x:,.0f}" if unit == "datagrams/s" else f"{x:.2f}"


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def ratios(a_list, b_list):
    """b / a per round, where both ran."""
    return [b / a for a, b in zip(a_list, b_list) if a and b is not None]


def shares(d):
    if d is None:
        return "–"
    return "/".join(str(round(m["share"] * 100)) for m in d["members"])


data = {(s, t, r): load(s, t, r, "json") for s in setups for t, *_ in TESTS
        for r in range(1, runs + 1)}
watch = {(s, t, r): load(s, t, r, "watch") for s in setups for t, *_ in TESTS
         for r in range(1, runs + 1)}
loads = []
for name in sorted(os.listdir(work)):
    if name.endswith(".load"):
        with open(os.path.join(work, name)) as f:
            try:
                loads.append(float(f.read().strip()))
            except ValueError:
                pass
vals = {(s, t): [value(data[s, t, r], t) for r in range(1, runs + 1)]
        for s in setups for t, *_ in TESTS}


def paths(s):
    """Every path the setup's lagds reported, with the reasons, and the frames in the windows:
    (set of 'path (reason)', set of paths, frames, of them through lagd, runs without a
    watch)."""
    seen, bare, frames, lagd, missing = set(), set(), 0, 0, 0
    for t, *_ in TESTS:
        for r in range(1, runs + 1):
            w = watch[s, t, r]
            if w is None:
                if data[s, t, r] is not None:
                    missing += 1
                continue
            for lg in bonds(w):
                for snap in (lg.get("first"), lg.get("second")):
                    if snap:
                        reason = f" ({snap['reason']})" if snap.get("reason") else ""
                        seen.add(f"{snap['path']}{reason}")
                        bare.add(snap["path"])
                frames += lg.get("frames", 0)
                lagd += lg.get("lagd_frames", 0)
    return seen, bare, frames, lagd, missing


def on_kernel(s):
    _, bare, frames, lagd, _ = paths(s)
    return bare == {"kernel"} and frames > 0 and lagd <= 0.001 * frames


def down(x, goal):
    """A ratio below its goal as the text shows it: rounded down where rounding would make a
    miss read as the goal itself."""
    return math.floor(x * 100) / 100 if round(x, 2) >= goal else x


def up(x):
    """A shortfall, rounded up (at least 0.01)."""
    return max(0.01, math.ceil(x * 100 - 1e-9) / 100)


def near(short):
    """What a miss by `short` says, given the run's noise (see the report's text)."""
    return "; within 0.1: not shown to be missed" if short < 0.1 else ""


def fmt_ratio(x):
    return "–" if x is None else f"{x:.2f}x"


summary, goals_missed, noise = [], [], []
for t, label, unit, goal in TESTS:
    d_med = med(vals["direct", t]) if "direct" in setups else None
    x_med = med(vals["xor", t]) if "xor" in setups else None
    for s in setups:
        v = vals[s, t]
        n = sum(1 for x in v if x is not None)
        m = med(v)
        rds = ratios(vals["direct", t], v) if "direct" in setups else []
        rd = med(rds)
        spread = f"{min(rds):.2f} – {max(rds):.2f}" if rds and s not in BASELINES else "–"
        if s == "xor" and rds:
            noise.append(f"{label}: {spread}")
        rdm = m / d_med if m is not None and d_med else None
        rx = med(ratios(vals["xor", t], v)) if "xor" in setups else None
        rb = (med(ratios(vals["bridge", t], v))
              if "bridge" in setups and s in SWITCHED else None)
        rt = med([data[s, t, r]["retransmits"] for r in range(1, runs + 1)
                  if data[s, t, r] and data[s, t, r].get("retransmits") is not None])
        name = LABELS.get(s, s)
        if s not in BASELINES and not on_kernel(s):
            name += " **(not the kernel path: see below)**"
        if s == "direct":
            g, met = "baseline", ""
        elif s == "bridge":
            g, met = "baseline of tlb, alb", ""
        else:
            g = f"≥ {goal:.2f}x direct"
            met = "–" if rd is None else ("yes" if rd >= goal else
                                          f"**no**: {down(rd, goal):.2f}x, {up(goal - rd):.2f} short")
            if rd is not None and rd < goal:
                goals_missed.append(f"{LABELS.get(s, s)}, {label}: {down(rd, goal):.2f}x direct "
                                    f"(goal {goal:.2f}x, {up(goal - rd):.2f} short)"
                                    + near(goal - rd)
                                    + (f"; {rb:.2f}x direct veth towards the same bridge"
                                       if rb is not None else ""))
            if s == "rr" and t == "tcp1":
                g += "; ≥ 1.00x balance-xor"
                if rx is not None:
                    met += "; " + ("yes" if rx >= 1.0 else f"**no**: {down(rx, 1.0):.2f}x balance-xor")
                    if rx < 1.0:
                        goals_missed.append(f"balance-rr, {label}: {down(rx, 1.0):.2f}x balance-xor "
                                            f"(goal 1.00x, {up(1 - rx):.2f} short)"
                                            + near(1 - rx))
        summary.append(
            f"| {label} | {name} | {n} | {num(m, unit)} | {fmt_ratio(rd)} | {spread} | {fmt_ratio(rdm)} "
            f"| {fmt_ratio(rx)} | {fmt_ratio(rb)} | {'–' if rt is None else f'{rt:.0f}'} | {g} | {met} |")

cpu_rows = []
for s in setups:
    if s in BASELINES:
        continue
    per = {}
    nlagd = set()
    for t, *_ in TESTS:
        ws = [watch[s, t, r] for r in range(1, runs + 1)]
        per[t] = med([w["cpu_core_pct"] for w in ws if w])
        nlagd |= {len(bonds(w)) for w in ws if w}
    k = max(nlagd) if nlagd else None
    c8 = per.get("tcp8")
    each = c8 / k if c8 is not None and k else None
    if each is None:
        met = "–"
    elif each < CPU_GOAL:
        met = "yes"
    else:
        met = f"**no**: {each:.1f} %"
        goals_missed.append(f"{LABELS.get(s, s)}, lagd's CPU during TCP 8 streams: {each:.1f} % "
                            f"of a core per lagd (goal under {CPU_GOAL:.0f} %)")
    c = lambda x: "–" if x is None else f"{x:.2f}"
    cpu_rows.append(f"| {LABELS.get(s, s)} | {k if k else '–'} | {c(c8)} | {c(each)} "
                    f"| {c(per.get('tcp1'))} | {c(per.get('udp64'))} | < {CPU_GOAL:.0f} % per lagd | {met} |")

path_rows, not_kernel = [], []
for s in setups:
    if s in BASELINES:
        continue
    seen, _, frames, lagd, missing = paths(s)
    share = f"{100 * lagd / frames:.4f} %" if frames else "–"
    ok = on_kernel(s)
    if not ok:
        not_kernel.append(LABELS.get(s, s))
    path_rows.append(f"| {LABELS.get(s, s)} | {', '.join(sorted(seen)) or '–'} | {frames:,} "
                     f"| {lagd:,} | {share} | {'yes' if ok else '**no**'} |"
                     + (f" ({missing} runs without a status)" if missing else ""))

details = []
for t, label, unit, _ in TESTS:
    for s in setups:
        runs_ = [data[s, t, r] for r in range(1, runs + 1)]
        ws = [watch[s, t, r] for r in range(1, runs + 1)]
        v = " ".join(num(value(d, t), unit) for d in runs_)
        rt = " ".join(str(d["retransmits"]) if d and d.get("retransmits") is not None else "–"
                      for d in runs_) if t != "udp64" else ""
        sh = " ".join(shares(d) for d in runs_)
        cpu = " ".join(f"{w['cpu_core_pct']:.2f}" if w else "–" for w in ws) if s not in BASELINES else ""
        lf = " ".join(str(sum(lg.get("lagd_frames", 0) for lg in bonds(w))) + "/"
                      + str(sum(lg.get("frames", 0) for lg in bonds(w))) if w else "–"
                      for w in ws) if s not in BASELINES else ""
        details.append(f"| {label} | {LABELS.get(s, s)} | {v} | {rt} | {sh} | {cpu} | {lf} |")

failed = []
for (s, t, r), d in sorted(data.items()):
    if d is None:
        err = os.path.join(work, f"{s}.{t}.{r}.err")
        last = ""
        if os.path.exists(err):
            lines = [x for x in open(err).read().splitlines() if x.strip()]
            last = lines[-1] if lines else ""
        failed.append(f"- {LABELS.get(s, s)}, {t}, round {r}: {last or 'no result'}")

with open(out, "w") as f:
    w = lambda s="": f.write(s + "\n")
    w("# Every mode on the kernel path against direct veth")
    w()
    w(f"Written by `bench/modes.sh` on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
      f"lagd {commit}.")
    w(f"Machine: {machine}; {iperf}. The machine is shared: other work may have run at the same "
      "time.")
    w()
    w("Two network namespaces joined by 2 unshaped veth links. *direct veth*: no bond, an address")
    w("pair on each veth (one stream uses one link, 8 streams put 4 on each). Every other setup:")
    w("lagd with `fastpath=on miimon=100` and the mode and policy named; at both ends, but for")
    w("balance-tlb and balance-alb, which `lagctl lab` runs as the kernel's documentation wants")
    w("them, towards a switch: lagd on host A, host B a Linux bridge over its link ends (the")
    w("traffic goes A → B, so lagd sends the data and receives the ACKs). balance-rr runs with")
    w("packets_per_slave=1 (a stream's frames alternate over both links). The bridge on host B")
    w("is part of what balance-tlb and balance-alb are compared with direct veth: its forwarding")
    w("costs CPU on this 2-CPU machine, which direct veth does not pay; *direct veth towards a")
    w("bridge* is direct veth's address pairs with host B's ends on that same bridge, no bond,")
    w("and */ bridge* is balance-tlb's and balance-alb's ratio to it: what lagd costs them. The")
    w("goals stay judged against direct veth. broadcast sends every")
    w("frame on both links (shares 50/50); host B's lagd hands its host one copy of each")
    w("(`broadcast_dedup`, on by default: the copies are counted as `duplicate` drops), so")
    w("iperf3 counts each datagram once; the sender still puts every frame out twice, and on")
    w("veth the receiving side of both copies runs on the sending CPU too. The bonds carry")
    w("their 8 streams between one address pair, as a bond does: active-backup, and encap2+3")
    w("(no ports in the hash), put all 8 on one link, the others as their hash or load falls")
    w("(the shares of every run are below), while direct veth's 8 streams use both veths.")
    w()
    w(f"{runs} rounds; in each round every test ran through every setup back to back, {duration} s")
    w("each, the setups' order rotating from round to round. */ direct* and */ balance-xor*: the")
    w("median of the rounds' own ratios (each ratio taken within a round, on the machine's state")
    w("of the moment); *ratio of medians*: the setup's median over direct's. A goal is judged on")
    w("the median of the rounds' ratios (issue 27, \"Figures\"). Retransmits: the sender's,")
    w("median over the rounds. Member shares (of the bytes host A sent) are in the table of every")
    w("run below. */ direct, rounds*: the lowest and the highest of the rounds' ratios;")
    w("*/ bridge*: as */ direct*, against direct veth towards a bridge.")
    w()
    if loads:
        w(f"The machine's load average (1 min) at the start of each measurement: median "
          f"{statistics.median(loads):.1f}, highest {max(loads):.1f}, on {machine.split(', ')[1]}.")
    if noise:
        w("The noise of this run, read off the reference: balance-xor layer3+4 is the kernel setup")
        w("of bench/fastpath.md (1.00x direct with one stream, 0.97x with eight, 0.80x for UDP, as")
        w("the medians of twelve pairs); here its rounds' ratios to direct range over "
          + "; ".join(noise) + ".")
        w(f"With {runs} rounds this wide, a median ratio within about 0.1 of a goal does not tell")
        w("the setup from the reference: a goal missed by that little is not shown to be missed,")
        w("nor one met by that little shown to be met.")
    w()
    w("| test | setup | runs | median | / direct | / direct, rounds | ratio of medians "
      "| / balance-xor | / bridge | retransmits | goal | met |")
    w("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |")
    for r in summary:
        w(r)
    w()
    w("## lagd's CPU")
    w()
    w("lagd's CPU time (user + system, from /proc) while the traffic ran: from 0.5 s after its")
    w(f"start to 1.5 s before its end (about {float(duration) - 2:.0f} s of {duration}), every lagd")
    w("of the setup together, in % of one core; median over the rounds (the kernel counts CPU")
    w("time in 10 ms ticks: about 0.2 % of a core over the window). The goal (under 2 % of a")
    w("core) is per lagd, judged on TCP 8 streams.")
    w()
    w("| setup | lagds | TCP 8 streams, all lagds | TCP 8 streams, per lagd | TCP 1 stream, all "
      "| UDP 64 B, all | goal | met |")
    w("| --- | ---: | ---: | ---: | ---: | ---: | --- | --- |")
    for r in cpu_rows:
        w(r)
    w()
    w("## Which path carried the data")
    w()
    w("At the two moments above, `lagctl show --json` of every lagd: the path its status names")
    w("(`dataplane.path`; the reason, if any), and the frames its members sent and received in")
    w("between, with those that went through lagd's own sockets rather than the kernel's")
    w("programs (`tx_packets + rx_packets - kernel_tx_packets - kernel_rx_packets`), summed over")
    w("every run of every test. *Kernel path*: every status said `kernel` and at most 0.1 % of")
    w("the frames went through lagd (its own frames: LACPDUs, alb's ARP, and the like).")
    w()
    w("| setup | path reported | member frames | through lagd | share | kernel path |")
    w("| --- | --- | ---: | ---: | ---: | --- |")
    for r in path_rows:
        w(r)
    w()
    if not_kernel:
        w("**Not on the kernel path** (their figures above are lagd's own dataplane, not the")
        w(f"kernel's): {', '.join(not_kernel)}.")
    else:
        w("Every lagd setup ran on the kernel path in every run.")
    w()
    w("## Goals not met")
    w()
    if goals_missed:
        for g in goals_missed:
            w(f"- {g}")
    else:
        w("None: every goal was met on the medians of the rounds' ratios.")
    w()
    w("## Every run")
    w()
    w("In order, round 1 first: the figure (Gbit/s or datagrams/s), the sender's retransmits,")
    w("the member shares of host A's bytes (%), lagd's CPU (all lagds, % of one core) and the")
    w("member frames through lagd / all member frames in the watched window.")
    w()
    w("| test | setup | figure | retransmits | shares | lagd CPU | frames through lagd |")
    w("| --- | --- | --- | --- | --- | --- | --- |")
    for r in details:
        w(r)
    if failed:
        w()
        w(f"Failed measurements ({len(failed)}):")
        w()
        for x in failed:
            w(x)
