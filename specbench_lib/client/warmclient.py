"""The client's first-time work done before a sweep's first measured cell (:func:`warm_client`),
as the warmup warms the server: what :mod:`~.dispatch`'s measuring path would otherwise do for the
first time with requests in flight."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import socket
from urllib.parse import urlsplit

from ..host.load import HostSampler
from ..host.stalls import StallWatch
from ..model.records import RequestRecord
from .dispatch import COMPACT_JSON, run_sync
from .http1 import Connection
from .streamread import Stream


def warm_client(base_url: str, *, host: bool = True) -> None:
    """Do before a sweep's first measured cell what its measuring path would otherwise do for the
    first time with requests in flight, as the warmup warms the server: look up ``base_url``'s
    host (the lookup's codec and resolver libraries), run an event loop in its thread with the
    stall watch, send one request over this module's wire to a loopback listener of its own
    (kernel stamps, the chunked and stream readers), use the digest and JSON codecs and, with
    ``host``, start and stop a host sampler (its first /proc read, ``nvidia-smi`` once). Nothing
    here may fail a sweep: what cannot be warmed is left cold."""
    url = urlsplit(base_url)
    with contextlib.suppress(OSError, UnicodeError, ValueError):
        socket.getaddrinfo(url.hostname or "127.0.0.1", url.port or 80, type=socket.SOCK_STREAM)
    with contextlib.suppress(Exception):
        run_sync(_warm_wire())
    json.loads(COMPACT_JSON.encode({"warm": [1]}))
    hashlib.sha256(b"warm").hexdigest()
    if host:
        HostSampler(interval_s=60.0).start().stop()


_WARM_REPLY = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\ne\r\ndata: [DONE]\n\n\r\n0\r\n\r\n"


async def _warm_wire() -> None:
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(_WARM_REPLY)
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    conn = Connection(f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}")
    watch, stream = StallWatch(), Stream(lambda line: None)
    rec = RequestRecord(0, True, 0, 1, multi_reads=[], stalls=[])
    watch.start()
    try:
        async with asyncio.timeout(5.0):
            resp = await conn.request("GET", "/")
            async with contextlib.aclosing(resp.stream()) as pieces:
                async for data, when in pieces:
                    stream.take_read(rec, data.split(b"\n"), when, resp.read_at)
    finally:
        watch.stop()
        conn.close()
        server.close()
        await server.wait_closed()


__all__ = ["warm_client"]
