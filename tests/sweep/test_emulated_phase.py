"""The shipped tp1 design against the GPU emulator, small and compressed (issue 47, item 3):
its screen and its grid run as a researcher runs them (``specbench run tp1 -f <file> -p stage
<name>``: papermill, the executed notebook and its page, answer.json), the grid carrying the
screen's contenders; each answer covers every panel its stage names, within its share of the
phase's budget. What the answers hold against the emulator's truth, at the full design, is
benchmarks/emulated_phases.py's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml
from emuphase import emulated_params, stand_in_gpus

import specbench_lib as sb
from specbench_lib.analysis.rounds import panel_of

ROOT = Path(__file__).resolve().parents[2]
SPECBENCH = Path(sys.executable).parent / "specbench"


def small(folder: Path) -> Path:
    """tp1's screen and grid as shipped, at the short context, 1 request a wave, fewer
    budgets (the questions and keys are the shipped file's)."""
    shipped = yaml.safe_load((ROOT / "params" / "tp1.yaml").read_text())
    stages = [{**s, "contexts": [3072], "max_rounds": 3, "requests_per_cell": 1}
              if "contenders" not in s else {**s, "contexts": [3072], "max_rounds": 3}
              for s in shipped["stages"][:2]]
    configs = [c if c["method"] == "auto" else {**c, "budgets": c["budgets"][:1]
                                                if c["method"] == "linear" else [8, 32]}
               for c in shipped["configs"]]
    return emulated_params(folder, ROOT / "params" / "tp1.yaml", truth="published", scale=200,
                           extra={"stages": stages, "configs": configs, "contexts": [3072],
                                  "workloads": shipped["workloads"][1:], "requests_per_cell": 1,
                                  "time_budget_s": 80, "warmup_requests": 1})


def test_the_screen_and_the_grid_run_through_the_notebook_against_the_emulator(
        tmp_path: Path) -> None:
    outputs = tmp_path / "out"
    smi = stand_in_gpus(tmp_path / "smi")
    env = {**os.environ, "SPECBENCH_OUTPUTS": str(outputs), "PYTHONPATH": str(ROOT),
           "PATH": f"{smi.folder}:{os.environ['PATH']}"}
    params = small(tmp_path)
    answers = {}
    for stage in ("screen", "grid"):
        done = subprocess.run([str(SPECBENCH), "run", "tp1", "-f", str(params), "-p", "stage",
                               stage], env=env, cwd=ROOT, capture_output=True, text=True,
                              timeout=300, check=False)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        (run,) = sorted((outputs / "runs").glob(f"*_tp1-{stage}_*"))  # its own phase
        answers[stage] = json.loads((run / "answer.json").read_text())
        assert list(run.glob("*.ipynb")) and list(run.glob("*.html"))  # notebook and page
        html = next(run.glob("*.html")).read_text()
        assert f"stage {1 if stage == 'screen' else 2} of 2, {stage}" in html
        os.environ["SPECBENCH_OUTPUTS"] = str(outputs)
        try:
            plan = sb.load_plan(params, stage=stage)
        finally:
            del os.environ["SPECBENCH_OUTPUTS"]
        named = {panel_of(c)[:4] for c in plan.cells if c.repeat == 0 and not c.load}
        answered = {tuple(p["panel"][k] for k in ("workload", "context", "output_tokens",
                                                  "concurrency")) for p in answers[stage]["panels"]}
        assert answered == named  # every panel the stage's question names
        budget = answers[stage]["budget_s"]
        assert answers[stage]["seconds"] <= budget * 1.1 + 10  # its share of the phase's
        if stage == "grid":  # auto and the screen's contenders, nothing else
            carried = {s.label for s in plan.servers}
            screened = {m for p in answers["screen"]["panels"] for m in p["confidence_set"]}
            assert carried - {"auto"} <= screened and "auto" in carried
    shares = [answers[s]["budget_s"] for s in ("screen", "grid")]
    assert sum(shares) <= 80 + 1e-6  # the phase's budget, shared: 3 h and 2 h 30 m of 8 h
