"""Time the embedded sweep (goal: at most 10 minutes on 2 cores once the engine is built).

    .venv/bin/python benchmarks/embedded_sweep.py [params file] [--budget N]

Prints the wall time, each server's ready time and the cells per verdict; the run directory is
kept under outputs/runs like any other run.
"""

from __future__ import annotations

import argparse
import time

import specbench_lib as sb


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("params", nargs="?", default="params/embedded.yaml")
    parser.add_argument("--budget", type=int)
    args = parser.parse_args()
    plan = sb.load_plan(args.params, budget=args.budget)
    start = time.monotonic()
    result = sb.run_sweep(plan, progress=False)
    wall = time.monotonic() - start
    manifest = result.manifest
    print(f"cells: {len(plan.cells)}  wall: {wall:.1f} s  ({wall / 60:.2f} min, goal <= 10 min)")
    print(f"per cell: {wall / len(plan.cells):.1f} s  verdicts: {result.counts()}")
    for label, server in manifest["servers"].items():
        warm = server.get("warmup", {})
        print(f"  {label:<12} ready {server.get('ready_s', '?')} s, warmup {warm.get('seconds', '?')} s")


if __name__ == "__main__":
    main()
