"""TCP_QUICKACK against a server that leaves Nagle on (llama-server's HTTP library does).

Such a server writes the response head, then the first event: Nagle holds the event until the
head is acknowledged, and on a kept-alive connection the client's kernel delays that ACK (up to
40 ms, it hopes to piggyback it on the next request). Every request after the first then showed
a TTFT of 41-51 ms for a true 4-10 ms. The kernel-stamped wire sets TCP_QUICKACK after each read,
so the head is acknowledged at once and the event leaves when the server writes it.
"""

from __future__ import annotations

import json
import socket
import threading
import time

import pytest

from specbench_lib.analysis.validate import judge_cell
from specbench_lib.client.dispatch import dispatch_cell
from specbench_lib.client.http1 import SO_TIMESTAMPNS
from specbench_lib.servers.engines.llamacpp import LlamaCppAdapter

DELAY_S = 0.005  # the server's true time to the first event after the response head
TOKENS = 4


def _event(data: dict[str, object]) -> bytes:
    line = f"data: {json.dumps(data)}\n\n".encode()
    return f"{len(line):x}\r\n".encode() + line + b"\r\n"


def _read_request(conn: socket.socket, buf: bytes) -> tuple[bytes, bytes] | None:
    while b"\r\n\r\n" not in buf:
        data = conn.recv(65536)
        if not data:
            return None
        buf += data
    head, rest = buf.split(b"\r\n\r\n", 1)
    length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                  if line.lower().startswith(b"content-length:"))
    while len(rest) < length:
        data = conn.recv(65536)
        if not data:
            return None
        rest += data
    return rest[:length], rest[length:]


class NagleServer:
    """llama.cpp's ``/completion`` stream from a raw socket with Nagle on (no TCP_NODELAY),
    kept alive; the head, each event and the end are separate small writes. ``true`` holds each
    request's head → first event time, as the server saw it."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.true: list[float] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)

    def __enter__(self) -> NagleServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.listener.close()
        self.thread.join(5)

    def _serve(self) -> None:
        try:
            conn, _ = self.listener.accept()
        except OSError:
            return
        with conn:
            assert conn.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 0
            buf = b""
            while (got := _read_request(conn, buf)) is not None:
                body, buf = got
                n = int(json.loads(body)["n_predict"])
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                             b"Transfer-Encoding: chunked\r\n\r\n")
                head_sent = time.perf_counter()
                for i in range(n):
                    time.sleep(DELAY_S)
                    conn.sendall(_event({"content": "t", "tokens": [i], "stop": False}))
                    if i == 0:
                        self.true.append(time.perf_counter() - head_sent)
                conn.sendall(_event({"content": "", "tokens": [], "stop": True,
                                     "tokens_predicted": n, "tokens_evaluated": 3,
                                     "truncated": False, "timings": {"predicted_n": n}}))
                conn.sendall(b"0\r\n\r\n")


@pytest.mark.skipif(SO_TIMESTAMPNS is None or not hasattr(socket, "TCP_QUICKACK"),
                    reason="kernel-stamped wire with TCP_QUICKACK: Linux")
def test_ttft_on_a_kept_alive_connection_is_the_servers_delay_not_a_delayed_ack() -> None:
    with NagleServer() as server:
        result = dispatch_cell(LlamaCppAdapter(), server.url, [[1, 2, 3]] * 6, warmup=1,
                               concurrency=1, max_tokens=TOKENS, timeout_s=10)
    assert judge_cell(result.records, server_alive=True).ok
    ttfts = [r.ttft for r in result.records]
    assert all(t is not None for t in ttfts)
    later = [t for t in ttfts[1:] if t is not None]  # every request after the first, one connection
    true = max(server.true)
    assert true < DELAY_S + 0.01, server.true  # the server itself was not slow
    # a delayed ACK costs 40 ms or more; the server's delay plus a loaded machine's slack does not
    assert max(later) < true + 0.015, [round(t * 1e3, 1) for t in ttfts]
