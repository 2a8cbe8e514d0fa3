"""``concurrency_not_held``: fewer requests were in flight on the server than the cell's
concurrency names, because its KV pool could not hold them (SGLang ``max_total_num_tokens``
below concurrency × (prompt + output): it admits fewer and queues the rest) or it took requests
out of the running batch mid-answer (``num_retractions``)."""

from __future__ import annotations

from ...model.catalogue import C
from ...model.verdict import Reason, Verdict
from ..rule import Judged, Rule


class ConcurrencyHeld(Rule):
    code = "concurrency_not_held"
    protects = ("a cell named by a concurrency its server did not run: its KV pool held fewer "
                "requests than concurrency × (prompt + output) tokens (SGLang admits fewer and "
                "queues the rest), or it retracted requests mid-answer (num_retractions), so "
                "the cell measured a lighter load than its label, and more so for drafters "
                "whose KV shares the pool")
    order = 45

    def judge(self, verdict: Verdict, cell: Judged) -> Verdict:
        found = [*_unfit(cell), *_retracted(cell)]
        if not found:
            return verdict
        reason = Reason(C.concurrency_not_held, "; ".join(found))
        return Verdict("invalid", (*verdict.reasons, reason), verdict.failed)


def _unfit(cell: Judged) -> list[str]:
    fit = cell.facts.kv_fit
    if not fit or fit.get("kv_tokens", 0) >= fit.get("needed", 0):
        return []
    return [kv_words(fit["kv_tokens"], fit["needed"], fit.get("per_request", 1))]


def _retracted(cell: Judged) -> list[str]:
    counts = [r.final.retractions or 0 for r in cell.measured if r.final is not None]
    hit = sum(1 for n in counts if n > 0)
    if not hit:
        return []
    return [f"{hit} of {len(counts)} requests were retracted {sum(counts)} times (the KV pool "
            f"was full): fewer requests were in flight than the concurrency"]


def kv_words(kv_tokens: int, needed: int, per_request: int) -> str:
    """Why a cell's concurrency does not fit its server's KV pool."""
    held = kv_tokens // max(per_request, 1)
    return (f"the server's KV pool holds {kv_tokens} tokens, the cell needs {needed} "
            f"({per_request} a request): at most {held} requests in flight; lower the "
            f"concurrency or the context, or raise --mem-fraction-static")
