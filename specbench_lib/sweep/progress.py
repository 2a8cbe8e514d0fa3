"""How a sweep tells the researcher where it is: one line per server start and per finished cell.

Plain lines on stdout, flushed, so they read the same in a terminal, in a notebook's saved
output and in ``specbench run`` (papermill logs the kernel's output): a progress bar's widget
state is lost in a saved notebook, a line is not. A cell's line has its verdict, the headline
number with its 95 % interval and n (or the first reason), the time elapsed and an estimate of
the time left: the cells still to come and a server start for each config among them (but the
one whose server is up), priced by the sweep's time model (:meth:`~.timemodel.TimeModel.left`).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from typing import TextIO

from ..model.cellspec import CellSpec
from ..model.records import CellRecord, RequestRecord
from .timemodel import TimeModel


class Progress:
    """Lines for ``total`` cells, ``done`` of them already kept; silent when not ``enabled``."""

    def __init__(self, total: int, *, done: int = 0, enabled: bool = True,
                 out: TextIO | None = None, cells: Sequence[CellSpec] | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 budget_s: float | None = None, model: TimeModel | None = None) -> None:
        """``cells``: the cells still to measure (the plan's less those kept); with ``model``
        (the sweep's time model, taught by every server start and cell here), each line
        says the time they are priced at (:mod:`.timemodel`). ``budget_s``: a time-budgeted
        sweep's budget; its lines show the time left in it instead."""
        self.total, self.done, self.enabled = total, done, enabled
        self.budget_s = budget_s
        self.out = out or sys.stdout
        self.clock = clock
        self.began = clock()
        self.measured = 0  # cells finished by this sweep (the ETA's base)
        self.model = model
        self.listeners: list[Callable[[CellRecord], None]] = []  # told of every cell's end
        self.starting: dict[str, float] = {}
        self.remaining = None if cells is None else list(cells)
        self.running: str | None = None  # the config whose server is up
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
            self.running = label
        elif what.startswith("stopped") and self.running == label:
            self.running = None
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
        if self.remaining is not None:
            ids = [c.cell_id for c in self.remaining]
            if record.cell_id in ids:
                del self.remaining[ids.index(record.cell_id)]
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
        eta = ""
        if self.model is not None and self.remaining:
            eta = f", about {_span(self.model.left(self.remaining, self.running))} left"
        self._say(f"[{self.done}/{self.total}] {where}: {record.status}"
                  f"{f', {figure}' if figure else ''} · {_span(elapsed)}{eta}")


def _span(seconds: float) -> str:
    minutes, secs = divmod(int(round(seconds)), 60)
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"
