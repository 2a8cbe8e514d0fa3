"""Uncertainty: 95 % intervals of throughput and of speedup, over independent units.

**The unit.** An interval needs independent draws, and requests are not always independent:
requests in flight together share the server's steps (a batching server decodes them in lock
step), so at concurrency 3 with 3 requests every request has the speed of the one shared
window. :func:`independent_units` names the unit behind a row:

- with two or more ok repeats, the **repeat**: each repeat is a whole cell on fresh prompts, so
  repeats are independent draws of everything (prompts, the server's state, the machine's drift);
- with one cell at concurrency 1, the **request**: requests run one after another, each on its
  own prompt;
- with one cell at concurrency c > 1, a **block** of c requests: the requests in the order they
  were sent (by start), cut into consecutive blocks of c (the remainder joins the last block),
  so a block is about one batch that ran together. Fewer than c requests are one block, and
  c · 2 requests are the least that give an interval. Neighbouring blocks still share the
  hand-over from one batch to the next; ``benchmarks/interval_coverage.py`` measures that this
  dependence does not cost coverage on a simulated batching server.

**Replicates.** A cell's output tok/s is its tokens T over its window W (first request sent to
last token received). Written as a ratio estimator over blocks b, T / W = k · Σ tokens_b /
Σ busy_b, with busy the time from send to last token and k = Σ busy / W the requests in flight
on average. One bootstrap replicate of a single cell resamples its blocks with replacement and
recomputes k · Σ tokens / Σ busy (k as measured), so it equals the estimate on the sample itself.
With repeats, a replicate resamples the repeats' own output tok/s and averages them (the row's
estimate is that mean): a block bootstrap with the repeat as the block, with no resampling
inside a repeat, which would count the within-repeat spread twice.

Replicates are **paired** across the configs of a panel (workload × context × output length ×
concurrency × load): every config sends the same prompts in the same order, and the draws come
from generators seeded by the panel and the repeat (blocks) or by the set of repeats (repeats),
so configs with the same requests draw the same prompts in every replicate, and the same rounds
of repeats. A speedup's replicates are ratios of two configs' replicates, so the
prompt-to-prompt spread, and the drift that a round shares, cancel instead of widening it.

**The interval** (:func:`interval`) is a percentile interval widened to a Student t interval's
reach with units − 1 degrees of freedom (on the log scale), since from a handful of units a
percentile interval is far too narrow; with fewer than 2 units there is no spread to learn from
and no interval (NaN, NaN): the row says so in ``interval_note``. One repeat's requests cannot
show how the machine drifts from round to round, so its throughput interval adds
:data:`DRIFT_CV` (a type B uncertainty, in quadrature); its speedup does not, since the configs
of a round share the machine's state and their ratio cancels it. Replicates are seeded, so a
table reads the same every time. :func:`sequential_level` is the level of one look of a sweep
that stops once its intervals are narrow (adaptive repeats), so that looking does not shrink
coverage.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from typing import Any, Literal, NamedTuple

from ..core.errors import ParamsError
from ..model.records import CellRecord, RequestRecord

REPLICATES = 2000
LEVEL = 0.95
SEED = 20261201
_REPEATS = 1 << 20  # the seed word of the repeat draws (block draws use the repeat number)
# the machine's drift between rounds, as a relative standard uncertainty (GUM type B): what one
# repeat's throughput interval cannot see in its own requests (repeats measure it instead)
DRIFT_CV = 0.03


class Bounds(NamedTuple):
    """A table row's intervals, the units and requests behind them, and why none, if none."""

    tok_s_lo: float
    tok_s_hi: float
    speedup_lo: float
    speedup_hi: float
    requests_n: int
    units_n: int
    note: str


