"""Send a cell's requests: async httpx, fixed concurrency, streaming, a timestamp per token."""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import time
from collections.abc import Coroutine
from dataclasses import asdict, dataclass, field
from typing import Any, TypeVar

import httpx

from .engines import Adapter, FinalStats

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

    @property
    def measured(self) -> list[RequestRecord]:
        return [r for r in self.records if not r.warmup]


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to completion from sync code, even inside a running loop (Jupyter)."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coro).result()


def dispatch_cell(adapter: Adapter, base_url: str, prompts: list[list[int]], *, warmup: int,
                  concurrency: int, max_tokens: int, timeout_s: float) -> CellDispatch:
    """Run ``warmup`` requests, then the rest with ``concurrency`` in flight (closed loop)."""
    return run_sync(_dispatch(adapter, base_url, prompts, warmup=warmup, concurrency=concurrency,
                              max_tokens=max_tokens, timeout_s=timeout_s))


async def _dispatch(adapter: Adapter, base_url: str, prompts: list[list[int]], *, warmup: int,
                    concurrency: int, max_tokens: int, timeout_s: float) -> CellDispatch:
    timeout = httpx.Timeout(timeout_s, connect=10.0)
    limits = httpx.Limits(max_connections=concurrency + 1)
    records = [RequestRecord(i, i < warmup, len(p), max_tokens) for i, p in enumerate(prompts)]
    async with httpx.AsyncClient(base_url=base_url, timeout=timeout, limits=limits) as client:
        t0 = time.perf_counter()
        clock = lambda: time.perf_counter() - t0  # noqa: E731
        warm = records[:warmup]
        measured = records[warmup:]
        await _closed_loop(adapter, client, prompts, warm, concurrency, max_tokens, clock)
        window_start = clock()
        await _closed_loop(adapter, client, prompts, measured, concurrency, max_tokens, clock)
        window_end = clock()
    return CellDispatch(records, window_start, window_end)


async def _closed_loop(adapter: Adapter, client: httpx.AsyncClient, prompts: list[list[int]],
                       records: list[RequestRecord], concurrency: int, max_tokens: int,
                       clock: Any) -> None:
    queue: asyncio.Queue[RequestRecord] = asyncio.Queue()
    for rec in records:
        queue.put_nowait(rec)

    async def worker() -> None:
        while not queue.empty():
            rec = queue.get_nowait()
            await _one_request(adapter, client, prompts[rec.index], rec, max_tokens, clock)

    await asyncio.gather(*(worker() for _ in range(min(concurrency, len(records)) or 1)))


async def _one_request(adapter: Adapter, client: httpx.AsyncClient, prompt: list[int],
                       rec: RequestRecord, max_tokens: int, clock: Any) -> None:
    timeout_s = client.timeout.read
    path, body = adapter.generation_request(prompt, max_tokens=max_tokens)
    digest = hashlib.sha256()
    rec.start = clock()
    try:
        async with client.stream("POST", path, json=body) as resp:
            rec.status = resp.status_code
            if resp.status_code != 200:
                text = (await resp.aread()).decode(errors="replace")
                rec.error, rec.error_kind = text[:500], f"http_{resp.status_code}"
                return
            async for line in resp.aiter_lines():
                event = adapter.parse_line(line)
                if event is None:
                    continue
                if event.error is not None:
                    rec.error, rec.error_kind = event.error, "error_in_stream"
                    return
                if event.n_tokens:
                    now = clock()
                    rec.token_times.extend([now] * event.n_tokens)
                    rec.chunk_sizes.append(event.n_tokens)
                digest.update(event.text.encode())
                if event.final is not None:
                    rec.final = event.final
                if event.done:
                    break
    except httpx.TimeoutException as exc:
        rec.error = f"{type(exc).__name__}: no answer within {timeout_s} s"
        rec.error_kind = "timeout"
    except httpx.TransportError as exc:
        rec.error, rec.error_kind = f"{type(exc).__name__}: {exc}", "connection_error"
    finally:
        rec.end = clock()
        rec.text_sha = digest.hexdigest()[:16]
