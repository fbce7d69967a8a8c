#!/usr/bin/env python3
"""Writes bench/kernels.sh's section of bench/kernels.md from the guests' results.

    kernels_report.py WORK OUT STARTED COMMIT ROUNDS DURATION FAIL_AT KERNELS HOST_KERNEL IPERF

WORK holds one directory per kernel series (results.tsv: round, setup, test, value; guest.txt;
lagd's status JSON per setup, round and namespace; the guest's log run-SERIES.log). The
section between the BEGIN and END markers of OUT is replaced (appended when absent); the rest
of OUT stays as it is.
"""

import glob
import json
import os
import statistics
import sys

BEGIN = "<!-- bench/kernels.sh: begin -->"
END = "<!-- bench/kernels.sh: end -->"

work, out, started, commit, rounds, duration, fail_at, kernels, host, iperf = sys.argv[1:11]
# The priority lagd ran at in the guests (bench/kernels.sh passes it on).
NICE = os.environ.get("LAGD_NICE", "-10")
TESTS = [
    ("tcp1", "TCP 1 stream, Gbit/s"),
    ("tcp8", "TCP 8 streams (2 × -P 4), Gbit/s"),
    ("udp64", "UDP 64 B batched, datagrams/s"),
    ("gap_ms", "failover gap, ms (longest silence)"),
    ("lost", "failover, datagrams lost (of 1/ms)"),
]
HIGHER_BETTER = {"tcp1", "tcp8", "udp64"}
# The setups beyond balance-xor and 802.3ad (bench/kernels.sh's kinds) and their mode names.
OTHER_MODES = {"bcast": "broadcast", "tlb": "balance-tlb", "rr": "balance-rr"}
ALL_SETUPS = ["bond-xor", "lagd-xor", "bond-lacp", "lagd-lacp"] + [
    f"{end}-{k}" for k in OTHER_MODES for end in ("bond", "lagd")
]


def results(series):
    vals = {}
    path = os.path.join(work, series, "results.tsv")
    if not os.path.exists(path):
        return vals
    for line in open(path):
        parts = line.rstrip("\n").split("\t")
        if len(parts) != 4:
            continue
        _, setup, test, value = parts
        try:
            vals.setdefault((setup, test), []).append(float(value))
        except ValueError:
            vals.setdefault((setup, "failed"), []).append(test)
    return vals


def num(test, x):
    if x is None:
        return "–"
    if test == "udp64":
        return f"{x:,.0f}"
    if test in ("gap_ms",):
        return f"{x:.0f}"
    if test == "lost":
        return f"{x:.0f}"
    return f"{x:.2f}"


def med(vals, setup, test):
    xs = vals.get((setup, test))
    return statistics.median(xs) if xs else None


def cell(vals, setup, test, ref=None):
    m = med(vals, setup, test)
    s = num(test, m)
    if ref and m is not None and test in HIGHER_BETTER:
        r = med(vals, ref, test)
        if r:
            s += f" ({m / r:.2f}×)"
    return s


def status_proof(series, setup):
    """Per namespace: path, attach, kernel tx/rx, lagd's own tx/rx, summed over the rounds."""
    rows = []
    for ns in ("kbA", "kbB"):
        files = sorted(glob.glob(os.path.join(work, series, f"{setup}.*.{ns}.status.json")))
        paths, attach, ktx, krx, otx, orx, n = set(), set(), 0, 0, 0, 0, 0
        for f in files:
            try:
                s = json.load(open(f))
            except (OSError, ValueError):
                continue
            n += 1
            dp = s.get("dataplane", {})
            paths.add(str(dp.get("path")))
            attach.add(str(dp.get("attach")))
            for m in s.get("members", []):
                ktx += m.get("kernel_tx_packets", 0)
                krx += m.get("kernel_rx_packets", 0)
                otx += m.get("tx_packets", 0) - m.get("kernel_tx_packets", 0)
                orx += m.get("rx_packets", 0) - m.get("kernel_rx_packets", 0)
        if n:
            rows.append(
                f"| {series} | {setup} | {ns[-1]} | {n} | {', '.join(sorted(paths))} "
                f"| {', '.join(sorted(attach))} | {ktx:,} | {krx:,} | {otx:,} | {orx:,} |"
            )
        else:
            rows.append(f"| {series} | {setup} | {ns[-1]} | 0 | – | – | – | – | – | – |")
    return rows


