"""``impossible_spec_stats`` at the cell, for verify steps: a request whose server counts more
forward steps than the tokens it streamed (SGLang ``spec_verify_ct`` above the completion
tokens: each step yields a token of its own) has counters its own stream rules out. Before,
such a request published τ 1.00 as measured (its accepted drafts clipped at 0). The code is the
request problem's (``validate.request_problems`` judges the drafts' form), whose catalogue
entry documents it, so this rule adds none (``declares`` False)."""

from __future__ import annotations

from collections import Counter

from ...model.catalogue import C
from ...model.verdict import Reason, Verdict
from ..rule import Judged, Rule


class VerifyCounts(Rule):
    code = "impossible_spec_stats"
    level = "request"
    declares = False
    order = 15  # before failed_fraction, which may tolerate it as any request's problem

    def judge(self, verdict: Verdict, cell: Judged) -> Verdict:
        found: Counter[Reason] = Counter()
        failed = set(verdict.failed)
        for rec in cell.measured:
            final = rec.final
            steps = final.verify_steps if final is not None else None
            tokens = (final.completion_tokens or 0) if final is not None else 0
            if steps is not None and tokens and steps > tokens:
                found[Reason(C.impossible_spec_stats, f"{steps} verify steps for {tokens} tokens "
                             "(each step yields one of its own)")] += 1
                failed.add(rec.index)
        if not found:
            return verdict
        reasons = (*verdict.reasons, *(r.counted(n) for r, n in found.items()))
        return Verdict("invalid", reasons, tuple(sorted(failed)))
