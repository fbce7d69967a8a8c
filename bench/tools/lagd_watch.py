#!/usr/bin/env python3
"""Watches the lagd processes of one `lagctl lab` run: which path carried the data and what
lagd's CPU cost while the traffic ran.

Usage: lagd_watch.py LAGD LAGCTL OUT DURATION

LAGD is the binary the lab runs (its processes are found by /proc/PID/exe, so lagds of other
labs on the machine are not counted), LAGCTL the lagctl that asks them. The watcher waits for
the traffic: the bytes on the interfaces of a lagd's network namespace (/proc/PID/net/dev, read
without asking lagd anything) growing by more than THRESHOLD bytes per second. Half a second
later it takes the first snapshot (`lagctl show --json` of every lagd, then their CPU time from
/proc/PID/stat), 1.5 s before the traffic's end (DURATION seconds after its start) the second
(CPU time, then `lagctl show`), so lagd's CPU between them excludes answering the two requests.
Writes to OUT, as JSON:

  window_s        time between the two CPU readings
  lagds           per lagd (one control socket: a lagd is two processes, lagd and the
                  launcher it forks at its start with the same command line, and both count
                  here as one lagd): control socket, its processes, `dataplane` of its status (path,
                  reason) at both snapshots, member frames in the window (total, sent or
                  received by the kernel programs, and the rest: through lagd's own sockets),
                  CPU seconds in the window, all its processes together
  cpu_core_pct    lagd's CPU, every lagd together, in % of one core over the window

Writes nothing if the traffic does not start (the script that started the watcher ends it).
"""

import json
import os
import subprocess
import sys
import time

THRESHOLD = 2_000_000  # bytes per second: more than pings, LACP and ARP, less than any test
TICK = os.sysconf("SC_CLK_TCK")


def lagds(binary):
    """The lagds running `binary`: their control sockets, each with its processes' PIDs."""
    out = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if os.readlink(f"/proc/{entry}/exe") != binary:
                continue
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                args = f.read().split(b"\0")
        except OSError:
            continue
        control = None
        for i, a in enumerate(args[:-1]):
            if a == b"--control":
                control = args[i + 1].decode()
        if control:
            out.setdefault(control, []).append(int(entry))
    return {c: sorted(pids) for c, pids in out.items()}


def cpu_seconds(pids):
    """User + system CPU seconds of the processes `pids` so far (None once one is gone)."""
    total = 0.0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            return None
        # After the name: state is field 3, utime 14 and stime 15.
        total += (int(fields[11]) + int(fields[12])) / TICK
    return total


def netns_bytes(pid):
    """Bytes received + sent on every interface but lo in `pid`'s network namespace."""
    try:
        with open(f"/proc/{pid}/net/dev") as f:
            lines = f.readlines()[2:]
    except OSError:
        return None
    total = 0
    for line in lines:
        name, data = line.split(":", 1)
        if name.strip() == "lo":
            continue
        v = data.split()
        total += int(v[0]) + int(v[8])
    return total


def show(lagctl, control):
    """What a lagd's status says of its path and its members' frames."""
    try:
        out = subprocess.run([lagctl, "show", "--control", control, "--json"],
                             capture_output=True, timeout=5, check=True).stdout
        s = json.loads(out)
    except (subprocess.SubprocessError, ValueError) as e:
        return {"error": str(e)}
    members = s.get("members", [])
    return {
        "mode": s.get("mode"),
        "dataplane": s.get("dataplane"),
        "frames": sum(m["tx_packets"] + m["rx_packets"] for m in members),
        "kernel_frames": sum(m["kernel_tx_packets"] + m["kernel_rx_packets"] for m in members),
    }


def wait_for_traffic(binary):
    """The lagds once the traffic has started, and when it started."""
    before = {}
    while True:
        found = lagds(binary)
        now = time.monotonic()
        for pids in found.values():
            pid = pids[0]
            b = netns_bytes(pid)
            if b is None:
                continue
            if pid in before:
                t0, b0 = before[pid]
                if (b - b0) / (now - t0) > THRESHOLD:
                    return found, now
            before[pid] = (now, b)
        time.sleep(0.2)


def main():
    binary, lagctl, out, duration = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
    found, start = wait_for_traffic(binary)
    time.sleep(0.5)
    first = {c: show(lagctl, c) for c in found}
    cpu0 = {c: cpu_seconds(pids) for c, pids in found.items()}
    t0 = time.monotonic()
    time.sleep(max(0.5, start + duration - 1.5 - time.monotonic()))
    cpu1 = {c: cpu_seconds(pids) for c, pids in found.items()}
    t1 = time.monotonic()
    second = {c: show(lagctl, c) for c in found}
    result = {"window_s": round(t1 - t0, 3), "lagds": []}
    total_cpu = 0.0
    for control, pids in sorted(found.items()):
        a, b = first[control], second[control]
        entry = {"control": control, "pids": pids, "first": a.get("dataplane"),
                 "second": b.get("dataplane"), "mode": b.get("mode")}
        if "error" in a or "error" in b:
            entry["error"] = a.get("error") or b.get("error")
        else:
            frames = b["frames"] - a["frames"]
            kernel = b["kernel_frames"] - a["kernel_frames"]
            entry.update(frames=frames, kernel_frames=kernel, lagd_frames=frames - kernel)
        if cpu0[control] is not None and cpu1[control] is not None:
            entry["cpu_s"] = round(cpu1[control] - cpu0[control], 3)
            total_cpu += entry["cpu_s"]
        result["lagds"].append(entry)
    result["cpu_core_pct"] = round(100 * total_cpu / (t1 - t0), 2)
    with open(out, "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()
