"""``rate_not_reached``: an open-loop cell whose requests went out slower than scheduled
(:func:`~specbench_lib.analysis.metricfamilies.openloop.rate_shortfall`, which flags it in the
metrics too)."""

from __future__ import annotations

from ...model.catalogue import RATE_TOLERANCE, C, Threshold
from ...model.records import RequestRecord
from ...model.verdict import Reason, Verdict
from ..metricfamilies.openloop import rate_shortfall
from ..rule import Judged, Rule


class RateNotReached(Rule):
    code = "rate_not_reached"
    protects = ("an open-loop cell whose requests went out slower than scheduled (client or "
                "concurrency cap): its latencies belong to another load than the one asked for, "
                "so the cell is invalid (achieved_rate_rps and the note stay)")
    thresholds = (Threshold("(rate tolerance, not a params key)", RATE_TOLERANCE),)
    order = 50

    def judge(self, verdict: Verdict, cell: Judged) -> Verdict:
        return judge_rate(verdict, list(cell.records), cell.target_rate) if verdict.ok else verdict


def judge_rate(verdict: Verdict, records: list[RequestRecord],
               target_rate: float | None) -> Verdict:
    """An ok open-loop cell whose requests went out slower than scheduled becomes ``invalid``
    with ``rate_not_reached``: its latencies are at another load than the one asked for."""
    late = rate_shortfall(records, target_rate)
    if not late.get("rate_not_reached"):
        return verdict
    note = str(late["rate_note"]).removeprefix("rate_not_reached: ")
    return Verdict("invalid", (*verdict.reasons, Reason(C.rate_not_reached, note)), verdict.failed)
