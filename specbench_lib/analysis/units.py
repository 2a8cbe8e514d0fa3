"""A panel's units, paired by prompt and nested in blocks: what :mod:`.claim` compares.

**Units.** Every config of a panel is sent the same prompts: request i of repeat (round) r
carries the same prompt in every config. So the unit is the prompt: at concurrency 1 a request,
keyed (r, i); at concurrency c > 1 a block of c requests in the order sent (requests in flight
together share the server's steps), keyed (r, block). A unit carries its tokens T and its time
E: the requests' busy time (send to last token) over the cell's overlap (busy time over the
cell's window), so Σ T / Σ E over one cell's units is that cell's output tok/s
(:mod:`.metrics`).

**Blocks.** A repeat (a fixed plan's) or a round (a budgeted sweep's) is a **block**: it
measures every config of the panel once, in an order drawn afresh for each block from the
plan's seed (:mod:`~specbench_lib.sweep.blocks`). Within a block each config has its own stretch
of time, so a change of the machine's speed between two configs' stretches is the same for all
the prompts of that block: pairing by prompt does not cancel it, and the prompts of one block
are not independent evidence. Randomising the order makes that term zero on average; counting
the **block** as the unit of replication puts it in the error. So two configs are compared by
the per-prompt log ratio d = log(T_i/E_i) − log(T_j/E_j) over the units both measured, averaged
within each block (m_b), and the blocks' means are the sample: the mean D of the m_b, its
standard error sd(m_b)/√B and Student t with B − 1 degrees of freedom (paired block means;
docs/uncertainty.md has its coverage under drift). With one block there is nothing to separate a
config from its time: the comparison falls back to the prompts (SE sd(d)/√n, n − 1 degrees of
freedom) and says so (``blocks`` 1), and a claim made on it is undecided (:mod:`.claim`).

**Blocks are stretches of time.** Repeats measured back to back (``repeat_order:
back_to_back``: every repeat of one config, then the next config's) are one block of the two
configs, whatever their numbers: where every block of one config began before every block of the
other (each block's first cell start, ``Units.began``), the pair's repeats are one block
(:func:`log_ratios`). Interleaved blocks never look like that: the second block of either config
starts after the first of the other.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..model.quantities import ACCEPTANCE, OUTPUT_RATE, Quantity, quantity
from ..model.records import CellRecord, RequestRecord
from .specmetrics import spec_metrics

UnitId = tuple[int, int]


@dataclass(frozen=True)
class Units:
    """One config's units in one panel: their keys, numerators and denominators (on the end-to-end
    quantity: tokens and seconds; :mod:`~specbench_lib.model.quantities`), and the requests behind."""

    ids: tuple[UnitId, ...]
    tokens: Any  # numpy arrays, aligned with ids: the quantity's numerators
    seconds: Any  # its denominators
    requests: int
    began: tuple[tuple[int, float], ...] = ()  # (block, its first cell's start, epoch s), where known

    @property
    def n(self) -> int:
        return len(self.ids)

    @property
    def blocks(self) -> int:
        """The blocks (repeats or rounds) its units come from."""
        return len({u[0] for u in self.ids})

    def rate(self) -> float:
        """Σ T / Σ E (NaN with none)."""
        total = float(self.seconds.sum()) if self.n else 0.0
        return float(self.tokens.sum()) / total if total > 0 else float("nan")


@dataclass(frozen=True)
class Paired:
    """Two configs compared (see the module): the mean log ratio, its standard error, the
    sample behind them (blocks, or prompts with one block), the prompts and the blocks."""

    diff: float
    se: float
    n: int  # the sample the t has n − 1 degrees of freedom from
    units: int
    blocks: int

    def values(self) -> tuple[float, float, int]:
        """(diff, se, n), as the claim's bounds read them."""
        return self.diff, self.se, self.n


