#!/usr/bin/env python3
"""A skewed traffic mix for the balance benchmark: ELEPHANTS bulk TCP streams and MICE small
TCP flows that send a 32 KB burst every 100-300 ms (idle in between, as request/response
traffic is).

  mix.py server ADDR BASEPORT COUNT         sinks COUNT connections on BASEPORT..
  mix.py client ADDR BASEPORT ELEPHANTS MICE SECONDS [ELEPHANT_SOURCE_PORT...]
  mix.py ports LAGCTL SRC DST BASEPORT      two elephant source ports whose layer3+4 hashes
                                            (to BASEPORT and BASEPORT+1) are even (the same
                                            member for hash % 2, and for buckets, which start
                                            interleaved) and in different buckets
"""
import ipaddress
import random
import socket
import subprocess
import sys
import threading
import time


def sink(addr: str, port: int) -> None:
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, port))
    s.listen(1)
    conn, _ = s.accept()
    buf = bytearray(1 << 16)
    while conn.recv_into(buf):
        pass


def elephant(addr: str, port: int, end: float, sport: int = 0) -> None:
    c = socket.create_connection((addr, port), source_address=("", sport))
    data = bytes(1 << 16)
    while time.monotonic() < end:
        c.sendall(data)
    c.close()


def mouse(addr: str, port: int, end: float, seed: int) -> None:
    rng = random.Random(seed)
    c = socket.create_connection((addr, port))
    data = bytes(32 << 10)
    while time.monotonic() < end:
        c.sendall(data)
        time.sleep(rng.uniform(0.1, 0.3))
    c.close()


def tcp_frame(src: str, dst: str, sport: int, dport: int) -> str:
    eth = "020000000002" "020000000001" "0800"
    ip = "45000028" "00000000" "4006" "0000" + ipaddress.IPv4Address(src).packed.hex()
    ip += ipaddress.IPv4Address(dst).packed.hex()
    tcp = f"{sport:04x}{dport:04x}" + "00" * 16
    return eth + ip + tcp


def ports(lagctl: str, src: str, dst: str, base: int) -> None:
    chosen: list[int] = []
    buckets: list[int] = []
    for k in range(2):
        candidates = list(range(41000 + 100 * k, 41100 + 100 * k))
        frames = "\n".join(tcp_frame(src, dst, p, base + k) for p in candidates) + "\n"
        out = subprocess.run(
            [lagctl, "hash", "--policy", "layer3+4", "--members", "2"],
            input=frames, capture_output=True, text=True, check=True,
        ).stdout.split("\n")
        for p, line in zip(candidates, out):
            h = int(line.split()[0], 16)
            if h % 2 == 0 and (h & 255) not in buckets:
                chosen.append(p)
                buckets.append(h & 255)
                break
    print(" ".join(map(str, chosen)))


def main() -> None:
    if sys.argv[1] == "ports":
        ports(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
        return
    role, addr, base = sys.argv[1], sys.argv[2], int(sys.argv[3])
    threads = []
    if role == "server":
        for i in range(int(sys.argv[4])):
            threads.append(threading.Thread(target=sink, args=(addr, base + i), daemon=True))
    else:
        elephants, mice, seconds = int(sys.argv[4]), int(sys.argv[5]), float(sys.argv[6])
        sports = [int(p) for p in sys.argv[7:]] + [0] * elephants
        end = time.monotonic() + seconds
        for i in range(elephants):
            threads.append(
                threading.Thread(target=elephant, args=(addr, base + i, end, sports[i]))
            )
        for i in range(mice):
            threads.append(
                threading.Thread(target=mouse, args=(addr, base + elephants + i, end, i))
            )
    for t in threads:
        t.start()
    for t in threads:
        t.join()


if __name__ == "__main__":
    main()