lines = [BEGIN, "", "## In each guest: direct veth, the kernel bond and lagd's kernel path", ""]
lines += [
    f"Written by `bench/kernels.sh` ({started}), lagd {commit} built on the host with "
    f"`cargo build --release -p lagd` (the guest runs the host's binary through hostfs); "
    f"host kernel {host}, {iperf}. Each guest is Debian's user-mode Linux booted by "
    f"`tools/uml.py`: one CPU, no BPF JIT (the interpreter runs lagd's programs). In each guest two "
    f"network namespaces are joined by 2 unshaped veth links; {rounds} rounds, every setup once "
    f"per round (the order rotating), {duration} s per test; medians over the rounds. The "
    f"machine (2 CPUs) was shared with other developers' builds and tests.",
    "",
    "Setups: *direct*: one address pair per veth link, no bond; *bond*: the kernel's bonding "
    "driver (balance-xor `xmit_hash_policy layer3+4`, or 802.3ad `lacp_rate fast` with the same "
    "policy; `miimon 100`); *lagd*: lagd at both ends with the same options and `fastpath=on` "
    "(lagd refuses to start without its kernel path; `fastpath_attach=auto`: clsact filters "
    "where the kernel has no tcx, tcx on 6.12), "
    + (
        f"at nice {NICE} as its systemd unit runs it"
        if NICE == "-10"
        else f"at nice {NICE} (its systemd unit runs it at -10)"
    )
    + ". Ratios in brackets: to the kernel bond of the "
    "same mode, in the same guest (direct: to balance-xor). TCP: iperf3 `-l 1M`; 8 streams: two "
    "clients with `-P 4` (direct: one per link address; bonds: two ports on the bond's "
    "address). UDP: one flow of 64-byte datagrams, sent with `sendmmsg` and read with "
    "`recvmmsg` in batches of 64 (`bench/tools/mmsg.c`), counted at the receiver, each "
    "datagram once (a broadcast bond without dedup delivers two). Failover: a "
    f"datagram every ms, {fail_at} s in the far end of the link that carried it set down; the "
    "longest silence at the receiver and the datagrams lost (direct has nothing to fail over to: "
    "the same probe without a cut, i.e. the guest's own jitter). Other modes, where measured: "
    "broadcast, balance-tlb (`xmit_hash_policy layer3+4`) and balance-rr (`packets_per_slave "
    "1`), the kernel bond at both ends against lagd at both ends.",
    "",
]
for series in kernels.split():
    vals = results(series)
    guest = {}
    gpath = os.path.join(work, series, "guest.txt")
    if os.path.exists(gpath):
        for line in open(gpath):
            if "=" in line:
                k, v = line.strip().split("=", 1)
                guest[k] = v
    lines.append(
        f"### {series}: kernel {guest.get('kernel', '?')}, {guest.get('cpus', '?')} CPU, "
        f"bpf_jit_enable {guest.get('bpf_jit_enable', '?')}"
    )
    lines.append("")
    if not vals:
        lines.append("No results: the guest run failed; the end of its output:")
        lines.append("")
        lines.append("```")
        log = os.path.join(work, f"run-{series}.log")
        if os.path.exists(log):
            lines += open(log).read().splitlines()[-20:]
        lines.append("```")
        lines.append("")
        continue
    lines.append("| test | direct | bond balance-xor | lagd balance-xor | bond 802.3ad | lagd 802.3ad |")
    lines.append("| --- | ---: | ---: | ---: | ---: | ---: |")
    for test, label in TESTS:
        lines.append(
            f"| {label} | {cell(vals, 'direct', test, 'bond-xor')} "
            f"| {cell(vals, 'bond-xor', test)} | {cell(vals, 'lagd-xor', test, 'bond-xor')} "
            f"| {cell(vals, 'bond-lacp', test)} | {cell(vals, 'lagd-lacp', test, 'bond-lacp')} |"
        )
    lines.append("")
    others = [k for k in OTHER_MODES if (f"bond-{k}", "tcp1") in vals or (f"lagd-{k}", "tcp1") in vals]
    if others:
        lines.append(
            "Other modes (issue 27's): the kernel bond's ratio to direct in brackets, lagd's to "
            "the kernel bond of the same mode; failover not measured for them."
        )
        lines.append("")
        head = "| test | direct |" + "".join(
            f" bond {OTHER_MODES[k]} | lagd {OTHER_MODES[k]} |" for k in others
        )
        lines.append(head)
        lines.append("| --- | ---: |" + " ---: | ---: |" * len(others))
        for test, label in TESTS[:3]:
            lines.append(
                f"| {label} | {cell(vals, 'direct', test)} |"
                + "".join(
                    f" {cell(vals, f'bond-{k}', test, 'direct')} "
                    f"| {cell(vals, f'lagd-{k}', test, f'bond-{k}')} |"
                    for k in others
                )
            )
        lines.append("")
    failed = [(s, t) for (s, t), v in vals.items() if t == "failed"]
    for s, _ in failed:
        lines.append(f"- {s}: setup failed in {len(vals[(s, 'failed')])} round(s); see below.")
    lines.append("Every round: " + "; ".join(
        f"{s} {t} " + " ".join(num(t, x) for x in vals.get((s, t), []))
        for t, _ in TESTS[:3] for s in ALL_SETUPS if (s, t) in vals
    ) + ".")
    lines.append("")

