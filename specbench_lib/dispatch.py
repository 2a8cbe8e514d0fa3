"""Send a cell's requests: async httpx, streaming, a timestamp per token, limits per request.

Requests go out in a closed loop (``concurrency`` in flight) or, with a request rate, on a seeded
open-loop schedule (Poisson or evenly spaced arrivals, still at most ``concurrency`` in flight).
Each request has its own connect, first-token, between-tokens and whole-request time limits; a
request that fails is recorded as failed and never retried.
"""

from __future__ import annotations

import asyncio
import hashlib
import random
import threading
import time
from collections.abc import Coroutine
from dataclasses import asdict, dataclass, field
from typing import Any, TypeVar

import httpx

from .engines import Adapter, FinalStats
from .params import RequestRateParams, TimeoutParams

T = TypeVar("T")


@dataclass
class RequestRecord:
    """Everything observed about one request; times are seconds from the cell's start."""

    index: int
    warmup: bool
    prompt_tokens_planned: int
    max_tokens: int
    status: int | None = None
    error: str | None = None
    error_kind: str | None = None
    start: float = 0.0
    end: float = 0.0
    token_times: list[float] = field(default_factory=list)
    chunk_sizes: list[int] = field(default_factory=list)
    final: FinalStats | None = None
    text_sha: str = ""
    output_ids: list[int] = field(default_factory=list)
    scheduled: float | None = None  # open loop: when the schedule said to send it

    @property
    def ttft(self) -> float | None:
        return self.token_times[0] - self.start if self.token_times else None

    @property
    def e2e(self) -> float:
        return self.end - self.start

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["ttft"] = self.ttft
        data["e2e"] = self.e2e
        return data


