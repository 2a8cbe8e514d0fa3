"""Service-level objectives: the highest load at which a config still meets them.

Goodput, and what meeting an SLO means for a request, are the ``slo`` metric family
(:mod:`~specbench_lib.analysis.metricfamilies.slo`). An SLO is never a rule: a cell that misses
it is a valid measurement of a miss. SLOs are analysis settings (in the manifest's params), so
they can be changed and a run read again without measuring anything.
"""

from __future__ import annotations

from typing import Any

from ..model.sections import SloParams
from ..model.tablekeys import load_points


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
