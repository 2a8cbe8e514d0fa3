"""A cell's verdict and metrics, concluded from what was measured: the stored requests and facts.

Tables, plots and reports read cells through :func:`analyse`, so a fix to a metric or to an
analysis-time rule applies to every run already on disk, with no request sent again. What only
the measurement could observe (the server died, a log signature, spec counters, a verdict
reached before any request) comes from the cell's :class:`~specbench_lib.model.records.CellFacts` as stored.
"""

from __future__ import annotations

from typing import Any

from ..model.records import CellRecord
from ..model.verdict import Verdict
from .metrics import CellMetrics, cell_metrics
from .metricset import FAMILIES
from .validate import judge as judge_all


def verdict_of(cell: CellRecord) -> Verdict:
    """The verdict the rules give the cell's stored requests and facts."""
    return judge_all(cell.records, cell.facts, cell.judge, target_rate=cell.target_rate,
                     prompts=cell.prompts)


def measure(cell: CellRecord, verdict: Verdict) -> CellMetrics | None:
    """The metrics of an ok cell (None otherwise): its requests', then each family's on read
    from the stored facts (the server's spec counters when the requests carry none, by the
    same definitions: :mod:`~.metricfamilies.spec`; the GPUs' telemetry)."""
    if not verdict.ok:
        return None
    metrics: dict[str, Any] = dict(cell_metrics(cell, exclude=verdict.failed))
    for family in FAMILIES:
        if family.stored is not None:
            metrics.update(family.stored(cell, metrics))
    return metrics


def analyse(cell: CellRecord) -> CellRecord:
    """The cell with the verdict and metrics that this specbench concludes from it now."""
    verdict = verdict_of(cell)
    return cell.with_analysis(verdict, measure(cell, verdict))