def units_of(cells: Sequence[CellRecord], of: str | Quantity = OUTPUT_RATE) -> Units:
    """The units of one config's ok cells in one panel (see the module) on the quantity ``of``
    (:mod:`~specbench_lib.model.quantities`; end-to-end output tok/s by default). A cell whose
    requests carry no value of it (acceptance on an engine that counts a cell's verify steps
    only) is one unit of its block, from the cell's counters (:func:`_cell_unit`)."""
    import numpy as np

    q = quantity(of)
    ids: list[UnitId] = []
    nums: list[float] = []
    dens: list[float] = []
    requests = 0
    began: dict[int, float] = {}
    for cell in sorted((c for c in cells if c.verdict.ok), key=lambda c: c.spec.repeat):
        groups = unit_requests(cell)
        found = _cell_units(cell, groups, q)
        if found is None:
            continue
        if (at := started(cell)) == at:
            began[cell.spec.repeat] = min(began.get(cell.spec.repeat, math.inf), at)
        requests += sum(map(len, groups.values()))
        for key, num, den in found:
            ids.append((cell.spec.repeat, key))
            nums.append(num)
            dens.append(den)
    return Units(tuple(ids), np.array(nums, dtype=float), np.array(dens, dtype=float), requests,
                 tuple(sorted(began.items())))


def started(cell: CellRecord) -> float:
    """When a cell began (epoch seconds; NaN where its provenance does not say)."""
    try:
        return dt.datetime.fromisoformat(str(cell.provenance.started)).timestamp()
    except ValueError:
        return math.nan


