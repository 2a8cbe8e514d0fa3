"""A staged design run end to end on fake servers with a known truth (issue 47): the screen
measures every budget, its answer names the contenders, the grid carries them (the true best
among them) with auto across more panels, and each stage keeps its share of the phase's
budget. The truth: ngram-b8 1.35x auto, b4 1.05x, b16 1.15x, b32 0.95x (budgetparams.KNOWN)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from budgetparams import budget_params

import specbench_lib as sb
from specbench_lib.sweep.preview import PlanPreview

STAGES = [
    {"name": "screen", "question": "which budgets can be the best", "time_budget_s": "24s",
     "max_rounds": 6},
    {"name": "grid", "question": "which contender is best at 1 and 2 in flight",
     "contenders": "screen", "max_contenders": 2, "concurrency": [1, 2],
     "requests_per_cell": "spread", "requests_max": 3, "max_rounds": 4, "time_budget_s": "36s"},
]


def staged(tmp_path: Path) -> Path:
    path = budget_params(tmp_path, seed=3, budget="60s", jitter=0.2)
    data = yaml.safe_load(path.read_text())
    data.update(stages=STAGES, phase="staged")
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_the_screen_names_the_contenders_and_the_grid_carries_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    outputs = tmp_path / "out"
    monkeypatch.setenv("SPECBENCH_OUTPUTS", str(outputs))  # where the grid finds the screen
    path = staged(tmp_path)
    design = PlanPreview(sb.load_plan(path)).design  # the dry run prices both stages
    assert [s.name for s in design.stages] == ["screen", "grid"]
    screen = sb.run_sweep(sb.load_plan(path, stage="screen"), outputs=outputs, progress=False)
    first = json.loads((screen.run_dir / "answer.json").read_text())
    assert screen.info.phase == "staged-screen" and len(first["panels"]) == 1
    assert first["seconds"] <= 24 * 1.1 + 5  # its share of the phase's budget, kept
    (found,) = first["panels"]
    assert "ngram-b8" in found["confidence_set"]  # the truth's best is a contender
    grid_plan = sb.load_plan(path, stage="grid")
    carried = [s.label for s in grid_plan.servers]
    assert carried[0] == "auto" and "ngram-b8" in carried and len(carried) <= 3
    assert screen.run_id in grid_plan.stage.note  # says which run it carried from
    grid = sb.run_sweep(grid_plan, outputs=outputs, progress=False)
    second = json.loads((grid.run_dir / "answer.json").read_text())
    assert {p["panel"]["concurrency"] for p in second["panels"]} == {1, 2}  # every panel
    assert all("ngram-b8" in p["confidence_set"] for p in second["panels"])
    assert second["seconds"] <= 36 * 1.1 + 5
    assert all(p["best"] == "ngram-b8" for p in second["panels"] if p["decision"] == "decided")
