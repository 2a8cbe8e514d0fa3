"""Service-level objectives: goodput, and the highest load at which a config still meets them.

A request *meets* the SLO when every limit given holds for it: its TTFT, its TPOT and its
end-to-end latency (vLLM ``bench serve --goodput``'s per-request definition), timed from the
request's scheduled arrival in an open loop. Per ok cell:
``goodput_rps`` and ``goodput_tok_s`` are the requests (and their completion tokens) that met it
over the cell's window, ``slo_met`` their fraction; the cell ``meets_slo`` when that fraction is
at least ``slo.percentile``. An SLO is never a rule: a cell that misses it is a valid
measurement of a miss. SLOs are analysis settings (in the manifest's params), so they can be
changed and a run read again without measuring anything.
"""

from __future__ import annotations

from typing import Any

from ..model.metricdefs import columns
from ..model.records import CellRecord, RequestRecord
from ..model.sections import SloParams
from ..model.tablekeys import load_points

SLO_COLUMNS = columns("slo")  # declared in model/metricdefs.py


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


def capacity(table: Any, slo: SloParams) -> Any:
    """Per config × workload × context × output length and load axis: the highest concurrency
    (closed loop) or rate asked for (open loop) whose row meets the SLO (None when none does),
    with the goodput there; from :func:`~specbench_lib.analysis.metrics.results_table` with SLO columns."""
    import pandas as pd

    keys = ["config", "workload", "context", "output_tokens", "load_axis"]
    rows = []
    for key, group in load_points(table).groupby(keys, sort=False):
        passing = group[group["meets_slo"] > 0.5]  # a mean over repeats: most of them met it
        top = passing.sort_values("load_value").iloc[-1] if len(passing) else None
        closed = key[-1] == "concurrency"
        best = None if top is None else (int(top["load_value"]) if closed
                                         else float(top["load_value"]))
        rows.append({**dict(zip(keys, key, strict=True)),
                     "max_concurrency_meeting_slo": best if closed else None,
                     "max_rate_meeting_slo": None if closed else best,
                     "goodput_rps": None if top is None else top["goodput_rps"],
                     "percentile": slo.percentile})
    return pd.DataFrame(rows, columns=[*keys, "max_concurrency_meeting_slo",
                                       "max_rate_meeting_slo", "goodput_rps", "percentile"])
