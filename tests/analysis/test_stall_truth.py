"""The stall rule against the truth: the requests ``coalesced_reads`` names are the late ones.

Against a reference server's send log (benchmarks/stall_truth.py) the rule as it was flagged
the requests whose *read* came inside a stall, though their bytes had all arrived, and been
stamped, before it (instant answers at concurrency 8 and more: precision 0.24-0.56), and missed
the ones the kernel delivered late in one batch while the host starved the client. Here: an
injected client stall is flagged on exactly the requests whose first token it delayed, a server
that writes two chunks back to back to an idle client invalidates nothing, and the decisions on
stored records (a read in a stall of bytes stamped before it; a batch stamped in a stall).
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from sglang_refserver import RefServerProcess  # noqa: E402

from specbench_lib.analysis.coalescing import coalesced, late_firsts  # noqa: E402
from specbench_lib.analysis.validate import coalesced_reads, judge_cell  # noqa: E402
from specbench_lib.client import dispatch  # noqa: E402
from specbench_lib.client.http1 import Connection  # noqa: E402
from specbench_lib.model.records import CellDispatch, RequestRecord  # noqa: E402
from specbench_lib.servers.engines.sglang import SGLangAdapter  # noqa: E402

INTERVAL, TOKENS, CONCURRENCY = 0.01, 16, 4


def _log(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(f"{url}/log", timeout=10) as resp:
        return dict(json.loads(resp.read()))


def _dispatch(url: str, requests: int) -> CellDispatch:
    async def main() -> CellDispatch:
        return await dispatch._dispatch(
            SGLangAdapter(), url, [[i, 7, 7] for i in range(requests)], warmup=0,
            concurrency=CONCURRENCY, max_tokens=TOKENS,
            limits=dispatch._resolve_timeouts(None, 30.0), rate=None, seed=0)

    return asyncio.run(main())


def truly_late(result: CellDispatch, log: dict[str, Any]) -> set[int]:
    """The requests whose first token's stamp is later than the server's first send by more
    than 10 % of the true TTFT (and 1 ms)."""
    late = set()
    for rec in result.measured:
        entry = log[str(rec.index)]
        sent = entry["sends"][0]
        if result.origin + rec.token_times[0] - sent > max(0.1 * (sent - entry["recv"]), 0.001):
            late.add(rec.index)
    return late


def test_an_injected_stall_is_flagged_on_exactly_the_requests_it_delayed(
        monkeypatch: pytest.MonkeyPatch) -> None:
    sent = 0
    request = Connection.request

    async def blocking_after_the_first_round(self: Connection, *args: Any, **kwargs: Any) -> Any:
        nonlocal sent
        sent += 1
        if sent == CONCURRENCY:  # the first round is out: block before its first tokens come
            asyncio.get_running_loop().call_soon(time.sleep, 0.1)
        return await request(self, *args, **kwargs)

    monkeypatch.setattr(Connection, "request", blocking_after_the_first_round)
    with RefServerProcess(interval=INTERVAL, tokens_per_chunk=1) as server:
        _log(server.url)
        result = _dispatch(server.url, 2 * CONCURRENCY)
        log = _log(server.url)
    assert all(r.error_kind is None and len(r.token_times) == TOKENS for r in result.records)
    late = truly_late(result, log)
    assert set(range(CONCURRENCY)) <= late  # the truth: the stall made their first tokens late
    decided = late_firsts(result.measured)
    assert set(range(CONCURRENCY)) <= set(decided) <= late, (decided, late)
    assert all(decided[i] == "coalesced" for i in range(CONCURRENCY))
    verdict = judge_cell(result.records, server_alive=True)
    assert verdict.codes == {"coalesced_reads"}
    detail = verdict.reasons[0].detail
    assert "read together with later events after a client stall (requests 0, 1, 2, 3" in detail


def test_two_chunks_written_back_to_back_to_an_idle_client_invalidate_nothing() -> None:
    with RefServerProcess(interval=INTERVAL, tokens_per_chunk=1, together=2) as server:
        result = _dispatch(server.url, 2 * CONCURRENCY)
    assert all(rec.error_kind is None for rec in result.records)
    together = [r for r in result.records if r.token_times[0] == r.token_times[1]]  # one read
    assert 2 * len(together) >= len(result.records)  # (a fast client may read the first alone)
    assert all(any(first for _, _, first in r.multi_reads or []) for r in together)
    if not result.stalls:  # a loaded machine may stall the client for real
        assert late_firsts(result.measured) == {}
        assert all(coalesced(r) == (0, False) for r in result.records)
        assert judge_cell(result.records, server_alive=True).ok


def _instant(index: int, start: float, stamp: float, read_at: float,
             stalls: list[tuple[float, float]]) -> RequestRecord:
    """An instant answer: its 32 tokens in one read, stamped at ``stamp``."""
    return RequestRecord(index, False, 3, 32, status=200, start=start, end=stamp,
                         token_times=[stamp] * 32, chunk_sizes=[4] * 8,
                         multi_reads=[(read_at, 28, True)], stalls=stalls)


def test_a_read_in_a_stall_of_bytes_stamped_before_it_is_not_late() -> None:
    """The rule's old mistake: a read 4 ms into a stall took an instant answer whose bytes had
    arrived 0.2 ms after the request, before the stall; its TTFT is right."""
    rec = _instant(0, 0.0, 0.0002, 0.008, [(0.004, 0.02)])
    assert coalesced(rec) == (0, False) and late_firsts([rec]) == {}
    # stamped inside the stall, alone: one delivery's worth, sent together, not late either
    alone = _instant(0, 0.0, 0.006, 0.008, [(0.004, 0.02)])
    assert coalesced(alone) == (0, False) and late_firsts([alone]) == {}


def test_first_tokens_stamped_in_one_batch_while_the_client_was_starved_are_late() -> None:
    """Requests sent 1 ms apart whose answers were all stamped within microseconds of each
    other, inside a client stall: the kernel delivered them in one batch, late."""
    stall = [(0.002, 0.03)]
    batch = [_instant(i, 0.001 * i, 0.02 + 2e-6 * i, 0.031, stall) for i in range(4)]
    batch.append(_instant(4, 0.0005, 0.0009, 0.0012, stall))  # answered before the stall
    assert late_firsts(batch) == {i: "batched" for i in range(4)}
    reason = coalesced_reads(batch, 0.05, 0.01)
    assert reason is not None and "4 of 5 first tokens (80.0%), in 4 of 5 requests" in reason.detail
    assert ("4 stamped in one batch the kernel delivered late while the host starved the client "
            "(requests 0, 1, 2, 3)") in reason.detail
    # the same batch with the client running (a server answering a batch at once): not late
    running = [_instant(r.index, r.start, r.token_times[0], r.token_times[0] + 1e-4, [])
               for r in batch]
    assert late_firsts(running) == {} and coalesced_reads(running, 0.05, 0.01) is None
    # a schema-2 record keeps the flag decided while it was measured, and joins no batch
    old = RequestRecord(9, False, 3, 32, status=200, token_times=[0.02] * 32,
                        first_token_coalesced=True)
    assert late_firsts([old]) == {9: "coalesced"}
