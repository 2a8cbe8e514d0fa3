"""Params of a fixed plan or a budgeted sweep on drifting stand-ins (``fake_server.py --drift``):
auto, ngram-b4 and ngram-b8 equally fast (true speedup 1.00) on a machine whose speed grows with
wall time, the same for every config (tests/analysis/test_drift.py, benchmarks/drift_blocks.py)."""

from __future__ import annotations

import json
import time
from pathlib import Path

from fakeparams import fake_argv
from paramsfiles import fake_plan, write_params
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
    rounds = {"time_budget_s": budget, "max_rounds": 8} if budget else {"repeats": repeats}
    configs = [{"name": "auto", "method": "auto", "argv": json.loads(base)},
               {"name": "ngram", "method": "ngram", "budgets": [4, 8], "argv": json.loads(spec)}]
    plan = fake_plan(free_port(), argv=base, phase="drift", configs=configs,
                     workloads=[{"name": "chat", "source": "sharegpt"}], contexts=[32],
                     output_tokens=24, requests_per_cell=3, warmup_requests=1, seed=seed, **rounds)
    return write_params(folder, plan, name=f"drift-{seed}-{budget or repeats}.yaml")
