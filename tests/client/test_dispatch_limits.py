"""Per-request time limits from params, and the open-loop request rate."""

from __future__ import annotations

import pytest
from fake_server import FakeLlamaServer
from reference_server import ReferenceServer

from specbench_lib.analysis.validate import judge_cell
from specbench_lib.client.arrivals import arrival_offsets
from specbench_lib.client.dispatch import dispatch_cell
from specbench_lib.model.sections import RequestRateParams, TimeoutParams
from specbench_lib.servers.engines.llamacpp import LlamaCppAdapter

ADAPTER = LlamaCppAdapter()


def run(url: str, timeouts: TimeoutParams, *, n: int = 1, tokens: int = 8, **kw):
    return dispatch_cell(ADAPTER, url, [[1, 2, 3]] * n, warmup=0, concurrency=n, max_tokens=tokens,
                         timeouts=timeouts, **kw)


def test_first_token_limit() -> None:
    with FakeLlamaServer("hang", hang_s=3.0) as server:
        result = run(server.url, TimeoutParams(first_token_s=0.3, between_tokens_s=5, request_s=5))
    rec = result.records[0]
    assert rec.error_kind == "timeout" and rec.error is not None
    assert rec.error.startswith("first_token limit of 0.3 s exceeded after 0 tokens")
    assert 0.25 < rec.e2e < 2.0
    assert judge_cell(result.records, server_alive=True).reasons[0].startswith("timeout")


def test_between_tokens_limit() -> None:
    with ReferenceServer(interval=0.4, tokens_per_chunk=1) as server:
        result = run(server.url, TimeoutParams(first_token_s=2, between_tokens_s=0.2, request_s=10))
    rec = result.records[0]
    assert rec.error_kind == "timeout"
    assert rec.error == "between_tokens limit of 0.2 s exceeded after 1 tokens"


def test_whole_request_limit() -> None:
    with ReferenceServer(interval=0.05, tokens_per_chunk=1) as server:
        result = run(server.url, TimeoutParams(first_token_s=1, between_tokens_s=1, request_s=0.5),
                     tokens=40)
    rec = result.records[0]
    assert rec.error_kind == "timeout" and rec.error is not None
    assert rec.error.startswith("request limit of 0.5 s exceeded")
    assert 3 <= len(rec.token_times) < 40 and 0.45 < rec.e2e < 1.5


def test_requests_within_limits_pass_and_are_never_retried() -> None:
    with ReferenceServer(interval=0.01, tokens_per_chunk=2) as server:
        result = run(server.url, TimeoutParams(first_token_s=1, between_tokens_s=1, request_s=5),
                     n=3)
    assert judge_cell(result.records, server_alive=True).ok
    assert [r.output_ids for r in result.records] == [list(range(8))] * 3
    with FakeLlamaServer("http400") as server:
        failed = run(server.url, TimeoutParams(request_s=5), n=2)
    assert [r.error_kind for r in failed.records] == ["http_400", "http_400"]


def test_arrivals_are_seeded_and_shaped() -> None:
    fixed = arrival_offsets(5, RequestRateParams(per_s=4, arrival="fixed"), seed=1)
    assert fixed == pytest.approx([0, 0.25, 0.5, 0.75, 1.0])
    poisson = RequestRateParams(per_s=10)
    assert arrival_offsets(50, poisson, seed=3) == arrival_offsets(50, poisson, seed=3)
    assert arrival_offsets(50, poisson, seed=3) != arrival_offsets(50, poisson, seed=4)
    many = arrival_offsets(2001, poisson, seed=0)
    assert many[-1] / 2000 == pytest.approx(0.1, rel=0.1)


def test_open_loop_sends_on_schedule_not_on_completion() -> None:
    rate = RequestRateParams(per_s=5, arrival="fixed")
    with ReferenceServer(interval=0.05, tokens_per_chunk=1) as server:  # 8 tokens: 0.4 s each
        result = run(server.url, TimeoutParams(request_s=5), n=4, request_rate=rate)
    starts = [r.start for r in result.records]
    assert [r.scheduled for r in result.records] == pytest.approx(
        [starts[0] + 0.2 * i for i in range(4)], abs=0.05)
    assert all(b - a < 0.3 for a, b in zip(starts, starts[1:], strict=False))  # overlapping
    assert judge_cell(result.records, server_alive=True).ok


def test_the_garbage_collector_waits_while_a_cells_requests_are_in_flight(monkeypatch) -> None:
    """A full collection of a large heap stalls the event loop for tens of ms (issue 24): none
    runs while requests are in flight; it is back on, with the cell's garbage, afterwards."""
    import gc

    seen: list[bool] = []
    from specbench_lib.servers.engines import llamacpp

    parse = llamacpp._Stream.parse

    def watched(self, data):  # type: ignore[no-untyped-def]
        seen.append(gc.isenabled())
        return parse(self, data)

    monkeypatch.setattr(llamacpp._Stream, "parse", watched)
    with FakeLlamaServer("ok") as server:
        result = run(server.url, TimeoutParams(first_token_s=5, between_tokens_s=5, request_s=10),
                     n=2)
    assert all(r.error_kind is None for r in result.records)
    assert seen and not any(seen)
    assert gc.isenabled() and gc.get_freeze_count() == 0
