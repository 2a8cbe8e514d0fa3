"""A client that stays cheap and does not stall itself (issue 24).

Its CPU per request is a benchmark's figure (benchmarks/client_overhead.py), never a timed
assertion here. These tests keep what the cheaper path must still do: the limits hold with one
lazy timer per request, a cancelled cell is not a timeout, blank stream lines never reach a
parser, the stalls a request keeps are those it overlaps, a numeric host is not looked up in a
thread pool, bodies are encoded before the cell, ``TCP_QUICKACK`` is set where it releases
something, and after :func:`~specbench_lib.client.warmclient.warm_client` a cell's dispatch (its host
sampler included) imports no module.
"""

from __future__ import annotations

import asyncio
import json
import random
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from fake_server import FakeLlamaServer
from reference_server import ReferenceServer

from specbench_lib.analysis.validate import judge_cell
from specbench_lib.client import dispatch, warmclient, wire
from specbench_lib.client.deadline import resolve_timeouts
from specbench_lib.client.streamread import Stream
from specbench_lib.model.records import RequestRecord
from specbench_lib.model.sections import TimeoutParams
from specbench_lib.servers.engines.base import StreamEvent
from specbench_lib.servers.engines.llamacpp import LlamaCppAdapter

ROOT = Path(__file__).resolve().parents[2]


def test_a_limit_that_tokens_keep_moving_does_not_fire() -> None:
    """The timer is set for 0.25 s after the start and fires while tokens still come every
    0.1 s: the limit has moved on, so it is set again, and the request ends ok after 0.6 s."""
    with ReferenceServer(interval=0.1, tokens_per_chunk=1) as server:
        result = dispatch.dispatch_cell(
            LlamaCppAdapter(), server.url, [[1, 2, 3]], warmup=0, concurrency=1, max_tokens=6,
            timeouts=TimeoutParams(first_token_s=0.25, between_tokens_s=0.25, request_s=5))
    rec = result.records[0]
    assert rec.error is None and len(rec.token_times) == 6 and rec.e2e > 0.5
    assert judge_cell(result.records, server_alive=True).ok


def test_a_cancelled_cell_is_cancelled_not_recorded_as_a_timeout() -> None:
    """Ctrl-C cancels the cell's task: that cancellation is not a request's limit."""

    async def main(url: str) -> None:
        task = asyncio.create_task(dispatch._dispatch(
            LlamaCppAdapter(), url, [[1, 2, 3]] * 2, warmup=0, concurrency=2, max_tokens=4,
            limits=resolve_timeouts(TimeoutParams(first_token_s=30, request_s=60), None),
            rate=None, seed=0))
        await asyncio.sleep(0.3)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    with FakeLlamaServer("hang", hang_s=3.0) as server:
        asyncio.run(main(server.url))


def test_blank_lines_never_reach_the_parser_and_a_read_of_several_events_is_kept() -> None:
    seen: list[str] = []

    def parse(line: str) -> StreamEvent | None:
        seen.append(line)
        return StreamEvent(n_tokens=1, text="t") if line.startswith("data:") else None

    rec = RequestRecord(0, False, 3, 8, multi_reads=[], stalls=[])
    stream = Stream(parse)
    assert not stream.take_read(rec, [b"data: 1", b"", b"\r", b"data: 2", b""], 1.0, 1.5)
    assert seen == ["data: 1", "data: 2"]
    assert rec.token_times == [1.0, 1.0] and rec.multi_reads == [(1.5, 1, True)]
    assert not stream.take_read(rec, [b"data: 3", b"", b": comment", b"data: 4"], 2.0, 2.5)
    assert rec.multi_reads == [(1.5, 1, True), (2.5, 1, False)] and stream.sse_only


def test_the_stalls_a_request_keeps_are_those_it_overlaps() -> None:
    rng = random.Random(5)
    stalls, t = [], 0.0
    for _ in range(300):  # in time order and apart, as the stall watch keeps them
        t += rng.uniform(0.001, 0.05)
        end = t + rng.uniform(0.0001, 0.01)
        stalls.append((t, end))
        t = end
    kept = tuple(stalls)
    for _ in range(500):
        start = rng.uniform(-0.1, t + 0.1)
        end = start + rng.uniform(0, 0.5)
        assert dispatch._overlapping(kept, start, end) == tuple(
            (a, b) for a, b in kept if b > start and a < end)


def test_a_numeric_host_is_not_looked_up_in_the_loops_thread_pool() -> None:
    listener = socket.create_server(("127.0.0.1", 0))

    async def main() -> None:
        loop = asyncio.get_running_loop()

        async def no_lookup(*args: Any, **kwargs: Any) -> Any:
            raise AssertionError("looked up in the thread pool")

        loop.getaddrinfo = no_lookup  # type: ignore[method-assign]
        sock = await wire.open_socket(loop, "127.0.0.1", listener.getsockname()[1])
        sock.close()

    with listener:
        asyncio.run(main())


