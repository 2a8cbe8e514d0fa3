"""A time estimate before any server starts (issue 41): minutes by config and workload from the
prompt lengths, the output cap and the engine's speed (an earlier run's on this machine, else a
stated default), in the dry run and the doctor; the dry run, the live estimate and the budget
priced by one function of the one time model. No server (about 3 s)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from cellfactory import make_cell
from timemodels import SLOW, small_plan

from specbench_lib.analysis.analyse import analyse
from specbench_lib.model.params import SweepParams
from specbench_lib.model.plan import build_plan
from specbench_lib.model.records import CellRecord
from specbench_lib.sweep.budget import Budget, more_time
from specbench_lib.sweep.estimate import Estimate, cell_seconds, measured_speed
from specbench_lib.sweep.preflight import doctor
from specbench_lib.sweep.preview import PlanPreview
from specbench_lib.sweep.progress import Progress
from specbench_lib.sweep.speeds import default_speed
from specbench_lib.sweep.timemodel import TimeModel

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
    assert found.speed == default_speed(build.params.engine) and "default" in found.text()
    # exact prompts are the context long; a summarization question is longer than a writing one
    assert found.lengths[("code", 512)] == 512
    assert found.lengths[("sb-summarization", 512)] > found.lengths[("sb-writing", 512)]
    minutes = found.minutes()
    assert set(minutes) == {(c, w) for c in ("auto", "ngram-b8")
                            for w in ("code", "sb-writing", "sb-summarization")}
    # two requests: prefill and decoding at the CPU default (SmolLM2-135M, the embedded model)
    code = 2 * (512 / 400 + 64 / 30) / 60
    assert abs(minutes[("auto", "code")] - code) < 1e-9
    assert "time estimate: about" in found.text() and "auto code:" in found.text()


def ok_auto_cell(concurrency: int = 1, tok_s: float = 50.0) -> CellRecord:
    return make_cell("auto", "auto", None, tok_s=tok_s, concurrency=concurrency)


def earlier_run(tmp_path: Path, build) -> Path:
    run = tmp_path / "runs" / "20260101T000000Z_t_000000"
    (run / "cells").mkdir(parents=True)
    (run / "manifest.json").write_text(json.dumps({
        "engine": {"kind": build.params.engine.kind}, "model": {"path": "x"},
        "servers": {"auto": {"ready_s": 2.5}}, "status": "complete"}))
    return run


def test_an_earlier_runs_speed_on_this_machine_is_used_and_named(tmp_path: Path) -> None:
    run = tmp_path / "runs" / "20260101T000000Z_t_000000"
    (run / "cells").mkdir(parents=True)
    build = plan()
    (run / "manifest.json").write_text(json.dumps({
        "engine": {"kind": build.params.engine.kind}, "model": {"path": "x"},
        "servers": {"auto": {"ready_s": 2.5}}, "status": "complete"}))
    cell = ok_auto_cell()
    (run / "cells" / f"{cell.cell_id}.json").write_text(json.dumps(cell.to_dict()))
    speed = measured_speed(build, tmp_path)
    metrics = analyse(cell).metrics or {}
    assert speed.calibrated and speed.start_s == 2.5
    assert speed.decode_tok_s == metrics["request_decode_tok_s"]
    assert speed.prefill_tok_s == metrics["prompt_tokens_mean"] / metrics["ttft_mean_s"]
    assert "measured in run 20260101T000000Z_t_000000" in speed.source
    assert "calibrated" in Estimate(build, speed).text()


def test_the_dry_run_and_the_doctor_give_the_estimate() -> None:
    build = plan()
    assert "time estimate: about" in PlanPreview(build).text()
    assert "minutes" in PlanPreview(build).html()
    (time,) = [c for c in doctor(build) if c.name == "time"]
    assert time.ok and "min" in time.detail


def test_the_dry_run_the_live_estimate_and_the_budget_price_with_one_function(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 50: one estimate of the time left. Every figure of time (the dry run's total and
    round, the live estimate's time left, the budget's slice and cell, another hour) comes
    from ``TimeModel.slice_s``: a price of a config's slice of 1000 s shows in each."""
    priced: list[str] = []

    def thousand(self: TimeModel, config: str, cells: object, **_: object) -> float:
        priced.append(config)
        return 1000.0

    build = small_plan()
    first = [c for c in build.cells if c.repeat == 0]
    assert TimeModel(build, SLOW).left(first) == pytest.approx(
        Estimate(build, SLOW).round_s)  # unpatched: a round, a start a config, agree
    monkeypatch.setattr(TimeModel, "slice_s", thousand)
    configs = len(build.servers)
    dry = Estimate(build, SLOW)
    assert dry.round_s == 1000.0 * configs and dry.total_s == 1000.0 * configs
    out, now = io.StringIO(), [0.0]
    live = Progress(len(build.cells), out=out, cells=build.cells, clock=lambda: now[0],
                    model=TimeModel(build, SLOW))
    live.cell(make_cell("other", "auto", None))
    assert out.getvalue().rstrip().endswith(f"about {1000 * configs // 60}m"
                                            f"{1000 * configs % 60:02d}s left")
    budget = Budget(100, TimeModel(build, SLOW), clock=lambda: 0.0)
    assert budget.estimate("auto", 1) == 1000.0
    assert not budget.may_start(build.cells[0], start=True) and budget.cut is not None
    assert budget.cut["predicted_s"] == 1000.0
    hour = more_time(TimeModel(build, SLOW), build.cells, {})
    assert hour is not None and hour.cells == 3  # 3 of 1000 s in an hour
    assert {"auto"} <= set(priced)


