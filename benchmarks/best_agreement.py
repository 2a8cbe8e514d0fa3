"""Do two runs name the same best config? The embedded sweep twice, back to back, compared panel
by panel (goal: the same best config in every panel, or each run's best in the other run's
confidence set for the best), with each best claim's speedup interval half-width (goal: at most 5 %).

    .venv/bin/python benchmarks/best_agreement.py [params file]       # runs the sweep twice
    .venv/bin/python benchmarks/best_agreement.py --runs DIR1 DIR2     # compares two runs on disk

A panel *agrees* when both runs name the same best config, or when each run's best is among the
configs the other run cannot exclude as the fastest (its confidence set); it *contradicts* when
one run excludes the other run's best. Figures go to benchmarks/results/best_agreement.json.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from _common import load_note, table, write_results

import specbench_lib as sb


def compare(first: sb.SweepResult, second: sb.SweepResult) -> list[dict[str, Any]]:
    keys = ["workload", "context", "concurrency"]
    a, b = first.best().set_index(keys), second.best().set_index(keys)
    rows = []
    for panel in a.index.intersection(b.index):
        x, y = a.loc[panel], b.loc[panel]
        tied_x = {s.strip() for s in str(x["confidence_set"]).split(",") if s.strip()}
        tied_y = {s.strip() for s in str(y["confidence_set"]).split(",") if s.strip()}
        same = x["best"] == y["best"]
        agree = same or (y["best"] in tied_x and x["best"] in tied_y)
        rows.append({"panel": "/".join(map(str, panel)), "best_1": x["best"], "best_2": y["best"],
                     "half_width_1_pct": x["half_width_pct"], "half_width_2_pct": y["half_width_pct"],
                     "verdict": "same" if same else "in_set" if agree else "contradicts"})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("params", nargs="?", default="params/embedded.yaml")
    parser.add_argument("--runs", nargs=2, type=Path, help="two run directories to compare")
    args = parser.parse_args()
    before = load_note()
    walls: list[float] = []
    if args.runs:
        results = [sb.SweepResult(d) for d in args.runs]
    else:
        results = []
        for _ in range(2):
            began = time.monotonic()
            outcome = sb.run_sweep(sb.load_plan(args.params), progress=False)
            assert isinstance(outcome, sb.SweepResult)
            results.append(outcome)
            walls.append(time.monotonic() - began)
    rows = compare(*results)
    print(table(rows, [("panel", "panel", 0), ("best_1", "run 1 best", 0),
                       ("best_2", "run 2 best", 0), ("half_width_1_pct", "±% 1", 1),
                       ("half_width_2_pct", "±% 2", 1), ("verdict", "verdict", 0)]))
    halves = [r[k] for r in rows for k in ("half_width_1_pct", "half_width_2_pct")
              if r[k] == r[k]]
    counts = {v: sum(r["verdict"] == v for r in rows) for v in ("same", "in_set",
                                                               "contradicts")}
    print(f"panels {len(rows)}: {counts}; best-claim half-width %: min {min(halves):.1f}, "
          f"max {max(halves):.1f} (goal <= 5); sweeps: {[round(w) for w in walls]} s")
    write_results("best_agreement", {"runs": [r.run_id for r in results], "rows": rows,
                                     "counts": counts, "walls_s": walls, "load_before": before,
                                     "load_after": load_note()})


if __name__ == "__main__":
    main()
