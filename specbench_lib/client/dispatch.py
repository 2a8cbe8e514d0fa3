"""Send a cell's requests over asyncio (:mod:`~.http1`): streaming, a timestamp per token, limits.

Requests go out in a closed loop (``concurrency`` in flight) or, with a request rate, on a seeded
open-loop schedule (Poisson or evenly spaced arrivals, still at most ``concurrency`` in flight).
Each request has its own connect, first-token, between-tokens and whole-request time limits; a
request that fails is recorded as failed and never retried. The one exception is a request that a
kept-alive connection could not deliver ("Server disconnected without sending a response" on a
reused connection: llama-server closes its connection after every stream): the server never saw
it, so it is sent once more on a fresh connection; a dead server then fails that attempt.

Whatever a server answers ends as that request's record, never as an exception out of
:func:`dispatch_cell`: an HTTP error status is ``http_<status>``, an error event or a stream line
that cannot be read (not UTF-8, not JSON, the wrong shape, over 16 MiB without a line break, a
token count beyond twice the limit) is ``error_in_stream``, a broken connection or HTTP framing
is ``connection_error``, and a limit is ``timeout``. A 200 stream that ends cleanly having
carried no token, no text and no final statistics (only ``data: [DONE]``, or an empty body) is
recorded with 0 completion tokens, so it reads as ``empty_output``; one that carried tokens but
no final statistics stays incomplete.

Coalesced reads: a read's kernel stamp is its last segment's arrival, so events that queued in
the socket while the client was not running (a busy loop, a descheduled process) all carry the
last one's time. A :class:`~specbench_lib.host.stalls.StallWatch` ticks every 2 ms and keeps the intervals in
which it could not run on time. Each request stores its reads that carried several token events
(``RequestRecord.multi_reads``) and the stalls that overlap it (``RequestRecord.stalls``); which
tokens they made late is decided on read (:mod:`~specbench_lib.analysis.coalescing`), and the rule
``coalesced_reads`` (:mod:`~specbench_lib.analysis.validate`) judges the fraction.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import gc
import json
import signal
import ssl
import threading
import time
from collections import deque
from collections.abc import Coroutine, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ..host.stalls import StallWatch
from ..model.catalogue import C, http_status
from ..model.records import CellDispatch, RequestRecord
from ..model.sampling import Sampling
from ..model.sections import RequestRateParams, TimeoutParams
from ..servers.engines import Adapter
from .arrivals import arrival_offsets
from .deadline import Deadline, resolve_timeouts
from .http1 import Connection, ConnectTimeout, HTTPError, Response
from .streamread import MAX_LINE, Stream

T = TypeVar("T")
_resolve_timeouts = resolve_timeouts  # the name tests and benchmarks know


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to completion from sync code, even inside a running loop (Jupyter).

    The coroutine runs on its own loop in a worker thread. Ctrl-C (KeyboardInterrupt in the
    calling thread) cancels it at once, so an interrupted cell does not wait for its requests.
    """
    loop = asyncio.new_event_loop()
    task = loop.create_task(coro)
    box: dict[str, Any] = {}

    def target() -> None:
        # Signals go to the main thread, never here: a Ctrl-C the kernel hands to this thread
        # would leave the main thread blocked in a system call, unaware of it.
        if hasattr(signal, "pthread_sigmask"):
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
        try:
            box["result"] = loop.run_until_complete(task)
        except BaseException as exc:  # handed to the caller below
            box["error"] = exc
        finally:
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    worker = threading.Thread(target=target, name="specbench-dispatch", daemon=True)
    worker.start()
    try:
        while worker.is_alive():
            worker.join(0.1)
    except BaseException:
        with contextlib.suppress(RuntimeError):  # the loop may have closed in the meantime
            loop.call_soon_threadsafe(task.cancel)
        worker.join(5.0)
        raise
    if "error" in box:
        raise box["error"]
    return box["result"]


def dispatch_cell(adapter: Adapter, base_url: str, prompts: list[list[int]], *, warmup: int,
                  concurrency: int, max_tokens: int, timeout_s: float | None = None,
                  timeouts: TimeoutParams | None = None, request_rate: RequestRateParams | None = None,
                  seed: int = 0, headers: dict[str, str] | None = None,
                  stop: str = "length", sampling: Sampling | None = None,
                  keep_text: bool = False, turn: int | None = None) -> CellDispatch:
    """Run ``warmup`` requests, then the rest: closed loop, or open loop at ``request_rate``.

    Args:
        timeout_s: a shorthand that sets the first-token, between-tokens and whole-request
            limits at once (tests and warmup); ``timeouts`` overrides it.
        timeouts: per-request limits (see :class:`~specbench_lib.model.sections.TimeoutParams`).
        request_rate: arrivals per second; None keeps ``concurrency`` requests in flight.
        seed: seeds the open-loop arrival times.
        headers: sent with every request (e.g. an attached server's bearer token).
        stop: ``length`` (exactly ``max_tokens``) or ``eos`` (the model's end, a cap).
        sampling: how the requests sample (None: greedy); each request gets its own seed,
            drawn from the sampling's and its prompt (:meth:`Sampling.for_prompt`).
        keep_text: keep each answer's text (``RequestRecord.output_text``: a conversation's
            turn 1, which turn 2 is built from).
        turn: a conversation's turn the requests are (``RequestRecord.turn``; None: none).
    """
    limits = resolve_timeouts(timeouts, timeout_s)
    with _no_collector():
        return run_sync(_dispatch(adapter, base_url, prompts, warmup=warmup,
                                  concurrency=concurrency, max_tokens=max_tokens, limits=limits,
                                  rate=request_rate, seed=seed, headers=headers, stop=stop,
                                  sampling=sampling, keep_text=keep_text, turn=turn))