def test_cell_costs_grow_with_prompt_and_output_length() -> None:
    costs = cell_seconds(build := plan(output_tokens=[32, 64]), default_speed(build.params.engine))
    assert costs["auto__code__ctx512__c1__o64"] > costs["auto__code__ctx512__c1__o32"]
    assert costs["auto__sb-summarization__ctx512__c1__o32"] > costs[
        "auto__sb-writing__ctx512__c1__o32"]


def test_a_damaged_earlier_cell_file_is_skipped_by_name(tmp_path: Path) -> None:
    """Issue 49 item 7: a cell file of another shape (a list, a cell with no verdict) broke
    every dry run and doctor with a traceback; it is named and skipped, and the good cell
    beside it still calibrates."""
    build = plan()
    run = earlier_run(tmp_path, build)
    cell = ok_auto_cell()
    (run / "cells" / f"{cell.cell_id}.json").write_text(json.dumps(cell.to_dict()))
    (run / "cells" / "auto__code__ctx128__c1.json").write_text("[1, 2]")
    (run / "cells" / "auto__code__ctx64__c1.json").write_text('{"verdict": "ok"}')
    speed = measured_speed(build, tmp_path)
    assert speed.calibrated
    assert "skipped 2 damaged cell files" in speed.source
    assert "auto__code__ctx128__c1.json" in speed.source
    assert "auto__code__ctx64__c1.json" in speed.source


def test_the_slowdown_per_request_in_flight_is_calibrated_from_higher_concurrency(
        tmp_path: Path) -> None:
    build = plan(concurrency=[1, 4])
    run = earlier_run(tmp_path, build)
    for cell in (ok_auto_cell(1), ok_auto_cell(4)):
        (run / "cells" / f"{cell.cell_id}.json").write_text(json.dumps(cell.to_dict()))
    speed = measured_speed(build, tmp_path)
    rates = {c: analyse(ok_auto_cell(c)).metrics["request_decode_tok_s"] for c in (1, 4)}
    assert speed.slowdown == pytest.approx(max(0.0, (rates[1] / rates[4] - 1) / 3))


def gpu_plan(**engine: object):
    params = SweepParams.model_validate({
        "phase": "t", "engine": {"kind": "sglang", "binary": "/x/python",
                                 "model": "/m/Qwen3-8B", **engine},
        "configs": [{"name": "auto", "method": "auto"}],
        "workloads": [{"name": "code", "source": "humaneval"}],
        "contexts": [3072], "concurrency": [1, 16], "output_tokens": 256,
        "requests_per_cell": 32, "time_budget_s": "1h"})
    return build_plan(params, source=SPEC_BENCH)


def test_a_gpu_engines_default_is_by_class_and_model_size_with_its_source(tmp_path: Path) -> None:
    """The old default priced an SGLang server on an H100 at 400 tok/s prefill and 30 tok/s
    decoding, whatever the GPU and model; now by class and size, each figure with its source."""
    h100 = Estimate(gpu_plan(), measured_speed(gpu_plan(), tmp_path))
    assert (h100.speed.prefill_tok_s, h100.speed.decode_tok_s) == (12000.0, 140.0)
    assert h100.speed.slowdown == 0.03 and not h100.speed.calibrated
    text = h100.text()
    assert "at default engine speeds" in text and "H100 assumed" in text
    assert "issue 47" in text and "a 8B model" in text
    big = Estimate(gpu_plan(gpu="h200", model_params_b=70), measured_speed(gpu_plan(), tmp_path))
    b200 = default_speed(gpu_plan(gpu="B200").params.engine)
    assert b200.decode_tok_s > h100.speed.decode_tok_s and "datasheets" in b200.source
    assert "H200 (engine.gpu)" in default_speed(gpu_plan(gpu="h200", model_params_b=70)
                                                .params.engine).source
    assert big.total_s > 0
    c16 = [c for c in gpu_plan().cells if c.concurrency == 16][0]
    c1 = [c for c in gpu_plan().cells if c.concurrency == 1][0]
    costs = cell_seconds(gpu_plan(), h100.speed)
    # 512 requests at c16 in 32 waves, each decoding 3 % slower per extra request (1.45×)
    assert costs[c16.cell_id] > 32 / 512 * 16 * costs[c1.cell_id]


def test_an_unknown_gpu_class_names_the_key_and_the_classes() -> None:
    with pytest.raises(ValueError, match="unknown GPU class 'V100'.*H100"):
        gpu_plan(gpu="V100")


def test_an_over_budget_plan_is_a_doctor_problem_with_the_reductions(tmp_path: Path) -> None:
    """The doctor said 'ok time: about 149193.0 min' for tp1 with an 8 h budget; a plan whose
    first answer cannot fit its budget is now a PROBLEM that names what would make it fit."""
    params = gpu_plan().params.model_copy(update={"time_budget_s": 600.0})
    build = build_plan(params, source=SPEC_BENCH)
    (time,) = [c for c in doctor(build, outputs=tmp_path) if c.name == "time"]
    assert not time.ok
    assert "cannot answer in its 10 m 0 s budget" in time.detail
    assert "requests_per_cell" in time.detail and "concurrency without 16" in time.detail
    assert "PROBLEM" in PlanPreview(build).text()
    roomy = build_plan(gpu_plan().params.model_copy(update={"time_budget_s": 86400.0}),
                       source=SPEC_BENCH)
    (time,) = [c for c in doctor(roomy, outputs=tmp_path) if c.name == "time"]
    assert time.ok and "fits" in time.detail
