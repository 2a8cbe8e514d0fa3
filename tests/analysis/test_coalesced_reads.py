"""Coalesced reads: token times a client stall took are counted, and judged.

A read's kernel stamp is its last segment's arrival. Events that queued while the client did not
run are read at once and all carry the last one's time (ITL gaps of 0, a late TTFT): after a
0.6 s stall at concurrency 64 a cell read TTFT +486 % and was ``ok``. Here the client's loop is
blocked while a reference server streams; a genuine burst (several events in one server write,
read promptly) must not be counted.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from burst_server import BurstServer
from cellfactory import make_cell
from paramsfiles import TINY, write_params
from reference_server import ReferenceServer

from specbench_lib.analysis.analyse import verdict_of
from specbench_lib.analysis.coalescing import cell_pace, coalesced, late_firsts
from specbench_lib.analysis.validate import coalesced_reads, judge_cell, judge_requests
from specbench_lib.client import dispatch
from specbench_lib.client.deadline import resolve_timeouts
from specbench_lib.client.http1 import Connection
from specbench_lib.core.errors import ParamsError
from specbench_lib.model.hostfacts import HostLoad
from specbench_lib.model.plan import load_plan
from specbench_lib.model.records import CellDispatch, CellFacts, CellRecord, JudgeInputs, RequestRecord
from specbench_lib.servers.engines.llamacpp import LlamaCppAdapter

INTERVAL, TOKENS, CONCURRENCY = 0.01, 64, 4


def run_blocked(url: str, *, block_at: float | None, block_s: float, requests: int,
                tokens: int = TOKENS) -> CellDispatch:
    """Dispatch a cell while the loop is blocked (``time.sleep`` in a callback) for ``block_s``
    from ``block_at`` seconds after the start."""

    async def main() -> CellDispatch:
        if block_at is not None:
            asyncio.get_running_loop().call_later(block_at, time.sleep, block_s)
        return await dispatch._dispatch(
            LlamaCppAdapter(), url, [[1, 2, 3]] * requests, warmup=0, concurrency=CONCURRENCY,
            max_tokens=tokens, limits=resolve_timeouts(None, 30.0), rate=None, seed=0)

    return asyncio.run(main())


def lost_tokens(rec: RequestRecord) -> int:
    """The tokens of ``rec`` a client stall took, as decided on read from its stored reads."""
    return coalesced(rec)[0]


def first_lost(rec: RequestRecord) -> bool:
    return coalesced(rec)[1]


def zero_gaps(rec: RequestRecord) -> int:
    return sum(b == a for a, b in zip(rec.token_times, rec.token_times[1:], strict=False))


def test_a_client_stall_marks_the_queued_tokens_coalesced_and_the_cell_invalid() -> None:
    with ReferenceServer(interval=INTERVAL, tokens_per_chunk=1) as server:
        result = run_blocked(server.url, block_at=0.15, block_s=0.3, requests=CONCURRENCY)
    assert any(b - a >= 0.25 for a, b in result.stalls), result.stalls  # the watch saw it
    for rec in result.records:
        assert rec.error_kind is None and len(rec.token_times) == TOKENS
        # about 0.3 s / 10 ms tokens queued in each stream; every one but the last of the read
        # that took them carries its time (a gap of 0), and is counted
        assert 20 <= lost_tokens(rec) <= 31, lost_tokens(rec)
        assert zero_gaps(rec) >= lost_tokens(rec)
        assert not first_lost(rec)  # the first tokens came before the stall
    verdict = judge_cell(result.records, server_alive=True)
    assert verdict.status == "invalid" and verdict.codes == {"coalesced_reads"}, verdict.reasons
    (reason,) = verdict.reasons
    lost = sum(lost_tokens(r) for r in result.records)
    assert reason.detail.startswith(f"{lost} of {TOKENS * CONCURRENCY} measured tokens")
    assert "max_coalesced_fraction 0.05, max_coalesced_first_fraction 0.01" in reason.detail
    assert "fewer concurrent requests or on a quieter client host" in reason.detail
    # the threshold comes from the cell's judge inputs: a tolerant one lets it through
    assert judge_cell(result.records, server_alive=True, max_coalesced_fraction=0.5).ok
    # a CPU engine not kept off the client's core (engine.cpus null) is named as the cause
    spinning = HostLoad(cpus=2, window_s=5, server_cpu_cores=1.93, own_cpu_cores=0.12)
    named = judge_requests(result.records, CellFacts(host=spinning),
                           JudgeInputs(planned=CONCURRENCY)).reasons[0].detail
    assert named.startswith(reason.detail) and "ran on the client's core" in named


def test_a_stall_before_the_first_tokens_makes_the_ttft_coalesced(
        monkeypatch: pytest.MonkeyPatch) -> None:
    sent = 0
    request = Connection.request

    async def blocking_after_the_last_send(self: Connection, *args: Any, **kwargs: Any) -> Any:
        nonlocal sent
        sent += 1
        if sent == CONCURRENCY:  # every request is out: block before their first tokens come
            asyncio.get_running_loop().call_soon(time.sleep, 0.1)
        return await request(self, *args, **kwargs)

    monkeypatch.setattr(Connection, "request", blocking_after_the_last_send)
    with ReferenceServer(interval=INTERVAL, tokens_per_chunk=1) as server:
        result = run_blocked(server.url, block_at=None, block_s=0, requests=CONCURRENCY,
                             tokens=16)
    assert all(first_lost(r) for r in result.records), [
        (r.start, r.token_times[:2], lost_tokens(r)) for r in result.records]
    assert all(r.ttft is not None and r.ttft > 0.09 for r in result.records)  # late, as feared
    reason = coalesced_reads(result.records, 0.01)
    assert reason is not None and f"{CONCURRENCY} of {CONCURRENCY} first tokens" in reason.detail


def test_a_stall_over_a_whole_streamed_answer_is_coalesced(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A client stall from the send of a request to past its last token: the whole stream comes
    in one read, one stamp for every token (no decode time, a TTFT of the stall's length). It
    was read as an instant answer and the cell was ``ok`` (a split of its speedup then measured
    11 of 12 prompts, tests/analysis/test_stepcost.py); its cell's other requests streamed,
    so by their pace it is coalesced."""
    sent = 0
    request = Connection.request

    async def blocking_after_the_second_send(self: Connection, *args: Any, **kwargs: Any) -> Any:
        nonlocal sent
        sent += 1
        if sent == 2:  # the whole second answer (32 tokens × 10 ms) queues in the stall
            asyncio.get_running_loop().call_soon(time.sleep, 0.6)
        return await request(self, *args, **kwargs)

    monkeypatch.setattr(Connection, "request", blocking_after_the_second_send)
    with ReferenceServer(interval=INTERVAL, tokens_per_chunk=1) as server:
        result = asyncio.run(dispatch._dispatch(
            LlamaCppAdapter(), server.url, [[1, 2, 3]] * 4, warmup=0, concurrency=1,
            max_tokens=32, limits=resolve_timeouts(None, 30.0), rate=None, seed=0))
    whole = result.records[1]
    assert len(set(whole.token_times)) == 1 and len(whole.token_times) == 32, whole.token_times
    assert coalesced(whole) == (0, False)  # alone it reads as an instant answer
    assert coalesced(whole, cell_pace(result.records)) == (31, True)
    assert late_firsts(result.records) == {1: "coalesced"}
    verdict = judge_cell(result.records, server_alive=True)
    assert verdict.status == "invalid" and verdict.codes == {"coalesced_reads"}, verdict.reasons
    # a cell of instant answers has no pace: one read each stays on time (test_stall_truth.py)
    assert cell_pace([whole]) is None


