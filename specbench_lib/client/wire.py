"""The wire under :mod:`~.http1`: a connected socket's received bytes, each piece stamped with the
time it arrived (the kernel's receive time via ``recvmsg`` on Linux; an asyncio transport
stamped on read elsewhere and for TLS).
"""

from __future__ import annotations

import asyncio
import platform
import socket
import struct
import sys
import time
from collections import deque
from typing import Any, cast

from ..core.errors import TransportError

HTTPError = TransportError  # the name this module's callers and tests know


class Pieces:
    """Received bytes with their arrival time (the ``time.perf_counter`` clock), and the end.

    Each piece also keeps when this process read it (``read_at``, the same clock): the kernel's
    stamp of a read is its last segment's arrival, so bytes that queued while the client was not
    running carry a later time than their own, and only the read time tells a caller that the
    read came right after such a stall (see :mod:`~specbench_lib.client.dispatch`).
    """

    def __init__(self) -> None:
        self.pieces: deque[tuple[bytes, float, float]] = deque()  # data, arrival, read time
        self.closed = False
        self.error: Exception | None = None
        self.read_at = 0.0  # when the piece that :meth:`read` returned last was read
        self._waiter: asyncio.Future[None] | None = None
        self.loop: asyncio.AbstractEventLoop | None = None  # the loop reading it, where known

    def _add(self, data: bytes, when: float, read_at: float | None = None) -> None:
        self.pieces.append((data, when, when if read_at is None else read_at))
        self._wake()

    def _unread(self, data: bytes, when: float) -> None:
        """Put back the part of the last piece read that belongs to what follows."""
        self.pieces.appendleft((data, when, self.read_at))

    def _end(self, exc: Exception | None = None) -> None:
        self.closed, self.error = True, self.error or exc
        self._wake()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    async def read(self) -> tuple[bytes, float]:
        """The next received piece; ``b""`` once the peer has closed and all was read."""
        while not self.pieces:
            if self.closed:
                return b"", time.perf_counter()
            self._waiter = (self.loop or asyncio.get_running_loop()).create_future()
            await self._waiter
        data, when, self.read_at = self.pieces.popleft()
        return data, when

    async def write(self, data: bytes) -> None:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError


class KernelStampedWire(Pieces):
    """Plain TCP read with ``recvmsg``: each piece carries the kernel's receive time
    (``SO_TIMESTAMPNS``), so a busy client loop does not delay a timestamp (Linux).

    After each read it sets ``TCP_QUICKACK`` (where the platform has it): a server that leaves
    Nagle on (llama-server's HTTP library does) holds its first event until the response head is
    acknowledged, and on a kept-alive connection the kernel delays that ACK by 40 ms or more,
    which every TTFT after a connection's first request then carried. Not after the read that
    ends a chunked body: nothing is left for an ACK to release, the next request carries it, and
    the setsockopt would cost a system call and a packet for each request.
    """

    def __init__(self, sock: socket.socket) -> None:
        super().__init__()
        self.sock = sock
        self.loop: asyncio.AbstractEventLoop = asyncio.get_running_loop()
        if SO_TIMESTAMPNS is None:
            raise HTTPError("kernel receive stamps need Linux on x86_64 or aarch64")
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        before = time.perf_counter()
        self.offset = time.time() - (before + time.perf_counter()) / 2  # realtime - perf_counter
        self.loop.add_reader(sock.fileno(), self._readable)

    def _readable(self) -> None:
        try:
            data, ancillary, _, _ = self.sock.recvmsg(262144, 64)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self._stop(exc)
            return
        now = time.perf_counter()
        if not data:
            self._stop(None)
            return
        # the kernel clears it again: set after every read, but for the one that ends a chunked
        # body (nothing follows that an ACK could release; the next request carries the ACK)
        if TCP_QUICKACK is not None and not (data.endswith(_BODY_END) or data == _BODY_END[2:]):
            try:
                self.sock.setsockopt(socket.IPPROTO_TCP, TCP_QUICKACK, 1)
            except OSError:
                pass
        when = now
        for level, kind, raw in ancillary:
            if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(raw) >= 16:
                sec, nsec = struct.unpack("qq", raw[:16])
                stamped = sec + nsec * 1e-9 - self.offset
                if now - 1.0 < stamped <= now:  # a clock step falls back to the loop's time
                    when = stamped
        self._add(data, when, now)

    def _stop(self, exc: Exception | None) -> None:
        if not self.closed:
            self.loop.remove_reader(self.sock.fileno())
        self._end(exc)

    async def write(self, data: bytes) -> None:
        try:  # a request fits the socket's buffer: sent at once, no coroutine of the loop's
            sent = self.sock.send(data)
        except (BlockingIOError, InterruptedError):
            sent = 0
        if sent < len(data):
            await self.loop.sock_sendall(self.sock, data[sent:])

    def close(self) -> None:
        if self.sock.fileno() >= 0:
            self._stop(None)
            self.sock.close()


class TransportWire(Pieces, asyncio.Protocol):
    """Any other connection (TLS) through an asyncio transport; stamped when the loop reads."""

    def __init__(self) -> None:
        super().__init__()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # a stream connection's

    def data_received(self, data: bytes) -> None:
        self._add(data, time.perf_counter())

    def eof_received(self) -> bool:
        self._end()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._end(exc)

    async def write(self, data: bytes) -> None:
        if self.transport is None:
            raise HTTPError("ConnectError: the connection is not open")
        self.transport.write(data)

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


# Python's socket module does not name it; 35 on Linux's 64-bit x86 and ARM (asm-generic).
SO_TIMESTAMPNS = 35 if sys.platform == "linux" and platform.machine() in ("x86_64",
                                                                          "aarch64") else None
TCP_QUICKACK: int | None = getattr(socket, "TCP_QUICKACK", None)  # Linux
_BODY_END = b"\r\n0\r\n\r\n"  # a chunked body's last chunk after the one before it


def _numeric(host: str, port: int) -> list[tuple[Any, ...]] | None:
    """``host``'s address when it is one (``127.0.0.1``, ``::1``): no name to look up."""
    try:
        return socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_NUMERICHOST)
    except (socket.gaierror, UnicodeError):
        return None


async def open_socket(loop: asyncio.AbstractEventLoop, host: str, port: int) -> socket.socket:
    """A connected non-blocking TCP socket (Nagle off), trying each address of ``host``.

    A numeric host is not looked up in the loop's thread pool (a cell's connections would start
    its threads and queue a lookup each, for nothing).
    """
    error: OSError = OSError(f"no address for {host}")
    found = _numeric(host, port) or await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    for family, kind, proto, _, address in found:
        sock = socket.socket(family, kind, proto)
        try:
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            await loop.sock_connect(sock, address)
            return sock
        except OSError as exc:
            sock.close()
            error = exc
        except BaseException:
            sock.close()
            raise
    raise error
