"""A reference SGLang ``/generate`` streaming server whose timing is known (benchmarks only).

It speaks SGLang's native stream (``data: {"text", "output_ids", "meta_info"}`` lines with
cumulative text, ids and ``completion_tokens``, ``finish_reason`` and ``spec_verify_ct`` on the
last chunk, then ``data: [DONE]``), so specbench's real SGLang parser is exercised. It is a bare
asyncio protocol server (HTTP/1.1 keep-alive, chunked replies) in its own process, so it shares
no GIL with the measuring client; replies are pre-encoded per output length, so a chunk costs one
``transport.write``.

Token i of a request is due at ``receive + (i + 1) * interval``; tokens go out ``tokens_per_chunk``
to a chunk, the chunk leaving when its last token is due (``interval`` 0: all at once; ``together``
K > 1: the first K chunks leave back to back when the first is due, as a server that writes two
events at once, so a client reading them in one read is not late). The server
logs, per request, the true receive time (the request's last byte read) and the send time of
every chunk, on ``CLOCK_MONOTONIC`` — the clock behind ``time.perf_counter`` on Linux, one clock
for every process of the machine, so client and server times compare directly (no offset
exchange needed; :func:`check_shared_clock` verifies it). ``GET /log`` returns and clears the log
(keyed by the first prompt id, which the benchmark sets to the request's index: the send log a
client's records are matched against, ``{"recv": t, "sends": [t, ...], "sizes": [k, ...]}``);
``GET /stats`` gives the server's CPU seconds.

    python benchmarks/sglang_refserver.py --interval 0.005 --chunk 4 [--together 2]  # "port N"
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import struct
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "support"))
from child_server import ChildServer  # noqa: E402

CLOCK = time.CLOCK_MONOTONIC
SO_TIMESTAMPNS = 35  # Linux, 64-bit x86 and ARM; Python's socket module does not name it


def now() -> float:
    """The shared clock (``CLOCK_MONOTONIC``; equals ``time.perf_counter()`` on Linux)."""
    return time.clock_gettime(CLOCK)


def check_shared_clock() -> float:
    """How far ``perf_counter`` is from the server's clock in this process (0 on Linux)."""
    a, b, c = time.perf_counter(), now(), time.perf_counter()
    return b - (a + c) / 2


def _chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


class _Replies:
    """Pre-encoded stream chunks per output length (identical for every request)."""

    def __init__(self, tokens_per_chunk: int) -> None:
        self.k = tokens_per_chunk
        self._cache: dict[tuple[int, int], list[bytes]] = {}

    def get(self, n_prompt: int, n: int) -> list[bytes]:
        key = (n_prompt, n)
        if key not in self._cache:
            out, ids, text, steps = [], [], "", 0
            for first in range(0, n, self.k):
                new = list(range(first, min(first + self.k, n)))
                ids += [1000 + i for i in new]
                text += "".join(f" t{i}" for i in new)
                steps += 1
                meta: dict[str, Any] = {
                    "id": "ref",
                    "finish_reason": None,
                    "prompt_tokens": n_prompt,
                    "completion_tokens": len(ids),
                    "cached_tokens": 0,
                }
                if len(ids) == n:
                    meta.update(
                        # verify passes only, the prefill's chunk not one (SGLang's count)
                        finish_reason={"type": "length", "length": n}, spec_verify_ct=steps - 1,
                        e2e_latency=0.0
                    )
                line = json.dumps({"text": text, "output_ids": ids, "meta_info": meta})
                out.append(_chunk(f"data: {line}\n\n".encode()))
            out[-1] += _chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n"
            self._cache[key] = out
        return self._cache[key]


