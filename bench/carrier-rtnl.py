#!/usr/bin/env python3
"""How long lagd's carrier poll (an ETHTOOL_GLINK ioctl, which takes the RTNL lock) waits
while another process holds that lock as often as it can (adding, bringing up and deleting
veth pairs in a loop). bench/restart.md quotes the figures.

Run as root: `python3 bench/carrier-rtnl.py`, or in another kernel:
`python3 tools/uml.py run 5.10 -- python3 bench/carrier-rtnl.py`. Everything happens in a
network namespace of its own (`lagd-rtnl-PID`), deleted at the end; the loop is ended by its
PID.
"""

import ctypes
import fcntl
import os
import socket
import statistics
import struct
import subprocess
import time

SIOCETHTOOL = 0x8946
ETHTOOL_GLINK = 0x0000000A
CLONE_NEWNET = 0x40000000


def enter(ns):
    """Moves this (single-threaded) process into network namespace `ns`."""
    fd = os.open(f"/var/run/netns/{ns}", os.O_RDONLY)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(fd, CLONE_NEWNET) != 0:
        raise OSError(ctypes.get_errno(), f"setns {ns}")
    os.close(fd)


def glink_timer(dev):
    """A function that runs ETHTOOL_GLINK on `dev` once and returns the seconds it took."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    cmd = ctypes.create_string_buffer(struct.pack("II", ETHTOOL_GLINK, 0), 8)
    ifreq = struct.pack("16sP", dev.encode(), ctypes.addressof(cmd)) + bytes(16)

    def once():
        start = time.perf_counter()
        fcntl.ioctl(sock, SIOCETHTOOL, ifreq)
        return time.perf_counter() - start

    return once


def sample(label, once, seconds=5.0):
    """Times `once` every 5 ms for `seconds` and prints the median, p99 and maximum."""
    times = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        times.append(once())
        time.sleep(0.005)
    times.sort()
    p99 = times[int(len(times) * 0.99)]
    print(
        f"{label}: ETHTOOL_GLINK n={len(times)} median {statistics.median(times) * 1e6:.0f} us, "
        f"p99 {p99 * 1e6:.0f} us, max {times[-1] * 1e3:.1f} ms",
        flush=True,
    )


def main():
    ns = f"lagd-rtnl-{os.getpid()}"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        ip = ["ip", "-n", ns, "link"]
        subprocess.run(ip + ["add", "rt0", "type", "veth", "peer", "rt1"], check=True)
        subprocess.run(ip + ["set", "rt0", "up"], check=True)
        subprocess.run(ip + ["set", "rt1", "up"], check=True)
        loop = (
            "i=0; while :; do ip link add rl$i type veth peer rm$i; ip link set rl$i up; "
            "ip link del rl$i; i=$(( (i + 1) % 50 )); done"
        )
        enter(ns)
        once = glink_timer("rt0")
        sample("quiet", once)
        # The shell is in this process's namespace now; the loop is its PID.
        hammer = subprocess.Popen(
            ["sh", "-c", loop], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        try:
            time.sleep(0.5)
            sample("beside a loop adding, raising and deleting veth pairs", once)
        finally:
            hammer.kill()
            hammer.wait()
    finally:
        subprocess.run(["ip", "netns", "del", ns], check=False)


if __name__ == "__main__":
    main()
