"""Which tokens a client stall made late, decided on read from a request's stored reads.

A read's kernel stamp is its last TCP segment's arrival, so stream events that queued in a socket
while the client did not run all carry the last one's time. The dispatcher stores each request's
reads that carried several token events (``RequestRecord.multi_reads``) and the client stalls
that overlap it (``RequestRecord.stalls``, from :class:`~.stalls.StallWatch`); this module decides
from them which tokens are coalesced, so a change to the decision applies to every run on disk.
A record from before schema 3 has neither and keeps the counts decided while it was measured.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

from .latency import deliveries
from .records import RequestRecord

COALESCED_ERROR = 0.10  # a stamp that may be late by more than this fraction of what it times


def waited(stalls: Sequence[tuple[float, float]], when: float) -> float | None:
    """How long bytes read at ``when`` may have queued: from the start of the stall (``stalls``
    sorted by start) the read came in, the most any of its stamps can be late; None after none."""
    i = bisect.bisect_left(stalls, (when, float("inf"))) - 1
    if i >= 0 and stalls[i][0] < when <= stalls[i][1]:
        return when - stalls[i][0]
    return None


def delivery_shape(times: Sequence[float]) -> tuple[float, int]:
    """A request's median gap between deliveries (0 with fewer than two) and its median tokens
    per delivery, deliveries as :func:`~.latency.deliveries` defines them."""
    found = deliveries(times) or [(0.0, 1)]
    gaps = sorted(b - a for (a, _), (b, _) in zip(found, found[1:], strict=False))
    sizes = sorted(k for _, k in found)
    return (gaps[len(gaps) // 2] if gaps else 0.0), sizes[len(sizes) // 2]


def coalesced(rec: RequestRecord) -> tuple[int, bool]:
    """The tokens of ``rec`` whose times a client stall took, and whether its first token's was.

    A read made right after a stall counts the tokens of all but its last event when the stall
    could make their times late by more than :data:`COALESCED_ERROR` of what they time: the
    request's TTFT for a first token, its median gap between deliveries for the others (a 2 ms
    stall does not spoil a 300 ms TTFT, and it would be counted against 5 ms tokens). A stall can
    only have hidden as many of the request's deliveries as fit in it (at least one): a 3 ms
    stall over a 32-token burst of an n-gram draft counts one delivery's worth of tokens, not the
    burst, whose events the server sent together.
    """
    if rec.multi_reads is None or rec.stalls is None:  # schema 2: decided while measuring
        return min(rec.coalesced_tokens, len(rec.token_times)), rec.first_token_coalesced
    stalls = sorted(rec.stalls)
    tokens_lost, first_lost = 0, False
    for read_at, tokens, first in rec.multi_reads:
        wait = waited(stalls, read_at)
        if wait is None:
            continue
        gap, size = delivery_shape(rec.token_times)
        if tokens and wait > COALESCED_ERROR * gap:
            hidden = max(1, int(wait / gap + 1e-9)) if gap > 0 else tokens
            tokens_lost += min(tokens, hidden * size)
        ttft = rec.ttft
        if first and ttft is not None and wait > COALESCED_ERROR * ttft:
            first_lost = True
    return min(tokens_lost, len(rec.token_times)), first_lost
