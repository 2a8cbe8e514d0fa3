"""How a sweep tells the researcher where it is: one line per server start and per finished cell.

Plain lines on stdout, flushed, so they read the same in a terminal, in a notebook's saved
output and in ``specbench run`` (papermill logs the kernel's output): a progress bar's widget
state is lost in a saved notebook, a line is not. A cell's line has its verdict, the headline
number with its 95 % interval and n (or the first reason), the time elapsed and an estimate of
the time left from the cells measured so far.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

from .records import CellRecord


class Progress:
    """Lines for ``total`` cells, ``done`` of them already kept; silent when not ``enabled``."""

    def __init__(self, total: int, *, done: int = 0, enabled: bool = True,
                 out: TextIO | None = None) -> None:
        self.total, self.done, self.enabled = total, done, enabled
        self.out = out or sys.stdout
        self.began = time.monotonic()
        self.measured = 0  # cells finished by this sweep (the ETA's base)
        if enabled:  # the interval's imports, before any cell: a Ctrl-C inside a first import
            import numpy  # noqa: F401  (mid-sweep) would leave the module half made
            import scipy.stats  # noqa: F401

    def _say(self, text: str) -> None:
        if self.enabled:
            print(text, file=self.out, flush=True)

    def server(self, label: str, what: str) -> None:
        """A server event: starting (with its limit), ready (with its time), stopped."""
        self._say(f"  server {label}: {what}")

    def cell(self, record: CellRecord) -> None:
        """One finished cell: where it is in the sweep, its verdict and headline figure."""
        from .intervals import (
            DRIFT_CV,
            independent_units,
            interval,
            throughput_replicates,
            too_few_note,
        )

        self.done += 1
        self.measured += 1
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
        elapsed = time.monotonic() - self.began
        left = self.total - self.done
        eta = f", about {_span(elapsed / self.measured * left)} left" if left else ""
        self._say(f"[{self.done}/{self.total}] {where}: {record.status}"
                  f"{f', {figure}' if figure else ''} · {_span(elapsed)}{eta}")


def _span(seconds: float) -> str:
    minutes, secs = divmod(int(round(seconds)), 60)
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"
