"""``too_few_completed``: fewer measured requests than planned were sent."""

from __future__ import annotations

from ...model.catalogue import C
from ...model.verdict import Reason, Verdict
from ..rule import Judged, Rule


class TooFewCompleted(Rule):
    code = "too_few_completed"
    protects = "a cell averaged over fewer requests than planned (failed requests silently dropped)"
    order = 10

    def judge(self, verdict: Verdict, cell: Judged) -> Verdict:
        sent, planned = len(cell.measured), cell.inputs.planned
        if sent >= planned:
            return verdict
        reason = Reason(C.too_few_completed, f"{sent} of {planned} planned requests were sent")
        return Verdict("invalid", (*verdict.reasons, reason), verdict.failed)
