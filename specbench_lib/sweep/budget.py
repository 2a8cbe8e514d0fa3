"""The time budget's scheduling: the wall clock of a budgeted sweep, what each config's slice of
a round costs, and the budget kept to the cell.

**Kept to the cell.** No server starts and no cell starts that the time model
(:class:`~.timemodel.TimeModel`: the stated or calibrated speeds, corrected by every cell this
run finished) says cannot end within the budget; before the run's first server, at the stated
speeds, only its start and warmup must fit (they calibrate the model: :mod:`.timemodel`). The
first refusal cuts its round where it stands (the budget's ``cut``): the cells it did not reach
are ``skipped`` (``time_budget``), and the answer says what was cut. A cut round's block holds
only the configs it measured; the claim pairs two configs over the blocks both measured
(:mod:`~specbench_lib.analysis.units`), so a config missing from a block leaves that block out of
its comparisons, and no comparison is biased by a config it never met there.

**The overrun.** A cell predicted to end in the budget may end after it, by the model's
misprediction: the allowed overrun is :data:`OVERRUN` of the budget, and the largest overrun of
any cell's end (and the sweep's) is recorded in ``answer.json`` (``overrun``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..model.answerfile import Cut, MoreTime, Overrun
from ..model.cellspec import CellSpec
from ..model.records import CellRecord
from .timemodel import TimeModel

OVERRUN = 0.10  # the allowed overrun (the model's misprediction), a share of the budget
OVERSHOOT = OVERRUN  # a slice starts only while its predicted end is within the budget + 10 %
HOUR_S = 3600.0


class Budget:
    """The wall clock of a budgeted sweep and what each config's slice of a round costs, as the
    time model prices it (:meth:`~.timemodel.TimeModel.slice_s`)."""

    def __init__(self, seconds: float, model: TimeModel, *,
                 clock: Callable[[], float] = time.monotonic, began: float | None = None,
                 overrun_s: float = 0.0) -> None:
        """``model``: the sweep's time model, which prices cells, starts and slices;
        ``began``: when the sweep began on ``clock`` (preflight, and a resumed run's earlier
        attempts, count against the budget); ``overrun_s``: the largest overrun of an earlier
        attempt."""
        self.seconds, self.model, self.clock = seconds, model, clock
        self.began = clock() if began is None else began
        self.spent = False
        self.cut: dict[str, Any] | None = None  # where the budget cut a round (:meth:`may_start`)
        self.overrun: dict[str, Any] = {"largest_s": max(0.0, overrun_s), "cell": None}

    @property
    def elapsed(self) -> float:
        return self.clock() - self.began

    @property
    def left(self) -> float:
        return self.seconds - self.elapsed

    def learn(self, config: str, seconds: float, cells: float, fixed: float) -> None:
        """A slice of ``config`` took ``seconds`` for ``cells`` cells (a fraction of one per
        cell of a partial round), ``fixed`` of them server start, warmup and stop: the time
        model keeps it (:meth:`~.timemodel.TimeModel.learn_slice`)."""
        self.model.learn_slice(config, seconds, cells, fixed)

    def estimate(self, config: str, cells: float) -> float:
        """A slice's predicted seconds (:meth:`~.timemodel.TimeModel.slice_s`): as the config's
        slice was timed; one not yet timed, its server start and its cells as the model prices
        them."""
        return self.model.slice_s(config, cells)

    def would_fit(self, slices: Mapping[str, float], *, parallel: bool = False) -> bool:
        """Whether a round of these slices is predicted to end in the budget (no side effect)."""
        costs = [self.estimate(c, n) for c, n in slices.items()]
        need = (max(costs) if parallel else sum(costs)) if costs else 0.0
        return self.elapsed + need <= self.seconds

    def round_fits(self, slices: Mapping[str, float], *, parallel: bool = False) -> bool:
        """Whether a round of these slices (config: cells) is predicted to end in the budget
        (``parallel``: placed slices run at once, the longest decides)."""
        fits = self.would_fit(slices, parallel=parallel)
        self.spent = self.spent or not fits
        return fits

    def slice_fits(self, config: str, cells: float) -> bool:
        """Whether one slice may start: the budget not spent, its predicted end within 10 %."""
        fits = (self.elapsed < self.seconds and self.elapsed + self.estimate(config, cells)
                <= self.seconds * (1 + OVERSHOOT))
        self.spent = self.spent or not fits
        return fits

    def may_start(self, cell: CellSpec, *, start: bool, share: float = 1.0) -> bool:
        """Whether ``cell`` (``share`` of its requests; ``start``: its server must start first)
        may start: its predicted end within the budget (see the module). The first refusal is
        the round's :attr:`cut`."""
        first = start and not self.model.calibrated  # the start calibrates what the cell costs
        cost = self.model.slice_s(cell.config, [] if first else [cell], share=share,
                                  starts=int(start), timed=False)
        fits = self.elapsed + cost <= self.seconds
        if not fits:
            self.spent = True
            if self.cut is None:
                self.cut = {"round": cell.repeat + 1, "config": cell.config, "cell": cell.cell_id,
                            "predicted_s": round(cost, 1), "left_s": round(self.left, 1),
                            "at_s": round(self.elapsed, 1), "server_start": start}
        return fits

    def round_may_start(self, slices: Mapping[str, Sequence[CellSpec]], share: float) -> bool:
        """Whether a placed round (its slices at once, the longest decides) may start; not:
        the round is the :attr:`cut`, at its longest slice."""
        costs = {c: self.estimate(c, len(t) * share) for c, t in slices.items() if t}
        if not costs or self.elapsed + max(costs.values()) <= self.seconds:
            return True
        config = max(costs, key=lambda c: costs[c])
        first = slices[config][0]
        self.spent = True
        self.cut = self.cut or {"round": first.repeat + 1, "config": config, "cell": first.cell_id,
                                "predicted_s": round(costs[config], 1),
                                "left_s": round(self.left, 1), "at_s": round(self.elapsed, 1),
                                "server_start": True}
        return False

    def cell_ended(self, record: CellRecord) -> None:
        """A cell ended: its overrun past the budget, if the largest yet."""
        over = self.elapsed - self.seconds
        if over > self.overrun["largest_s"] and not record.verdict.by_design:
            self.overrun = {"largest_s": round(over, 2), "cell": record.cell_id}

    def overrun_doc(self) -> Overrun:
        """``answer.json``'s ``overrun``: the largest past the budget (a cell's end, or the
        sweep's), the sweep's own, and the allowed."""
        end = max(0.0, self.elapsed - self.seconds)
        largest = max(self.overrun["largest_s"], end)
        return Overrun(largest_s=round(largest, 2), cell=self.overrun["cell"],
                       end_s=round(end, 2), allowed_s=round(OVERRUN * self.seconds, 2))


