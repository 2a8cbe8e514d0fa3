"""``missing_spec_stats`` at the cell: a speculative config whose statistics are the server's
counters (vLLM ``/metrics``) must show them moving. The code is a request problem's too, whose
catalogue entry documents it, so this rule adds none (``declares`` False)."""

from __future__ import annotations

from typing import Any

from ...model.catalogue import C
from ...model.verdict import Reason, Verdict
from ..rule import Judged, Rule


class SpecCounters(Rule):
    code = "missing_spec_stats"
    level = "request"
    declares = False
    order = 40

    def judge(self, verdict: Verdict, cell: Judged) -> Verdict:
        inputs = cell.inputs
        if not verdict.ok or not inputs.speculative or inputs.spec_stats != "counters":
            return verdict
        return judge_counters(verdict, cell.facts.spec_counters)


def judge_counters(verdict: Verdict, counters: dict[str, Any]) -> Verdict:
    """For engines whose speculative statistics are server counters (vLLM ``/metrics``): an ok
    speculative cell whose counters are missing or did not move becomes ``invalid``."""
    if counters.get("drafts"):
        return verdict
    why = counters.get("error") or ("no speculative counters" if not counters
                                    else "the draft counters did not move during the cell")
    return Verdict("invalid", (*verdict.reasons, Reason(C.missing_spec_stats, why)), verdict.failed)
