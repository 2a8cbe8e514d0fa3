"""A shipped phase's whole design against the GPU emulator, compressed, under several truths
(issue 47, item 3): each stage run as a researcher runs it (``specbench run tp1 -f <file> -p
stage <name>``: papermill, the executed notebook and its page, ``answer.json``), its answer read
against the emulator's closed-form truth (tests/support/emuphase.py).

    PYTHONPATH=$PWD .venv/bin/python benchmarks/emulated_phases.py --scale 60 \\
        --truths published,budget_shift,tree_never

Prints per truth × stage: the panels the stage's question names and those its answer covers;
how many panels' sets hold the true best (of the configs the stage measured, and of every
config of the phase); "decided" panels whose best is not the true best (against α = 5 % a
panel); the stage's seconds against its budget (the phase's budget / scale, shared by the
stages in proportion). The emulator's time is scaled; this machine's (the client, prompt
building, the kernel) is not, so a compressed round costs more than its scaled share and fewer
rounds fit than at full speed: the table says how many each stage took.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from _common import ROOT, load_note, write_results

sys.path.insert(0, str(ROOT / "tests" / "support"))

from emuphase import emulated_config, emulated_params, score, stand_in_gpus  # noqa: E402

import specbench_lib as sb  # noqa: E402
from specbench_lib.analysis.rounds import panel_of  # noqa: E402
from specbench_lib.servers.engines import get_adapter  # noqa: E402
from specbench_lib.sweep.lifetimes import launch_argvs  # noqa: E402


def configs_of(plan: sb.Plan) -> dict[str, Any]:
    """Each server of ``plan`` as the emulator runs it (from the argv it is launched with)."""
    argvs = launch_argvs(plan, get_adapter(plan.params.engine))
    return {s.label: emulated_config(list(argvs[s.label] or [])) for s in plan.servers}


def run_stage(params: Path, stage: str, outputs: Path, env: dict[str, str]) -> Path:
    """``specbench run`` of one stage (the notebook through papermill); its run directory."""
    done = subprocess.run([str(Path(sys.executable).parent / "specbench"), "run", "tp1", "-f",
                           str(params), "-p", "stage", stage], env=env, cwd=ROOT,
                          capture_output=True, text=True, check=False)
    runs = sorted((outputs / "runs").glob(f"*_tp1-{stage}_*"))
    if done.returncode != 0 or not runs:
        raise SystemExit(f"stage {stage} failed ({done.returncode}):\n{done.stdout[-3000:]}"
                         f"\n{done.stderr[-3000:]}")
    return runs[-1]


def one_truth(truth: str, scale: float, folder: Path, phase: Path, *,
              rescore: bool = False) -> list[dict[str, Any]]:
    """Every stage of ``phase`` under ``truth`` (``rescore``: the runs already in ``folder``,
    read again, nothing run)."""
    outputs = folder / "out"
    smi = stand_in_gpus(folder / "smi")
    env = {**os.environ, "SPECBENCH_OUTPUTS": str(outputs),
           "PATH": f"{smi.folder}:{os.environ['PATH']}", "PYTHONPATH": str(ROOT)}
    os.environ["SPECBENCH_OUTPUTS"] = str(outputs)  # where a contenders stage reads its answer
    # chat alone: the emulator's tokenizer is words, so HumanEval's documents hold fewer tokens
    # than Qwen3's and cannot fill the code workload's 3072-token prompts (a preflight refusal)
    shipped = sb.load_params(phase)
    params = emulated_params(folder, phase, truth=truth, scale=scale, extra={"workloads": [
        w.model_dump(exclude_defaults=True) for w in shipped.workloads if w.name == "chat"]})
    every = configs_of(sb.load_plan(params))  # the screen measures every config of the phase
    rows = []
    for stage in [s.name for s in sb.load_params(params).stages]:
        began = time.monotonic()
        if rescore:
            run = sorted((outputs / "runs").glob(f"*_tp1-{stage}_*"))[-1]
        else:
            run = run_stage(params, stage, outputs, env)
        plan = sb.load_plan(params, stage=stage)  # the newest screen's contenders: the run's
        rows.append(_row(truth, stage, run, plan, every, time.monotonic() - began))
        print(_line(rows[-1]), flush=True)
    return rows


def _row(truth: str, stage: str, run: Path, plan: sb.Plan, every: dict[str, Any],
         wall: float) -> dict[str, Any]:
    answer = json.loads((run / "answer.json").read_text())
    named = {panel_of(c) for c in plan.cells if c.repeat == 0 and not c.load}
    measured = {label: c for label, c in every.items()
                if label in {s.label for s in plan.servers}}
    found = score(answer, measured, every, truth=truth, gpu="H100", model="Qwen3-8B",
                  tp=plan.params.engine.tp, task="chat")
    return {"truth": truth, "stage": stage, "named": len(named),
            "answered": len(answer["panels"]),
            "covered": sum(s.covered for s in found),
            "covered_phase": sum(s.covered_phase for s in found),
            # the answer's leader within 5 % of the true best of every config
            "near_phase": sum(s.gap_phase <= 0.05 for s in found),
            "decided": sum(s.decision == "decided" for s in found),
            "tie": sum(s.decision == "tie" for s in found),
            "wrong": sum(s.wrong for s in found), "rounds": answer["rounds"],
            "seconds": answer["seconds"], "budget_s": answer["budget_s"],
            "wall_s": round(wall, 1), "pages": sorted(p.name for p in run.glob("*.html")),
            "run": run.name, "carried": [s.label for s in plan.servers],
            "panels": [vars(s) for s in found]}


def _line(row: dict[str, Any]) -> str:
    return (f"{row['truth']:<13} {row['stage']:<12} panels {row['answered']}/{row['named']} · "
            f"set holds the true best {row['covered']}/{row['answered']} (of every config "
            f"{row['covered_phase']}; leader within 5 % of it {row['near_phase']}) · "
            f"decided {row['decided']}, tie {row['tie']}, wrong {row['wrong']} · "
            f"{row['rounds']} rounds · {row['seconds']:.0f} s of {row['budget_s']:.0f} s · "
            f"configs {', '.join(row['carried'])}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--phase", default="params/tp1.yaml")
    ap.add_argument("--scale", type=float, default=60.0)
    ap.add_argument("--truths", default="published,budget_shift,tree_never")
    ap.add_argument("--folder", default="/tmp/specbench-emulated-phases")
    ap.add_argument("--rescore", action="store_true", help="read the runs in --folder again")
    args = ap.parse_args()
    note = load_note()
    rows = []
    for truth in args.truths.split(","):
        rows += one_truth(truth, args.scale, Path(args.folder) / truth, ROOT / args.phase,
                          rescore=args.rescore)
    total = {t: sum(r["seconds"] for r in rows if r["truth"] == t) for t in args.truths.split(",")}
    answered = sum(r["answered"] for r in rows)
    print(f"\nall: set holds the true best in {sum(r['covered'] for r in rows)}/{answered} "
          f"panels ({sum(r['covered_phase'] for r in rows)} of every config's best; the leader "
          f"within 5 % of that best in {sum(r['near_phase'] for r in rows)}); wrong "
          f"{sum(r['wrong'] for r in rows)} of {sum(r['decided'] + r['tie'] for r in rows)} "
          f"decided or tied; seconds per truth {total} against {args.scale:g}x-compressed budgets; "
          f"load {note}")
    write_results("emulated_phases", {"scale": args.scale, "rows": rows, "load": note})


if __name__ == "__main__":
    main()