def test_without_a_stall_nothing_is_coalesced() -> None:
    with ReferenceServer(interval=INTERVAL, tokens_per_chunk=1) as server:
        result = run_blocked(server.url, block_at=None, block_s=0, requests=CONCURRENCY)
    if not result.stalls:  # a loaded machine may stall the client for real
        assert all(lost_tokens(r) == 0 for r in result.records)
    assert judge_cell(result.records, server_alive=True).ok


def test_a_genuine_burst_read_promptly_is_not_coalesced() -> None:
    with BurstServer() as server:
        result = run_blocked(server.url, block_at=None, block_s=0, requests=CONCURRENCY, tokens=32)
    for rec in result.records:
        assert rec.error_kind is None and rec.chunk_sizes == [1] * 32  # one event per token
        assert zero_gaps(rec) >= 24  # the bursts were read together: 3 of each 4 gaps are 0
        if not result.stalls:  # a loaded machine may stall the client for real
            assert lost_tokens(rec) == 0 and not first_lost(rec)
    assert judge_cell(result.records, server_alive=True).ok


def test_a_burst_read_after_a_stall_is_counted() -> None:
    with BurstServer() as server:
        result = run_blocked(server.url, block_at=0.05, block_s=0.1, requests=CONCURRENCY,
                             tokens=32)
    # 0.1 s holds about five bursts: all their events but the read's last are counted
    assert all(lost_tokens(rec) >= 12 for rec in result.records), [
        lost_tokens(r) for r in result.records]


