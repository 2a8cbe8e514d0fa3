"""When each open-loop request of a cell is due: a fixed rate's even spacing or a Poisson
process's exponential gaps, drawn from the plan's seed (the same schedule in every config)."""

from __future__ import annotations

import random

from ..model.sections import RequestRateParams

__all__ = ["arrival_offsets"]


def arrival_offsets(n: int, rate: RequestRateParams, seed: int) -> list[float]:
    """Seconds from the window's start at which each of ``n`` open-loop requests is due."""
    rng = random.Random(seed)
    offsets, t = [], 0.0
    for _ in range(n):
        offsets.append(t)
        t += rng.expovariate(rate.per_s) if rate.arrival == "poisson" else 1.0 / rate.per_s
    return offsets
