#!/usr/bin/env python3
"""Runs shell jobs on a fixed number of workers and reports each one's output, time and exit code.

    tools/pool.py [--workers N] < JOBS

JOBS has one job per line, `NAME | COMMAND` (blank lines and lines starting with `#` are
skipped). Jobs start in the order listed, each as soon as a worker is free, so list the longest
first: N workers then finish close together. COMMAND runs under `sh -ec`, in a session of its
own, with its output (standard output and error together) in a file. While jobs run, a line
tells when each started and ended; at the end each job's output follows in list order, then a
summary with each one's time. The exit code is 0 when every job exited 0, 1 otherwise (every
job runs even if one fails). On SIGINT or SIGTERM the running jobs' sessions are killed.

CI uses it for the user-mode-Linux guests: each runs on one CPU, so two at once on two CPUs.
"""

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time


def parse(text):
    """The (name, command) pairs of a job list; raises ValueError naming a bad line."""
    jobs = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, command = line.partition("|")
        name, command = name.strip(), command.strip()
        if not sep or not name or not command:
            raise ValueError(f"line {number}: want `NAME | COMMAND`, got {line!r}")
        if any(name == n for n, _ in jobs):
            raise ValueError(f"line {number}: job {name!r} is listed twice")
        jobs.append((name, command))
    return jobs


def stamp():
    return time.strftime("%H:%M:%S", time.gmtime())


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    if args.workers < 1:
        ap.error("--workers must be at least 1")
    try:
        jobs = parse(sys.stdin.read())
    except ValueError as e:
        print(f"pool: {e}", file=sys.stderr)
        return 2
    if not jobs:
        print("pool: no jobs", file=sys.stderr)
        return 2

    logs = tempfile.mkdtemp(prefix="lagd-pool-")
    running = {}  # pid -> (index, Popen, start time, log file)
    results = {}  # index -> (exit code, seconds)

    def stop(signum, _frame):
        for _, proc, _, _ in running.values():
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        sys.exit(128 + signum)

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)

    queue = list(enumerate(jobs))
    began = time.monotonic()
    while queue or running:
        while queue and len(running) < args.workers:
            index, (name, command) = queue.pop(0)
            log = open(os.path.join(logs, f"{index}.log"), "wb")
            proc = subprocess.Popen(
                ["sh", "-ec", command],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            running[proc.pid] = (index, proc, time.monotonic(), log)
            print(f"[{stamp()}] start {name}", flush=True)
        pid, status = os.wait()
        if pid not in running:
            continue
        index, proc, start, log = running.pop(pid)
        proc.returncode = os.waitstatus_to_exitcode(status)
        log.close()
        seconds = time.monotonic() - start
        results[index] = (proc.returncode, seconds)
        print(
            f"[{stamp()}] {jobs[index][0]}: exit {proc.returncode} in {seconds:.0f} s",
            flush=True,
        )

    for index, (name, command) in enumerate(jobs):
        print(f"\n--- {name}: {command}")
        path = os.path.join(logs, f"{index}.log")
        with open(path, "rb") as f:
            sys.stdout.buffer.write(f.read())
        sys.stdout.flush()
        os.unlink(path)
    os.rmdir(logs)

    print(f"\n--- pool of {args.workers}: {time.monotonic() - began:.0f} s in all")
    failed = 0
    for index, (name, _) in enumerate(jobs):
        code, seconds = results[index]
        failed += code != 0
        print(f"{name:<24} exit {code:<4} {seconds:6.0f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
