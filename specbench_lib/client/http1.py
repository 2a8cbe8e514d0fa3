"""A lean HTTP/1.1 client connection for the measured requests: one request at a time, the body
streamed as it arrives, each piece stamped with the time its bytes were received.

Why not httpx here: the dispatcher's own CPU time delays the timestamps of every stream it is
reading, and httpx costs about 0.7 ms of CPU per streamed request on this machine (its request
and response models, httpcore's connection state machine, anyio) - more than the serving
benchmarks' aiohttp clients. This module is only the wire: a socket read with ``recvmsg`` whose
pieces carry the kernel's receive time (Linux; an asyncio transport stamped on read elsewhere and
for TLS), a request writer and a response reader that decodes Content-Length, chunked and
read-until-close bodies. Everything else (health checks, tokenization, server info, metrics)
still goes through httpx.
"""

from __future__ import annotations

import asyncio
import re
import ssl
import time
from collections.abc import AsyncGenerator, Callable
from urllib.parse import urlsplit

from ..core.errors import ConnectTimeout, StaleConnection, TransportError
from .wire import SO_TIMESTAMPNS, KernelStampedWire, Pieces, TransportWire, open_socket

HTTPError = TransportError  # the name this module's callers and tests know
_HEX = re.compile(rb"[0-9A-Fa-f]{1,16}")
_MAX_CHUNK_LINE = 4096  # a chunk-size line, extensions included
_MAX_TRAILERS = 65536


