#!/usr/bin/env python3
"""A service manager's descriptor store for bench/restart.sh, as systemd keeps one.

  supervise.py NOTIFY_SOCKET -- PROGRAM ARGS...

Starts PROGRAM with NOTIFY_SOCKET set, keeps what it stores (FDSTORE=1 with FDNAME=, the
descriptors attached; FDSTOREREMOVE=1 drops a name), and on SIGUSR1 kills it with SIGKILL,
reaps it and starts it again with the stored descriptors from 3 on (LISTEN_FDS,
LISTEN_FDNAMES, LISTEN_PID), as Restart= does after a crash. SIGTERM ends the program and
then this supervisor.
"""
import fcntl
import os
import signal
import socket
import subprocess
import sys
import threading


def main() -> int:
    if len(sys.argv) < 4 or sys.argv[2] != "--":
        print(__doc__, file=sys.stderr)
        return 2
    path, argv = sys.argv[1], sys.argv[3:]
    if os.path.exists(path):
        os.unlink(path)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    store = {}
    lock = threading.Lock()

    def listen():
        while True:
            msg, fds, _flags, _addr = socket.recv_fds(sock, 4096, 64)
            fields = dict(line.split("=", 1) for line in msg.decode().splitlines() if "=" in line)
            name = fields.get("FDNAME", "stored")
            with lock:
                if fields.get("FDSTORE") == "1":
                    for old in store.pop(name, []):
                        os.close(old)
                    store[name] = list(fds)
                    continue
                if fields.get("FDSTOREREMOVE") == "1":
                    for old in store.pop(name, []):
                        os.close(old)
            for fd in fds:
                os.close(fd)

    threading.Thread(target=listen, daemon=True).start()

    def start():
        with lock:
            names = [n for n, fds in store.items() for _ in fds]
            fds = [fd for fds in store.values() for fd in fds]
        env = dict(os.environ, NOTIFY_SOCKET=path, LISTEN_FDS=str(len(fds)),
                   LISTEN_FDNAMES=":".join(names))

        def place():
            # In the child: the stored descriptors to 3, 4, ... (first out of the way).
            moved = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 100 + len(fds)) for fd in fds]
            for k, fd in enumerate(moved):
                os.dup2(fd, 3 + k, inheritable=True)

        # LISTEN_PID must be the child's own pid: set in the child before exec.
        return subprocess.Popen(["sh", "-c", 'LISTEN_PID=$$ exec "$0" "$@"', *argv], env=env,
                                preexec_fn=place, close_fds=False)

    child = start()
    restart = threading.Event()
    stop = threading.Event()
    signal.signal(signal.SIGUSR1, lambda *_: restart.set())
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    while not stop.is_set():
        if restart.wait(0.05):
            restart.clear()
            child.kill()
            child.wait()
            child = start()
        if child.poll() is not None and not restart.is_set():
            break
    if child.poll() is None:
        child.terminate()
        child.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
