"""The metrics' registry: every metric family of ``metricfamilies/``, found by its folder, and
every metric declared once, there, beside its computation.

A module of ``metricfamilies/`` holds one :class:`~.metric.Family` (its ``FAMILY``).
:data:`FAMILIES` is them in their ``order``, and :data:`METRICS` their metrics in that order,
each family's in its declaration order: the order of ``results.csv``'s columns. ``results.csv``
(:func:`~specbench_lib.analysis.metrics.results_table`), a cell's metrics
(:func:`~specbench_lib.analysis.metrics.cell_metrics`, :func:`~.analyse.measure`), the generated
table of ``docs/metrics.md`` (``scripts/metrics_reference.py``), the lead results table
(:data:`RESULTS`), a diff page's metrics (:data:`DIFF`) and a run's summary (:data:`SUMMARY`)
read them; nothing else lists a
metric. A new metric is a line of its family and its computation there, and its test.
"""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType

from ..core.errors import SpecbenchError
from ..core.tables import ROW_KEYS, Column
from . import metricfamilies as _folder
from .metric import CELL_KINDS, KINDS, Family, Metric

__all__ = ["CELL_KINDS", "DIFF", "FAMILIES", "KINDS", "LEAD", "METRIC", "METRICS", "RESULTS",
           "SUMMARY", "against_baseline", "columns", "discover"]


def discover(package: ModuleType) -> tuple[Family, ...]:
    """The families of ``package``'s modules (one ``FAMILY`` each), by ``order``; a module
    without one, or a metric declared twice, raises."""
    found: list[Family] = []
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda i: i.name):
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        family = getattr(module, "FAMILY", None)
        if not isinstance(family, Family):
            raise SpecbenchError(f"{module.__name__} holds no FAMILY (a metric.Family): every "
                                 "module of metricfamilies/ declares one")
        found.append(family)
    found.sort(key=lambda f: f.order)
    names = [m.name for f in found for m in f.metrics]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise SpecbenchError(f"metric {', '.join(twice)} declared twice in metricfamilies/; "
                             "declare each once")
    return tuple(found)


FAMILIES: tuple[Family, ...] = discover(_folder)
METRICS: tuple[Metric, ...] = tuple(m for f in FAMILIES for m in f.metrics)
METRIC = {m.name: m for m in METRICS}


def _placed(mark: str) -> tuple[str, ...]:
    return tuple(m.name for m in sorted((m for m in METRICS if getattr(m, mark)),
                                        key=lambda m: getattr(m, mark)))


LEAD = _placed("lead")  # the lead results table: a row's keys, then these, then its notes
DIFF = _placed("diff")  # a diff page's metrics, A and B side by side
# a run's summary table (RunResult.summary): a row's keys, then these with their intervals' ends
SUMMARY = tuple(c for n in _placed("summary") for c in
                (n, *((f"{n}_lo", f"{n}_hi") if METRIC[n].interval else ())))


def columns(*kinds: str) -> tuple[str, ...]:
    """The ``results.csv`` columns of the metrics of ``kinds``, in declaration order."""
    return tuple(m.name for m in METRICS if m.column and m.kind in kinds)


def against_baseline() -> tuple[str, ...]:
    """The columns that compare with another config's row (each ``baseline`` metric, with its
    interval's ends)."""
    return tuple(c for m in METRICS if m.baseline
                 for c in (m.name, *((f"{m.name}_lo", f"{m.name}_hi") if m.interval else ())))


RESULTS = (*ROW_KEYS, *(METRIC[n].shown() for n in LEAD), Column("notes", "notes"))