class Connection:
    """One kept-alive connection to ``base_url``, reopened when the server has closed it."""

    def __init__(self, base_url: str, *, headers: dict[str, str] | None = None,
                 connect_timeout_s: float = 10.0, keepalive_s: float = 4.0,
                 ssl_context: ssl.SSLContext | None = None) -> None:
        url = urlsplit(base_url)
        try:
            port = url.port
        except ValueError as exc:  # a port out of range or not a number
            raise HTTPError(f"bad URL {base_url!r}: {exc}") from None
        self.host = url.hostname or "127.0.0.1"
        self.tls = url.scheme == "https"
        self.port = port or (443 if self.tls else 80)
        self.prefix = url.path.rstrip("/")
        self.connect_timeout_s = connect_timeout_s
        self.keepalive_s = keepalive_s
        self.ssl_context = ssl_context or (ssl.create_default_context() if self.tls else None)
        host = self.host if port is None else f"{self.host}:{port}"
        extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
        self._head = f"Host: {host}\r\nAccept: */*\r\nUser-Agent: specbench\r\n{extra}"
        self._wire: Pieces | None = None
        self._idle_since = 0.0
        self.fresh = False  # the current request went out on a connection opened for it

    async def _connect(self) -> Pieces:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(self.connect_timeout_s):
                if self.tls or SO_TIMESTAMPNS is None:
                    _, wire = await loop.create_connection(
                        TransportWire, self.host, self.port, ssl=self.ssl_context,
                        server_hostname=self.host if self.tls else None)
                    return wire
                return KernelStampedWire(await open_socket(loop, self.host, self.port))
        except TimeoutError:
            raise ConnectTimeout(f"ConnectTimeout: no connection to {self.host}:{self.port} "
                                 f"within {self.connect_timeout_s:g} s") from None
        except OSError as exc:
            raise HTTPError(f"ConnectError: {exc}") from None

    def _usable(self) -> bool:
        wire = self._wire
        return (wire is not None and not wire.closed and not wire.pieces
                and time.monotonic() - self._idle_since < self.keepalive_s)

    def close(self) -> None:
        if self._wire is not None:
            self._wire.close()
        self._wire = None

    async def open(self) -> None:
        """Connect now (before a timed window), unless a usable connection is there."""
        if not self._usable():
            self.close()
            self._wire = await self._connect()
            self._idle_since = time.monotonic()

    def _encode(self, method: str, path: str, body: bytes | None) -> bytes:
        length = "" if body is None else (f"Content-Type: application/json\r\n"
                                          f"Content-Length: {len(body)}\r\n")
        head = f"{method} {self.prefix}{path} HTTP/1.1\r\n{self._head}{length}\r\n".encode()
        return head + body if body else head

    async def request(self, method: str, path: str, body: bytes | None = None, *,
                      on_send: Callable[[], None] | None = None) -> Response:
        """Send a request (a JSON ``body``, if any) and read the response head.

        ``on_send`` is called when the connection is open and the request encoded, just before
        its bytes are written: the moment a request starts, as its server can first see it. A
        kept-alive connection that the server had closed (no byte of a response) is replaced and
        the request sent once more; :attr:`fresh` tells whether the request went out on a
        connection opened for it.
        """
        data = self._encode(method, path, body)
        attempt = 0
        while True:
            self.fresh = attempt > 0 or not self._usable()
            if attempt:
                self.close()
            await self.open()
            if on_send is not None:
                on_send()
            try:
                await self._open_wire().write(data)
                return await self.response()
            except StaleConnection:
                if self.fresh:
                    raise
            except OSError as exc:  # reset or broken pipe while writing: no response began
                self.close()
                if self.fresh:
                    raise HTTPError(f"ConnectError: {type(exc).__name__}: {exc}") from None
            attempt += 1

    def _open_wire(self) -> Pieces:
        if self._wire is None:
            raise HTTPError("ConnectError: the connection is not open")
        return self._wire

    async def response(self) -> Response:
        """Read the head of the response to the request just sent."""
        wire, buf, when = self._open_wire(), b"", 0.0
        while b"\r\n\r\n" not in buf:
            data, when = await wire.read()
            if not data:
                self.close()
                if not buf:
                    raise StaleConnection("Server disconnected without sending a response")
                raise HTTPError("RemoteProtocolError: incomplete response head")
            buf += data
            if len(buf) > 65536 and b"\r\n\r\n" not in buf[:65536 + 4]:  # a body may follow
                self.close()
                raise HTTPError("RemoteProtocolError: response head over 64 KiB")
        head, rest = buf.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ", 2)
        if (len(parts) < 2 or not parts[0].startswith("HTTP/1.") or len(parts[1]) != 3
                or not parts[1].isascii() or not parts[1].isdigit()):
            self.close()
            raise HTTPError(f"RemoteProtocolError: bad status line {lines[0][:80]!r}")
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        length = headers.get("content-length")
        if length is not None and not (length.isascii() and length.isdigit()):
            self.close()
            raise HTTPError(f"RemoteProtocolError: bad Content-Length {length[:40]!r}")
        if rest:
            wire._unread(rest, when)
        return Response(self, int(parts[1]), headers, parts[0] == "HTTP/1.1")

    def _done(self, reusable: bool) -> None:
        if reusable:
            self._idle_since = time.monotonic()
        else:
            self.close()


class Response:
    """A response whose body is read with :meth:`stream` (pieces and their arrival times)."""

    def __init__(self, conn: Connection, status: int, headers: dict[str, str],
                 http11: bool) -> None:
        self.conn, self.status_code, self.headers = conn, status, headers
        chunked = "chunked" in headers.get("transfer-encoding", "").lower()
        if status in (204, 304) or 100 <= status < 200:
            self._length: int | None = 0  # never a body
        else:
            self._length = None if chunked or "content-length" not in headers else int(
                headers["content-length"])
        self._chunked = chunked
        self._keep = http11 and headers.get("connection", "").lower() != "close" and (
            chunked or self._length is not None)
        self.complete = False
        self.read_at = 0.0  # when the piece :meth:`stream` yielded last was read (perf_counter)

    async def stream(self) -> AsyncGenerator[tuple[bytes, float]]:
        """Body bytes as they arrive, each with its arrival time (:attr:`read_at` tells when
        this process read them); the connection is kept for the next request only when the body
        was read to its end."""
        wire = self.conn._open_wire()
        try:
            if self._chunked:
                body = _Dechunker()
                while not body.done:
                    data, when = await wire.read()
                    if not data:
                        if body.last:  # closed in the trailers: the body was all there
                            break
                        raise _cut_short(wire)
                    payload = body.feed(data)
                    if payload:
                        self.read_at = wire.read_at
                        yield payload, when
            elif self._length is not None:
                left = self._length
                while left > 0:
                    data, when = await wire.read()
                    if not data:
                        raise _cut_short(wire)
                    if len(data) > left:
                        wire._unread(data[left:], when)
                        data = data[:left]
                    left -= len(data)
                    self.read_at = wire.read_at
                    yield data, when
            else:
                while True:
                    data, when = await wire.read()
                    if not data:
                        break
                    self.read_at = wire.read_at
                    yield data, when
            self.complete = True
        finally:
            self.conn._done(self.complete and self._keep)

    async def read(self) -> bytes:
        return b"".join([data async for data, _ in self.stream()])


