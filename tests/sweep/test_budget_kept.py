"""The budget kept to the cell (issue 46): no cell and no server start that the time model says
cannot end in the budget, the time model calibrated by the first server's warmup and taught by
every cell, the answer so far readable while the sweep runs (from the CLI too), the largest
overrun kept across a resume, and what another hour would buy."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from budgetparams import budget_params
from timemodels import SLOW, small_plan

import specbench_lib as sb
from specbench_lib.cli import main
from specbench_lib.model.records import RequestRecord
from specbench_lib.sweep import adaptive
from specbench_lib.sweep.budget import Budget, more_time
from specbench_lib.sweep.speeds import Speed
from specbench_lib.sweep.timemodel import TimeModel

NEAR_TIES = {"speedups": {4: 1.0, 8: 1.01, 16: 1.02}, "jitter": 0.3, "equivalence": 0.001}


def test_a_cell_that_cannot_end_in_the_budget_does_not_start() -> None:
    plan = small_plan()
    model = TimeModel(plan, SLOW)
    now = [0.0]
    budget = Budget(100, clock=lambda: now[0], began=0.0, model=model)
    cell = plan.cells[0]
    assert model.cell_s(cell.cell_id) == pytest.approx(22.0)
    assert budget.may_start(cell, start=True)  # 5 + 22 of 100
    now[0] = 75.0
    assert budget.may_start(cell, start=False)  # 22 more: 97
    assert not budget.may_start(cell, start=True)  # 27 more: 102
    assert budget.cut == {"round": 1, "config": cell.config, "cell": cell.cell_id,
                          "predicted_s": 27.0, "left_s": 25.0, "at_s": 75.0,
                          "server_start": True}
    now[0] = 99.0
    assert not budget.may_start(cell, start=False)
    assert budget.cut["at_s"] == 75.0  # the first refusal is the cut


def test_cells_measured_teach_the_model_what_is_left() -> None:
    plan = small_plan()
    model = TimeModel(plan, SLOW)
    first, later = plan.cells[0], plan.cells[-1]
    model.learn_cell(first.cell_id, 11.0)  # measured at half the predicted 22 s
    assert model.ratio(first.config) == pytest.approx(0.5)
    assert model.cell_s(later.cell_id) == pytest.approx(11.0)  # every config's, before its own
    assert "calibrated on 1 cells of this run (measured / predicted 0.50" in model.words()


def test_the_first_servers_warmup_calibrates_stated_defaults() -> None:
    plan = small_plan()
    default = Speed(400.0, 30.0, 10.0, "a stated default")
    model = TimeModel(plan, default)
    times = [0.5 + 0.01 * k for k in range(11)]  # TTFT 0.5 s for 50 tokens, then 100 tok/s
    warm = RequestRecord(0, True, 50, 11, start=0.0, end=times[-1], token_times=times)
    budget = Budget(100, clock=lambda: 0.0, began=0.0, model=model)
    cell = plan.cells[0]
    assert budget.may_start(cell, start=True)  # uncalibrated: only its start must fit
    model.calibrate([warm], start_s=3.0)
    assert model.calibrated and model.speed.prefill_tok_s == pytest.approx(100.0)
    assert model.speed.decode_tok_s == pytest.approx(100.0)
    assert model.start_s(cell.config) == 3.0
    # 2 requests × (100 / 100 + 100 / 100): 4 s
    assert model.cell_s(cell.cell_id) == pytest.approx(4.0)


def test_another_hour_says_which_rounds_it_would_end() -> None:
    plan = small_plan(requests_per_cell=20)  # a cell 220 s, a start 5 s
    model = TimeModel(plan, SLOW)
    found = more_time(model, list(plan.cells), {})
    # round 1: 2 × (5 + 220) = 450 s, ... 3600 s holds 7 cells with their starts
    assert found is not None and found.whole_rounds == (1, 2, 3)
    assert found.words == ("another hour would measure about 6 of the 6 cells left unmeasured, "
                           "rounds 1-3 whole")
    two = more_time(model, [c for c in plan.cells if c.repeat in (0, 1)], {})
    assert two is not None and two.words.endswith("rounds 1, 2 whole")
    assert more_time(model, [], {}) is None


def test_the_answer_so_far_is_written_after_each_look_and_the_cli_reads_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A long run's answer used to exist only at its end; now after every look, so the notebook
    and ``specbench answer RUN`` read where it stands."""
    def stopped(*args: object, **kwargs: object) -> None:  # the machine stopped at the end
        raise KeyboardInterrupt

    monkeypatch.setattr(adaptive, "_finish", stopped)
    monkeypatch.setenv("SPECBENCH_OUTPUTS", str(tmp_path / "out"))
    plan = sb.load_plan(budget_params(tmp_path, seed=2, budget="30s", max_rounds=3, **NEAR_TIES))
    with pytest.raises(KeyboardInterrupt):
        sb.run_sweep(plan, outputs=tmp_path / "out", progress=False)
    capsys.readouterr()
    (run_dir,) = (tmp_path / "out" / "runs").iterdir()
    answer = json.loads((run_dir / "answer.json").read_text())
    assert answer["stopped"] == "running" and answer["rounds"] >= 1
    assert main(["answer", run_dir.name]) == 0
    said = capsys.readouterr().out
    assert said.startswith("answer so far (written at a look while the sweep ran): after ")
    assert "panels decided" in said and "open" in said