def unit_requests(cell: CellRecord) -> dict[UnitId, list[RequestRecord]]:
    """The requests behind each unit of an ok cell, in the order sent: a request each at
    concurrency 1 (keyed by its index), a block of ``concurrency`` requests otherwise (keyed by
    its place), the last block holding the remainder; the one grouping every reader of units
    uses (:mod:`.promptspread` too)."""
    if not cell.verdict.ok:
        return {}
    skip = set(cell.verdict.failed)
    recs = sorted((r for r in cell.measured if r.index not in skip and r.token_times and r.final),
                  key=lambda r: (r.start, r.index))
    slots = max(1, int(cell.spec.concurrency))
    blocks = max(1, len(recs) // slots)
    return {(cell.spec.repeat, recs[b].index if slots == 1 else b):
            recs[b * slots: len(recs) if b == blocks - 1 else (b + 1) * slots]
            for b in range(blocks if recs else 0)}


def _cell_units(cell: CellRecord, groups: dict[UnitId, list[RequestRecord]], q: Quantity
                ) -> list[tuple[int, float, float]] | None:
    """One cell's units (key, numerator, denominator) from its :func:`unit_requests`; None
    where it has none."""
    recs = [r for group in groups.values() for r in group]
    busy = [r.token_times[-1] - r.start for r in recs]
    window = (max(r.token_times[-1] for r in recs) - min(r.start for r in recs)) if recs else 0
    if not recs or window <= 0 or sum(busy) <= 0:
        return None
    drafting = cell.spec.method != "auto"
    parts = {id(r): q.parts(r, drafting) for r in recs}
    if q is ACCEPTANCE and any(p is None for p in parts.values()):
        return _cell_unit(cell, recs, q)
    overlap = sum(busy) / window if q.overlap else 1.0
    found = []
    for (_, key), group in groups.items():  # a request without a value (one token: no decode
        mine = [p for r in group if (p := parts[id(r)]) is not None]  # rate) is left out
        if mine:
            found.append((key, sum(p[0] for p in mine), sum(p[1] for p in mine) / overlap))
    return found or None


def _cell_unit(cell: CellRecord, recs: Sequence[RequestRecord], q: Quantity
               ) -> list[tuple[int, float, float]] | None:
    """Acceptance from the cell's counters (vLLM's: accepted drafts, capped as
    :func:`~.specmetrics.spec_metrics` caps them) as one unit keyed −1; None for any other
    quantity a request lacks (a request with one token has no decode rate)."""
    counters = cell.facts.spec_counters
    if q is not ACCEPTANCE or not counters.get("drafts"):
        return None
    tokens = sum(float(r.final.completion_tokens or 0) for r in recs if r.final)
    steps = spec_metrics(int(tokens), len(recs), accepted=counters.get("accepted_tokens") or 0,
                         drafted_tokens=counters.get("draft_tokens"))["verify_steps"]
    return [(-1, tokens, float(steps))] if steps else None


def log_ratios(a: Units, b: Units) -> tuple[Any, list[int]]:
    """The per-prompt log ratios log(rate a / rate b) over the units both measured (rate: a
    unit's T / E), and each one's block: one block for all where the two configs' blocks were
    not interleaved in time (:func:`back_to_back`)."""
    logs, blocks = _log_ratios(a, b)
    if back_to_back(a, b, set(blocks)):
        blocks = [min(blocks)] * len(blocks)
    return logs, blocks


def back_to_back(a: Units, b: Units, shared: set[int]) -> bool:
    """Whether every block of ``a`` among ``shared`` began before every one of ``b``, or the
    other way round (two blocks or more, each one's start known): one stretch of time each."""
    mine = [t for k, t in a.began if k in shared]
    theirs = [t for k, t in b.began if k in shared]
    if len(shared) < 2 or len(mine) < len(shared) or len(theirs) < len(shared):
        return False
    return max(mine) < min(theirs) or max(theirs) < min(mine)


def _log_ratios(a: Units, b: Units) -> tuple[Any, list[int]]:
    import numpy as np

    if a.ids == b.ids:  # the usual case: the same prompts, in the same order
        ra, rb, ids = a.tokens / a.seconds, b.tokens / b.seconds, list(a.ids)
    elif not set(a.ids) & set(b.ids):  # a cell's counters on one side: its blocks are paired
        return _block_ratios(a, b)
    else:
        where = {u: k for k, u in enumerate(b.ids)}
        mine = [(k, where[u]) for k, u in enumerate(a.ids) if u in where]
        ra = np.array([a.tokens[k] / a.seconds[k] for k, _ in mine], dtype=float)
        rb = np.array([b.tokens[k] / b.seconds[k] for _, k in mine], dtype=float)
        ids = [a.ids[k] for k, _ in mine]
    keep = (ra > 0) & (rb > 0) & np.isfinite(ra) & np.isfinite(rb)
    logs = np.log(ra[keep]) - np.log(rb[keep])
    return logs, [u[0] for u, k in zip(ids, keep, strict=True) if k]


def _block_ratios(a: Units, b: Units) -> tuple[Any, list[int]]:
    """The log ratios of the two configs' block values (Σ numerator / Σ denominator of each
    block both measured): where one side's units are whole cells (:func:`_cell_unit`)."""
    import numpy as np

    def by_block(u: Units) -> dict[int, float]:
        sums: dict[int, list[float]] = {}
        for (block, _), num, den in zip(u.ids, u.tokens, u.seconds, strict=True):
            pair = sums.setdefault(block, [0.0, 0.0])
            pair[0], pair[1] = pair[0] + float(num), pair[1] + float(den)
        return {k: n / d for k, (n, d) in sums.items() if n > 0 and d > 0}

    mine, theirs = by_block(a), by_block(b)
    both = sorted(set(mine) & set(theirs))
    return (np.array([math.log(mine[k] / theirs[k]) for k in both], dtype=float), both)


def paired(a: Units, b: Units) -> Paired:
    """``a`` against ``b`` (see the module): paired block means with two blocks or more, the
    prompts themselves with one (SE NaN with fewer than 2 of the sample)."""

    return paired_logs(*log_ratios(a, b))


def paired_logs(logs: Any, blocks: Sequence[int]) -> Paired:
    """Per-prompt log ratios (``logs``, numpy) and each one's block as a :class:`Paired`: the
    mean of the block means and its SE with two blocks or more, the prompts with one."""
    import numpy as np

    n = int(logs.size)
    if n == 0:
        return Paired(math.nan, math.nan, 0, 0, 0)
    by_block: dict[int, list[float]] = {}
    for value, block in zip(logs, blocks, strict=True):
        by_block.setdefault(block, []).append(float(value))
    if len(by_block) >= 2:
        means = np.array([float(np.mean(v)) for v in by_block.values()])
        sample = means
    else:
        sample = logs
    size = int(sample.size)
    se = float(np.std(sample, ddof=1)) / math.sqrt(size) if size >= 2 else math.nan
    # 0 only where every block (prompt) gave the same ratio
    return Paired(float(sample.mean()), se, size, n, len(by_block))
