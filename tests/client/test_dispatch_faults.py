"""Each injected fault ends as the right request error and cell verdict, never as a number."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest
from fake_server import FakeLlamaServer
from protocol_servers import sglang_server, vllm_server

from specbench_lib.analysis.validate import judge_cell, request_problems
from specbench_lib.client.dispatch import dispatch_cell
from specbench_lib.servers.engines import StreamEvent
from specbench_lib.servers.engines.llamacpp import LlamaCppAdapter
from specbench_lib.servers.engines.sglang import SGLangAdapter
from specbench_lib.servers.engines.vllm import VllmAdapter

PROMPTS = [[1, 2, 3, 4]] * 3


def run(mode: str, *, timeout_s: float = 5.0, concurrency: int = 2,
        adapter: LlamaCppAdapter | None = None):
    with FakeLlamaServer(mode, hang_s=timeout_s + 2) as server:
        result = dispatch_cell(adapter or LlamaCppAdapter(), server.url, PROMPTS, warmup=1,
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


# --- malformed answers end as a reason on their request, never as an exception -----------------

@pytest.mark.parametrize("mode", ["done_only", "no_events"])
def test_an_empty_200_stream_is_empty_output_not_incomplete(mode: str) -> None:
    """docs/fault-matrix.md's fault matrix: only ``data: [DONE]`` (or nothing) in a 200 stream."""
    result, verdict = run(mode)
    assert verdict.status == "invalid"
    assert {r.split(":")[0] for r in verdict.reasons} == {"empty_output"}, verdict.reasons
    for rec in result.records:
        assert rec.error_kind is None and rec.status == 200 and not rec.token_times
        assert rec.final is not None and rec.final.completion_tokens == 0
        assert rec.final.prompt_tokens is None  # not invented: the server sent no count
        assert [p.code for p in request_problems(rec)] == ["empty_output"]


def test_tokens_without_final_statistics_stay_an_incomplete_stream() -> None:
    result, verdict = run("no_final")
    assert {r.split(":")[0] for r in verdict.reasons} == {"incomplete_stream"}, verdict.reasons
    assert all(rec.final is None and len(rec.token_times) == 8 for rec in result.records)


@pytest.mark.parametrize(("mode", "kind", "text"), [
    ("bad_utf8", "error_in_stream", "not UTF-8"),
    ("bad_length", "connection_error", "bad Content-Length"),
    ("bad_chunk", "connection_error", "bad chunk size"),
])
def test_a_malformed_answer_is_a_reason_on_each_request(mode: str, kind: str, text: str) -> None:
    result, verdict = run(mode)  # returns: no UnicodeDecodeError or ValueError out of the sweep
    assert verdict.status == "invalid"
    assert {r.split(":")[0] for r in verdict.reasons} == {kind}, verdict.reasons
    for rec in result.records:
        assert rec.error_kind == kind and text in (rec.error or ""), rec.error


def test_a_lone_surrogate_in_the_text_is_measured_like_any_text() -> None:
    """JSON may escape a lone surrogate (``\\ud800``); hashing the text must not raise."""
    result, verdict = run("lone_surrogate")
    assert verdict.status == "ok", verdict.reasons
    assert all(len(r.token_times) == 8 and r.text_sha for r in result.records)


@dataclass(frozen=True)
class _BrokenParserAdapter(LlamaCppAdapter):
    """An adapter whose parser breaks its contract (it raises): the dispatcher's last guard."""

    def stream_parser(self) -> Callable[[str], StreamEvent | None]:
        def parse(line: str) -> StreamEvent | None:
            if line.startswith("data:"):
                raise KeyError("tokens")
            return None
        return parse


def test_an_exception_while_reading_an_answer_is_recorded_not_raised() -> None:
    result, verdict = run("ok", adapter=_BrokenParserAdapter())
    assert verdict.status == "invalid"
    for rec in result.records:
        assert rec.error_kind == "connection_error"
        assert rec.error and rec.error.startswith("KeyError while reading the answer: 'tokens'")


@pytest.mark.parametrize(("mode", "code"), [("done_only", "empty_output"),
                                            ("bad_utf8", "error_in_stream")])
@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_sglang_and_vllm_streams_label_empty_and_unreadable_streams(engine: str, mode: str,
                                                                    code: str) -> None:
    make, adapter = ((sglang_server, SGLangAdapter()) if engine == "sglang"
                     else (vllm_server, VllmAdapter()))
    with make(mode) as server:
        result = dispatch_cell(adapter, server.url, PROMPTS, warmup=0, concurrency=2, max_tokens=8,
                               timeout_s=5.0)
    for rec in result.records:
        assert [p.code for p in request_problems(rec)] == [code], rec.error
        if code == "error_in_stream":
            assert "not UTF-8" in (rec.error or "") and len(rec.token_times) == 1
