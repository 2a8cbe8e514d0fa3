"""How a sweep tells the researcher where it is: one line per server start and per finished cell.

Plain lines on stdout, flushed, so they read the same in a terminal, in a notebook's saved
output and in ``specbench run`` (papermill logs the kernel's output): a progress bar's widget
state is lost in a saved notebook, a line is not. A cell's line has its verdict, the headline
number with its 95 % interval and n (or the first reason), the time elapsed and an estimate of
the time left. Given the cells still to come, the estimate is from the measured pace of each
config × context (:class:`Pace`) plus the server starts still to come; without them, the mean
time per cell so far.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TextIO

from ..model.params import CellSpec
from ..model.records import CellRecord, RequestRecord
from .timemodel import TimeModel


class Pace:
    """The time a sweep has left, from what it measured: each cell's time (from the previous
    cell's end or its server's ready, whichever is later) per config × context, and each server
    start's time (from ``starting`` to ``ready``).

    A cell still to come takes the mean time of its config × context. One of a config and
    context not yet seen takes its config's mean at the contexts seen, each scaled by how much
    slower this context was than that one for the configs measured at both (1 when none was);
    one of a config not yet seen, the mean of the cells at its context (else of every cell).
    Each config still to come adds one server start (their mean time; none before one is seen).

    With ``costs`` (each cell's predicted seconds from its prompt lengths and output cap,
    :mod:`.estimate`), a cell still to come takes its cost times its config's measured/predicted
    ratio (over every cell seen when its config has none yet), so a workload of long prompts
    after short ones does not swing the estimate.
    """

    def __init__(self, cells: Sequence[CellSpec], now: float,
                 costs: Mapping[str, float] | None = None,
                 model: TimeModel | None = None) -> None:
        self.model = model
        self.remaining = list(cells)
        self.costs = dict(costs or {})
        self.scaled: dict[str, list[tuple[float, float]]] = {}  # config: (measured, predicted)
        self.times: dict[tuple[str, int], list[float]] = {}
        self.starts: list[float] = []
        self.mark = now  # the end of the last cell, or the last server's ready
        self.starting: float | None = None
        self.running: str | None = None  # the config whose server is up

    def server(self, label: str, what: str, now: float) -> None:
        if what.startswith("starting"):
            self.starting, self.running = now, label
        elif what.startswith("ready"):
            if self.starting is not None:
                self.starts.append(now - self.starting)
            self.starting, self.mark = None, now
        elif what.startswith("stopped") and self.running == label:
            self.running = None

    def cell(self, spec: CellSpec, now: float) -> None:
        self.times.setdefault((spec.config, spec.context), []).append(now - self.mark)
        if spec.cell_id in self.costs:
            self.scaled.setdefault(spec.config, []).append((now - self.mark,
                                                            self.costs[spec.cell_id]))
        self.mark = now
        ids = [c.cell_id for c in self.remaining]
        if spec.cell_id in ids:
            del self.remaining[ids.index(spec.cell_id)]

    def left(self) -> float:
        """Seconds still to come: each remaining cell's estimate and each server start (with a
        time model, its price of them: :mod:`.timemodel`)."""
        if self.model is not None:
            return self.model.left(self.remaining, self.running)
        configs = {c.config for c in self.remaining} - {self.running}
        start = statistics.fmean(self.starts) if self.starts else 0.0
        if self.costs and self.scaled:
            cells = sum(self.costs.get(c.cell_id, 0.0) * self._rate(c.config)
                        for c in self.remaining)
        else:
            cells = sum(self.estimate(c.config, c.context) for c in self.remaining)
        return cells + start * len(configs)

    def _rate(self, config: str) -> float:
        """Measured over predicted seconds of ``config``'s cells (of every cell seen when it
        has none)."""
        pairs = self.scaled.get(config) or [p for v in self.scaled.values() for p in v]
        predicted = sum(p for _, p in pairs)
        return sum(m for m, _ in pairs) / predicted if predicted > 0 else 1.0

    def estimate(self, config: str, context: int) -> float:
        means = {key: statistics.fmean(v) for key, v in self.times.items()}
        if (config, context) in means:
            return means[(config, context)]
        seen = [(ctx, mean) for (name, ctx), mean in means.items() if name == config]
        if seen:
            return statistics.fmean(mean * self._ratio(context, ctx, means) for ctx, mean in seen)
        here = [mean for (_, ctx), mean in means.items() if ctx == context]
        return statistics.fmean(here or list(means.values()) or [0.0])

    @staticmethod
    def _ratio(context: int, seen: int, means: dict[tuple[str, int], float]) -> float:
        """How much longer a cell at ``context`` took than one at ``seen``, for the configs
        measured at both (1 when none was)."""
        both = [means[(name, context)] / mean for (name, ctx), mean in means.items()
                if ctx == seen and (name, context) in means and mean > 0]
        return statistics.fmean(both) if both else 1.0


class Progress:
    """Lines for ``total`` cells, ``done`` of them already kept; silent when not ``enabled``."""

    def __init__(self, total: int, *, done: int = 0, enabled: bool = True,
                 out: TextIO | None = None, cells: Sequence[CellSpec] | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 budget_s: float | None = None, costs: Mapping[str, float] | None = None,
                 model: TimeModel | None = None) -> None:
        """``cells``: the cells still to measure (the plan's less those kept), for an estimate
        from the pace of each config × context; without them, the mean time per cell.
        ``budget_s``: a time-budgeted sweep's budget; its lines show the time left in it.
        ``model``: the sweep's time model, taught by every server start and cell here, and
        the estimate's price of what is left (:mod:`.timemodel`)."""
        self.total, self.done, self.enabled = total, done, enabled
        self.budget_s = budget_s
        self.out = out or sys.stdout
        self.clock = clock
        self.began = clock()
        self.measured = 0  # cells finished by this sweep (the ETA's base)
        self.model = model
        self.listeners: list[Callable[[CellRecord], None]] = []  # told of every cell's end
        self.starting: dict[str, float] = {}
        self.pace = Pace(cells, self.began, costs, model) if cells is not None else None
        if enabled:  # the interval's imports, before any cell: a Ctrl-C inside a first import
            import numpy  # noqa: F401  (mid-sweep) would leave the module half made
            import scipy.stats  # noqa: F401

    def _say(self, text: str) -> None:
        if self.enabled:
            print(text, file=self.out, flush=True)

    def note(self, text: str) -> None:
        """A line of its own: a round's state, the answer."""
        self._say(text)

    def warmed(self, label: str, config: str, warmup: Sequence[RequestRecord]) -> None:
        """``label``'s server (of ``config``) is started and warmed up: the time model learns
        the start, and its speeds from the warmup when they are stated defaults."""
        began = self.starting.pop(label, None)
        if self.model is not None and began is not None:
            self.model.calibrate(warmup, self.clock() - began)
            self.model.learn_start(config, self.clock() - began)

    def server(self, label: str, what: str) -> None:
        """A server event: starting (with its limit), ready (with its time), stopped."""
        if what.startswith("starting"):
            self.starting[label] = self.clock()
        if self.pace is not None:
            self.pace.server(label, what, self.clock())
        self._say(f"  server {label}: {what}")

    def cell(self, record: CellRecord) -> None:
        """One finished cell: where it is in the sweep, its verdict and headline figure."""
        from ..analysis.intervals import (
            DRIFT_CV,
            independent_units,
            interval,
            throughput_replicates,
            too_few_note,
        )

        self.done += 1
        self.measured += 1
        if self.model is not None and record.status in ("ok", "invalid"):  # it ran its requests
            self.model.learn_record(record)
        for listener in self.listeners:
            listener(record)
        if self.pace is not None:
            self.pace.cell(record.spec, self.clock())
        if not self.enabled:
            return
        spec = record.spec
        where = (f"{spec.config} {spec.workload} ctx{spec.context}"
                 + (f" o{spec.output_tokens}" if spec.outputs > 1 else "")
                 + f" c{spec.concurrency}"
                 + (f" {spec.load}" if spec.load else "")
                 + (f" at {record.target_rate:.3g}/s" if spec.profile_point and record.target_rate
                    else "")
                 + (f" r{spec.repeat}" if spec.repeats > 1 else ""))
        tok_s = (record.metrics or {}).get("output_tok_s")
        if record.verdict.ok and tok_s is not None:
            n = len(record.measured) - len(record.verdict.failed)
            units = independent_units([record])
            low, high = interval(throughput_replicates([record]), units, drift=DRIFT_CV)
            figure = (f"{tok_s:.1f} tok/s [{low:.1f}, {high:.1f}] n={n}" if units >= 2 else
                      f"{tok_s:.1f} tok/s n={n}, {too_few_note(units, spec.concurrency)}")
        else:
            figure = record.verdict.reasons[0] if record.verdict.reasons else ""
        elapsed = self.clock() - self.began
        if self.budget_s is not None:  # rounds: how many cells come depends on what they show
            if record.verdict.by_design:  # a round the contest did not need: not news
                return
            left_s = self.budget_s - elapsed
            clock = f"{_span(left_s)} of the budget left" if left_s >= 0 else \
                f"{_span(-left_s)} over the budget"
            self._say(f"[{self.measured}] {where}: {record.status}"
                      f"{f', {figure}' if figure else ''} · {_span(elapsed)}, {clock}")
            return
        left = self.total - self.done
        seconds = self.pace.left() if self.pace is not None else elapsed / self.measured * left
        eta = f", about {_span(seconds)} left" if left else ""
        self._say(f"[{self.done}/{self.total}] {where}: {record.status}"
                  f"{f', {figure}' if figure else ''} · {_span(elapsed)}{eta}")


def _span(seconds: float) -> str:
    minutes, secs = divmod(int(round(seconds)), 60)
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"