def test_old_records_without_the_fields_load_and_are_judged_as_before() -> None:
    rec = RequestRecord(0, False, 3, 2, status=200, token_times=[0.1, 0.2], chunk_sizes=[1, 1])
    data = rec.to_dict()
    assert data["coalesced_tokens"] == 0 and data["first_token_coalesced"] is False
    del data["coalesced_tokens"], data["first_token_coalesced"]
    old = RequestRecord.from_dict(data)
    assert old.coalesced_tokens == 0 and not old.first_token_coalesced
    marked = RequestRecord.from_dict({**rec.to_dict(), "coalesced_tokens": 1,
                                      "first_token_coalesced": True})
    assert marked.coalesced_tokens == 1 and marked.first_token_coalesced
    schema3 = {"planned": 1, "max_failed_fraction": 0.0}  # written before the rule: its default
    assert JudgeInputs.from_dict(schema3).thresholds["max_coalesced_fraction"] == 0.05


def test_the_verdict_on_read_takes_the_cells_threshold() -> None:
    cell = make_cell("auto", "auto", None, outputs=[[1]] * 4)  # 4 requests of 16 tokens
    hit = [replace(r, coalesced_tokens=4 * (r.index == 3)) for r in cell.requests]  # 4 of 64
    stored = CellRecord.from_dict({**cell.to_dict(), "requests": [r.to_dict() for r in hit]})
    assert verdict_of(cell).ok and verdict_of(stored).codes == {"coalesced_reads"}
    data = stored.to_dict()
    data["judge"]["thresholds"]["max_coalesced_fraction"] = 0.1  # as params said when it was measured
    assert verdict_of(CellRecord.from_dict(data)).ok
    late = [replace(r, first_token_coalesced=r.index == 3) for r in cell.requests]  # 1 of 4 TTFTs
    first = CellRecord.from_dict({**cell.to_dict(), "requests": [r.to_dict() for r in late]})
    assert verdict_of(first).codes == {"coalesced_reads"}
    # the reason says how many requests it touched and the smallest counts that trip it here
    detail = verdict_of(first).reasons[0]
    assert "0 of 64 measured tokens (0.0%) and 1 of 4 first tokens (25.0%), in 1 of 4 requests" in detail
    assert "at this cell's size 4 tokens or 1 first tokens trip it" in detail
    data2 = first.to_dict()
    data2["judge"]["thresholds"]["max_coalesced_first_fraction"] = 0.25
    assert verdict_of(CellRecord.from_dict(data2)).ok
    del data["judge"]["thresholds"]["max_coalesced_fraction"], data["requests"][3]["coalesced_tokens"]
    old = CellRecord.from_dict(data)  # a cell written before the rule: judged as before
    assert "max_coalesced_fraction" not in old.judge.thresholds and verdict_of(old).ok


