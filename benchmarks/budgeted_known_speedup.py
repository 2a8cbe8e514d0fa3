"""The issue-22 check on a real sweep: a time-budgeted sweep on servers with known speedups.

    python benchmarks/budgeted_known_speedup.py [--seeds 3] [--budget 40s]

Five configs on ``tests/support/fake_server.py`` (real HTTP server processes, started and measured by
the whole sweep machinery): auto sends a token every 4 ms, budget b every 4 ms / speedup(b), with
b4 1.05, b8 1.35, b16 1.15, b32 0.95. One panel, 3 requests a cell a round. For each seed (other
prompts, another order) the run must end within its budget and name ngram-b8 the decided best,
alone in its set, with a speedup interval that contains 1.35. ``tests/sweep/test_time_budget.py``
runs seed 0; this runs ``--seeds``. Writes ``benchmarks/results/budgeted_known_speedup.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "support"))

from budgetparams import budget_params  # noqa: E402

import specbench_lib as sb  # noqa: E402
from specbench_lib.core.durations import parse_duration  # noqa: E402
from specbench_lib.model.answerfile import read_answer  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--budget", default="40s")
    args = parser.parse_args()
    budget = parse_duration(args.budget) or 0.0
    rows, passed = [], 0
    with tempfile.TemporaryDirectory() as tmp:
        for seed in range(args.seeds):
            began = time.monotonic()
            result = sb.run_sweep(sb.load_plan(budget_params(Path(tmp), seed=seed,
                                                             budget=args.budget, jitter=0.3)),
                                  outputs=Path(tmp) / "out", progress=False)
            wall = time.monotonic() - began
            answer = read_answer(result.run_dir)
            assert answer is not None, "a budgeted sweep writes its answer"
            (panel,) = answer.panels
            low, high = panel.speedup_lo or float("nan"), panel.speedup_hi or float("nan")
            ok = (wall <= budget * 1.1 and panel.decided and panel.best == "ngram-b8"
                  and panel.confidence_set == ("ngram-b8",) and low <= 1.35 <= high)
            passed += ok
            rows.append({"seed": seed, "wall_s": round(wall, 1), "rounds": answer.rounds,
                         "stopped": answer.stopped, "best": panel.best,
                         "set": list(panel.confidence_set), "speedup": panel.speedup,
                         "interval": [panel.speedup_lo, panel.speedup_hi],
                         "eliminated": panel.eliminated, "pass": ok})
            print(f"seed {seed}: {'PASS' if ok else 'FAIL'} in {wall:.1f} s of {budget:g} s, "
                  f"{answer.rounds} rounds: {panel.best} {panel.speedup or float('nan'):.3f} "
                  f"[{low:.3f}, {high:.3f}], set "
                  f"{list(panel.confidence_set)}, out {panel.eliminated}")
    print(f"{passed}/{args.seeds} seeds pass")
    out = ROOT / "benchmarks" / "results"
    out.mkdir(parents=True, exist_ok=True)
    (out / "budgeted_known_speedup.json").write_text(json.dumps(rows, indent=1) + "\n")
    return 0 if passed == args.seeds else 1


if __name__ == "__main__":
    raise SystemExit(main())
