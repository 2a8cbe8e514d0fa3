"""A phase's design in stages (issue 47): each stage a run of its own questions, axes and time
budget; a contenders stage carries auto and the configs an earlier stage's answer could not
exclude; bad stage keys are refused naming the key; a dry run prices every stage."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from paramsfiles import write_params

import specbench_lib as sb
from specbench_lib.core.errors import ParamsError
from specbench_lib.sweep.preview import PlanPreview

CONFIGS = [{"name": "auto", "method": "auto"},
           {"name": "ngram", "method": "ngram", "budgets": [4, 8, 16, 32],
            "options": {"n_match": 8, "n_min": 8}}]
STAGES = [
    {"name": "screen", "question": "which budgets can be the best at the corners",
     "concurrency": [1], "max_rounds": 3, "time_budget_s": "20m"},
    {"name": "grid", "question": "which contender is best in every panel", "contenders": "screen",
     "max_contenders": 2, "requests_per_cell": "spread", "requests_max": 6,
     "time_budget_s": "30m"},
]


def staged(tmp_path: Path, stages: list[dict[str, Any]] = STAGES, **keys: Any) -> Path:
    return write_params(tmp_path, configs=CONFIGS, contexts=[128], concurrency=[1, 2],
                        time_budget_s=keys.pop("time_budget_s", "1h"), max_rounds=4,
                        stages=stages, **keys)


def answer(outputs: Path, run_id: str, panels: list[dict[str, Any]]) -> Path:
    folder = outputs / "runs" / run_id
    folder.mkdir(parents=True)
    doc = {"seconds": 10.0, "budget_s": 1200.0, "rounds": 3, "stopped": "decided",
           "alpha": 0.05, "looks": 2, "panels": panels}
    (folder / "answer.json").write_text(json.dumps(doc))
    return folder


def panel(concurrency: int, best: str, members: list[str], lo: float, hi: float,
          requests: int) -> dict[str, Any]:
    return {"panel": {"workload": "code", "context": 128, "output_tokens": 64,
                      "concurrency": concurrency, "load": "", "temperature": 0.0},
            "decided": len(members) == 1, "decision": "undecided", "best": best,
            "confidence_set": members, "speedup": (lo * hi) ** 0.5, "speedup_lo": lo,
            "speedup_hi": hi, "baseline": "auto", "requests": {best: requests}, "eliminated": {}}


def test_the_first_stage_is_a_run_of_its_own_with_its_axes_and_says_so(tmp_path: Path) -> None:
    plan = sb.load_plan(staged(tmp_path))
    assert plan.params.phase == "tiny-screen"  # its runs are found by name
    assert plan.params.concurrency == (1,) and plan.params.max_rounds == 3
    assert plan.params.time_budget_s == 1200 and plan.params.stages == ()
    assert {s.label for s in plan.servers} == {"auto", "ngram-b4", "ngram-b8", "ngram-b16",
                                               "ngram-b32"}
    assert "stage 1 of 2, screen: which budgets can be the best" in repr(plan)
    assert "stage 1 of 2, screen" in plan.html()


def test_a_contenders_stage_carries_the_union_of_the_sets_leaders_first(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    outputs = tmp_path / "out"
    monkeypatch.setenv("SPECBENCH_OUTPUTS", str(outputs))
    answer(outputs, "20260101T000000Z_tiny-screen_aaaaaa", [panel(1, "ngram-b4", ["ngram-b4"],
                                                                  1.2, 1.3, 8)])
    answer(outputs, "20260102T000000Z_tiny-screen_bbbbbb", [
        panel(1, "ngram-b32", ["ngram-b32", "ngram-b16", "auto"], 1.01, 1.4, 4),
        panel(2, "ngram-b8", ["ngram-b8", "ngram-b16"], 1.05, 1.2, 8)])
    plan = sb.load_plan(staged(tmp_path), stage="grid")  # the newest screen's answer
    assert plan.params.phase == "tiny-grid"
    # each panel's leader first, then the other members; auto always; at most 2 carried
    assert [s.label for s in plan.servers] == ["auto", "ngram-b8", "ngram-b32"]
    assert "the first 2 of 3" in plan.stage.note and not plan.stage.missing
    # 4 waves gave a half-width of ln(1.4/1.01)/2: reaching ln(1/0.95) needs ~45 waves over 4
    # rounds, capped at requests_max 6
    assert plan.params.requests_per_cell == 6 and "sized from the measured spread" in plan.stage.note
    named = sb.load_plan(staged(tmp_path), stage="grid",
                         contenders_run="20260101T000000Z_tiny-screen_aaaaaa")
    assert [s.label for s in named.servers] == ["auto", "ngram-b4"]
    # ln(1.3/1.2)/2 = 0.040 from 8 waves: 8 * (0.040 / 0.0513)^2 = 4.9 waves over 4 rounds: 2
    assert named.params.requests_per_cell == 2


def test_without_its_earlier_answer_a_stage_is_priced_but_not_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPECBENCH_OUTPUTS", str(tmp_path / "out"))
    plan = sb.load_plan(staged(tmp_path), stage="grid")
    assert plan.stage.missing and len(plan.servers) == 3  # auto + max_contenders, priced
    with pytest.raises(ParamsError, match="run stage screen first"):
        sb.run_sweep(plan, outputs=tmp_path / "out", progress=False)
    preview = PlanPreview(sb.load_plan(staged(tmp_path)))  # the phase's dry run: every stage
    text = preview.text()
    assert "design: 2 stages, 50 m" in text
    assert "1. screen: 5 configs" in text and "2. grid: 3 configs" in text
    assert [s.rounds for s in preview.design.stages] == [3, 4]


@pytest.mark.parametrize(("change", "message"), [
    ({"stages": [{**STAGES[1], "contenders": "later"}, STAGES[0]]},
     "stages.grid.contenders = 'later': name an earlier stage"),
    ({"stages": [STAGES[0], {**STAGES[0]}]}, "the name 'screen' is used twice"),
    ({"stages": [{**STAGES[0], "workloads": ["chat"]}]}, "stages.screen.workloads names ['chat']"),
    ({"stages": [{**STAGES[0], "requests_per_cell": "spread"}]}, "give contenders, or a number"),
    ({"stages": [{**STAGES[0], "contexts": [128], "concurency": [1]}]},
     "unknown key 'concurency'; did you mean 'concurrency'?"),
    ({"stages": [{**STAGES[0], "time_budget_s": "soon"}]}, "stages.0.time_budget_s"),
])
def test_a_bad_stage_is_refused_naming_its_key(tmp_path: Path, change: dict[str, Any],
                                               message: str) -> None:
    with pytest.raises(ParamsError) as caught:
        sb.load_plan(staged(tmp_path, **change))
    assert message in str(caught.value) and str(tmp_path) in str(caught.value)


def test_a_phase_budget_under_the_stages_sum_scales_each_stage_down(tmp_path: Path) -> None:
    """A compressed run (the phase's budget in minutes) keeps the phase's budget: each stage's
    share of it, in proportion to the stages' own budgets (20 m and 30 m of 50 m)."""
    plan = sb.load_plan(staged(tmp_path, time_budget_s="5m"))
    assert plan.params.time_budget_s == pytest.approx(120.0)
    assert "scaled to 120 s" in plan.stage.note
    grid = sb.load_plan(staged(tmp_path, time_budget_s="5m"), stage="grid")
    assert grid.params.time_budget_s == pytest.approx(180.0)


def test_an_unknown_stage_names_the_stages(tmp_path: Path) -> None:
    with pytest.raises(ParamsError, match="no stage 'grdi'; the stages are screen, grid"):
        sb.load_plan(staged(tmp_path), stage="grdi")
    with pytest.raises(ParamsError, match="has no stages"):
        sb.load_plan(write_params(tmp_path, name="plain.yaml"), stage="screen")


def test_the_design_cards_one_budget_runs_in_the_first_stage_and_says_so() -> None:
    """`papermill notebooks/tp1.ipynb out.ipynb -p params_file params/tp1.yaml -p budget 16`:
    one budget of each config against the baseline, in the screen, which the plan names."""
    plan = sb.load_plan("params/tp1.yaml", budget=16)
    assert [s.label for s in plan.servers] == ["auto", "dflash-b16", "ddtree-b16"]
    assert plan.params.phase == "tp1-screen"
    assert "stage 1 of 4, screen: Which of auto, DFlash-b16 and DDTree" in repr(plan)


def test_a_plans_cells_keep_the_fingerprints_they_had_before_stages_existed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The design is not measured: a plan's cells (a stage's, or a plain file's) carry the
    fingerprints its params gave before the ``stages`` key existed, so earlier runs' cells
    stay current for resume and reuse."""
    from specbench_lib.model import fingerprint
    from specbench_lib.model.params import SweepParams

    parts = fingerprint.Components({"kind": "x"}, "m", "c", {"prompt": [1]})

    def prints(plan: sb.Plan) -> dict[str, str]:
        return fingerprint.cell_fingerprints(plan, {s.label: ["x"] for s in plan.servers}, parts)

    plans = [sb.load_plan(staged(tmp_path)), sb.load_plan(write_params(tmp_path, name="p2.yaml"))]
    now = [prints(p) for p in plans]
    dump = SweepParams.model_dump

    def before(self: SweepParams, **kw: Any) -> dict[str, Any]:  # the params without the key
        return {k: v for k, v in dump(self, **kw).items() if k != "stages"}

    monkeypatch.setattr(SweepParams, "model_dump", before)
    assert now == [prints(p) for p in plans]
