"""The machine's drift during a run, measured on work that every config does alike, and the
panels whose claimed effect it could explain (the ``drift`` reason of the catalogue).

**The same work.** Where two configs prefill a prompt the same way (the target model alone:
``auto`` and lookup drafting, :data:`SAME_PREFILL`), the prefill of the same prompt is the same
work, so its speed (prompt tokens over the time to the first token, at concurrency 1, where no
other request shares the steps) measures the machine, not the config. Where a config's prefill
differs (a draft model prefills too), the baseline, measured in every block, is the reference.

**The run's drift.** Each such cell's prefill speed, over its group's median (the same workload
and context), placed at the cell's start: ``speed_range`` is the slowest and fastest of them,
``trend`` the last block's median over the first's. The answer says it in words
(:func:`drift_words`).

**A panel's drift** (:func:`panel_drift`): over the prompts both measured, the mean log ratio of
the leader's prefill speed to the baseline's (both doing the same prefill): the part of the
machine's speed that differed between the two configs' stretches of time. It is ``drift`` when
it reaches half the claimed effect (the log of the leader's speedup) and 3 %: the claim's
interval holds the drift where the blocks can (:mod:`.units`), but a reader must see that the
machine moved as much as the effect, never a quiet number.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from ..model.catalogue import C
from ..model.records import CellRecord
from ..model.verdict import Reason
from .claim import Claim
from .units import started

SAME_PREFILL = ("auto", "ngram")  # methods that prefill with the target model alone
SHARE = 0.5  # drift at half the claimed effect (log scale) or more is a reason
FLOOR = 0.03  # and at least 3 %: a quiet machine's prefill moves ~1 %


@dataclass(frozen=True)
class RunDrift:
    """The machine's speed over a run, from the prefill of identical work (see the module)."""

    cells: int  # the cells it was measured on
    slowest: float  # a cell's prefill speed over its group's median, the slowest
    fastest: float
    trend: float  # the last block's median over the first's (1.0: none, NaN: one block)

    @property
    def measured(self) -> bool:
        return self.cells >= 2

    @property
    def range(self) -> float:
        """fastest / slowest − 1: how much the machine's speed moved during the run."""
        return self.fastest / self.slowest - 1 if self.measured else math.nan


def prefill_speeds(cell: CellRecord) -> dict[tuple[int, int], float]:
    """Each ok request's prefill speed (prompt tokens / TTFT), keyed as the claim's units
    (repeat, index); none for a cell above concurrency 1 or an open-loop point."""
    if not cell.verdict.ok or int(cell.spec.concurrency) != 1 or cell.spec.load:
        return {}
    skip = set(cell.verdict.failed)
    found = {}
    for r in cell.measured:
        ttft = r.ttft
        tokens = (r.final.prompt_tokens if r.final and r.final.prompt_tokens
                  else r.prompt_tokens_planned)
        if r.index not in skip and ttft and ttft > 0 and tokens:
            found[cell.spec.repeat, r.index] = tokens / ttft
    return found


def run_drift(cells: Sequence[CellRecord]) -> RunDrift:
    """The run's drift (see the module) from its cells of :data:`SAME_PREFILL` configs."""
    groups: dict[tuple[str, int], list[tuple[float, int, float]]] = {}
    for cell in cells:
        if cell.spec.method not in SAME_PREFILL:
            continue
        speeds = list(prefill_speeds(cell).values())
        if speeds:
            groups.setdefault((cell.spec.workload, cell.spec.context), []).append(
                (started(cell), cell.spec.repeat, statistics.median(speeds)))
    points = []
    for rows in groups.values():
        middle = statistics.median(s for _, _, s in rows)
        points += [(at, block, s / middle) for at, block, s in rows]
    if len(points) < 2:
        return RunDrift(len(points), math.nan, math.nan, math.nan)
    blocks = sorted({b for _, b, _ in points})
    first = statistics.median(s for _, b, s in points if b == blocks[0])
    last = statistics.median(s for _, b, s in points if b == blocks[-1])
    return RunDrift(len(points), min(s for _, _, s in points), max(s for _, _, s in points),
                    last / first if len(blocks) > 1 else math.nan)


def drift_words(drift: RunDrift) -> str:
    """"the machine's speed (prefill of the same prompts) moved 31 % during the run (last
    block 1.12× the first)", or why it was not measured."""
    if not drift.measured:
        return ("the machine's drift was not measured (no two concurrency-1 cells of a config "
                "that prefills as the target alone)")
    trend = (f"; last block {drift.trend:.2f}× the first" if drift.trend == drift.trend
             else "; one block")
    return (f"the machine's speed (prefill of the same prompts) moved {100 * drift.range:.0f} % "
            f"during the run ({drift.cells} cells{trend})")


def panel_drift(cells: Sequence[CellRecord], found: Claim) -> tuple[float, Reason | None]:
    """A panel's drift between its leader and its baseline (see the module): the ratio of the
    leader's prefill speed to the baseline's on the same prompts (NaN where not measured), and
    the ``drift`` reason when it reaches half the claimed effect."""
    leader, base = found.leader, found.baseline
    if leader is None or base is None or leader == base:
        return math.nan, None
    speeds: dict[str, dict[tuple[int, int], float]] = {leader: {}, base: {}}
    for cell in cells:
        if cell.spec.config in speeds and cell.spec.method in SAME_PREFILL:
            speeds[cell.spec.config].update(prefill_speeds(cell))
    both = sorted(set(speeds[leader]) & set(speeds[base]))
    if len(both) < 2:
        return math.nan, None
    logs = [math.log(speeds[leader][u] / speeds[base][u]) for u in both]
    moved = statistics.fmean(logs)
    effect = abs(math.log(found.speedup)) if found.speedup and found.speedup > 0 else 0.0
    ratio = math.exp(moved)
    if abs(moved) < max(FLOOR, SHARE * effect):
        return ratio, None
    held = ("one block: the claim cannot separate the two" if found.confounded
            else "the blocks hold it in the interval")
    return ratio, Reason(C.drift, (
        f"the same prompts' prefill ran {ratio:.2f}× as fast in {leader}'s stretches as in "
        f"{base}'s ({len(both)} prompts): the machine's speed moved by as much as the claimed "
        f"{found.speedup:.2f}× ({held})"))