class _Dechunker:
    """A chunked body's framing, fed as it is read: :meth:`feed` gives the payload each read
    completes (a plain method, not a generator between the socket and the stream's reader)."""

    def __init__(self) -> None:
        self.buf = b""
        self.data_left = self.crlf_left = 0  # of the current chunk: payload, then its CRLF
        self.last = False  # the last chunk was read: only trailers (if any) are left
        self.done = False  # and the empty line after them

    def feed(self, data: bytes) -> bytes:
        buf = self.buf + data if self.buf else data
        if self.last:
            self._trailers(buf)
            return b""
        out = []
        pos, n = 0, len(buf)  # read from pos on: the buffer is not sliced per chunk
        data_left, crlf_left = self.data_left, self.crlf_left
        while True:
            if data_left:
                stop = pos + data_left
                out.append(buf[pos:stop])
                if stop > n:
                    pos, data_left = n, stop - n
                    break
                pos, data_left = stop, 0
            if crlf_left:
                if n - pos < crlf_left:
                    break
                if buf[pos:pos + crlf_left] != b"\r\n"[2 - crlf_left:]:
                    raise HTTPError("RemoteProtocolError: a chunk longer than its size")
                pos, crlf_left = pos + crlf_left, 0
            end = buf.find(b"\r\n", pos, pos + _MAX_CHUNK_LINE + 2)
            if end < 0:
                if n - pos > _MAX_CHUNK_LINE:
                    raise HTTPError(f"RemoteProtocolError: chunk size line over {_MAX_CHUNK_LINE} "
                                    f"bytes {buf[pos:pos + 40]!r}")
                break
            digits = buf[pos:end]
            if not _HEX.fullmatch(digits):  # int(..., 16) would take "-1", "0x1" and "1_0"
                digits = digits.split(b";", 1)[0].strip()  # extensions, spaces
                if not _HEX.fullmatch(digits):
                    raise HTTPError(f"RemoteProtocolError: bad chunk size {buf[pos:end][:40]!r}")
            size = int(digits, 16)
            pos = end + 2
            if size == 0:  # the last chunk; trailers (if any) end with an empty line
                self.last = True
                self._trailers(buf[pos:])
                break
            data_left, crlf_left = size, 2
        if not self.last:
            self.buf, self.data_left, self.crlf_left = buf[pos:], data_left, crlf_left
        return b"".join(out)

    def _trailers(self, buf: bytes) -> None:
        if buf.startswith(b"\r\n") or b"\r\n\r\n" in buf:
            self.done, self.buf = True, b""
        elif len(buf) > _MAX_TRAILERS:
            raise HTTPError(f"RemoteProtocolError: trailers over {_MAX_TRAILERS} bytes")
        else:
            self.buf = buf


def _cut_short(wire: Pieces) -> HTTPError:
    why = f" ({wire.error})" if wire.error else ""
    return HTTPError(f"RemoteProtocolError: peer closed connection without sending complete "
                     f"message body{why}")