def test_the_largest_overrun_is_kept_across_a_resume(tmp_path: Path) -> None:
    plan = sb.load_plan(budget_params(tmp_path, seed=2, budget="4s", **NEAR_TIES))
    first = sb.run_sweep(plan, outputs=tmp_path / "out", progress=False)
    assert "overrun" in json.loads((first.run_dir / "answer.json").read_text())
    manifest = json.loads((first.run_dir / "manifest.json").read_text())
    manifest["overrun_s"] = 7.5  # as an earlier attempt's cell that ended 7.5 s past it wrote
    (first.run_dir / "manifest.json").write_text(json.dumps(manifest))
    again = sb.run_sweep(plan, resume=first.run_id, outputs=tmp_path / "out", progress=False)
    after = json.loads((again.run_dir / "answer.json").read_text())
    assert after["overrun"]["largest_s"] >= 7.5
    assert after["overrun"]["allowed_s"] == 0.4


def test_the_live_estimate_is_the_time_models_price_of_what_is_left() -> None:
    """A fixed plan's cell lines say the time left as the one time model prices it: after one
    cell measured at half its prediction, every cell left costs half (and a start each)."""
    import io
    import re

    from specbench_lib.sweep.progress import Progress

    plan = small_plan(time_budget_s=None)
    model = TimeModel(plan, SLOW)
    now = [0.0]
    out = io.StringIO()
    progress = Progress(len(plan.cells), out=out, cells=plan.cells, clock=lambda: now[0],
                        model=model)
    first = plan.cells[0]
    progress.server(first.config, "starting, waiting")
    now[0] = 5.0
    progress.warmed(first.config, first.config, [])
    now[0] = 16.0
    record = make_cell_record(first, timing={"prompts_s": 1.0, "dispatch_s": 10.0})
    progress.cell(record)
    left = re.search(r"about (\S+) left", out.getvalue()).group(1)
    assert model.ratio() == pytest.approx(0.5)  # 11 s measured of 22 predicted
    rest = plan.cells[1:]
    configs = {c.config for c in rest} - {first.config}
    seconds = 11.0 * len(rest) + 5.0 * len(configs)  # each at half, and a start a config
    assert left == f"{int(seconds)}s" and rest


def make_cell_record(spec, *, timing):
    from dataclasses import replace

    from cellfactory import make_cell

    cell = make_cell(spec.config, spec.method, spec.budget, workload=spec.workload,
                     context=spec.context, repeat=spec.repeat, repeats=spec.repeats,
                     tokens=spec.output_tokens)
    return replace(cell, spec=spec, timing=timing, judge=replace(cell.judge, planned=2))


def test_a_killed_attempts_time_counts_to_its_last_heartbeat(tmp_path: Path) -> None:
    """A reboot mid-cell: the attempt has no end, and its time after its last written cell (a
    server start, the cell it had begun: hours on a GPU) was not counted against the budget;
    now it counts to the attempt's last heartbeat (written before each cell and server start)."""
    import datetime as dt

    from specbench_lib.runs.run import spent_before
    from specbench_lib.runs.rundir import RunDir

    plan = sb.load_plan(budget_params(tmp_path, seed=2, budget="4s", **NEAR_TIES))
    first = sb.run_sweep(plan, outputs=tmp_path / "out", progress=False)
    beat = json.loads((first.run_dir / "heartbeat.json").read_text())
    assert beat["attempt"] == 1
    manifest = json.loads((first.run_dir / "manifest.json").read_text())
    manifest["attempts"][-1].update(ended=None, status=None)  # killed: no end
    (first.run_dir / "manifest.json").write_text(json.dumps(manifest))
    run_dir = RunDir(first.run_dir)
    before = spent_before(run_dir, manifest["attempts"])
    later = dt.datetime.fromisoformat(beat["at"]) + dt.timedelta(seconds=600)
    (first.run_dir / "heartbeat.json").write_text(json.dumps(
        {"attempt": 1, "at": later.isoformat()}))
    # to the heartbeat, 600 s after the last one written (which came before the last cell's end:
    # a heartbeat is written before each cell)
    started = dt.datetime.fromisoformat(manifest["attempts"][-1]["started"])
    spent = spent_before(run_dir, manifest["attempts"])
    assert spent > before + 590 and spent >= (later - started).total_seconds() - 1


def test_a_placed_round_starts_only_when_its_longest_slice_fits() -> None:
    """Placed on Ray a round's slices run at once: the budget lets in the whole round when its
    longest slice is predicted to end in it (the first round too)."""
    plan = small_plan()
    model = TimeModel(plan, SLOW)
    now = [0.0]
    budget = Budget(100, clock=lambda: now[0], began=0.0, model=model)
    slices = {s.label: [c for c in plan.cells_for(s) if c.repeat == 0]  # a start, a cell: 27 s
              for s in plan.servers}
    assert budget.round_may_start(slices, 1.0)
    now[0] = 80.0
    assert not budget.round_may_start(slices, 1.0)
    assert budget.cut is not None and budget.cut["predicted_s"] == 27.0
    assert budget.cut["server_start"] and budget.cut["left_s"] == 20.0
