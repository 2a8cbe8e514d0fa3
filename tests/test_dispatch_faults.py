"""Each injected fault ends as the right request error and cell verdict, never as a number."""

from __future__ import annotations

import pytest
from fake_server import FakeLlamaServer

from specbench_lib.dispatch import dispatch_cell
from specbench_lib.engines.llamacpp import LlamaCppAdapter
from specbench_lib.validate import judge_cell

PROMPTS = [[1, 2, 3, 4]] * 3


def run(mode: str, *, timeout_s: float = 5.0, concurrency: int = 2):
    with FakeLlamaServer(mode, hang_s=timeout_s + 2) as server:
        result = dispatch_cell(LlamaCppAdapter(), server.url, PROMPTS, warmup=1,
                               concurrency=concurrency, max_tokens=8, timeout_s=timeout_s)
    return result, judge_cell(result.records, server_alive=True)


def test_ok_stream_gives_ok_cell_with_token_timestamps() -> None:
    result, verdict = run("ok")
    assert verdict.status == "ok", verdict.reasons
    assert len(result.measured) == 2 and result.records[0].warmup
    for r in result.records:
        assert len(r.token_times) == 8 and r.final and r.final.completion_tokens == 8
        assert r.final.prompt_tokens == 4


def test_chunks_of_several_tokens_count_every_token() -> None:
    result, verdict = run("chunky")
    assert verdict.status == "ok", verdict.reasons
    assert result.records[1].chunk_sizes == [4, 4]
    assert len(result.records[1].token_times) == 8


@pytest.mark.parametrize(("mode", "reasons"), [
    ("http400", ("http_400",)),
    ("error_line", ("error_in_stream",)),
    ("empty", ("empty_output",)),
    ("short", ("short_output", "truncated")),
    ("crash", ("connection_error",)),
])
def test_fault_gives_invalid_cell_with_reason(mode: str, reasons: tuple[str, ...]) -> None:
    result, verdict = run(mode)
    assert verdict.status == "invalid"
    codes = {r.split(":")[0] for r in verdict.reasons}
    assert codes == set(reasons), verdict.reasons
    assert all(r.error_kind or r.final for r in result.records)


def test_hang_times_out() -> None:
    result, verdict = run("hang", timeout_s=0.5, concurrency=3)
    assert verdict.status == "invalid"
    assert verdict.reasons[0].startswith("timeout")
    assert all(r.error_kind == "timeout" for r in result.records)