lines += [
    "### Proof that lagd's programs carried the traffic",
    "",
    "`lagctl show --json` of each lagd after its round, summed over the rounds: the data path and "
    "attachment lagd reports, the frames its programs sent and received on the members "
    "(`kernel_tx_packets`, `kernel_rx_packets`), and the frames that went through lagd itself "
    "(`tx_packets - kernel_tx_packets`: ARP, LACPDUs and the like; `rx_packets - "
    "kernel_rx_packets`: what its member sockets read, which must be 0).",
    "",
    "| kernel | setup | end | runs | path | attach | program tx | program rx | lagd tx | lagd rx |",
    "| --- | --- | --- | ---: | --- | --- | ---: | ---: | ---: | ---: |",
]
for series in kernels.split():
    for setup in (s for s in ALL_SETUPS if s.startswith("lagd-")):
        if glob.glob(os.path.join(work, series, f"{setup}.*.status.json")):
            lines += status_proof(series, setup)
lines.append("")
logs = []
for series in kernels.split():
    for f in sorted(glob.glob(os.path.join(work, series, "lagd-*.log"))):
        bad = [l for l in open(f).read().splitlines() if " WARN " in l or " ERROR " in l]
        if bad:
            logs.append((f"{series}/{os.path.basename(f)}", bad[-8:]))
if logs:
    lines += ["### lagd's warnings and errors (the first logs that have any)", ""]
    for name, tail in logs[:6]:
        lines += [f"`{name}`:", "", "```", *tail, "```", ""]
lines.append(END)
section = "\n".join(lines) + "\n"

text = open(out).read() if os.path.exists(out) else "# lagd on the kernels people run\n"
if BEGIN in text and END in text:
    head, rest = text.split(BEGIN, 1)
    tail = rest.split(END, 1)[1]
    text = head + section.rstrip("\n") + tail
else:
    text = text.rstrip("\n") + "\n\n" + section
open(out, "w").write(text)
print(section)