@contextlib.contextmanager
def _no_collector() -> Iterator[None]:
    """No garbage collection while a cell's requests are in flight: a full collection of the
    sweep's heap (tens of ms) would stall the event loop and coalesce the reads it delays. The
    young garbage is collected before the cell, the survivors frozen out of later passes, and
    collection resumes after it. Not a full collection: that cost each cell 7-20 ms of CPU on a
    bare client's heap (more in a notebook's); the old generation's garbage waits for the
    collector's own full passes, which run between cells."""
    enabled = gc.isenabled()
    gc.collect(1)
    gc.freeze()
    gc.disable()
    try:
        yield
    finally:
        gc.unfreeze()
        if enabled:
            gc.enable()


async def _dispatch(adapter: Adapter, base_url: str, prompts: list[list[int]], *, warmup: int,
                    concurrency: int, max_tokens: int, limits: TimeoutParams,
                    rate: RequestRateParams | None, seed: int,
                    headers: dict[str, str] | None = None, stop: str = "length",
                    sampling: Sampling | None = None, keep_text: bool = False,
                    turn: int | None = None) -> CellDispatch:
    records = [RequestRecord(i, i < warmup, len(p), max_tokens, multi_reads=[], stalls=[],
                             stop=stop, turn=turn, output_text="" if warmup <= i < warmup + SAMPLE_ANSWERS
                             else None) for i, p in enumerate(prompts)]
    bodies = [_encoded(adapter.generation_request(
        p, max_tokens=max_tokens, stop=stop,
        sampling=None if sampling is None else sampling.for_prompt(p))) for p in prompts]
    tls = ssl.create_default_context() if base_url.startswith("https:") else None
    conns = [Connection(base_url, headers=headers, connect_timeout_s=limits.connect_s,
                        keepalive_s=_KEEPALIVE_S, ssl_context=tls)
             for _ in range(max(1, min(concurrency, len(prompts))))]
    watch = StallWatch()
    try:
        await _open_connections(conns, limits.connect_s)
        t0 = time.perf_counter()
        send = _Sender(adapter, deque(conns), bodies, t0, limits, watch, keep_text=keep_text)
        watch.start()
        await _closed_loop(send, records[:warmup], concurrency)
        window_start = send.clock()
        if rate is None:
            await _closed_loop(send, records[warmup:], concurrency)
        else:
            await _open_loop(send, records[warmup:], concurrency, rate, seed)
        window_end = send.clock()
        watch.stop()
    finally:
        watch.stop()
        for conn in conns:
            conn.close()
    stalls = tuple((a - t0, b - t0) for a, b in watch.stalls)
    for rec in records:  # the stalls a read of the request could have come right after
        rec.stalls = list(_overlapping(stalls, rec.start, rec.end))
    return CellDispatch(records, window_start, window_end, origin=t0,
                        target_rate=rate.per_s if rate is not None else None, stalls=stalls)


def _overlapping(stalls: tuple[tuple[float, float], ...], start: float,
                 end: float) -> tuple[tuple[float, float], ...]:
    """The stalls (in time order, apart) with ``end > start`` and ``start < end``: a bisection,
    not a pass over every stall of the cell for each request (a busy host has thousands)."""
    first = bisect.bisect_right(stalls, start, key=lambda s: s[1])
    last = bisect.bisect_left(stalls, end, lo=first, key=lambda s: s[0])
    return stalls[first:last]


_KEEPALIVE_S = 4.0  # idle connections are dropped before servers' own 5 s idle timeouts


async def _open_connections(conns: list[Connection], limit_s: float) -> None:
    """Open every request slot's connection before any timed window.

    Connection set-up then never falls inside a request's TTFT (a burst of new connections at a
    cell's start inflated TTFT p99 several-fold). Failures are ignored here: the measured
    requests meet them and record them.
    """
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(limit_s):
            await asyncio.gather(*(c.open() for c in conns), return_exceptions=True)