class _Protocol(asyncio.Protocol):
    def __init__(self, server: RefServer) -> None:
        self.server = server
        self.buf = b""
        self.transport: asyncio.Transport | None = None
        self.busy = False
        self.stamp: float | None = None  # kernel receive time of the latest bytes

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.server.connections += 1

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while not self.busy:
            head_end = self.buf.find(b"\r\n\r\n")
            if head_end < 0:
                return
            head = self.buf[:head_end].decode("latin-1").split("\r\n")
            length = 0
            for line in head[1:]:
                name, _, value = line.partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value)
            end = head_end + 4 + length
            if len(self.buf) < end:
                return
            received = self.stamp if self.stamp is not None else now()
            body, self.buf = self.buf[head_end + 4 : end], self.buf[end:]
            method, path = head[0].split(" ")[:2]
            self.handle(method, path, body, received)

    def _reply(self, status: str, payload: bytes, content_type: str = "application/json") -> None:
        assert self.transport is not None
        self.transport.write(
            f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: "
            f"{len(payload)}\r\n\r\n".encode()
            + payload
        )

    def handle(self, method: str, path: str, body: bytes, received: float) -> None:
        srv = self.server
        if method == "GET":
            if path == "/log":
                log, srv.log = srv.log, {}
                self._reply("200 OK", json.dumps(log).encode())
            elif path == "/stats":
                self._reply(
                    "200 OK",
                    json.dumps({"cpu_s": time.process_time(), "connections": srv.connections}).encode(),
                )
            else:
                self._reply("200 OK", b"{}")
            return
        data = json.loads(body)
        ids = data["input_ids"]
        n = int(data["sampling_params"]["max_new_tokens"])
        entry: dict[str, Any] = {"recv": received, "sends": [], "sizes": [], "handed": []}
        srv.log[str(ids[0])] = entry
        assert self.transport is not None
        self.transport.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
        )
        chunks = srv.replies.get(len(ids), n)
        if srv.interval <= 0:
            for i, chunk in enumerate(chunks):
                self._send(entry, chunk, min(srv.k, n - i * srv.k))
            return
        self.busy = True
        asyncio.get_running_loop().create_task(self.stream(chunks, n, received, entry))

    async def stream(self, chunks: list[bytes], n: int, received: float, entry: dict[str, Any]) -> None:
        srv, k = self.server, self.server.k
        for j, chunk in enumerate(chunks):
            slot = 0 if j < srv.together else j  # the first ``together`` chunks: at once
            due = received + min((slot + 1) * k, n) * srv.interval
            delay = due - now()
            if delay > 0:
                await asyncio.sleep(delay)
            if self.transport is None or self.transport.is_closing():
                return
            self._send(entry, chunk, min(k, n - j * k))
        self.busy = False
        if self.buf:
            self.data_received(b"")

    def _send(self, entry: dict[str, Any], chunk: bytes, size: int) -> None:
        """Write one chunk and log it: when it was written (``sends``), its tokens, and when
        the kernel took its last byte (``handed``: later than the write only when the socket's
        send buffer was full, the client not reading)."""
        assert self.transport is not None
        entry["sends"].append(now())
        entry["sizes"].append(size)
        handed: list[float] = entry["handed"]
        handed.append(0.0)
        at = len(handed) - 1
        self.transport.write(chunk, lambda when: handed.__setitem__(at, when))  # type: ignore[call-arg]

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None


class RefServer:
    """The server's state: timing, replies and the log."""

    def __init__(self, interval: float, tokens_per_chunk: int, together: int = 1) -> None:
        self.interval = interval
        self.k = tokens_per_chunk
        self.together = together
        self.replies = _Replies(tokens_per_chunk)
        self.log: dict[str, Any] = {}
        self.connections = 0


class RefServerProcess(ChildServer):
    """Start the reference server in a child process; ``url`` is where it answers."""

    def __init__(self, *, interval: float, tokens_per_chunk: int, together: int = 1) -> None:
        super().__init__([sys.executable, str(Path(__file__).resolve()), "--interval",
                          str(interval), "--chunk", str(tokens_per_chunk), "--together",
                          str(together)], "reference server")

    @property
    def pid(self) -> int:
        assert self._proc is not None
        return self._proc.pid