def independent_units(cells: Sequence[CellRecord]) -> int:
    """The independent units behind a row of ok ``cells`` (the repeats of one config in one
    panel): its repeats with a throughput when there are two or more, else the blocks of its
    one cell (see the module's text), 0 with none."""
    usable = [c for c in cells if _point(c) is not None]
    if len(usable) >= 2:
        return len(usable)
    if not usable:
        return 0
    recs = _usable(usable[0])
    return max(1, len(recs) // _slots(usable[0])) if recs else 0


def too_few_note(units: int, concurrency: int) -> str:
    """The note of a row with too few units for an interval ("" with enough)."""
    if units >= 2:
        return ""
    return (f"too few independent requests ({units} unit{'' if units == 1 else 's'} at "
            f"concurrency {concurrency}: raise requests_per_cell or repeats)")


def throughput_replicates(cells: Sequence[CellRecord], seed: Sequence[int] = (SEED,)) -> Any:
    """``REPLICATES`` bootstrap replicates of the mean output tok/s of ``cells`` (the repeats of
    one config × panel); None when no cell has a usable window. The draws come from generators
    seeded by ``seed`` (see :func:`panel_seed`) and the repeats, so two configs given the same
    seed resample the same blocks, or the same repeats."""
    import numpy as np

    usable = sorted((c for c in cells if _point(c) is not None), key=lambda c: c.spec.repeat)
    if not usable:
        return None
    if len(usable) == 1:
        return _cell_replicates(usable[0], (*seed, usable[0].spec.repeat))
    points = np.array([_point(c) for c in usable], dtype=float)
    rng = np.random.default_rng([*seed, _REPEATS, *(c.spec.repeat for c in usable)])
    return points[rng.integers(0, len(points), size=(REPLICATES, len(points)))].mean(axis=1)


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


def _point(cell: CellRecord) -> float | None:
    value = (cell.metrics or {}).get("output_tok_s")
    return float(value) if value is not None and value > 0 else None


def _slots(cell: CellRecord) -> int:
    return max(1, int(cell.spec.concurrency))


def _usable(cell: CellRecord) -> list[RequestRecord]:
    """The cell's measured requests that count (not failed, with tokens), in the order sent."""
    skip = set(cell.verdict.failed)
    recs = [r for r in cell.measured if r.index not in skip and r.token_times and r.final]
    return sorted(recs, key=lambda r: (r.start, r.index))


def _cell_replicates(cell: CellRecord, seed: Sequence[int]) -> Any:
    import numpy as np

    recs = _usable(cell)
    if not recs:
        return None
    starts = np.array([r.start for r in recs])
    lasts = np.array([r.token_times[-1] for r in recs])
    tokens = np.array([float(r.final.completion_tokens or 0) if r.final else 0.0 for r in recs])
    busy = lasts - starts
    window = lasts.max() - starts.min()
    if window <= 0 or busy.sum() <= 0:
        return None
    units = max(1, len(recs) // _slots(cell))
    block = np.minimum(np.arange(len(recs)) // _slots(cell), units - 1)
    block_tokens = np.bincount(block, weights=tokens, minlength=units)
    block_busy = np.bincount(block, weights=busy, minlength=units)
    overlap = busy.sum() / window  # requests in flight on average: the window's concurrency
    pick = np.random.default_rng(list(seed)).integers(0, units, size=(REPLICATES, units))
    with np.errstate(divide="ignore", invalid="ignore"):
        return overlap * block_tokens[pick].sum(axis=1) / block_busy[pick].sum(axis=1)


def interval(replicates: Any, units: int, level: float = LEVEL, *,
             drift: float = 0.0) -> tuple[float, float]:
    """The central ``level`` interval of bootstrap replicates from ``units`` independent units
    (:func:`independent_units`); (NaN, NaN) with no replicates or fewer than 2 units. ``drift``
    is a relative standard uncertainty the replicates cannot show (:data:`DRIFT_CV` for one
    repeat's throughput), added in quadrature on the log scale.

    A percentile interval from a handful of units is far too narrow: it cannot reach past the
    most extreme resample, and at 3 units it covers about as often as ±1.4 standard errors. So
    it is widened twice: its percentiles are expanded (Hesterberg 2015) so that its width
    matches a Student t interval's, sqrt(u / (u − 1)) · t(u − 1); and it reaches at least as far
    as that t interval around the replicates' mean, with the bootstrap standard error (on the
    log scale when every replicate is positive, as throughputs and speedups are): with the
    repeats as units this is the t interval of the repeats' mean. From about 30 units on, both
    corrections are within a few percent of the plain interval.
    """
    import numpy as np
    from scipy.special import ndtr, ndtri, stdtrit  # the normal and t quantiles, fast

    if not 0 < level < 1:
        raise ParamsError(f"an interval's level must be between 0 and 1, not {level!r}")
    if replicates is None or units < 2:
        return float("nan"), float("nan")
    finite = replicates[np.isfinite(replicates)]
    if finite.size == 0:
        return float("nan"), float("nan")
    alpha = (1 - level) / 2
    widen = (units / (units - 1)) ** 0.5 * float(stdtrit(units - 1, 1 - alpha))
    tail, z = 100 * float(ndtr(-widen)), -float(ndtri(alpha))
    low, high = np.percentile(finite, [tail, 100 - tail])
    if (finite > 0).all():  # throughput and speedup: on the log scale, never below 0
        logs = np.log(finite)
        reach = float(np.hypot(widen * float(logs.std()), z * drift))
        centre = float(logs.mean())
        return float(min(low, np.exp(centre - reach))), float(max(high, np.exp(centre + reach)))
    centre = float(finite.mean())
    reach = float(np.hypot(widen * float(finite.std()), z * drift * centre))
    return float(min(low, centre - reach)), float(max(high, centre + reach))


def sequential_level(look: int, looks: int, level: float = LEVEL, *,
                     rule: Literal["spending", "bonferroni"] = "spending") -> float:
    """The confidence level of look ``look`` (1-based) of ``looks`` planned looks, so that a
    sweep that stops at the first look whose intervals are narrow enough still covers with
    ``level`` overall.

    Each look k spends part α_k of the error α = 1 − ``level``, with Σ α_k = α; by the union
    bound the interval reported at whichever look the sweep stops misses with probability at
    most α. ``rule="spending"`` spends by the Lan-DeMets O'Brien-Fleming-type function
    α(τ) = 2 − 2 Φ(z(1 − α/2) / √τ) at information τ = k / looks (little at the early looks,
    which have few repeats anyway, and close to α at the last); ``"bonferroni"`` spends α /
    looks at every look. One look is the plain ``level``.
    """
    from scipy.special import ndtr, ndtri

    if not 0 < level < 1:
        raise ParamsError(f"a sequential level must be between 0 and 1, not {level!r}")
    if not 1 <= look <= looks:
        raise ParamsError(f"look {look} of {looks}: a look is counted from 1 to the looks planned")
    alpha = 1 - level
    if rule == "bonferroni":
        return 1 - alpha / looks

    def spent(k: int) -> float:
        return 0.0 if k == 0 else float(2 * ndtr(ndtri(alpha / 2) / (k / looks) ** 0.5))

    return 1 - (spent(look) - spent(look - 1))


def row_bounds(by_group: dict[tuple[Any, ...], list[CellRecord]], keys: list[str],
               group: list[str], *, level: float = LEVEL) -> dict[tuple[Any, ...], Bounds]:
    """Per group of ok cells (a row key over ``group``): its throughput interval and its
    speedup interval vs the ``auto`` group of the same ``keys`` (the panel), at ``level``."""
    replicates = group_replicates(by_group)
    units = {k: independent_units(v) for k, v in by_group.items()}

    def panel(key: tuple[Any, ...]) -> tuple[Any, ...]:
        return tuple(key[group.index(g)] for g in keys)

    base = {panel(k): k for k in by_group if k[group.index("method")] == "auto"}
    found = {}
    for key, cells in by_group.items():
        mine, n, slots = replicates[key], units[key], cells[0].spec.concurrency
        auto = base.get(panel(key))
        theirs = replicates[auto] if auto is not None else None
        ratio = mine / theirs if mine is not None and theirs is not None else None
        s_units = min(n, units[auto]) if auto is not None else 0
        note = too_few_note(n, slots) or (
            "auto baseline: " + too_few_note(units[auto], slots)
            if auto is not None and units[auto] < 2 else "")
        drift = 0.0 if sum(_point(c) is not None for c in cells) >= 2 else DRIFT_CV
        found[key] = Bounds(*interval(mine, n, level, drift=drift),
                            *interval(ratio, s_units, level),
                            requests_n(cells), n, note)
    return found


def add_intervals(table: Any, cells: Sequence[CellRecord], keys: list[str],
                  group: list[str]) -> Any:
    """``table`` (one row per ``group``) with ``output_tok_s_lo/hi`` and ``speedup_lo/hi``
    (vs the ``auto`` row of the same ``keys``), ``requests_n`` (the requests behind a row),
    ``units_n`` (its independent units) and ``interval_note`` ("" or why it has no interval)."""
    bounds = row_bounds(ok_groups(cells, group), keys, group)
    none = Bounds(*(float("nan"),) * 4, 0, 0, "")
    rows = [bounds.get(tuple(key_value(v) for v in row), none)
            for row in table[group].itertuples(index=False, name=None)]
    return table.assign(output_tok_s_lo=[b.tok_s_lo for b in rows],
                        output_tok_s_hi=[b.tok_s_hi for b in rows],
                        speedup_lo=[b.speedup_lo for b in rows],
                        speedup_hi=[b.speedup_hi for b in rows],
                        requests_n=[b.requests_n for b in rows],
                        units_n=[b.units_n for b in rows],
                        interval_note=[b.note for b in rows])


def requests_n(cells: Sequence[CellRecord]) -> int:
    """The measured requests behind a row: every ok repeat's, less the failed ones tolerated."""
    return sum(len(c.measured) - len(c.verdict.failed) for c in cells)


def key_value(value: Any) -> Any:
    """A group key's value from a table row as the spec has it: a missing budget is None, not NaN."""
    return None if value is None or (isinstance(value, float) and value != value) else value
