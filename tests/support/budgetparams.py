"""Params of a time-budgeted sweep on ``tests/support/fake_server.py`` with a known speedup per budget
(``--speedups``): auto sends a token every ``interval`` s, budget b every interval / speedup(b).
A base of :func:`paramsfiles.fake_plan` with the keys a time-budgeted sweep changes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from fakeparams import fake_argv
from paramsfiles import fake_plan, write_params
from ports import free_port

KNOWN = {4: 1.05, 8: 1.35, 16: 1.15, 32: 0.95}  # the truth: b8 is the best


def budget_params(folder: Path, *, seed: int, budget: str, speedups: dict[int, float] = KNOWN,
                  interval: float = 0.004, max_rounds: int = 8, tokens: int = 32,
                  port: int | None = None, extra: str = "", jitter: float = 0.0,
                  equivalence: float | None = None, requests: int = 3,
                  start_s: float = 1.0, **overrides: Any) -> Path:
    """A params file: auto and ngram at the budgets of ``speedups``, one panel (chat, context
    32, concurrency 1), ``requests`` a cell, ``time_budget_s: budget``; ``extra``: more config
    lines (YAML list items); ``jitter``: each token's delay noisy around its known mean;
    ``equivalence``: the margin within which the leader decides a panel (the default's if None);
    ``start_s``: a server's start as the time model prices it before the first has started (a
    fake server starts in well under a second; the CPU default is 10 s); ``overrides``: more
    top-level keys (:func:`paramsfiles.compose`)."""
    known = ",".join(f"{b}:{s}" for b, s in speedups.items())
    noise = ("--jitter", str(jitter)) if jitter else ()  # seeded per config and sweep seed:
    # --nodelay: the pace is the known one, not a busy client's late ACKs (tests/sweep/test_repeats.py)
    argv = fake_argv("--nodelay", "--speedups", known, *noise,
                     *(("--noise-seed", f"{seed}:{{budget}}") if jitter else ()),
                     interval=interval, budget=True)
    base = fake_argv("--nodelay", *noise, *(("--noise-seed", f"{seed}:auto") if jitter else ()),
                     interval=interval)
    configs = [{"name": "auto", "method": "auto", "argv": json.loads(base)},
               {"name": "ngram", "method": "ngram", "budgets": sorted(speedups),
                "argv": json.loads(argv)}, *(yaml.safe_load(extra) if extra else [])]
    plan = fake_plan(port or free_port(), argv=base, phase="budgeted", configs=configs,
                     engine={"start_s": start_s},
                     workloads=[{"name": "chat", "source": "sharegpt"}], contexts=[32],
                     output_tokens=tokens, requests_per_cell=requests, warmup_requests=1,
                     time_budget_s=budget, max_rounds=max_rounds, seed=seed,
                     **({"equivalence": equivalence} if equivalence is not None else {}),
                     **overrides)
    return write_params(folder, plan, name=f"budget-{seed}-{budget}.yaml")
