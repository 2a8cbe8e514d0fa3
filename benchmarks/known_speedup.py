"""Interval coverage on a real sweep against a server whose speedup is set (issue 20).

    python benchmarks/known_speedup.py [--sweeps 40] [--requests 3]

Two configs on ``tests/support/fake_server.py`` (a real HTTP server process, started and measured by the
whole sweep machinery): ``auto`` sends a token every 4 ms, ``fast`` every 3 ms. The truth is the
speedup a sweep with many requests measures (``--truth-requests`` per wave, its own interval
printed); then ``--sweeps`` independent sweeps (another seed each: other prompts, another order)
at concurrency 1 and 3 count how often the 95 % speedup interval holds the truth. A cell with too
few independent units has no interval and is counted apart. Writes
``benchmarks/results/known_speedup.json``. Run it on a quiet host (``uptime``).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "support"))

from fakeparams import fake_argv, fake_engine  # noqa: E402

import specbench_lib as sb  # noqa: E402

PORT = 8251


def params(folder: Path, *, seed: int, requests: int) -> Path:
    path = folder / f"known-{seed}-{requests}.yaml"
    path.write_text(f"""phase: known
{fake_engine(PORT, fake_argv(interval=0.004), ready_timeout_s=20)}configs:
  - {{name: auto, method: auto, argv: {fake_argv(interval=0.004)}}}
  - {{name: fast, method: ngram, budgets: [4], argv: {fake_argv(interval=0.003, budget=True)}}}
workloads:
  - {{name: chat, source: sharegpt}}
contexts: [32]
concurrency: [1, 3]
output_tokens: 32
requests_per_cell: {requests}
warmup_requests: 1
seed: {seed}
""")
    return path


def speedups(result: sb.SweepResult) -> dict[int, tuple[float, float, float]]:
    table = result.table()
    rows = table[table["config"] == "fast-b4"]
    return {int(r["concurrency"]): (float(r["speedup"]), float(r["speedup_lo"]),
                                    float(r["speedup_hi"])) for _, r in rows.iterrows()}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sweeps", type=int, default=40)
    parser.add_argument("--requests", type=int, default=3, help="requests per wave of a cell")
    parser.add_argument("--truth-requests", type=int, default=40)
    args = parser.parse_args()
    began = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        truth_run = sb.run_sweep(sb.load_plan(params(folder, seed=10_000,
                                                     requests=args.truth_requests)),
                                 outputs=folder / "out", progress=False)
        truth = speedups(truth_run)
        print("truth:", {c: f"{s:.3f} [{lo:.3f}, {hi:.3f}]" for c, (s, lo, hi) in truth.items()})
        found: dict[int, dict[str, int]] = {c: {"covered": 0, "missed": 0, "no_interval": 0,
                                                "not_ok": 0} for c in truth}
        for seed in range(args.sweeps):
            run = sb.run_sweep(sb.load_plan(params(folder, seed=seed, requests=args.requests)),
                               outputs=folder / "out", progress=False)
            got = speedups(run)
            for conc, (point, *_) in truth.items():
                if conc not in got:
                    found[conc]["not_ok"] += 1
                    continue
                _, lo, hi = got[conc]
                key = ("no_interval" if lo != lo else "covered" if lo <= point <= hi
                       else "missed")
                found[conc][key] += 1
    report: dict[str, Any] = {"truth": truth, "sweeps": args.sweeps, "requests": args.requests,
                              "coverage": found, "seconds": round(time.monotonic() - began, 1)}
    for conc, counts in found.items():
        judged = counts["covered"] + counts["missed"]
        share = counts["covered"] / judged if judged else float("nan")
        print(f"c{conc}: {counts['covered']}/{judged} intervals hold the truth ({100 * share:.1f} "
              f"%), {counts['no_interval']} without an interval, {counts['not_ok']} not ok")
    out = ROOT / "benchmarks" / "results" / "known_speedup.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(report, indent=1))
    print(f"{report['seconds']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
