"""What a metric is, and a family of them: the declarations and the computation that gives them,
side by side in one module of ``metricfamilies/`` (AIPerf's metrics are the model: a metric's
declaration and its computation in one place, found by a registry, :mod:`~.metricset`).

A :class:`Metric` is declared once: its name, unit, meaning, what computes it (``kind``),
whether it is a ``results.csv`` column, how a readable table shows it. A :class:`Family` holds
its metrics and, for the metrics a cell file stores, its computation: from the cell's requests
(``requests``, over a :class:`Requests` view every family reads alike) and, on read, from the
cell's stored facts (``stored``: a server's counters, the GPUs' telemetry). Families whose
metrics are computed over several cells (losslessness, SLOs, a results row) keep their
computation beside their declarations too, and :func:`~.metrics.results_table` calls it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from ..core.tables import Column
from ..model.records import CellRecord, RequestRecord
from .latency import deliveries

__all__ = ["CELL_KINDS", "KINDS", "Computed", "Family", "Metric", "Requests"]

# what computes a metric: ``cell`` (every ok cell), ``spec`` (the server's spec counters),
# ``open_loop`` (a cell with a request rate), ``gpu`` (a cell whose GPUs were sampled),
# ``lossless`` (a speculative cell against ``auto``'s), ``slo`` (with an SLO) and ``row``
# (a results row, over its repeats and its panel)
KINDS = ("cell", "spec", "open_loop", "gpu", "lossless", "slo", "row")
CELL_KINDS = ("cell", "spec", "open_loop", "gpu")  # stored in a cell file's ``metrics``


@dataclass(frozen=True)
class Metric:
    """One metric: ``unit`` (``text`` is aggregated as text, every other unit as a number),
    ``meaning`` in a sentence, ``column`` (in ``results.csv``; a list or a mapping is only in the
    cell file), how a table shows it (``header``, ``form``, ``scale``, ``interval``: with its
    ``_lo`` and ``_hi`` columns), whether it compares with another config (``baseline``), and
    its place in the lead results table, on a diff page and in a run's summary (``lead``,
    ``diff``, ``summary``: 1, 2, …; 0 for none)."""

    name: str
    unit: str
    meaning: str
    kind: str = "cell"
    column: bool = True
    header: str = ""
    form: str = "{:.3g}"
    scale: float = 1.0
    interval: bool = False
    # a ratio against another config's row of its panel (``auto``'s, the best ``linear``'s):
    # none at a rate profile's point, where each config runs at a rate of its own
    baseline: bool = False
    lead: int = 0
    diff: int = 0
    summary: int = 0

    def shown(self) -> Column:
        """The metric as a readable table's column."""
        return Column(self.name, self.header or self.name, self.form, interval=self.interval,
                      scale=self.scale)


class Requests:
    """A cell's measured requests as every family reads them: ``measured`` those averaged
    (failed ones a tolerant verdict let through left out), ``failed`` the number left out,
    ``records`` every request (warmups included), and the figures several families share."""

    def __init__(self, records: Sequence[RequestRecord], measured: Sequence[RequestRecord],
                 exclude: Sequence[int] = (), target_rate: float | None = None) -> None:
        skip = set(exclude)
        self.records = list(records)
        self.measured = [r for r in measured if r.index not in skip]
        self.failed = len(measured) - len(self.measured)
        self.target_rate = target_rate

    @cached_property
    def total(self) -> int:
        """Completion tokens, as the server counted them."""
        return sum(r.final.completion_tokens or 0 for r in self.measured if r.final)

    @cached_property
    def window(self) -> float:
        """The measurement window: first request sent → last token received (0 for none)."""
        starts = [r.start for r in self.measured]
        lasts = [r.token_times[-1] for r in self.measured if r.token_times]
        return (max(lasts) - min(starts)) if starts and lasts else 0.0

    @cached_property
    def deliveries(self) -> list[list[tuple[float, int]]]:
        """Each request's deliveries (:func:`~.latency.deliveries`)."""
        return [deliveries(r.token_times) for r in self.measured]


Computed = dict[str, Any]


@dataclass(frozen=True)
class Family:
    """A family of metrics: where its columns sit among the others (``order``), its
    declarations, and its computation of a cell's metrics from the requests (``requests``) and
    on read from the stored facts (``stored``, given the metrics so far; what it returns
    replaces them key by key)."""

    order: int
    metrics: tuple[Metric, ...]
    requests: Callable[[Requests], Computed] | None = None
    stored: Callable[[CellRecord, Mapping[str, Any]], Computed] | None = None