class _KernelStampedSocket:
    """A transport for :class:`_Protocol` on a raw socket: reads with ``recvmsg`` so the
    protocol learns when the kernel received the bytes (``SO_TIMESTAMPNS``). A request's receive
    time is then the arrival of its last byte, not the moment this server's loop got to it: a
    busy server loop is the server's own latency, part of the true TTFT."""

    def __init__(self, sock: socket.socket, protocol: _Protocol) -> None:
        self.sock, self.protocol = sock, protocol
        self.loop = asyncio.get_running_loop()
        self.out = b""
        self.closing = False
        self.accepted = 0  # bytes the kernel took so far
        self.given = 0  # bytes given to :meth:`write` so far
        self.waiting: list[tuple[int, Callable[[float], None]]] = []  # (end, told when taken)
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.offset = time.time() - now()  # CLOCK_REALTIME - CLOCK_MONOTONIC
        self.loop.add_reader(sock.fileno(), self._readable)
        protocol.connection_made(self)  # type: ignore[arg-type]

    def _readable(self) -> None:
        try:
            data, ancillary, _, _ = self.sock.recvmsg(262144, 64)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data, ancillary = b"", []
        if not data:
            self.close()
            return
        stamp = now()
        for level, kind, raw in ancillary:
            if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
                sec, nsec = struct.unpack("qq", raw[:16])
                stamp = min(stamp, sec + nsec * 1e-9 - self.offset)
        self.protocol.stamp = stamp
        self.protocol.data_received(data)

    def write(self, data: bytes, taken: Callable[[float], None] | None = None) -> None:
        """Send ``data`` (what the kernel does not take now waits for the socket to drain);
        ``taken`` is told when the kernel took its last byte."""
        if self.closing:
            return
        self.given += len(data)
        if taken is not None:
            self.waiting.append((self.given, taken))
        if not self.out:
            try:
                sent = self.sock.send(data)
            except BlockingIOError:
                sent = 0
            except OSError:
                self.close()
                return
            self._took(sent)
            data = data[sent:]
            if data:
                self.loop.add_writer(self.sock.fileno(), self._flush)
        self.out += data

    def _took(self, sent: int) -> None:
        self.accepted += sent
        while self.waiting and self.waiting[0][0] <= self.accepted:
            self.waiting.pop(0)[1](now())

    def _flush(self) -> None:
        try:
            sent = self.sock.send(self.out)
        except BlockingIOError:
            return
        except OSError:
            self.close()
            return
        self._took(sent)
        self.out = self.out[sent:]
        if not self.out:
            self.loop.remove_writer(self.sock.fileno())

    def is_closing(self) -> bool:
        return self.closing

    def close(self) -> None:
        if not self.closing:
            self.closing = True
            self.loop.remove_reader(self.sock.fileno())
            self.loop.remove_writer(self.sock.fileno())
            self.sock.close()
            self.protocol.connection_lost(None)


async def _serve(interval: float, chunk: int, port: int, together: int = 1) -> None:
    state = RefServer(interval, chunk, together)
    loop = asyncio.get_running_loop()
    listener = socket.create_server(("127.0.0.1", port), backlog=1024)
    listener.setblocking(False)
    keep: set[_KernelStampedSocket] = set()

    def accept() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except BlockingIOError:
                return
            conn.setblocking(False)
            keep.add(_KernelStampedSocket(conn, _Protocol(state)))

    loop.add_reader(listener.fileno(), accept)
    print(f"port {listener.getsockname()[1]}", flush=True)
    await asyncio.Event().wait()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--interval", type=float, required=True)
    parser.add_argument("--chunk", type=int, default=1)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--together", type=int, default=1,
                        help="the first N chunks of a reply are written back to back")
    args = parser.parse_args()
    asyncio.run(_serve(args.interval, args.chunk, args.port, args.together))


if __name__ == "__main__":
    main()
