"""``failed_fraction``: failed measured requests may be tolerated up to a fraction of those
planned; past it the cell is invalid, within it ``ok`` with its reasons ``tolerated``."""

from __future__ import annotations

from ...model.catalogue import DEFAULT_MAX_FAILED_FRACTION, C, Threshold, level
from ...model.verdict import Reason, Verdict
from ..rule import Judged, Rule


class FailedFraction(Rule):
    code = "failed_fraction"
    protects = "more failed requests than max_failed_fraction allows"
    thresholds = (Threshold("max_failed_fraction", DEFAULT_MAX_FAILED_FRACTION),)
    order = 20

    def judge(self, verdict: Verdict, cell: Judged) -> Verdict:
        """Measured requests may fail (or be missing) up to ``max_failed_fraction`` of those
        planned: tolerated failures leave an otherwise valid cell ``ok``, their reasons
        ``tolerated``; a failed warmup request or a cell rule's reason before this one never is."""
        fraction, planned = self.limit(cell, "max_failed_fraction"), cell.inputs.planned
        allowed = int(fraction * planned + 1e-9)
        failed = len(verdict.failed) + max(planned - len(cell.measured), 0)
        if fraction > 0 and failed > allowed:
            reason = Reason(C.failed_fraction, f"{failed} of {planned} requests failed, "
                            f"max_failed_fraction {fraction:g} allows {allowed}")
            return Verdict("invalid", (*verdict.reasons, reason), verdict.failed)
        requests_only = all(level(r.code) == "request" for r in verdict.reasons)
        if verdict.status == "invalid" and requests_only and not cell.warm_bad \
                and len(verdict.failed) <= allowed:
            return Verdict("ok", tuple(r.as_tolerated() for r in verdict.reasons), verdict.failed)
        return verdict
