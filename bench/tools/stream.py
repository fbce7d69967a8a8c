#!/usr/bin/env python3
"""One TCP or MPTCP stream for the benchmarks, with the receiver's view of it.

  stream.py server tcp|mptcp ADDR PORT          accepts one connection; prints one JSON object:
                                                goodput (bit/s), bytes, the longest time
                                                between two reads (ms) and bytes per 100 ms
  stream.py client tcp|mptcp ADDR PORT SECONDS  sends zeros for SECONDS
"""
import json
import socket
import sys
import time

IPPROTO_MPTCP = getattr(socket, "IPPROTO_MPTCP", 262)
SLOT = 0.1


def sock(proto: str) -> socket.socket:
    p = IPPROTO_MPTCP if proto == "mptcp" else socket.IPPROTO_TCP
    return socket.socket(socket.AF_INET, socket.SOCK_STREAM, p)


def server(proto: str, addr: str, port: int) -> None:
    s = sock(proto)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, port))
    s.listen(1)
    conn, _ = s.accept()
    buf = bytearray(1 << 20)
    total, start, last, gap = 0, None, None, 0.0
    slots: list[int] = []
    while True:
        n = conn.recv_into(buf)
        now = time.monotonic()
        if n == 0:
            break
        if start is None:
            start = now
        else:
            gap = max(gap, now - last)
        last = now
        total += n
        i = int((now - start) / SLOT)
        while len(slots) <= i:
            slots.append(0)
        slots[i] += n
    seconds = (last - start) if start is not None and last > start else 1e-9
    print(json.dumps({
        "bits_per_s": total * 8 / seconds,
        "bytes": total,
        "seconds": seconds,
        "longest_gap_ms": gap * 1000,
        "slot_s": SLOT,
        "slots": slots,
    }))


def client(proto: str, addr: str, port: int, seconds: float) -> None:
    c = sock(proto)
    for _ in range(50):
        try:
            c.connect((addr, port))
            break
        except ConnectionRefusedError:
            time.sleep(0.1)
            c = sock(proto)
    data = bytes(1 << 20)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        c.sendall(data)
    c.close()


def main() -> None:
    role, proto, addr, port = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    if role == "server":
        server(proto, addr, port)
    else:
        client(proto, addr, port, float(sys.argv[5]))


if __name__ == "__main__":
    main()
