"""The time-budgeted sweep against the full factorial, over simulated sweeps with a known truth.

    python benchmarks/adaptive_sweep.py [--sweeps 200] [--budget 60] [--start 1.0]

One panel of ``tests/simcells.py``'s batching-server model (concurrency 1, 3 requests a cell):
auto and four budgets whose gains are the issue's speedups (b4 1.05, b8 1.35, b16 1.15,
b32 0.95), with prompt-to-prompt spread, per-step noise and drift between rounds. Each config's
slice of a round costs a server start (``--start`` s) plus its cell's simulated window.

- **adaptive**: :class:`specbench_lib.analysis.rounds.Contention` round by round (the sweep's own code:
  looks at α / looks, Holm sets, elimination), a round started only when its predicted cost
  fits what is left of ``--budget``; the answer from :func:`specbench_lib.analysis.answer.build_answer`.
- **factorial**: as many whole rounds of every config as fit in the same budget, then one
  confidence set at the plain α (:func:`specbench_lib.analysis.selection.select`).

Prints: how often the decided best is the true best (of the decided sweeps; ≥ 95 % wanted), how
often each design decides the true best and the ratio adaptive / factorial at equal wall time,
and how often the adaptive answer's speedup interval covers the true speedup (≥ 93 % wanted).
Writes ``benchmarks/results/adaptive_sweep.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from simcells import ConfigTruth, Truth, simulate_panels, true_speedup  # noqa: E402

from specbench_lib.analysis.answer import build_answer  # noqa: E402
from specbench_lib.analysis.intervals import group_replicates, independent_units, ok_groups  # noqa: E402
from specbench_lib.analysis.metrics import GROUP  # noqa: E402
from specbench_lib.analysis.rounds import Contention  # noqa: E402
from specbench_lib.analysis.selection import select  # noqa: E402
from specbench_lib.model.records import CellRecord  # noqa: E402

SPEEDUPS = {4: 1.05, 8: 1.35, 16: 1.15, 32: 0.95}
def truth_with(cell_sd: float) -> Truth:
    """The panel's model, with ``cell_sd`` of drift of each cell of its own."""
    return Truth(configs=(ConfigTruth("auto", gain_sigma=0.1),
                          *(ConfigTruth(f"ngram-b{b}", "ngram", b, gain=g, gain_sigma=0.3,
                                        batch_exponent=0.6) for b, g in SPEEDUPS.items())),
                 step_s=0.02, tokens=16, token_sd=0.1, drift_sd=0.03, cell_sd=cell_sd)
BEST = "ngram-b8"


def cost(cell: CellRecord, start_s: float) -> float:
    """A slice's seconds: a server start and the cell's window."""
    times = [t for r in cell.measured for t in r.token_times]
    return start_s + (max(times) - min(r.start for r in cell.measured) if times else 0.0)


def adaptive(cells: list[CellRecord], rounds: int, budget: float,
             start_s: float) -> dict[str, Any]:
    """One budgeted sweep over pre-simulated cells (all rounds), measuring only what the
    contest asks for, as long as each round's predicted cost fits."""
    contest = Contention([c.spec for c in cells], rounds=rounds)
    by_key = {(c.spec.config, c.spec.repeat): c for c in cells}
    measured: list[CellRecord] = []
    spent, last, last_n, stopped, number = 0.0, 0.0, 1, "rounds", 0
    for number in range(rounds):
        todo = contest.wanted([c.spec for c in cells], number)
        predicted = last / max(1, last_n) * len(todo) if number else 0.0
        if number and spent + predicted > budget:
            stopped = "budget"
            break
        took = sum(cost(by_key[(s.config, s.repeat)], start_s) for s in todo)
        measured += [by_key[(s.config, s.repeat)] for s in todo]
        spent, last, last_n = spent + took, took, len(todo)
        contest.observe(measured, number, spent)
        if contest.done:
            stopped, number = "decided", number + 1
            break
    else:
        number = rounds
    return build_answer(contest, measured, seconds=spent, budget_s=budget, rounds=number,
                        stopped=stopped)["panels"][0]