def test_bodies_are_encoded_before_the_first_request_goes_out() -> None:
    events: list[str] = []

    class Recording(LlamaCppAdapter):
        def generation_request(self, prompt: list[int], *, max_tokens: int,
                               stop: str = "length", sampling: Any = None) -> Any:
            events.append("encoded")
            return super().generation_request(prompt, max_tokens=max_tokens, stop=stop,
                                              sampling=sampling)

        def stream_parser(self) -> Any:
            events.append("sent")
            return super().stream_parser()

    with FakeLlamaServer("ok") as server:
        result = dispatch.dispatch_cell(Recording(), server.url, [[1, 2, 3]] * 4, warmup=0,
                                        concurrency=2, max_tokens=4, timeout_s=10)
    assert all(r.error is None for r in result.records)
    assert events == ["encoded"] * 4 + ["sent"] * 4


class _Recorder:
    """A socket whose ``setsockopt`` calls are kept (the rest is the real socket's)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock, self.options = sock, []

    def setsockopt(self, level: int, option: int, value: int) -> None:
        self.options.append(option)
        self.sock.setsockopt(level, option, value)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.sock, name)


@pytest.mark.skipif(wire.SO_TIMESTAMPNS is None or wire.TCP_QUICKACK is None,
                    reason="kernel receive stamps and TCP_QUICKACK: Linux")
def test_quickack_follows_every_read_but_the_one_that_ends_a_chunked_body() -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    replies = [b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
               b"5\r\ntoken\r\n", b"5\r\ntoken\r\n0\r\n\r\n"]

    async def main() -> list[list[int]]:
        loop = asyncio.get_running_loop()
        sock = await wire.open_socket(loop, "127.0.0.1", listener.getsockname()[1])
        peer, _ = await loop.run_in_executor(None, listener.accept)
        piece = wire.KernelStampedWire(sock)
        recorder = _Recorder(sock)
        piece.sock = recorder  # type: ignore[assignment]
        calls = []
        with peer:
            for reply in replies:
                before = len(recorder.options)
                peer.sendall(reply)
                data, _ = await piece.read()
                assert data == reply
                calls.append(recorder.options[before:])
        piece.close()
        return calls

    with listener:
        calls = asyncio.run(main())
    assert calls == [[wire.TCP_QUICKACK], [wire.TCP_QUICKACK], []]


_FIRST_USE = """
import json, sys
sys.path.insert(0, {tests!r})
from reference_server import ReferenceServer
import specbench_lib, specbench_lib.sweep.serversweep
from specbench_lib.client.dispatch import dispatch_cell
from specbench_lib.client.warmclient import warm_client
from specbench_lib.servers.engines.llamacpp import LlamaCppAdapter
from specbench_lib.host.load import HostSampler
with ReferenceServer(interval=0.001, tokens_per_chunk=1) as server:
    if {warm}:
        warm_client(server.url)
    before = set(sys.modules)
    with HostSampler(server=()):
        result = dispatch_cell(LlamaCppAdapter(), server.url, [[1, 2, 3]] * 4, warmup=0,
                               concurrency=2, max_tokens=8, timeout_s=10)
    ok = all(r.error is None for r in result.records)
print(json.dumps({{"ok": ok, "imported": sorted(set(sys.modules) - before)}}))
"""


def _first_dispatch(warm: bool) -> dict[str, Any]:
    code = _FIRST_USE.format(tests=str(ROOT / "tests" / "support"), warm=warm)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, cwd=ROOT, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_after_warm_client_a_cells_dispatch_imports_nothing() -> None:
    """In a fresh interpreter (the front door and the sweep imported), the first cell, host
    sampler and all, imports no module once the client was warmed; cold, the address lookup's
    codec comes in with the first request slots."""
    warmed = _first_dispatch(warm=True)
    assert warmed == {"ok": True, "imported": []}
    cold = _first_dispatch(warm=False)
    assert cold["ok"] and cold["imported"], "nothing left to warm: the test no longer tells"


def test_warm_client_never_fails_a_sweep() -> None:
    errors: list[BaseException] = []

    def warm() -> None:
        try:
            warmclient.warm_client("http://no-such-host.invalid:1", host=False)
        except BaseException as exc:  # noqa: BLE001 (what the test looks for)
            errors.append(exc)

    thread = threading.Thread(target=warm)
    thread.start()
    thread.join(30)
    assert not thread.is_alive() and errors == []
