"""A stand-in node process: listens on a TCP port and answers each connection with its name.

Used when the real node processes are not wanted (backend tests, partition checks): it has the same
lifecycle as a node (start, stop, kill, pause) and gives the fault tests something to connect to.
"""

from __future__ import annotations

import argparse
import socket
import sys
import threading


def serve(bind: str, port: int, name: str) -> None:
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind((bind, port))
    srv.listen(64)
    while True:
        conn, _ = srv.accept()
        try:
            conn.sendall(f"{name}\n".encode())
        finally:
            conn.close()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m faultline.testing.placeholder")
    p.add_argument("--name", required=True)
    p.add_argument("--bind", default="0.0.0.0")
    p.add_argument("--port", type=int, action="append", required=True)
    a = p.parse_args(argv)
    threads = [threading.Thread(target=serve, args=(a.bind, port, a.name), daemon=True) for port in a.port]
    for t in threads:
        t.start()
    print(f"placeholder {a.name} listening on {a.port}", flush=True)
    for t in threads:
        t.join()
    return 0


if __name__ == "__main__":
    sys.exit(main())
