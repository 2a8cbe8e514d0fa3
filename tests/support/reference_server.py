"""A reference streaming server with a known timing truth (tests and benchmarks only).

It speaks llama.cpp's native ``/completion`` stream (one ``data:`` line per chunk, a final
``"stop": true`` event with ``timings``) and emits token i of a request at exactly
``start + (i + 1) * interval`` seconds, grouped ``tokens_per_chunk`` tokens to a chunk: the chunk
holding tokens j*k .. j*k+k-1 leaves when its last token is due. Times are absolute from the
request's arrival, so sleep overshoot never accumulates. It runs in its own process (not a
thread of the measuring process), so the client's timestamps do not share a GIL with it.

A busy host delays the server too: a chunk leaves when the server gets to it, not at its due
time. So it logs what it did (``GET /log`` returns and clears it): per request, keyed by its
prompt's first id, each chunk's send time (``time.perf_counter()``, the client's clock: both
read ``CLOCK_MONOTONIC``) taken just before its write, the truth a client's stamps are held to.

    python tests/support/reference_server.py --interval 0.02 --chunk 4   # prints "port N"
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from child_server import ChildServer


def expected_itl_mean(n_tokens: int, interval: float, tokens_per_chunk: int) -> float:
    """The true mean per-token ITL of one request: a chunk's gap shared by its tokens.

    Chunks of k tokens leave ``k * interval`` apart, so every token after the first chunk waits
    ``interval`` (its chunk's gap / k); ``n_tokens`` does not change it.
    """
    return interval


def expected_tpot_mean(n_tokens: int, interval: float, tokens_per_chunk: int) -> float:
    """The true TPOT of one request: (last − first token) / (n − 1), with the first chunk's k
    tokens at one time: ``(n − k) * interval / (n − 1)`` (``interval`` when k = 1)."""
    return (n_tokens - tokens_per_chunk) * interval / (n_tokens - 1)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # as real servers do: small chunks leave at once
    server: _Server

    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        payload = b'{"status": "ok"}'
        if self.path == "/log":
            with self.server.lock:
                log, self.server.log = self.server.log, {}
            payload = json.dumps(log).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def do_POST(self) -> None:
        start = time.perf_counter()
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        n_prompt, n = len(body["prompt"]), int(body["n_predict"])
        k, interval = self.server.tokens_per_chunk, self.server.interval
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        sends: list[float] = []
        with self.server.lock:
            self.server.log[str(body["prompt"][0] if body["prompt"] else "")] = sends
        for first in range(0, n, k):
            ids = list(range(first, min(first + k, n)))
            due = start + (ids[-1] + 1) * interval
            time.sleep(max(0.0, due - time.perf_counter()))
            sends.append(time.perf_counter())
            self._event({"content": "t" * len(ids), "tokens": ids, "stop": False})
        steps = -(-n // k)
        self._event({"content": "", "tokens": [], "stop": True, "tokens_predicted": n,
                     "tokens_evaluated": n_prompt, "truncated": False, "stop_type": "limit",
                     "timings": {"prompt_n": n_prompt, "predicted_n": n,
                                 "draft_n": (n - steps) if k > 1 else 0,
                                 "draft_n_accepted": (n - steps) if k > 1 else 0}})
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _event(self, data: dict[str, Any]) -> None:
        chunk = f"data: {json.dumps(data)}\n\n".encode()
        self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
        self.wfile.flush()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 64

    def __init__(self, interval: float, tokens_per_chunk: int) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.interval = interval
        self.tokens_per_chunk = tokens_per_chunk
        self.log: dict[str, list[float]] = {}  # prompt's first id → each chunk's send time
        self.lock = threading.Lock()

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class ReferenceServer(ChildServer):
    """Start the reference server in a child process; ``url`` is where it answers."""

    def __init__(self, *, interval: float, tokens_per_chunk: int) -> None:
        self.interval = interval
        self.tokens_per_chunk = tokens_per_chunk
        super().__init__([sys.executable, str(Path(__file__).resolve()), "--interval",
                          str(interval), "--chunk", str(tokens_per_chunk)], "reference server")

    def send_log(self) -> dict[str, list[float]]:
        """The chunks' send times since the last call, per prompt's first id (then cleared)."""
        with urllib.request.urlopen(f"{self.url}/log", timeout=10) as resp:
            return dict(json.loads(resp.read()))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--interval", type=float, required=True)
    parser.add_argument("--chunk", type=int, default=1)
    args = parser.parse_args()
    server = _Server(args.interval, args.chunk)
    print(f"port {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
