"""The dispatcher's HTTP/1.1 connection: framing split at every byte, keep-alive, stale
connections, broken bodies and the arrival time of each piece."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Awaitable, Callable

import pytest

from specbench_lib.client.http1 import SO_TIMESTAMPNS, Connection, HTTPError, Pieces, StaleConnection
from specbench_lib.core.errors import TransportError

Script = Callable[[asyncio.StreamReader, asyncio.StreamWriter, int], Awaitable[bool]]


async def read_request(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                   if line.lower().startswith(b"content-length:")), 0)
    return head + await reader.readexactly(length)


async def trickle(writer: asyncio.StreamWriter, data: bytes, step: int = 1) -> None:
    """Send ``data`` a few bytes at a time, so every framing boundary falls between reads."""
    for i in range(0, len(data), step):
        writer.write(data[i:i + step])
        await writer.drain()
        await asyncio.sleep(0.0005)


Client = Callable[[str, list[bytes]], Awaitable[None]]


def serve(script: Script) -> Callable[[Client], list[bytes]]:
    """Run ``client(url, requests_seen)`` against a server answering each connection with
    ``script(reader, writer, connection_number)``; the script returns True to keep serving.
    Returns the requests the server read, then ``connections=N``."""

    def runner(client: Client) -> list[bytes]:
        seen: list[bytes] = []

        async def main() -> None:
            count = 0

            async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
                nonlocal count
                count += 1
                number = count
                try:
                    while True:
                        try:
                            seen.append(await read_request(reader))
                        except asyncio.IncompleteReadError:
                            break
                        if not await script(reader, writer, number):
                            break
                finally:
                    writer.close()

            server = await asyncio.start_server(handle, "127.0.0.1", 0)
            port = server.sockets[0].getsockname()[1]
            async with server:
                await client(f"http://127.0.0.1:{port}", seen)
            seen.append(f"connections={count}".encode())

        asyncio.run(main())
        return seen

    return runner


CHUNKED = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
           b"8;ext=1\r\ndata: a\n\r\n" b"10\r\ndata: bbbbbbbbb\n\r\n" b"0\r\nX-Trailer: 1\r\n\r\n")


def test_chunked_body_split_at_every_byte_is_decoded_and_the_connection_reused() -> None:
    async def script(reader, writer, number) -> bool:
        await trickle(writer, CHUNKED)
        return True

    async def client(url: str, seen: list[bytes]) -> None:
        conn = Connection(url)
        for _ in range(2):
            resp = await conn.request("POST", "/generate", b'{"x":1}')
            assert resp.status_code == 200
            assert await resp.read() == b"data: a\n" + b"data: bbbbbbbbb\n"
            assert resp.complete
        assert not conn.fresh  # the second request went out on the first connection
        conn.close()
        assert seen[0].startswith(b"POST /generate HTTP/1.1\r\n") and seen[0].endswith(b'{"x":1}')

    assert serve(script)(client)[-1] == b"connections=1"


def test_content_length_body_and_error_status() -> None:
    async def script(reader, writer, number) -> bool:
        await trickle(writer, b"HTTP/1.1 400 Bad Request\r\nContent-Length: 11\r\n\r\ntoo long!!!", 3)
        return True

    async def client(url: str, seen: list[bytes]) -> None:
        conn = Connection(url)
        resp = await conn.request("POST", "/completion", b"{}")
        assert (resp.status_code, await resp.read()) == (400, b"too long!!!")
        resp = await conn.request("GET", "/health")
        assert await resp.read() == b"too long!!!" and not conn.fresh
        conn.close()

    serve(script)(client)


def test_a_204_has_no_body_and_keeps_the_connection() -> None:
    async def script(reader, writer, number) -> bool:
        writer.write(b"HTTP/1.1 204 No Content\r\n\r\n")
        await writer.drain()
        return True

    async def client(url: str, seen: list[bytes]) -> None:
        conn = Connection(url)
        for _ in range(2):
            resp = await asyncio.wait_for(conn.request("GET", "/x"), 2)
            assert (resp.status_code, await asyncio.wait_for(resp.read(), 2)) == (204, b"")
        conn.close()

    assert serve(script)(client)[-1] == b"connections=1"


def test_body_until_close_and_a_new_connection_for_the_next_request() -> None:
    async def script(reader, writer, number) -> bool:
        await trickle(writer, b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nall of it", 4)
        return False

    async def client(url: str, seen: list[bytes]) -> None:
        conn = Connection(url)
        for _ in range(2):
            resp = await conn.request("POST", "/v1/completions", b"{}")
            assert await resp.read() == b"all of it"
        assert conn.fresh
        conn.close()

    assert serve(script)(client)[-1] == b"connections=2"


def test_a_kept_alive_connection_closed_by_the_server_is_replaced_once() -> None:
    async def script(reader, writer, number) -> bool:
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        await writer.drain()
        return False  # promises keep-alive, then closes (llama-server does this after a stream)

    async def client(url: str, seen: list[bytes]) -> None:
        conn = Connection(url)
        assert await (await conn.request("GET", "/a")).read() == b"ok"
        await asyncio.sleep(0.05)
        sent: list[float] = []
        resp = await conn.request("GET", "/b", on_send=lambda: sent.append(time.perf_counter()))
        assert await resp.read() == b"ok" and conn.fresh
        assert len(sent) >= 1
        conn.close()

    serve(script)(client)


def test_a_new_connection_closed_without_a_response_is_an_error() -> None:
    async def script(reader, writer, number) -> bool:
        return False

    async def client(url: str, seen: list[bytes]) -> None:
        with pytest.raises(StaleConnection, match="without sending a response"):
            await Connection(url).request("GET", "/x")

    serve(script)(client)


@pytest.mark.parametrize(("reply", "error"), [
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10\r\nonly half", "peer closed"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly half", "peer closed"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n0\r\n\r\n", "longer than"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n", "bad chunk size"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n-1\r\nabc\r\n", "bad chunk size"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0x3\r\nabc\r\n", "bad chunk size"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1_0\r\nabc\r\n", "bad chunk size"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + b"1" * 5000, "chunk size line over"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1;" + b"x" * 5000 + b"\r\n", "line over"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n" + b"X: y\r\n" * 12000,
     "trailers over"),
])
def test_a_broken_body_is_an_error(reply: bytes, error: str) -> None:
    async def script(reader, writer, number) -> bool:
        writer.write(reply)
        await writer.drain()
        return False

    async def client(url: str, seen: list[bytes]) -> None:
        conn = Connection(url)
        resp = await conn.request("POST", "/generate", b"{}")
        with pytest.raises(HTTPError, match=error):
            await resp.read()
        assert not resp.complete

    serve(script)(client)


@pytest.mark.parametrize(("reply", "error"), [
    (b"HTTP/1.1 200 OK\r\nContent-Length: many\r\n\r\nabc", "bad Content-Length"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: -3\r\n\r\nabc", "bad Content-Length"),
    (b"HTTP/1.1 2\xb20 OK\r\nContent-Length: 0\r\n\r\n", "bad status line"),
    (b"HTTP/1.1 20 OK\r\nContent-Length: 0\r\n\r\n", "bad status line"),
])
def test_a_broken_head_is_a_transport_error(reply: bytes, error: str) -> None:
    """Not a bare ValueError from int(): every protocol fault is the one TransportError."""
    async def script(reader, writer, number) -> bool:
        writer.write(reply)
        await writer.drain()
        return False

    async def client(url: str, seen: list[bytes]) -> None:
        with pytest.raises(TransportError, match=error):
            await Connection(url).request("POST", "/generate", b"{}")

    serve(script)(client)


def test_a_head_and_a_large_body_in_one_read_is_not_a_head_over_64_kib() -> None:
    body = b"x" * 200_000

    async def script(reader, writer, number) -> bool:
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
        await writer.drain()
        return True

    async def client(url: str, seen: list[bytes]) -> None:
        conn = Connection(url)
        await conn.open()
        await asyncio.sleep(0)
        resp = await conn.request("POST", "/x", b"{}")
        assert await resp.read() == body
        conn.close()

    serve(script)(client)


class _BrokenPipeWire(Pieces):
    """A connection the server has reset: writing to it raises, as the socket would."""

    def __init__(self) -> None:
        super().__init__()
        self.writes = 0

    async def write(self, data: bytes) -> None:
        self.writes += 1
        raise BrokenPipeError(32, "Broken pipe")

    def close(self) -> None:
        self.closed = True


def test_a_kept_alive_connection_that_fails_the_write_is_replaced_once() -> None:
    async def script(reader, writer, number) -> bool:
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        await writer.drain()
        return True

    async def client(url: str, seen: list[bytes]) -> None:
        conn = Connection(url)
        broken = _BrokenPipeWire()
        conn._wire, conn._idle_since = broken, time.monotonic()  # looks usable, kept alive
        resp = await conn.request("GET", "/a")
        assert await resp.read() == b"ok" and conn.fresh and broken.writes == 1
        conn.close()

    assert serve(script)(client)[-1] == b"connections=1"


def test_a_new_connection_that_fails_the_write_is_a_transport_error(
        monkeypatch: pytest.MonkeyPatch) -> None:
    async def connect(self: Connection) -> Pieces:
        return _BrokenPipeWire()

    monkeypatch.setattr(Connection, "_connect", connect)

    async def client() -> None:
        with pytest.raises(TransportError, match="ConnectError: BrokenPipeError"):
            await Connection("http://127.0.0.1:9").request("POST", "/x", b"{}")

    asyncio.run(client())


def test_a_bad_url_is_a_transport_error() -> None:
    with pytest.raises(TransportError, match="bad URL"):
        Connection("http://127.0.0.1:99999")
    assert HTTPError is TransportError


def test_a_refused_connection_is_an_error() -> None:
    async def client() -> None:
        with pytest.raises(HTTPError, match="ConnectError"):
            await Connection("http://127.0.0.1:9").request("GET", "/")

    asyncio.run(client())


@pytest.mark.skipif(SO_TIMESTAMPNS is None, reason="kernel receive stamps: Linux x86_64/aarch64")
def test_a_piece_carries_the_kernel_arrival_time_even_when_the_client_was_busy() -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    sends: list[float] = []

    def server() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.recv(65536)
            conn.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
            for _ in range(3):
                time.sleep(0.03)
                sends.append(time.perf_counter())
                conn.sendall(b"5\r\ntoken\r\n")
            conn.sendall(b"0\r\n\r\n")

    thread = threading.Thread(target=server)
    thread.start()

    async def client() -> list[tuple[bytes, float, float]]:
        conn = Connection(f"http://127.0.0.1:{listener.getsockname()[1]}")
        resp = await conn.request("POST", "/generate", b"{}")
        pieces = []
        async for data, arrived in resp.stream():
            pieces.append((data, arrived, time.perf_counter()))
            if len(pieces) == 1:
                time.sleep(0.15)  # the loop is blocked while the other tokens arrive
        conn.close()
        return pieces

    pieces = asyncio.run(client())
    thread.join()
    listener.close()
    assert b"".join(p[0] for p in pieces) == b"token" * 3
    tokens = 0
    for data, arrived, _ in pieces:
        tokens += data.count(b"token")
        sent = sends[tokens - 1]  # the last token in this piece
        assert sent <= arrived < sent + 0.02, (arrived - sent)
    assert pieces[-1][2] - pieces[-1][1] > 0.05  # handled late, stamped on arrival
