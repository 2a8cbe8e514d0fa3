"""Goodput: the requests that met a service-level objective, per ok cell.

A request *meets* the SLO when every limit given holds for it: its TTFT, its TPOT and its
end-to-end latency (vLLM ``bench serve --goodput``'s per-request definition), timed from the
request's scheduled arrival in an open loop. ``goodput_rps`` and ``goodput_tok_s`` are the
requests (and their completion tokens) that met it over the cell's window, ``slo_met`` their
fraction; the cell ``meets_slo`` when that fraction is at least ``slo.percentile``. The highest
load that meets it: :func:`~specbench_lib.analysis.slo.capacity`.
"""

from __future__ import annotations

from typing import Any

from ...model.records import CellRecord, RequestRecord
from ...model.sections import SloParams
from ..metric import Family, Metric


def meets(rec: RequestRecord, slo: SloParams) -> bool:
    """Whether one measured request met every limit of ``slo``. An open-loop request's TTFT and
    E2E run from its *scheduled* arrival, so the time it waited for a free slot counts (no
    coordinated omission: a user arrives when the schedule says, not when the client sends)."""
    times = rec.token_times
    origin = rec.scheduled if rec.scheduled is not None else rec.start
    ttft = times[0] - origin if times else None
    tpot = (times[-1] - times[0]) / (len(times) - 1) if len(times) >= 2 else 0.0
    return (ttft is not None
            and (slo.ttft_s is None or ttft <= slo.ttft_s)
            and (slo.tpot_s is None or tpot <= slo.tpot_s)
            and (slo.e2e_s is None or rec.end - origin <= slo.e2e_s))


def goodput(cell: CellRecord, slo: SloParams) -> dict[str, Any]:
    """The SLO figures of an ok cell (its metrics' window; failed tolerated requests never meet)."""
    window = (cell.metrics or {}).get("window_s") or 0.0
    skip = set(cell.verdict.failed)
    recs = [r for r in cell.measured if r.index not in skip]
    good = [r for r in recs if meets(r, slo)]
    tokens = sum((r.final.completion_tokens or 0) for r in good if r.final)
    met = len(good) / len(cell.measured) if cell.measured else None
    return {"goodput_rps": len(good) / window if window > 0 else None,
            "goodput_tok_s": tokens / window if window > 0 else None,
            "slo_met": met, "meets_slo": met is not None and met >= slo.percentile}


FAMILY = Family(90, (
    Metric("goodput_rps", "requests/s", "requests that met every SLO limit over the window",
           "slo"),
    Metric("goodput_tok_s", "tok/s", "completion tokens of those requests over the window", "slo"),
    Metric("slo_met", "fraction", "the fraction of measured requests that met the SLO", "slo"),
    Metric("meets_slo", "bool", "at least `slo.percentile` of the requests met it (a mean over "
           "repeats: the fraction of repeats)", "slo"),
))
