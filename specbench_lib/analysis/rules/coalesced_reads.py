"""``coalesced_reads``: token times the client host took, judged from the stored reads and
stalls (:mod:`~specbench_lib.analysis.coalescing`); a host-side rule (measured again at once)."""

from __future__ import annotations

import math

from ...model.catalogue import (
    DEFAULT_MAX_COALESCED_FIRST_FRACTION,
    DEFAULT_MAX_COALESCED_FRACTION,
    C,
    Threshold,
)
from ...model.records import RequestRecord
from ...model.verdict import Reason, Verdict
from ..coalescing import cell_pace, coalesced, late_firsts
from ..rule import Judged, Rule


class CoalescedReads(Rule):
    code = "coalesced_reads"
    protects = ("token times the client host took: events that queued in the socket while the "
                "client did not run are read at once and all carry the last one's kernel stamp "
                "(ITL gaps of 0, a late TTFT), and first tokens the kernel stamped in one batch "
                "for several connections while the host starved the client; judged by the "
                "stamps against the stalls, the requests named in the detail; more than "
                "max_coalesced_fraction of the tokens, or max_coalesced_first_fraction of the "
                "first tokens, makes the cell invalid")
    thresholds = (Threshold("max_coalesced_fraction", DEFAULT_MAX_COALESCED_FRACTION),
                  Threshold("max_coalesced_first_fraction", DEFAULT_MAX_COALESCED_FIRST_FRACTION))
    order = 30
    host_side = True

    def judge(self, verdict: Verdict, cell: Judged) -> Verdict:
        """Judged over the measured requests that did not fail; a server that ran on the
        client's core is the cause it names. Tolerated failures count again (invalid)."""
        kept = [r for r in cell.measured if r.index not in verdict.failed]
        lost = coalesced_reads(kept, self.limit(cell, "max_coalesced_fraction"),
                               self.limit(cell, "max_coalesced_first_fraction"))
        if lost is None:
            return verdict
        taken = cell.facts.host.client_core_taken() if cell.facts.host is not None else None
        reason = Reason(C.coalesced_reads, f"{lost.detail}; {taken}") if taken else lost
        counted = tuple(Reason(r.code, r.detail, count=r.count) for r in verdict.reasons)
        return Verdict("invalid", (*counted, reason), verdict.failed)


def coalesced_reads(records: list[RequestRecord], limit: float,
                    first_limit: float = DEFAULT_MAX_COALESCED_FIRST_FRACTION) -> Reason | None:
    """``coalesced_reads`` when more than ``limit`` of the tokens, or ``first_limit`` of the
    first tokens, of ``records`` carry a time the client host took: read together with a later
    event right after the client stalled (their ITL gaps read 0, the gap before them or the
    TTFT holds the stall), or, for first tokens, stamped in one batch the kernel handed over
    late while the host starved the client (:func:`~specbench_lib.analysis.coalescing.late_firsts`)."""
    tokens = sum(len(r.token_times) for r in records)
    firsts = sum(1 for r in records if r.token_times)
    pace = cell_pace(records)
    decided = [coalesced(r, pace)[0] for r in records]  # from the stored reads and stalls
    late = late_firsts(records)
    lost = sum(decided)
    if not tokens or (lost <= limit * tokens and len(late) <= first_limit * firsts):
        return None
    affected = sum(1 for r, n in zip(records, decided, strict=True) if n or r.index in late)
    return Reason(C.coalesced_reads, (
        f"{lost} of {tokens} measured tokens ({lost / tokens:.1%}) and {len(late)} of {firsts} "
        f"first tokens ({len(late) / firsts:.1%}), in {affected} of {len(records)} requests, "
        f"carry a time the client host took, not their own{_causes(late)} "
        f"(max_coalesced_fraction {limit:g}, "
        f"max_coalesced_first_fraction {first_limit:g}: at this cell's size "
        f"{math.floor(limit * tokens) + 1} tokens or {math.floor(first_limit * firsts) + 1} "
        f"first tokens trip it); measure with fewer concurrent requests or on a "
        f"quieter client host"))


def _causes(late: dict[int, str]) -> str:
    """Which first tokens were late and why, for a reason's detail (the first 8 requests)."""
    parts = []
    for cause, why in (("coalesced", "read together with later events after a client stall"),
                       ("batched", "stamped in one batch the kernel delivered late while the "
                                   "host starved the client")):
        named = sorted(i for i, c in late.items() if c == cause)
        if named:
            more = f" and {len(named) - 8} more" if len(named) > 8 else ""
            parts.append(f"{len(named)} {why} (requests {', '.join(map(str, named[:8]))}{more})")
    return f": first tokens {'; '.join(parts)}" if parts else ""
