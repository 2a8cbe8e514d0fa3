"""A llama.cpp ``/completion`` server that sends bursts: each token its own event, ``--burst``
events in one write every ``--interval`` seconds (how llama-server sends the draft tokens one
step accepted, microseconds apart). Its own process, Nagle off, kept-alive connections.

    python tests/support/burst_server.py --burst 4 --interval 0.02   # prints "port N"
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
import threading
import time
from pathlib import Path

from child_server import ChildServer


def _event(data: dict[str, object]) -> bytes:
    line = f"data: {json.dumps(data)}\n\n".encode()
    return f"{len(line):x}\r\n".encode() + line + b"\r\n"


def _serve(conn: socket.socket, burst: int, interval: float) -> None:
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    with conn:
        buf = b""
        while True:
            while b"\r\n\r\n" not in buf:
                data = conn.recv(65536)
                if not data:
                    return
                buf += data
            head, buf = buf.split(b"\r\n\r\n", 1)
            length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                          if line.lower().startswith(b"content-length:"))
            while len(buf) < length:
                buf += conn.recv(65536)
            n, buf = int(json.loads(buf[:length])["n_predict"]), buf[length:]
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                         b"Transfer-Encoding: chunked\r\n\r\n")
            start = time.perf_counter()
            for first in range(0, n, burst):
                time.sleep(max(0.0, start + (first // burst + 1) * interval - time.perf_counter()))
                conn.sendall(b"".join(_event({"content": "t", "tokens": [i], "stop": False})
                                      for i in range(first, min(first + burst, n))))
            conn.sendall(_event({"content": "", "tokens": [], "stop": True, "tokens_predicted": n,
                                 "tokens_evaluated": 3, "truncated": False,
                                 "timings": {"predicted_n": n}}) + b"0\r\n\r\n")


class BurstServer(ChildServer):
    """Start the burst server in a child process; ``url`` is where it answers."""

    def __init__(self, *, burst: int = 4, interval: float = 0.02) -> None:
        super().__init__([sys.executable, str(Path(__file__).resolve()), "--burst", str(burst),
                          "--interval", str(interval)], "burst server")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--burst", type=int, default=4)
    parser.add_argument("--interval", type=float, default=0.02)
    args = parser.parse_args()
    listener = socket.create_server(("127.0.0.1", 0))
    print(f"port {listener.getsockname()[1]}", flush=True)
    while True:
        conn, _ = listener.accept()
        threading.Thread(target=_serve, args=(conn, args.burst, args.interval),
                         daemon=True).start()


if __name__ == "__main__":
    main()
