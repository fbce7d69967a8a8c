#!/usr/bin/env python3
"""A UDP probe train for the failover benchmark: how long a path carried nothing.

  probe.py echo ADDR PORT SECONDS
      answers every datagram to ADDR:PORT with the same bytes, for SECONDS
  probe.py send ADDR PORT INTERVAL_MS COUNT SPLIT_S
      sends COUNT numbered datagrams to ADDR:PORT, one every INTERVAL_MS on a fixed schedule,
      and prints one JSON object: the longest time between two replies before SPLIT_S
      (the run's noise floor) and after it (the gap), probes without a reply, and send errors

Unlike ping, the sender never slows down: iputils ping waits 10 ms after a send that fails
(ENOBUFS from a device that drops), so a single dropped probe shows as an 11 ms gap whatever the
path did. Here a failed send is counted and the schedule goes on, so the gap is the path's own.
"""
import json
import select
import socket
import struct
import sys
import time

HEADER = struct.Struct("!Qd")


def echo(addr: str, port: int, seconds: float) -> None:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((addr, port))
    end = time.monotonic() + seconds
    while True:
        left = end - time.monotonic()
        if left <= 0:
            return
        s.settimeout(left)
        try:
            data, peer = s.recvfrom(2048)
        except socket.timeout:
            return
        try:
            s.sendto(data, peer)
        except OSError:
            pass


def send(addr: str, port: int, interval_ms: float, count: int, split: float) -> None:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setblocking(False)
    s.connect((addr, port))
    interval = interval_ms / 1000.0
    start = time.monotonic()
    replies: dict[int, float] = {}
    errors = 0

    def drain(until: float) -> None:
        while True:
            left = until - time.monotonic()
            if left <= 0:
                return
            ready, _, _ = select.select([s], [], [], left)
            if not ready:
                return
            while True:
                try:
                    data = s.recv(2048)
                except (BlockingIOError, ConnectionRefusedError):
                    break
                if len(data) >= HEADER.size:
                    seq, _ = HEADER.unpack_from(data)
                    replies.setdefault(seq, time.monotonic() - start)

    for seq in range(count):
        try:
            s.send(HEADER.pack(seq, time.monotonic() - start).ljust(64, b"\0"))
        except OSError:
            errors += 1
        drain(start + (seq + 1) * interval)
    drain(time.monotonic() + 0.5)

    times = sorted(replies.values())
    before = gap = 0.0
    for a, b in zip(times, times[1:]):
        if b < split:
            before = max(before, b - a)
        else:
            gap = max(gap, b - a)
    print(
        json.dumps(
            {
                "gap_ms": round(gap * 1000, 2),
                "before_ms": round(before * 1000, 2),
                "lost": count - len(replies),
                "send_errors": errors,
                "sent": count,
            }
        )
    )


def main() -> None:
    if len(sys.argv) == 5 and sys.argv[1] == "echo":
        echo(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]))
    elif len(sys.argv) == 7 and sys.argv[1] == "send":
        send(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5]), float(sys.argv[6]))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
