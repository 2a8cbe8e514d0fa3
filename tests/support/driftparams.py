"""Params of a fixed plan or a budgeted sweep on drifting stand-ins (``fake_server.py --drift``):
auto, ngram-b4 and ngram-b8 equally fast (true speedup 1.00) on a machine whose speed grows with
wall time, the same for every config (tests/analysis/test_drift.py, benchmarks/drift_blocks.py)."""

from __future__ import annotations

import time
from pathlib import Path

from fakeparams import LENIENT_HOST, fake_argv, fake_engine
from ports import free_port

DRIFT = 6.0  # the machine's speed grows by 600 % a minute: 10 % a second, ~50 % over a run


def drift_params(folder: Path, *, seed: int, budget: str | None, repeats: int = 5) -> Path:
    """auto, ngram-b4 and ngram-b8 on drifting stand-ins whose configs are equally fast (a
    fixed plan of ``repeats`` blocks without a ``budget``)."""
    flags = ["--drift", str(DRIFT), "--epoch", f"{time.time():.3f}", "--jitter", "0.05",
             "--prefill", "0.03"]  # a prefill of 30 ms, the same work in every config
    spec = fake_argv("--speedups", "4:1,8:1", *flags, "--noise-seed", f"{seed}:{{budget}}",
                     interval=0.003, budget=True)
    base = fake_argv(*flags, "--noise-seed", f"{seed}:auto", interval=0.003)
    plan = (f"time_budget_s: {budget}\nmax_rounds: 8\n" if budget else f"repeats: {repeats}\n")
    path = folder / f"drift-{seed}-{budget or repeats}.yaml"
    path.write_text(f"""phase: drift
{fake_engine(free_port(), base)}configs:
  - {{name: auto, method: auto, argv: {base}}}
  - {{name: ngram, method: ngram, budgets: [4, 8], argv: {spec}}}
workloads:
  - {{name: chat, source: sharegpt}}
contexts: [32]
concurrency: [1]
output_tokens: 24
requests_per_cell: 3
warmup_requests: 1
seed: {seed}
{plan}{LENIENT_HOST}""")
    return path
