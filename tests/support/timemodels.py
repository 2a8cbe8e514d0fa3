"""A small plan and the time model that prices it at a stated speed: what the budget's, the live
estimate's and the dry run's tests price their cells with (sweep/timemodel.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from specbench_lib.model.params import SweepParams
from specbench_lib.model.plan import Plan, build_plan
from specbench_lib.sweep.speeds import Speed
from specbench_lib.sweep.timemodel import TimeModel

# prefill 100 tok/s, decoding 10 tok/s: a cell is 2 × (1 + 10) = 22 s; a start 5 s
SLOW = Speed(100.0, 10.0, 5.0, "stated by the test", calibrated=True)


def small_plan(**more: Any) -> Plan:
    """auto and ngram-b8, one workload at context 100, two requests a cell of 100 tokens, no
    warmup, a 100 s budget of three rounds at most; ``more``: top-level keys."""
    params = SweepParams.model_validate({
        "phase": "t", "configs": [{"name": "auto", "method": "auto"},
                                  {"name": "ngram", "method": "ngram", "budgets": [8]}],
        "workloads": [{"name": "code", "source": "humaneval"}], "contexts": [100],
        "concurrency": [1], "output_tokens": 100, "requests_per_cell": 2,
        "warmup_requests": 0, "time_budget_s": 100, "max_rounds": 3, **more})
    return build_plan(params, source=Path("."))


def slow_model(**more: Any) -> TimeModel:
    """:func:`small_plan` priced at :data:`SLOW`."""
    return TimeModel(small_plan(**more), SLOW)