@dataclass
class _Sender:
    adapter: Adapter
    conns: deque[Connection]  # free request slots, one connection each, used in turn
    bodies: list[tuple[str, bytes]]  # each request's path and JSON body, encoded before the cell
    origin: float  # time.perf_counter() at the cell's time 0
    limits: TimeoutParams
    watch: StallWatch = field(default_factory=StallWatch)
    keep_text: bool = False  # keep each answer's text (RequestRecord.output_text)
    loop: asyncio.AbstractEventLoop = field(default_factory=asyncio.get_running_loop)

    def clock(self) -> float:
        return time.perf_counter() - self.origin

    async def __call__(self, rec: RequestRecord) -> None:
        conn = self.conns.popleft()  # never empty: at most one request per slot in flight
        try:
            await _one_request(self, conn, rec)
        finally:
            self.conns.append(conn)


async def _closed_loop(send: _Sender, records: list[RequestRecord], concurrency: int) -> None:
    queue = iter(records)  # the workers share it: each takes the next record when it is free

    async def worker() -> None:
        for rec in queue:
            await send(rec)

    await asyncio.gather(*(worker() for _ in range(min(concurrency, len(records)) or 1)))


async def _open_loop(send: _Sender, records: list[RequestRecord], concurrency: int,
                     rate: RequestRateParams, seed: int) -> None:
    slots = asyncio.Semaphore(concurrency)
    origin = send.clock()

    async def one(rec: RequestRecord) -> None:
        async with slots:
            await send(rec)

    tasks = []
    for rec, offset in zip(records, arrival_offsets(len(records), rate, seed), strict=True):
        rec.scheduled = origin + offset
        delay = rec.scheduled - send.clock()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(one(rec)))
    await asyncio.gather(*tasks)


def _encoded(request: tuple[str, dict[str, Any]]) -> tuple[str, bytes]:
    """A request's path and JSON body, encoded before the cell (a prompt of thousands of tokens
    costs 0.1 ms or more to encode: not while requests are in flight)."""
    return request[0], COMPACT_JSON.encode(request[1]).encode()


_MAX_ERROR_BODY = 1024 * 1024  # of an error answer's body, read for its text
COMPACT_JSON = json.JSONEncoder(separators=(",", ":"))  # json.dumps would build one per request
SAMPLE_ANSWERS, SAMPLE_CHARS = 3, 600  # a cell's readable answers: its first ones' text, cut


async def _one_request(send: _Sender, conn: Connection, rec: RequestRecord) -> None:
    adapter, origin = send.adapter, send.origin
    path, payload = send.bodies[rec.index]
    stream = Stream(adapter.stream_parser(), text=[] if send.keep_text or rec.output_text == "" else None)
    deadline = Deadline(rec, send.limits, send.clock, send.loop)

    def starting() -> None:
        rec.start = send.clock()  # queueing and connecting are not the server's time

    rec.start = send.clock()
    resp: Response | None = None
    try:
        deadline.arm()
        resp = await conn.request("POST", path, payload, on_send=starting)
        rec.status = resp.status_code
        if resp.status_code != 200:
            text = (await _read_some(resp, _MAX_ERROR_BODY)).decode(errors="replace")
            rec.error, rec.error_kind = text[:500], http_status(resp.status_code)
            return
        pending = b""
        # closed here, not by the garbage collector: its end would close a later connection
        async with contextlib.aclosing(resp.stream()) as pieces:
            async for data, arrived in pieces:
                *lines, pending = (pending + data).split(b"\n")
                # arrived: when the bytes were received, before any parsing
                if stream.take_read(rec, lines, arrived - origin, resp.read_at - origin):
                    return
                if stream.ended is not None:
                    pending = b""  # the rest of the body is only read to its end
                elif len(pending) > MAX_LINE:
                    rec.error, rec.error_kind = (f"a stream line over {MAX_LINE >> 20} MiB without "
                                                 f"a line break: {pending[:200]!r}", C.error_in_stream)
                    return
                if not deadline.tokens and rec.token_times:
                    deadline.first_token()
        stream.take_rest(rec, pending, send.clock())
    except asyncio.CancelledError:
        if not deadline.expired():
            raise
        rec.error, rec.error_kind = deadline.message(), C.timeout
    except ConnectTimeout as exc:
        rec.error, rec.error_kind = str(exc), C.timeout
    except HTTPError as exc:
        rec.error, rec.error_kind = str(exc), C.connection_error
    except Exception as exc:  # the last guard: nothing a server sends may end the sweep
        rec.error = f"{type(exc).__name__} while reading the answer: {exc}"[:500]
        rec.error_kind = C.connection_error
    finally:
        deadline.cancel()
        rec.end = send.clock() if stream.ended is None else stream.ended
        rec.text_sha = stream.digest.hexdigest()[:16]
        rec.reasoning = stream.opened_reasoning()
        if stream.text is not None:  # a turn 1's whole answer, or a sample's first characters
            rec.output_text = "".join(stream.text)[:None if send.keep_text else SAMPLE_CHARS]
        if resp is None or not resp.complete:
            conn.close()  # a response not read to its end leaves the connection unusable


async def _read_some(resp: Response, limit: int) -> bytes:
    """A body's first ``limit`` bytes (the rest, if any, is not read: the connection closes)."""
    out = b""
    async with contextlib.aclosing(resp.stream()) as pieces:
        async for data, _ in pieces:
            out += data
            if len(out) >= limit:
                break
    return out[:limit]
