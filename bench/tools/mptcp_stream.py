#!/usr/bin/env python3
"""One MPTCP stream, for the balance benchmark (iperf3 3.12 has no --mptcp).

  mptcp_stream.py server ADDR PORT          accepts one connection, prints goodput (bit/s)
  mptcp_stream.py client ADDR PORT SECONDS  sends zeros for SECONDS
"""
import socket
import sys
import time

IPPROTO_MPTCP = getattr(socket, "IPPROTO_MPTCP", 262)


def main() -> None:
    role, addr, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
    if role == "server":
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM, IPPROTO_MPTCP)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((addr, port))
        s.listen(1)
        conn, _ = s.accept()
        total, start, buf = 0, None, bytearray(1 << 20)
        while True:
            n = conn.recv_into(buf)
            if n == 0:
                break
            if start is None:
                start = time.monotonic()
            total += n
        print(f"{total * 8 / (time.monotonic() - start):.0f}")
    else:
        seconds = float(sys.argv[4])
        c = socket.socket(socket.AF_INET, socket.SOCK_STREAM, IPPROTO_MPTCP)
        c.connect((addr, port))
        data = bytes(1 << 20)
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            c.sendall(data)
        c.close()


if __name__ == "__main__":
    main()
