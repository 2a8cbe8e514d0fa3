"""Latency percentiles of a table row with their intervals (TTFT, ITL and E2E over the row's
requests; p99 only with 100 requests behind it), and what a request's deliveries and per-token
ITLs are.

A row's percentile is of its measured requests pooled over its repeats (TTFT and E2E: one value
a request; ITL: each token's, see :func:`token_itls`), so the value and its interval are of one
sample. The interval is a bootstrap over the *requests* (a request's tokens stay together: their
ITLs are not independent), :data:`~specbench_lib.analysis.intervals.REPLICATES` seeded draws, read by
:func:`~.intervals.interval` with the requests as the units. A p99 is given only with at least
:data:`P99_MIN_REQUESTS` requests behind it: with fewer, a p99 is the maximum or next to it and
says nothing about the 99th percentile, so it is NaN (every ``*_p99_s`` column of the row, and
its interval) and ``*_max_s`` gives the maximum of the ``max_n`` requests, labelled as such.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from typing import Any

from ..model.records import CellRecord
from .intervals import REPLICATES, SEED, interval, key_value, ok_groups

DELIVERY_GAP_S = 0.0005  # tokens received closer together than this arrived as one delivery
P99_MIN_REQUESTS = 100
LATENCIES = ("ttft", "itl", "e2e")
QUANTILES = (50, 90, 99)
PERCENTILE_COLUMNS = (*(f"{m}_p{q}_s_{end}" for m in LATENCIES for q in QUANTILES
                        for end in ("lo", "hi")), *(f"{m}_max_s" for m in LATENCIES), "max_n")
_CELLS = 2_000_000  # replicates × tokens weighed at once (memory: 8 bytes each)


def deliveries(times: Sequence[float]) -> list[tuple[float, int]]:
    """A request's token receive times as deliveries: (time of its last token, tokens), where a
    delivery is the consecutive tokens received less than :data:`DELIVERY_GAP_S` after its
    first (a burst, however many events, cannot chain into a long delivery)."""
    firsts: list[float] = []
    found: list[tuple[float, int]] = []
    for when in times:
        if found and when - firsts[-1] < DELIVERY_GAP_S:
            found[-1] = (when, found[-1][1] + 1)
        else:
            firsts.append(when)
            found.append((when, 1))
    return found


def token_itls(found: Sequence[tuple[float, int]]) -> list[float]:
    """Per-token ITLs of a request's :func:`deliveries`: a delivery's gap shared by its k tokens."""
    return [(when - before) / k for (before, _), (when, k) in zip(found, found[1:], strict=False)
            for _ in range(k)]


def quantile(values: Sequence[float], q: float) -> float | None:
    """The ``q`` quantile of ``values``, linear between order statistics (None if empty)."""
    if not values:
        return None
    ordered = sorted(values)
    pos = q * (len(ordered) - 1)
    low = int(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def add_percentiles(table: Any, cells: Sequence[CellRecord], group: list[str]) -> Any:
    """``table`` (one row per ``group``) with TTFT, ITL and E2E p50/p90/p99 of the row's pooled
    requests and their intervals (``ttft_p50_s_lo``, …), ``*_max_s`` and ``max_n``; every
    ``*_p99_s`` column is NaN where fewer than :data:`P99_MIN_REQUESTS` requests are behind it."""
    by_group = ok_groups(cells, group)
    names = [*(f"{m}_p{q}_s" for m in LATENCIES for q in QUANTILES), *PERCENTILE_COLUMNS]
    columns: dict[str, list[float]] = {name: [] for name in names}
    for row in table[group].itertuples(index=False, name=None):
        key = tuple(key_value(v) for v in row)
        found = row_percentiles(by_group.get(key, []), seed=zlib.crc32(repr(key).encode()))
        for name in names:
            columns[name].append(found.get(name, float("nan")))
    out = table.assign(**columns)
    few = out["max_n"] < P99_MIN_REQUESTS
    p99 = [c for c in out.columns if "_p99_s" in str(c)]
    out.loc[few, p99] = float("nan")
    return out


def row_percentiles(cells: Sequence[CellRecord], seed: int = 0) -> dict[str, float]:
    """TTFT, ITL and E2E percentiles of ``cells``' pooled requests with their intervals."""
    import numpy as np

    recs = [r for c in cells for r in c.measured if r.index not in c.verdict.failed]
    found: dict[str, float] = {"max_n": float(len(recs))}
    if not recs:
        return found
    picks = np.random.default_rng([SEED, seed]).integers(0, len(recs), size=(REPLICATES, len(recs)))
    counts = np.zeros((REPLICATES, len(recs)))
    np.add.at(counts, (np.arange(REPLICATES)[:, None], picks), 1)
    per_request = {"ttft": [[r.ttft] if r.ttft is not None else [] for r in recs],
                   "e2e": [[r.e2e] for r in recs],
                   "itl": [token_itls(deliveries(r.token_times)) for r in recs]}
    for name, values in per_request.items():
        pooled = [v for vs in values for v in vs]
        if not pooled:
            continue
        found[f"{name}_max_s"] = max(pooled)
        reps = _replicates(values, counts)
        for q in QUANTILES:
            found[f"{name}_p{q}_s"] = float(quantile(pooled, q / 100) or 0.0)  # never None here
            low, high = interval(reps[q], len(recs))
            found[f"{name}_p{q}_s_lo"], found[f"{name}_p{q}_s_hi"] = low, high
    return found


def _replicates(values: list[list[float]], counts: Any) -> dict[int, Any]:
    """Bootstrap replicates of each quantile of the pooled ``values`` (a list per request),
    each replicate weighing request i's values by ``counts[replicate, i]`` (times drawn)."""
    import numpy as np

    flat = np.array([v for vs in values for v in vs], dtype=float)
    owner = np.repeat(np.arange(len(values)), [len(vs) for vs in values])
    order = np.argsort(flat, kind="stable")
    flat, owner = flat[order], owner[order]
    found = {q: np.full(len(counts), np.nan) for q in QUANTILES}
    step = max(1, _CELLS // max(1, flat.size))
    for start in range(0, len(counts), step):
        cumulative = np.cumsum(counts[start:start + step][:, owner], axis=1)
        total = cumulative[:, -1]
        drawn = total > 0
        for q in QUANTILES:
            pos = q / 100 * np.maximum(total - 1, 0)
            low = np.floor(pos)
            # the element of rank k is the first whose cumulative weight exceeds k
            at_low = (cumulative <= low[:, None]).sum(axis=1)
            at_high = (cumulative <= np.minimum(low + 1, total - 1)[:, None]).sum(axis=1)
            at_low, at_high = np.minimum(at_low, flat.size - 1), np.minimum(at_high, flat.size - 1)
            value = flat[at_low] + (flat[at_high] - flat[at_low]) * (pos - low)
            found[q][start:start + step] = np.where(drawn, value, np.nan)
    return found
