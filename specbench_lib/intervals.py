"""Uncertainty: 95 % bootstrap intervals of throughput and of speedup, over requests and repeats.

A cell's output tok/s is its completion tokens T over its window W (first request sent to last
token received). Written as a ratio estimator, T / W = k · Σ tokens_i / Σ busy_i, where busy_i is a
request's time from send to its last token and k = Σ busy_i / W the requests in flight on average.
One bootstrap replicate resamples the measured requests with replacement and recomputes
k · Σ tokens / Σ busy (k as measured), so it equals the estimate on the sample itself and spreads
as the requests do; resampling the window's ends instead would inflate throughput whenever the
first or last request is left out. With repeats, a replicate also resamples the repeats and
averages them. A speedup's
replicates are ratios of two configs' replicates (drawn independently), and every interval is the
2.5th to 97.5th percentile of its replicates. Replicates are seeded, so a table reads the same
every time; with one request there is no spread to resample and the interval is a point.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .records import CellRecord

REPLICATES = 2000
LEVEL = 0.95
SEED = 20261201


def throughput_replicates(cells: Sequence[CellRecord], rng: Any) -> Any:
    """``REPLICATES`` bootstrap replicates of the mean output tok/s of ``cells`` (the repeats of
    one config × workload × context × concurrency); None when no cell has a usable window."""
    import numpy as np

    per_cell = [r for r in (_cell_replicates(c, rng) for c in cells) if r is not None]
    if not per_cell:
        return None
    stack = np.vstack(per_cell)  # repeats × replicates
    pick = rng.integers(0, len(per_cell), size=(REPLICATES, len(per_cell)))
    return stack[pick, np.arange(REPLICATES)[:, None]].mean(axis=1)


def ok_groups(cells: Sequence[CellRecord], group: list[str]) -> dict[tuple[Any, ...],
                                                                        list[CellRecord]]:
    """The ok cells by the values of ``group`` in their spec (a table row's key)."""
    by_group: dict[tuple[Any, ...], list[CellRecord]] = {}
    for cell in cells:
        if cell.verdict.ok:
            spec = vars(cell.spec)
            by_group.setdefault(tuple(spec[k] for k in group), []).append(cell)
    return by_group


def group_replicates(by_group: dict[tuple[Any, ...], list[CellRecord]]) -> dict[tuple[Any, ...], Any]:
    """Throughput replicates per group, drawn in order from one seeded generator, so every
    caller given the same groups gets the same replicates (a table and its best-config
    statement agree)."""
    import numpy as np

    rng = np.random.default_rng(SEED)
    return {k: throughput_replicates(v, rng) for k, v in by_group.items()}


def _cell_replicates(cell: CellRecord, rng: Any) -> Any:
    import numpy as np

    skip = set(cell.verdict.failed)
    recs = [r for r in cell.measured if r.index not in skip and r.token_times and r.final]
    if not recs:
        return None
    starts = np.array([r.start for r in recs])
    lasts = np.array([r.token_times[-1] for r in recs])
    tokens = np.array([float(r.final.completion_tokens or 0) for r in recs if r.final])
    busy = lasts - starts
    window = lasts.max() - starts.min()
    if window <= 0 or busy.sum() <= 0:
        return None
    overlap = busy.sum() / window  # requests in flight on average: the window's concurrency
    pick = rng.integers(0, len(recs), size=(REPLICATES, len(recs)))
    with np.errstate(divide="ignore", invalid="ignore"):
        return overlap * tokens[pick].sum(axis=1) / busy[pick].sum(axis=1)


def interval(replicates: Any) -> tuple[float, float]:
    """The central ``LEVEL`` percentile interval of bootstrap replicates (NaN, NaN if none)."""
    import numpy as np

    if replicates is None:
        return float("nan"), float("nan")
    finite = replicates[np.isfinite(replicates)]
    if finite.size == 0:
        return float("nan"), float("nan")
    tail = (1 - LEVEL) / 2 * 100
    low, high = np.percentile(finite, [tail, 100 - tail])
    return float(low), float(high)


def add_intervals(table: Any, cells: Sequence[CellRecord], keys: list[str],
                  group: list[str]) -> Any:
    """``table`` (one row per ``group``) with ``output_tok_s_lo/hi`` and ``speedup_lo/hi``
    (vs the ``auto`` row of the same ``keys``), and ``requests_n``: the requests behind a row."""
    by_group = ok_groups(cells, group)
    replicates = group_replicates(by_group)
    baseline = {tuple(k[group.index(g)] for g in keys): r for k, r in replicates.items()
                if k[group.index("method")] == "auto"}
    lows, highs, s_lows, s_highs, counts = [], [], [], [], []
    for row in table[group].itertuples(index=False, name=None):
        key = tuple(key_value(v) for v in row)
        found = replicates.get(key)
        low, high = interval(found)
        base = baseline.get(tuple(key[group.index(g)] for g in keys))
        s_low, s_high = interval(found / base if found is not None and base is not None
                                 else None)
        lows.append(low)
        highs.append(high)
        s_lows.append(s_low)
        s_highs.append(s_high)
        counts.append(sum(len(c.measured) - len(c.verdict.failed) for c in by_group.get(key, ())))
    return table.assign(output_tok_s_lo=lows, output_tok_s_hi=highs, speedup_lo=s_lows,
                        speedup_hi=s_highs, requests_n=counts)


def key_value(value: Any) -> Any:
    """A group key's value from a table row as the spec has it: a missing budget is None, not NaN."""
    return None if value is None or (isinstance(value, float) and value != value) else value
