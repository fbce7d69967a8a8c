#!/usr/bin/env python3
"""UDP probes for bench/restart.sh: the longest silence in a stream of datagrams.

  udp_gap.py send ADDR PORT SECONDS   one 32-byte datagram every 5 ms for SECONDS
  udp_gap.py recv ADDR PORT SECONDS   prints the arrival time (CLOCK_REALTIME, seconds) of every
                                      datagram received within SECONDS, one per line

Unlike ping, the sender never slows down when answers stop coming, so the gap between two
arrivals is the outage the receiving host saw, to within the 5 ms spacing.
"""
import socket
import sys
import time


def main() -> int:
    if len(sys.argv) != 5 or sys.argv[1] not in ("send", "recv"):
        print(__doc__, file=sys.stderr)
        return 2
    mode, addr, port, seconds = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    end = time.monotonic() + seconds
    if mode == "send":
        seq = 0
        while time.monotonic() < end:
            try:
                s.sendto(seq.to_bytes(32, "big"), (addr, port))
            except OSError:
                pass  # no route or no buffer while the bond is down: the next one may pass
            seq += 1
            time.sleep(0.005)
        return 0
    s.bind((addr, port))
    out = []
    while True:
        left = end - time.monotonic()
        if left <= 0:
            break
        s.settimeout(left)
        try:
            s.recv(64)
        except socket.timeout:
            break
        out.append(time.time())
    sys.stdout.write("".join(f"{t:.6f}\n" for t in out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
