"""Dry runs show the plan of any phase, GPU phases included, on a machine without a GPU."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from paramsfiles import write_params

import specbench_lib as sb
from specbench_lib.sweep.preview import PlanPreview

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def test_preview_gives_argv_guard_and_known_bad(tmp_path: Path) -> None:
    # one length, closed loop only, the fixed plan (one round), greedy only, the phase's axes
    # as one plan (no stages)
    params = write_params(tmp_path, ROOT / "params" / "tp1.yaml", contexts=[3072, 32600],
                          output_tokens=256, request_rate=None, time_budget_s=None,
                          temperature=0, stages=[])
    preview = sb.run_sweep(sb.load_plan(params, budget=8), dry_run=True)
    assert isinstance(preview, PlanPreview)
    servers = preview.servers().set_index("config")["argv"]
    assert "--speculative-num-draft-tokens 9" in servers["ddtree-b8"]
    assert "--speculative" not in servers["auto"]
    cells = preview.cells().set_index("cell")
    assert cells.loc["auto__code__ctx3072__c1", "guard"] == "fits"
    refused = cells.loc["auto__chat__ctx32600__c1", "guard"]  # code: 3072 only
    assert refused.startswith("context_overflow: prompt 32600 + output 256")
    assert "illegal instruction" in cells.loc["ddtree-b8__chat__ctx3072__c4", "known_bad"]
    assert preview.figures() == {}
    assert "context guard: 12 cells fit, 6 refused" in preview.text()  # code at 3072 only


@pytest.mark.parametrize("phase", ["tp4", "tp8"])
def test_gpu_phase_notebook_dry_run_through_papermill(phase: str, tmp_path: Path) -> None:
    out = tmp_path / f"{phase}.ipynb"
    done = subprocess.run([str(BIN / "papermill"), f"notebooks/{phase}.ipynb", str(out), "-p",
                           "dry_run", "True", "-p", "budget", "16"], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    text = json.dumps(json.loads(out.read_text())["cells"])
    assert f"--tp-size {phase[2:]}" in text
    assert "--speculative-dflash-enable-ddtree" in text and "dry run" in text


def test_cli_dry_run_uses_the_notebook_default_params() -> None:
    done = subprocess.run([str(BIN / "specbench"), "run", "tp8", "--dry-run"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("Plan tp8-screen (tp8.yaml)")  # the design's first stage
    assert "stage 1 of 4, screen" in done.stdout and "design: 4 stages, 24.0 h" in done.stdout
    assert "--tp-size 8" in done.stdout and "ddtree-b64" in done.stdout