@dataclass
class CellDispatch:
    records: list[RequestRecord]
    window_start: float
    window_end: float
    origin: float = 0.0  # time.perf_counter() at the cell's time 0 (records are relative to it)

    @property
    def measured(self) -> list[RequestRecord]:
        return [r for r in self.records if not r.warmup]


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to completion from sync code, even inside a running loop (Jupyter).

    The coroutine runs on its own loop in a worker thread. Ctrl-C (KeyboardInterrupt in the
    calling thread) cancels it at once, so an interrupted cell does not wait for its requests.
    """
    loop = asyncio.new_event_loop()
    task = loop.create_task(coro)
    box: dict[str, Any] = {}

    def target() -> None:
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
        loop.call_soon_threadsafe(task.cancel)
        worker.join(5.0)
        raise
    if "error" in box:
        raise box["error"]
    return box["result"]


def dispatch_cell(adapter: Adapter, base_url: str, prompts: list[list[int]], *, warmup: int,
                  concurrency: int, max_tokens: int, timeout_s: float | None = None,
                  timeouts: TimeoutParams | None = None, request_rate: RequestRateParams | None = None,
                  seed: int = 0, headers: dict[str, str] | None = None) -> CellDispatch:
    """Run ``warmup`` requests, then the rest: closed loop, or open loop at ``request_rate``.

    Args:
        timeout_s: a shorthand that sets the first-token, between-tokens and whole-request
            limits at once (tests and warmup); ``timeouts`` overrides it.
        timeouts: per-request limits (see :class:`~specbench_lib.params.TimeoutParams`).
        request_rate: arrivals per second; None keeps ``concurrency`` requests in flight.
        seed: seeds the open-loop arrival times.
        headers: sent with every request (e.g. an attached server's bearer token).
    """
    limits = _resolve_timeouts(timeouts, timeout_s)
    return run_sync(_dispatch(adapter, base_url, prompts, warmup=warmup, concurrency=concurrency,
                              max_tokens=max_tokens, limits=limits, rate=request_rate, seed=seed,
                              headers=headers))


def arrival_offsets(n: int, rate: RequestRateParams, seed: int) -> list[float]:
    """Seconds from the window's start at which each of ``n`` open-loop requests is due."""
    rng = random.Random(seed)
    offsets, t = [], 0.0
    for _ in range(n):
        offsets.append(t)
        t += rng.expovariate(rate.per_s) if rate.arrival == "poisson" else 1.0 / rate.per_s
    return offsets


def _resolve_timeouts(timeouts: TimeoutParams | None, timeout_s: float | None) -> TimeoutParams:
    if timeouts is not None:
        return timeouts if timeouts.request_s is not None else timeouts.model_copy(
            update={"request_s": timeout_s or 120.0})
    if timeout_s is None:
        return TimeoutParams(request_s=120.0)
    return TimeoutParams(first_token_s=timeout_s, between_tokens_s=timeout_s, request_s=timeout_s)


async def _dispatch(adapter: Adapter, base_url: str, prompts: list[list[int]], *, warmup: int,
                    concurrency: int, max_tokens: int, limits: TimeoutParams,
                    rate: RequestRateParams | None, seed: int,
                    headers: dict[str, str] | None = None) -> CellDispatch:
    timeout = httpx.Timeout(limits.request_s, connect=limits.connect_s)
    limit_conns = httpx.Limits(max_connections=concurrency + 1)
    records = [RequestRecord(i, i < warmup, len(p), max_tokens) for i, p in enumerate(prompts)]
    async with httpx.AsyncClient(base_url=base_url, timeout=timeout, limits=limit_conns,
                                 headers=headers) as client:
        t0 = time.perf_counter()
        clock = lambda: time.perf_counter() - t0  # noqa: E731
        warm = records[:warmup]
        measured = records[warmup:]
        send = _Sender(adapter, client, prompts, max_tokens, clock, limits)
        await _closed_loop(send, warm, concurrency)
        window_start = clock()
        if rate is None:
            await _closed_loop(send, measured, concurrency)
        else:
            await _open_loop(send, measured, concurrency, rate, seed)
        window_end = clock()
    return CellDispatch(records, window_start, window_end, origin=t0)


class _RequestTimeout(Exception):
    def __init__(self, which: str, seconds: float) -> None:
        super().__init__(f"{which} limit of {seconds:g} s exceeded")


@dataclass
class _Sender:
    adapter: Adapter
    client: httpx.AsyncClient
    prompts: list[list[int]]
    max_tokens: int
    clock: Any
    limits: TimeoutParams

    async def __call__(self, rec: RequestRecord) -> None:
        await _one_request(self, rec)


async def _closed_loop(send: _Sender, records: list[RequestRecord], concurrency: int) -> None:
    queue: asyncio.Queue[RequestRecord] = asyncio.Queue()
    for rec in records:
        queue.put_nowait(rec)

    async def worker() -> None:
        while not queue.empty():
            await send(queue.get_nowait())

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


async def _within(awaitable: Coroutine[Any, Any, T], rec: RequestRecord, send: _Sender) -> T:
    """Await ``awaitable`` within the request's first-token/between-tokens and whole limits."""
    limits = send.limits
    total = float(limits.request_s or 0.0)
    if rec.token_times:
        which, since, gap = "between_tokens", rec.token_times[-1], limits.between_tokens_s
    else:
        which, since, gap = "first_token", rec.start, limits.first_token_s
    if rec.start + total < since + gap:
        which, since, gap = "request", rec.start, total
    remaining = since + gap - send.clock()
    try:
        if remaining <= 0:
            raise asyncio.TimeoutError
        return await asyncio.wait_for(awaitable, remaining)
    except asyncio.TimeoutError:
        if asyncio.iscoroutine(awaitable):
            awaitable.close()
        raise _RequestTimeout(which, gap) from None


async def _one_request(send: _Sender, rec: RequestRecord) -> None:
    adapter, clock = send.adapter, send.clock
    path, body = adapter.generation_request(send.prompts[rec.index], max_tokens=send.max_tokens)
    parse = adapter.stream_parser()  # per stream: some engines send cumulative counts
    digest = hashlib.sha256()
    rec.start = clock()
    resp: httpx.Response | None = None
    lines: Any = None
    try:
        request = send.client.build_request("POST", path, json=body)
        resp = await _within(send.client.send(request, stream=True), rec, send)
        rec.status = resp.status_code
        if resp.status_code != 200:
            text = (await _within(resp.aread(), rec, send)).decode(errors="replace")
            rec.error, rec.error_kind = text[:500], f"http_{resp.status_code}"
            return
        lines = resp.aiter_lines()
        while True:
            try:
                line = await _within(lines.__anext__(), rec, send)
            except StopAsyncIteration:
                break
            event = parse(line)
            if event is None:
                continue
            if event.error is not None:
                rec.error, rec.error_kind = event.error, "error_in_stream"
                return
            if event.n_tokens:
                now = clock()
                rec.token_times.extend([now] * event.n_tokens)
                rec.chunk_sizes.append(event.n_tokens)
                rec.output_ids.extend(event.token_ids)
            digest.update(event.text.encode())
            if event.final is not None:
                rec.final = event.final
            if event.done:
                break
    except _RequestTimeout as exc:
        rec.error, rec.error_kind = f"{exc} after {len(rec.token_times)} tokens", "timeout"
    except httpx.TimeoutException as exc:
        rec.error, rec.error_kind = f"{type(exc).__name__}: {exc}", "timeout"
    except httpx.TransportError as exc:
        rec.error, rec.error_kind = f"{type(exc).__name__}: {exc}", "connection_error"
    finally:
        rec.end = clock()
        rec.text_sha = digest.hexdigest()[:16]
        await _close(lines, resp)


async def _close(lines: Any, resp: httpx.Response | None) -> None:
    """Close the line iterator and the response, also after a cancelled read."""
    try:
        if lines is not None:
            await lines.aclose()
    except (RuntimeError, httpx.HTTPError):
        pass
    if resp is not None:
        await resp.aclose()
