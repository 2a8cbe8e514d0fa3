"""Uncertainty: 95 % bootstrap intervals of throughput and of speedup, over requests and repeats.

A cell's output tok/s is its completion tokens T over its window W (first request sent to last
token received). Written as a ratio estimator, T / W = k · Σ tokens_i / Σ busy_i, where busy_i is a
request's time from send to its last token and k = Σ busy_i / W the requests in flight on average.
One bootstrap replicate resamples the measured requests with replacement and recomputes
k · Σ tokens / Σ busy (k as measured), so it equals the estimate on the sample itself and spreads
as the requests do; resampling the window's ends instead would inflate throughput whenever the
first or last request is left out. With repeats, a replicate also resamples the repeats and
averages them.

Replicates are **paired** across the configs of a panel (workload × context × concurrency): the
configs of a panel send the same prompts in the same order (request i of repeat r has the same
prompt in every config), so the resampling draws come from a generator seeded by the panel and
the repeat, and configs with the same requests draw the same prompts in every replicate. A
speedup's replicates are ratios of two configs' replicates, so the prompt-to-prompt spread
(n-gram speculation gains much on some prompts, little on others) cancels instead of widening
the interval. Every interval is the 2.5th to 97.5th percentile of its replicates; replicates
are seeded, so a table reads the same every time; with one request there is no spread to
resample and the interval is a point.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from typing import Any

from .records import CellRecord

REPLICATES = 2000
LEVEL = 0.95
SEED = 20261201
_REPEATS = 1 << 20  # the seed word of the repeat draws (request draws use the repeat number)


def throughput_replicates(cells: Sequence[CellRecord], seed: Sequence[int] = (SEED,)) -> Any:
    """``REPLICATES`` bootstrap replicates of the mean output tok/s of ``cells`` (the repeats of
    one config × workload × context × concurrency); None when no cell has a usable window.
    The draws come from generators seeded by ``seed`` (see :func:`panel_seed`) and the repeat,
    so two configs given the same seed resample the same request positions."""
    import numpy as np

    ordered = sorted(cells, key=lambda c: c.spec.repeat)
    per_cell = [r for r in (_cell_replicates(c, (*seed, c.spec.repeat)) for c in ordered)
                if r is not None]
    if not per_cell:
        return None
    stack = np.vstack(per_cell)  # repeats × replicates
    rng = np.random.default_rng([*seed, _REPEATS])
    pick = rng.integers(0, len(per_cell), size=(REPLICATES, len(per_cell)))
    return stack[pick, np.arange(REPLICATES)[:, None]].mean(axis=1)


def panel_seed(cell: CellRecord) -> tuple[int, int]:
    """The seed of a panel's draws: the same for every config of a workload × context ×
    concurrency, whatever order the cells come in."""
    spec = cell.spec
    panel = f"{spec.workload}|{spec.context}|{spec.concurrency}"
    if spec.outputs > 1 or spec.load:  # the axes beyond these (older panels keep their seeds)
        panel += f"|{spec.output_tokens}|{spec.load}"
    return SEED, zlib.crc32(panel.encode())


def ok_groups(cells: Sequence[CellRecord], group: list[str]) -> dict[tuple[Any, ...],
                                                                        list[CellRecord]]:
    """The ok cells by the values of ``group`` in their spec (a table row's key)."""
    by_group: dict[tuple[Any, ...], list[CellRecord]] = {}
    for cell in cells:
        if cell.verdict.ok:
            spec = cell.spec.row()
            by_group.setdefault(tuple(spec[k] for k in group), []).append(cell)
    return by_group


def group_replicates(by_group: dict[tuple[Any, ...], list[CellRecord]]) -> dict[tuple[Any, ...], Any]:
    """Throughput replicates per group, paired within each panel (see the module's text); the
    same groups always give the same replicates (a table and its best-config statement agree)."""
    return {k: throughput_replicates(v, panel_seed(v[0])) for k, v in by_group.items()}


def _cell_replicates(cell: CellRecord, seed: Sequence[int]) -> Any:
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
    pick = np.random.default_rng(list(seed)).integers(0, len(recs), size=(REPLICATES, len(recs)))
    with np.errstate(divide="ignore", invalid="ignore"):
        return overlap * tokens[pick].sum(axis=1) / busy[pick].sum(axis=1)


def interval(replicates: Any, n: int | None = None, *,
             level: float = LEVEL) -> tuple[float, float]:
    """The central ``level`` interval of bootstrap replicates (NaN, NaN if none) from a sample
    of ``n`` requests (None: the plain percentile interval).

    A percentile interval from a handful of requests is far too narrow: it cannot reach past
    the most extreme resample, and at n = 3 it covers about as often as ±1.4 standard errors.
    So it is widened twice: its percentiles are expanded (Hesterberg 2015) so that its width
    matches a Student t interval's, sqrt(n / (n − 1)) · t(n − 1); and it reaches at least as far
    as that t interval around the replicates' mean, with the bootstrap standard error (on the
    log scale when every replicate is positive, as throughputs and speedups are). From about 30
    requests on, both corrections are within a few percent of the plain interval.
    """
    import numpy as np

    if replicates is None:
        return float("nan"), float("nan")
    finite = replicates[np.isfinite(replicates)]
    if finite.size == 0:
        return float("nan"), float("nan")
    alpha = (1 - level) / 2
    if n is None or n < 2:
        low, high = np.percentile(finite, [100 * alpha, 100 * (1 - alpha)])
        return float(low), float(high)
    from scipy.stats import norm, t

    widen = (n / (n - 1)) ** 0.5 * float(t.isf(alpha, n - 1))
    tail = 100 * float(norm.sf(widen))
    low, high = np.percentile(finite, [tail, 100 - tail])
    if (finite > 0).all():  # throughput and speedup: on the log scale, never below 0
        logs = np.log(finite)
        reach, centre = widen * float(logs.std()), float(logs.mean())
        return float(min(low, np.exp(centre - reach))), float(max(high, np.exp(centre + reach)))
    reach, centre = widen * float(finite.std()), float(finite.mean())
    return float(min(low, centre - reach)), float(max(high, centre + reach))


def add_intervals(table: Any, cells: Sequence[CellRecord], keys: list[str],
                  group: list[str]) -> Any:
    """``table`` (one row per ``group``) with ``output_tok_s_lo/hi`` and ``speedup_lo/hi``
    (vs the ``auto`` row of the same ``keys``), and ``requests_n``: the requests behind a row."""
    by_group = ok_groups(cells, group)
    replicates = group_replicates(by_group)
    baseline_keys = [k for k in replicates if k[group.index("method")] == "auto"]
    baseline = {tuple(k[group.index(g)] for g in keys): replicates[k] for k in baseline_keys}
    counts = {k: requests_n(v) for k, v in by_group.items()}
    base_n = {tuple(k[group.index(g)] for g in keys): counts[k] for k in baseline_keys}
    lows, highs, s_lows, s_highs, ns = [], [], [], [], []
    for row in table[group].itertuples(index=False, name=None):
        key = tuple(key_value(v) for v in row)
        found, n = replicates.get(key), counts.get(key, 0)
        low, high = interval(found, n)
        panel = tuple(key[group.index(g)] for g in keys)
        base = baseline.get(panel)
        s_low, s_high = interval(found / base if found is not None and base is not None
                                 else None, min(n, base_n.get(panel, 0)))
        lows.append(low)
        highs.append(high)
        s_lows.append(s_low)
        s_highs.append(s_high)
        ns.append(n)
    return table.assign(output_tok_s_lo=lows, output_tok_s_hi=highs, speedup_lo=s_lows,
                        speedup_hi=s_highs, requests_n=ns)


def requests_n(cells: Sequence[CellRecord]) -> int:
    """The measured requests behind a row: every ok repeat's, less the failed ones tolerated."""
    return sum(len(c.measured) - len(c.verdict.failed) for c in cells)


def key_value(value: Any) -> Any:
    """A group key's value from a table row as the spec has it: a missing budget is None, not NaN."""
    return None if value is None or (isinstance(value, float) and value != value) else value