def factorial(cells: list[CellRecord], budget: float, start_s: float) -> tuple[str, str, int]:
    """The full factorial that fits the budget: its leader, decision and rounds."""
    configs = list(dict.fromkeys(c.spec.config for c in cells))
    per_round = np.mean([cost(c, start_s) for c in cells]) * len(configs)
    rounds = max(1, int(budget // per_round))
    chosen = [c for c in cells if c.spec.repeat < rounds]
    groups = ok_groups(chosen, GROUP)
    key = {k[GROUP.index("config")]: k for k in groups}
    reps = group_replicates(groups)
    means = {c: np.mean([x.metrics["output_tok_s"] for x in groups[key[c]]]) for c in configs}
    leader = max(configs, key=lambda c: means[c])
    picked = select(configs, {c: reps[key[c]] for c in configs},
                    {c: independent_units(groups[key[c]]) for c in configs}, leader)
    return picked.leader, picked.decision, rounds


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sweeps", type=int, default=200)
    parser.add_argument("--budget", type=float, default=60.0, help="seconds of simulated time")
    parser.add_argument("--rounds", type=int, default=12, help="max_rounds")
    parser.add_argument("--start", type=float, default=1.0, help="a server start, seconds")
    parser.add_argument("--seed", type=int, default=22)
    parser.add_argument("--cell-sd", type=float, default=0.02,
                        help="each cell's own drift (lognormal sd): what pairing cannot cancel")
    args = parser.parse_args()
    began = time.monotonic()
    model = truth_with(args.cell_sd)
    truth = true_speedup(model, BEST, 1, 3)
    sweeps = simulate_panels(model, 1, 3, args.rounds, np.random.default_rng(args.seed),
                             sweeps=args.sweeps)
    found = {"decided": 0, "right": 0, "covered": 0, "with_interval": 0, "factorial_right": 0,
             "seconds": [], "factorial_rounds": 0}
    for cells in sweeps:
        panel = adaptive(cells, args.rounds, args.budget, args.start)
        found["seconds"].append(panel["decided_s"] or args.budget)
        if panel["decided"]:
            found["decided"] += 1
            found["right"] += panel["best"] == BEST and panel["decision"] == "decided"
        if panel["best"] == BEST and panel["speedup_lo"] is not None:
            found["with_interval"] += 1
            found["covered"] += panel["speedup_lo"] <= truth <= panel["speedup_hi"]
        leader, decision, rounds = factorial(cells, args.budget, args.start)
        found["factorial_right"] += leader == BEST and decision == "decided"
        found["factorial_rounds"] = rounds
    n = args.sweeps
    right_rate = found["right"] / max(1, found["decided"])
    ratio = found["right"] / max(1, found["factorial_right"])
    coverage = found["covered"] / max(1, found["with_interval"])
    figures = {
        "sweeps": n, "budget_s": args.budget, "cell_sd": args.cell_sd, "max_rounds": args.rounds,
        "true_speedup_b8": round(truth, 4),
        "adaptive_decided": found["decided"] / n, "adaptive_right_of_decided": right_rate,
        "adaptive_right_best": found["right"] / n,
        "factorial_right_best": found["factorial_right"] / n,
        "factorial_rounds": found["factorial_rounds"],
        "adaptive_over_factorial": ratio if found["factorial_right"] else None,
        "coverage": coverage, "coverage_n": found["with_interval"],
        "adaptive_median_s": float(np.median(found["seconds"])),
        "wall_s": round(time.monotonic() - began, 1)}
    print(f"true speedup of {BEST}: {truth:.3f}; {n} sweeps, budget {args.budget:g} s")
    print(f"adaptive: decided {found['decided']}/{n}, the true best in {found['right']}"
          f" ({100 * right_rate:.1f} % of the decided); median time to decide "
          f"{figures['adaptive_median_s']:.1f} s")
    print(f"factorial ({found['factorial_rounds']} rounds in the budget): decided the true best "
          f"in {found['factorial_right']}/{n}")
    print(f"adaptive / factorial, right best decided at equal wall time: "
          f"{found['right']}/{found['factorial_right']} = {ratio:.2f}")
    print(f"coverage of the adaptive speedup interval: {found['covered']}/"
          f"{found['with_interval']} = {100 * coverage:.1f} %")
    out = ROOT / "benchmarks" / "results"
    out.mkdir(parents=True, exist_ok=True)
    (out / "adaptive_sweep.json").write_text(json.dumps(figures, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
