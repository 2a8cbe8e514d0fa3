from __future__ import annotations

from specbench_lib.analysis.validate import context_guard, judge_cell, request_problems
from specbench_lib.model.records import RequestRecord
from specbench_lib.servers.engines import FinalStats


def record(*, completion: int = 8, prompt: int = 16, tokens: int | None = None,
           truncated: bool = False, error_kind: str | None = None) -> RequestRecord:
    rec = RequestRecord(index=0, warmup=False, prompt_tokens_planned=16, max_tokens=8)
    if error_kind:
        rec.status, rec.error_kind, rec.error = 400, error_kind, "boom"
        return rec
    rec.status = 200
    n = completion if tokens is None else tokens
    rec.token_times = [0.1 * (i + 1) for i in range(n)]
    rec.final = FinalStats(prompt_tokens=prompt, completion_tokens=completion, truncated=truncated)
    return rec


def test_valid_request_has_no_problems() -> None:
    assert request_problems(record()) == []


def test_each_failure_gets_its_reason() -> None:
    assert request_problems(record(error_kind="http_400"))[0].startswith("http_400")
    assert request_problems(record(completion=0))[0].startswith("empty_output")
    short = request_problems(record(completion=5, truncated=True))[0]
    assert short.startswith("short_output: 5 of 8") and "truncated" in short
    assert request_problems(record(prompt=15))[0].startswith("prompt_mismatch: server counted 15")
    assert request_problems(record(tokens=6))[0].startswith("token_count_mismatch")
    no_final = RequestRecord(index=0, warmup=False, prompt_tokens_planned=4, max_tokens=8)
    assert request_problems(no_final)[0].startswith("incomplete_stream")


def test_cell_is_ok_only_when_every_request_is() -> None:
    assert judge_cell([record(), record()], server_alive=True).status == "ok"
    verdict = judge_cell([record(), record(completion=0), record(completion=0)], server_alive=True)
    assert verdict.status == "invalid"
    assert verdict.reasons == ("empty_output: the server reported 0 completion tokens (x2)",)


def test_dead_server_or_crash_signature_is_crashed() -> None:
    dead = judge_cell([record()], server_alive=False, crash_line="CUDA error: illegal instruction")
    assert dead.status == "crashed"
    assert any("illegal instruction" in r for r in dead.reasons)
    assert judge_cell([record()], server_alive=True, crash_line="GGML_ASSERT").status == "crashed"


def test_context_guard_refuses_with_numbers() -> None:
    assert context_guard(prompt_tokens=1000, output_tokens=128, reserve=16, context=2048) is None
    refused = context_guard(prompt_tokens=32700, output_tokens=256, reserve=0, context=32768)
    assert refused is not None and refused.status == "invalid"
    assert refused.reasons[0].startswith("context_overflow: prompt 32700 + output 256")
    assert "32956" in refused.reasons[0] and "32768" in refused.reasons[0]
    edge = context_guard(prompt_tokens=2047 - 128, output_tokens=128, reserve=0, context=2048)
    assert edge is None
    assert context_guard(prompt_tokens=2048 - 128, output_tokens=128, reserve=0, context=2048)


def test_counter_engines_need_moving_draft_counters() -> None:
    from specbench_lib.analysis.validate import Verdict, judge_counters

    ok = Verdict("ok")
    assert judge_counters(ok, {"source": "/metrics", "drafts": 12, "acceptance_length": 3.0}) is ok
    for counters, why in (({}, "no speculative counters"),
                          ({"drafts": 0, "draft_tokens": 0}, "did not move"),
                          ({"error": "a counter went down"}, "went down")):
        verdict = judge_counters(ok, counters)
        assert verdict.status == "invalid" and why in verdict.reasons[0]


def test_sglang_style_stats_without_draft_counts_are_enough() -> None:
    rec = record()
    rec.final.verify_steps, rec.final.draft_tokens = 3, None
    assert request_problems(rec, speculative=True) == []
    rec.final.verify_steps = None
    assert request_problems(rec, speculative=True)[0].startswith("missing_spec_stats")
