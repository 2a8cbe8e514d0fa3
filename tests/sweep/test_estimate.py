"""A time estimate before any server starts (issue 41): minutes by config and workload from the
prompt lengths, the output cap and the engine's speed (an earlier run's on this machine, else a
stated default), in the dry run and the doctor; and a live estimate that weighs each cell by its
predicted cost, so long prompts after short ones do not swing it. No server (about 3 s)."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

from cellfactory import make_cell

from specbench_lib.model.params import SweepParams
from specbench_lib.model.plan import build_plan
from specbench_lib.sweep.estimate import DEFAULT, Estimate, cell_seconds, measured_speed
from specbench_lib.sweep.preflight import doctor
from specbench_lib.sweep.preview import PlanPreview
from specbench_lib.sweep.progress import Progress

SPEC_BENCH = Path(__file__).resolve().parents[1] / "data" / "spec_bench_question.jsonl"


def plan(**more: object):
    params = SweepParams.model_validate({
        "phase": "t", "configs": [{"name": "auto", "method": "auto"},
                                  {"name": "ngram", "method": "ngram", "budgets": [8]}],
        "workloads": [{"name": "code", "source": "humaneval"},
                      {"name": "sb", "source": "spec_bench", "path": str(SPEC_BENCH),
                       "categories": ["writing", "summarization"]}],
        "contexts": [512], "concurrency": [1], "output_tokens": 64, "requests_per_cell": 2,
        **more})
    return build_plan(params, source=SPEC_BENCH)


def test_minutes_by_config_and_workload_from_prompt_lengths_at_the_default_speed(
        tmp_path: Path) -> None:
    found = Estimate(build := plan(), measured_speed(build, tmp_path))
    assert found.speed == DEFAULT and "stated default" in found.text()
    # exact prompts are the context long; a summarization question is longer than a writing one
    assert found.lengths[("code", 512)] == 512
    assert found.lengths[("sb-summarization", 512)] > found.lengths[("sb-writing", 512)]
    minutes = found.minutes()
    assert set(minutes) == {(c, w) for c in ("auto", "ngram-b8")
                            for w in ("code", "sb-writing", "sb-summarization")}
    code = 2 * (512 / 400 + 64 / 30) / 60  # two requests: prefill and decoding at the default
    assert abs(minutes[("auto", "code")] - code) < 1e-9
    assert "time estimate: about" in found.text() and "auto code:" in found.text()


def test_an_earlier_runs_speed_on_this_machine_is_used_and_named(tmp_path: Path) -> None:
    run = tmp_path / "runs" / "20260101T000000Z_t_000000"
    (run / "cells").mkdir(parents=True)
    build = plan()
    (run / "manifest.json").write_text(json.dumps({
        "engine": {"kind": build.params.engine.kind}, "model": {"path": "x"},
        "servers": {"auto": {"ready_s": 2.5}}, "status": "complete"}))
    (run / "cells" / "auto__code__ctx256__c1.json").write_text(json.dumps({
        "verdict": {"status": "ok"}, "metrics": {"request_decode_tok_s": 50.0,
                                                 "ttft_mean_s": 0.5, "prompt_tokens_mean": 256}}))
    speed = measured_speed(build, tmp_path)
    assert (speed.prefill_tok_s, speed.decode_tok_s, speed.start_s) == (512.0, 50.0, 2.5)
    assert "measured in run 20260101T000000Z_t_000000" in speed.source


def test_the_dry_run_and_the_doctor_give_the_estimate() -> None:
    build = plan()
    assert "time estimate: about" in PlanPreview(build).text()
    assert "minutes" in PlanPreview(build).html()
    (time,) = [c for c in doctor(build) if c.name == "time"]
    assert time.ok and "min" in time.detail


def left(out: io.StringIO) -> str:
    return re.search(r"about (\S+) left", out.getvalue().splitlines()[-1]).group(1)


def test_the_live_estimate_weighs_cells_by_prompt_length_and_does_not_swing() -> None:
    """Three short cells (10 s) then three of ten times the prompt (100 s each): by count the
    estimate after the short ones says 30 s; weighted by the predicted cost it says 300 s."""
    cells = [make_cell("auto", "auto", None, workload=w, context=512, repeat=r, repeats=3).spec
             for w in ("short", "long") for r in range(3)]
    costs = {c.cell_id: 1.0 if c.workload == "short" else 10.0 for c in cells}
    now = [0.0]
    weighted, counted = io.StringIO(), io.StringIO()
    progresses = [Progress(6, out=weighted, cells=cells, clock=lambda: now[0], costs=costs),
                  Progress(6, out=counted, cells=cells, clock=lambda: now[0])]
    for spec in cells[:3]:
        now[0] += 10.0
        for progress in progresses:
            progress.cell(make_cell("auto", "auto", None, workload=spec.workload, context=512,
                                    repeat=spec.repeat, repeats=3))
    assert left(weighted) == "5m00s" and left(counted) == "30s"


def test_cell_costs_grow_with_prompt_and_output_length() -> None:
    costs = cell_seconds(plan(output_tokens=[32, 64]), DEFAULT)
    assert costs["auto__code__ctx512__c1__o64"] > costs["auto__code__ctx512__c1__o32"]
    assert costs["auto__sb-summarization__ctx512__c1__o32"] > costs[
        "auto__sb-writing__ctx512__c1__o32"]