def test_the_threshold_comes_from_params(tmp_path: Path) -> None:
    path = write_params(tmp_path, max_coalesced_fraction=0.1, max_coalesced_first_fraction=0.2)
    params = load_plan(path).params
    assert params.max_coalesced_fraction == 0.1 and params.max_coalesced_first_fraction == 0.2
    defaults = load_plan(TINY.parent.parent.parent / "params" / "embedded.yaml").params
    assert defaults.max_coalesced_fraction == 0.05 and defaults.max_coalesced_first_fraction == 0.01
    with pytest.raises(ParamsError, match="max_coalesced_fraction"):
        load_plan(write_params(tmp_path, max_coalesced_fraction=1.5))


def test_a_short_stall_against_long_gaps_is_not_counted() -> None:
    """The same 30 ms stall over a burst: against bursts 0.4 s apart it cannot make a token late
    by 10 % of its gap, so nothing is counted; against bursts 20 ms apart it is."""
    with BurstServer(interval=0.4) as server:  # bursts at 0.4, 0.8, ... s from the request
        slow = run_blocked(server.url, block_at=0.39, block_s=0.03, requests=CONCURRENCY,
                           tokens=8)
    assert any(b - a >= 0.025 for a, b in slow.stalls), slow.stalls
    assert all(lost_tokens(r) == 0 and not first_lost(r) for r in slow.records)
    with BurstServer(interval=0.02) as server:  # 50 ms: two bursts or more queue in it
        fast = run_blocked(server.url, block_at=0.05, block_s=0.05, requests=CONCURRENCY,
                           tokens=32)
    assert all(lost_tokens(r) >= 3 for r in fast.records), [
        lost_tokens(r) for r in fast.records]


def test_one_burst_stamped_in_a_stall_and_read_after_it_is_not_counted() -> None:
    """A read inside a stall that holds one burst carries that burst's own stamp (the kernel's
    arrival time): read late, timed right. The rule before issue 24 counted its events."""
    times = [0.02 * (i // 4 + 1) for i in range(16)]  # bursts of 4 events, 20 ms apart
    rec = RequestRecord(0, False, 3, 16, status=200, start=0.0, end=times[-1],
                        token_times=times, chunk_sizes=[1] * 16,
                        multi_reads=[(0.045, 3, False)],  # the 40 ms burst, read at 45 ms
                        stalls=[(0.035, 0.046)])
    assert coalesced(rec) == (0, False)


def test_a_stall_over_a_long_burst_counts_only_the_deliveries_it_could_hide() -> None:
    """n-gram drafts send a burst of up to budget events microseconds apart: a 5 ms stall over
    a 32-token burst, in a request whose deliveries are single tokens 20 ms apart, can hide one
    delivery (one token), not the 31 burst events the server sent together."""
    times = [0.02 * (i + 1) for i in range(20)]
    stamp = times[-1] + 0.02
    times += [stamp] * 32  # the burst, in one read: one stamp for its events
    read_at = stamp + 1e-4
    rec = RequestRecord(0, False, 3, len(times), status=200, start=0.0, end=times[-1],
                        token_times=times, chunk_sizes=[1] * len(times),
                        multi_reads=[(read_at, 31, False)],
                        stalls=[(stamp - 0.005, read_at)])  # stamped 5 ms into a stall
    assert coalesced(rec) == (1, False)
    # a 100 ms stall since the previous delivery: five 20 ms deliveries fit in it
    late = [*times[:20], *[times[19] + 0.1] * 32]
    long_stall = replace(rec, token_times=late, multi_reads=[(late[-1] + 1e-4, 31, False)],
                         stalls=[(times[19] - 0.001, late[-1] + 1e-4)])
    assert coalesced(long_stall) == (5, False)
    stored = RequestRecord.from_dict(long_stall.to_dict())  # decided on read, from the file
    assert stored.multi_reads == long_stall.multi_reads and coalesced(stored) == (5, False)
    old = replace(rec, multi_reads=None, stalls=None, coalesced_tokens=7)  # schema 2
    assert coalesced(old) == (7, False)
