"""Answers that end at EOS (issue 30): a workload's ``stop: eos`` sends every engine's request
without ``ignore_eos``, ``output_tokens`` is then only a cap, an answer the model ended early is
not ``short_output``, and the metrics carry the answers' length distribution and a
token-weighted TPOT. ``stop: length`` (the default) keeps every answer exactly its length."""

from __future__ import annotations

from pathlib import Path

import pytest
from cellfactory import not_ok
from paramsfiles import fake_plan, write_params
from ports import free_port

import specbench_lib as sb
from specbench_lib.model.sections import EngineParams
from specbench_lib.servers.engines import get_adapter


@pytest.mark.parametrize(("kind", "where"), [
    ("llamacpp", lambda body: body), ("vllm", lambda body: body),
    ("sglang", lambda body: body["sampling_params"])])
def test_every_adapter_ignores_eos_only_for_a_forced_length(kind: str, where) -> None:  # type: ignore[no-untyped-def]
    adapter = get_adapter(EngineParams(kind=kind, binary="x", model="m"))
    forced = where(adapter.generation_request([1, 2], max_tokens=8)[1])
    natural = where(adapter.generation_request([1, 2], max_tokens=8, stop="eos")[1])
    assert forced["ignore_eos"] is True and natural["ignore_eos"] is False


def plan(tmp_path: Path, stop: str) -> Path:
    return write_params(tmp_path, fake_plan(free_port(), engine={"ready_timeout_s": 10}),
                        name=f"{stop}.yaml", phase="stop",
                        workloads=[{"name": "code", "source": "humaneval", "stop": stop}],
                        contexts=[64], output_tokens=32, requests_per_cell=8, warmup_requests=1)


def test_answers_that_end_at_eos_are_measured_not_refused(tmp_path: Path) -> None:
    natural = sb.run_sweep(sb.load_plan(plan(tmp_path, "eos")), outputs=tmp_path / "a",
                           progress=False)
    assert natural.counts()["ok"] == 1, not_ok(natural)
    [cell] = natural.cells
    lengths = [r.final.completion_tokens for r in cell.measured if r.final]
    assert all(r.stop == "eos" for r in cell.measured)
    assert len(set(lengths)) > 1 and max(lengths) <= 32  # the model's ends, capped
    metrics = cell.metrics
    assert metrics["output_tokens_p10"] < metrics["output_tokens_p90"]
    assert metrics["output_tokens_mean"] == pytest.approx(sum(lengths) / len(lengths))
    spans = [(r.token_times[-1] - r.token_times[0], len(r.token_times) - 1)
             for r in cell.measured if len(r.token_times) >= 2]
    assert metrics["tpot_weighted_s"] == pytest.approx(sum(t for t, _ in spans)
                                                       / sum(k for _, k in spans))
    forced = sb.run_sweep(sb.load_plan(plan(tmp_path, "length")), outputs=tmp_path / "b",
                          progress=False)
    assert forced.counts()["ok"] == 1, not_ok(forced)
    [cell] = forced.cells
    assert {r.final.completion_tokens for r in cell.measured if r.final} == {32}
    assert cell.metrics["output_tokens_p10"] == cell.metrics["output_tokens_p90"] == 32
