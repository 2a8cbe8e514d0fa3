"""Do the 95 % intervals cover? Simulated sweeps of a batching server with a known truth
(``tests/support/simcells.py``): at concurrency 1, 2, 3 × repeats 1 and 3 × few and many requests a
cell, the fraction of sweeps whose interval holds the true output tok/s of each config and the
true speedup (goal: 95 % ± 2 at every design point that gives intervals), its Monte-Carlo
standard error, the median relative half-width, and how many sweeps gave no interval (too few
independent units: honest, not a miss).

    .venv/bin/python benchmarks/interval_coverage.py [--sweeps 500] [--seed 1]
    .venv/bin/python benchmarks/interval_coverage.py --intervals OLD.py   # another version, e.g.
        git show bbab476:specbench_lib/analysis/intervals.py > /tmp/old_intervals.py

Each sweep's table rows come from that version's ``add_intervals`` (as ``results_table`` calls
it). Figures go to benchmarks/results/interval_coverage.json.
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import statistics
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

from _common import ROOT, load_note, table, write_results

sys.path.insert(0, str(ROOT / "tests" / "support"))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from simcells import Truth, simulate_panels, true_speedup, true_tok_s  # noqa: E402

from specbench_lib.analysis import intervals  # noqa: E402
from specbench_lib.analysis.metrics import GROUP, PANEL  # noqa: E402

DESIGN = [(c, r, n) for c in (1, 2, 3) for r in (1, 3) for n in (3, 24)]


def load_intervals(path: str | None) -> ModuleType:
    """This checkout's intervals module, or another version of it from a file."""
    if path is None:
        return intervals
    spec = importlib.util.spec_from_file_location("specbench_lib._intervals_under_test", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def rows_of(module: ModuleType, cells: list[Any]) -> Any:
    """One sweep's table rows with their intervals (the row estimate: the repeats' mean)."""
    frame = pd.DataFrame([{**c.spec.row(), "output_tok_s": c.metrics["output_tok_s"]}
                          for c in cells if c.verdict.ok])
    means = frame.groupby(GROUP, dropna=False, sort=False)["output_tok_s"].mean().reset_index()
    auto = means[means["method"] == "auto"][[*PANEL, "output_tok_s"]]
    means = means.merge(auto.rename(columns={"output_tok_s": "auto"}), on=PANEL, how="left")
    means["speedup"] = means["output_tok_s"] / means["auto"]
    return module.add_intervals(means, cells, PANEL, GROUP).set_index("config")


def design_point(module: ModuleType, truth: Truth, point: tuple[int, int, int], sweeps: int,
                 rng: np.random.Generator) -> list[dict[str, Any]]:
    concurrency, repeats, requests = point
    tally: dict[str, dict[str, Any]] = {}
    for cells in simulate_panels(truth, concurrency, requests, repeats, rng, sweeps=sweeps):
        rows = rows_of(module, cells)
        for config in truth.configs:
            targets = [("output_tok_s", config.name,
                        true_tok_s(truth, config.name, concurrency, requests))]
            if config.method != "auto":
                targets.append(("speedup", config.name,
                                true_speedup(truth, config.name, concurrency, requests)))
            for column, name, true in targets:
                row = rows.loc[name]
                low, high = float(row[f"{column}_lo"]), float(row[f"{column}_hi"])
                entry = tally.setdefault(f"{column} {name}", {"truth": true, "hits": 0, "given": 0,
                                                              "none": 0, "half": []})
                if math.isnan(low) or math.isnan(high):
                    entry["none"] += 1
                    continue
                entry["given"] += 1
                entry["hits"] += low <= true <= high
                entry["half"].append(100 * (high - low) / 2 / float(row[column]))
    found = []
    for metric, entry in tally.items():
        given = entry["given"]
        cover = entry["hits"] / given if given else None
        found.append({"concurrency": concurrency, "repeats": repeats, "requests": requests,
                      "metric": metric, "truth": entry["truth"], "given": given,
                      "no_interval": entry["none"],
                      "coverage_pct": None if cover is None else 100 * cover,
                      "mc_se_pct": None if cover is None else
                      100 * math.sqrt(cover * (1 - cover) / given),
                      "median_half_width_pct": statistics.median(entry["half"])
                      if entry["half"] else None})
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sweeps", type=int, default=500, help="simulated sweeps per point")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--intervals", help="an intervals.py to measure instead of this one's")
    parser.add_argument("--name", default="interval_coverage", help="the results file's name")
    parser.add_argument("--drift-sd", type=float, default=Truth().drift_sd,
                        help="the simulated machine's drift between rounds (relative sd)")
    parser.add_argument("--point", action="append", metavar="C,R,N",
                        help="only this design point (concurrency, repeats, requests); repeatable")
    args = parser.parse_args()
    module = load_intervals(args.intervals)
    truth = Truth(drift_sd=args.drift_sd)
    began = time.monotonic()
    rows: list[dict[str, Any]] = []
    design = [tuple(int(x) for x in p.split(",")) for p in args.point] if args.point else DESIGN
    for point in design:
        rows.extend(design_point(module, truth, point, args.sweeps,
                                 np.random.default_rng([args.seed, *point])))
    columns = [("concurrency", "c", 0), ("repeats", "repeats", 0), ("requests", "requests", 0),
               ("metric", "metric", 0), ("truth", "truth", 3), ("coverage_pct", "cover %", 1),
               ("mc_se_pct", "± se", 1), ("median_half_width_pct", "± half %", 1),
               ("no_interval", "none", 0)]
    print(table(rows, columns))
    given = [r for r in rows if r["coverage_pct"] is not None]
    worst = min(given, key=lambda r: r["coverage_pct"]) if given else None
    elapsed = time.monotonic() - began
    print(f"{len(design)} design points × {args.sweeps} sweeps in {elapsed:.0f} s; lowest "
          f"coverage {worst['coverage_pct']:.1f} % ({worst['metric']}, c{worst['concurrency']}, "
          f"{worst['repeats']} repeat(s), {worst['requests']} requests)" if worst else "")
    write_results(args.name, {"load": load_note(), "sweeps": args.sweeps, "seed": args.seed,
                              "intervals": str(Path(args.intervals).resolve())
                              if args.intervals else "specbench_lib/analysis/intervals.py",
                              "truth": repr(truth), "elapsed_s": elapsed, "rows": rows})


if __name__ == "__main__":
    main()
