"""Measured requests of ok cells → per-cell metrics → a tidy table with speedups: the metric
families (:mod:`~.metricset`) run over a cell and over a results table."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypedDict

from ..model.records import CellRecord, RequestRecord
from ..model.sections import SloParams
from ..model.tablekeys import GROUP as GROUP
from ..model.tablekeys import PANEL as PANEL
from ..model.tablekeys import load_points as load_points
from .latency import add_percentiles
from .metric import Requests
from .metricset import CELL_KINDS, FAMILIES, METRIC, METRICS, against_baseline, columns

# a row's measured columns in declaration order: the cell's metrics, then losslessness
STORED_COLUMNS = columns("cell", "spec", "open_loop", "lossless")


# The metrics of one ok cell, as :func:`cell_metrics` gives them and a cell file stores them
# (``CellRecord.metrics``): a TypedDict generated from the declarations of the kinds a cell
# stores (``metricset.CELL_KINDS``), so a metric is declared once, in its family. Times in
# seconds, rates per second; the open-loop keys only for a cell with a request rate, the GPU
# keys for sampled GPUs, the position and histogram keys from a server's spec counters
# (:func:`~specbench_lib.analysis.analyse.measure`). mypy reads it as a mapping of names.
_VALUE: dict[str, Any] = {"text": str, "bool": bool | None, "list": list[float] | None,
                          "counts": dict[str, int]}
if TYPE_CHECKING:
    CellMetrics = dict[str, Any]
else:
    CellMetrics = TypedDict("CellMetrics", {m.name: _VALUE.get(m.unit, float | None)
                                            for m in METRICS if m.kind in CELL_KINDS}, total=False)


class Measured(Protocol):
    """A cell's requests: a :class:`~specbench_lib.model.records.CellRecord` or a fresh ``CellDispatch``."""

    @property
    def records(self) -> list[RequestRecord]: ...

    @property
    def measured(self) -> list[RequestRecord]: ...

    @property
    def target_rate(self) -> float | None: ...


def cell_metrics(dispatch: Measured, *, exclude: Sequence[int] = ()) -> CellMetrics:
    """Metrics of one cell's measured requests, with token counts as the server reported them.

    ``output_tok_s`` is completion tokens over the measurement window, from the first request
    sent to the last token received. A *delivery* is the tokens that reached the client
    together: one chunk, or a burst of events less than :data:`~.latency.DELIVERY_GAP_S` apart
    (llama.cpp sends each accepted draft token as its own event, microseconds apart). ``delivery_gap`` is
    the time between a request's deliveries, ``tokens_per_delivery`` their mean size; ITL is per
    token, a delivery's gap shared by its k tokens (gap / k each), so its percentiles are
    latencies a user waits per token; TPOT is a request's (last − first token) / (n − 1);
    acceptance length is tokens per verify step, weighted by tokens: sum(tokens) /
    sum(verify steps). ``exclude`` names failed requests a tolerant verdict let through: they
    are left out and counted in ``n_failed``, never averaged in.
    """
    cell = Requests(dispatch.records, dispatch.measured, exclude, dispatch.target_rate)
    metrics: dict[str, Any] = {}
    for family in FAMILIES:
        if family.requests is not None:
            metrics.update(family.requests(cell))
    return metrics


def results_table(cells: Sequence[CellRecord], *, unstable_cv: float = 0.10,
                  slo: SloParams | None = None, alphas: Mapping[Any, float] | None = None) -> Any:
    """A pandas DataFrame of ok cells: one row per config × :data:`PANEL` (workload × context ×
    output tokens × concurrency × open-loop load point).

    Repeats of a cell are averaged; ``output_tok_s_cv`` is their coefficient of variation
    (sample std / mean; NaN for one repeat), ``repeats_failed`` counts the row's repeats that
    ended ``invalid`` or ``crashed``, and ``unstable`` flags a CV above ``unstable_cv`` or any
    failed repeat (the row stays, marked). ``speedup`` compares mean output tok/s with the ``auto`` row of
    the same workload, context and concurrency; it is NaN when that baseline is not ok;
    ``speedup_vs_linear`` does the same against the best ok ``linear`` config, when any. The
    ``lossless_*`` columns compare greedy outputs with ``auto``'s (see :mod:`~.metricfamilies.lossless`).
    ``output_tok_s_lo/hi`` is a 95 % bootstrap interval over the row's independent units
    (repeats, requests, or blocks of requests in flight together); ``speedup`` and
    ``speedup_lo/hi`` are the panel's claim (:mod:`~.claim`: paired by prompt, simultaneous
    over the panel's configs, at the panel's error in ``alphas``: a budgeted run's last look),
    ``requests_n`` the requests and ``units_n`` the units behind them, ``interval_note`` why a
    row has none (see :mod:`~specbench_lib.analysis.intervals`). TTFT, ITL and E2E
    percentiles are of the row's requests pooled over its repeats, with intervals
    (``ttft_p50_s_lo/hi``, …); p99 (every ``*_p99_s``) only with at least 100 requests behind
    it, else NaN, and ``*_max_s`` the maximum of ``max_n`` requests (see :mod:`~.latency`).
    With an ``slo``, the ``slo`` family's columns too (:mod:`~.metricfamilies.slo`;
    ``meets_slo`` as the fraction of repeats that met it).
    """
    import pandas as pd

    from .metricfamilies.lossless import losslessness
    from .metricfamilies.rows import row_columns
    from .metricfamilies.slo import goodput

    same = losslessness(cells)

    rows = [{**c.spec.row(), **(c.metrics or {}), **same.get(c.cell_id, {}),
             **(goodput(c, slo) if slo is not None else {})} for c in cells if c.verdict.ok]
    gpus = any("gpu_energy_j" in (c.metrics or {}) for c in cells)  # sampled GPUs only
    columns_ = [*GROUP, *STORED_COLUMNS, *(columns("slo") if slo is not None else ()),
                *(columns("gpu") if gpus else ())]
    table = pd.DataFrame(rows, columns=columns_)
    text = [c for c in columns_ if c in METRIC and METRIC[c].unit == "text"]
    numeric = [c for c in columns_ if c not in GROUP and c not in text]
    table[numeric] = table[numeric].apply(pd.to_numeric, errors="coerce")
    grouped = table.groupby(GROUP, dropna=False, sort=False)
    means = grouped[numeric].mean().reset_index()
    for name in text:  # the repeats' notes, each said once
        means[name] = grouped[name].agg(_said_once).to_numpy()
    means = means[[*GROUP, *(c for c in columns_ if c not in GROUP)]].copy()  # one block
    means = row_columns(means, grouped, cells, unstable_cv, alphas)
    means = add_percentiles(means, cells, GROUP)
    # a rate profile's point k runs each config at its own rate: no like-for-like baseline
    profile = means["load"].str.startswith("p")
    means.loc[profile, list(against_baseline())] = float("nan")
    return means


def _said_once(values: Any) -> str | None:
    """A text column's repeats as one text: each distinct note once, in order (None if none)."""
    notes = list(dict.fromkeys(str(v) for v in values if isinstance(v, str) and v))
    return "; ".join(notes) or None