def cut_words(cut: dict[str, Any], measured: Sequence[str], missing: Sequence[str],
              cells: int) -> Cut:
    """``answer.json``'s ``cut``: where the budget cut its round and what that leaves."""
    what = "its server's start" if cut.get("server_start") else "its cell"
    words = (f"round {cut['round']} cut at {cut['config']} ({what} {cut['cell']} was predicted "
             f"to take {cut['predicted_s']:.0f} s with {max(0.0, cut['left_s']):.0f} s left): "
             f"{cells} cell{'s' if cells != 1 else ''} of it not measured")
    if measured:
        words += (f"; its block compares only {', '.join(measured)} among themselves"
                  if len(measured) > 1 else f"; its block holds {measured[0]} alone")
    if missing:
        words += f"; not measured in it: {', '.join(missing)}"
    return Cut(**cut, measured=tuple(measured), missing=tuple(missing), cells=cells, words=words)


def more_time(model: TimeModel, wanted: Sequence[CellSpec], restarts: dict[str, bool],
              seconds: float = HOUR_S) -> MoreTime | None:
    """What another ``seconds`` (an hour) would buy: of the cells the contest still wanted (the
    budget cut them), round by round, each config's server started once a round (once a cell
    where it restarts before each), how many would fit and which rounds would end whole."""
    if not wanted:
        return None
    spent, cells, whole = 0.0, 0, list[int]()
    rounds: dict[int, list[CellSpec]] = {}
    for cell in wanted:
        rounds.setdefault(cell.repeat, []).append(cell)
    for number in sorted(rounds):
        started: set[str] = set()
        for cell in rounds[number]:
            start = bool(restarts.get(cell.config)) or cell.config not in started
            started.add(cell.config)
            cost = model.slice_s(cell.config, [cell], starts=int(start), timed=False)
            if spent + cost > seconds:
                return _more(seconds, cells, whole, len(wanted), number + 1)
            spent, cells = spent + cost, cells + 1
        whole.append(number + 1)
    return _more(seconds, cells, whole, len(wanted), None)


def _spans(numbers: list[int]) -> str:
    """Rounds as people list them: ``1, 2, 3`` as ``1-3``, ``1, 2, 5`` as ``1, 2, 5``."""
    runs: list[list[int]] = []
    for n in numbers:
        if runs and n == runs[-1][-1] + 1:
            runs[-1].append(n)
        else:
            runs.append([n])
    return ", ".join(f"{r[0]}-{r[-1]}" if len(r) > 2 else ", ".join(map(str, r)) for r in runs)


def _more(seconds: float, cells: int, whole: list[int], wanted: int,
          partly: int | None) -> MoreTime:
    hours = "hour" if seconds == HOUR_S else f"{seconds / HOUR_S:g} hours"
    parts = [f"about {cells} of the {wanted} cells left unmeasured"]
    if whole:
        parts.append(f"round{'s' if len(whole) > 1 else ''} {_spans(whole)} whole")
    if partly is not None and cells:
        parts.append(f"part of round {partly}")
    return MoreTime(seconds=seconds, cells=cells, wanted=wanted, whole_rounds=tuple(whole),
                    words=f"another {hours} would measure " + ", ".join(parts))
