"""Which tokens a client stall made late, decided on read from a request's stored reads.

A read's kernel stamp is its last TCP segment's arrival, so stream events that queued in a socket
while the client did not run all carry the last one's time. The dispatcher stores each request's
reads that carried several token events (``RequestRecord.multi_reads``) and the client stalls
that overlap it (``RequestRecord.stalls``, from :class:`~specbench_lib.host.stalls.StallWatch`); this
module decides from them which tokens are coalesced, so a change to the decision applies to
every run on disk.
A record from before schema 3 has neither and keeps the counts decided while it was measured.

The decision is by the read's stamp, not by when the loop got to it (checked against a
reference server's send log, ``benchmarks/stall_truth.py``): a read that came inside a stall
whose bytes had all arrived before it was stamped before, and is not late; a read just after a
stall that took what queued in it is. Its events can have queued only from the later of the
stall's start and the request's previous delivery (its start, for a first read), and only as
many of the request's deliveries as the read holds beyond one: a read of one delivery's worth of
tokens (an instant answer written back to back, a burst) was sent together, however late it was
read. What the truth showed made first tokens late at concurrency 8 and more on a busy host is
not coalescing but the kernel stamping them late, in one batch for several connections, while
the host starved the client (:func:`late_firsts`); both are host-side and named as such.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

from ..host.stalls import WATCH_PERIOD_S
from ..model.records import RequestRecord
from .latency import deliveries

COALESCED_ERROR = 0.10  # a stamp that may be late by more than this fraction of what it times
# first tokens of several requests stamped this close together, while the client was starved:
# one batch the kernel handed over late (against the send log: 2-3 µs apart a connection; the
# reference server's own writes of first chunks due together: 25-35 µs apart)
BATCH_S = 10e-6


def queued(stalls: Sequence[tuple[float, float]], stamp: float, before: float,
           read_at: float) -> float | None:
    """How long the events of a read stamped at ``stamp`` (made at ``read_at``) may have queued
    in a client stall: from the earliest stall that began before the stamp, ended after
    ``before`` (the request's previous delivery, or its start) and that the read came in (the
    watch keeps a stall open until the reads after it are made), to the stamp; None: no such
    stall, the client read them as they came."""
    starts = [a for a, b in stalls if a < stamp and b > before and read_at <= b]
    return stamp - max(min(starts), before) if starts else None


def _stamp(times: Sequence[float], read_at: float, tokens: int) -> tuple[float, int, float | None]:
    """A read's stamp (its tokens' time: the latest token time by ``read_at``), its tokens (its
    events share the stamp; at least ``tokens`` + 1, the ones before its last event's and one),
    and the time of the delivery before it (None for a first read)."""
    last = bisect.bisect_right(times, read_at) - 1
    if last < 0:
        return read_at, tokens + 1, None
    held = max(last - bisect.bisect_left(times, times[last]) + 1, tokens + 1)
    first = last - held + 1
    return times[last], held, (times[first - 1] if first > 0 else None)


def cell_pace(records: Sequence[RequestRecord]) -> tuple[float, int] | None:
    """A cell's median gap between deliveries and median delivery size over its requests that
    streamed (two deliveries or more; None where none did): the pace of a request that has no
    gap of its own to judge by."""
    gaps: list[float] = []
    sizes: list[int] = []
    for rec in records:
        found = deliveries(rec.token_times)
        if len(found) > 1:
            gaps += [b - a for (a, _), (b, _) in zip(found, found[1:], strict=False)]
            sizes += [k for _, k in found]
    if not gaps:
        return None
    gaps.sort()
    sizes.sort()
    return gaps[len(gaps) // 2], sizes[(len(sizes) - 1) // 2]


def coalesced(rec: RequestRecord, pace: tuple[float, int] | None = None) -> tuple[int, bool]:
    """The tokens of ``rec`` whose times a client stall took, and whether its first token's was.

    A read that carried several events counts the tokens of all but its last event when they
    may have queued in a stall (:func:`queued`, from its stamp) long enough to make their times
    late by more than :data:`COALESCED_ERROR` of what they time: the request's TTFT for a first
    token (and no shorter than its gap between deliveries, or it cannot have hidden one: a
    request with no such gap, an instant answer, has no first token coalesced), its median gap
    between deliveries for the others (a 2 ms stall does not spoil a 300 ms TTFT, and it would
    be counted against 5 ms tokens). The gap is the request's own, leaving out the gaps that
    end at such a read. A read can only have hidden as many of the request's deliveries (their
    lower median size: what the server sends at once) as it holds beyond one, and as fit
    in the stall (at least one): a 3 ms stall over a 32-token burst of an n-gram draft counts
    one delivery's worth of tokens, not the burst, whose events the server sent together; a
    first read of one delivery's worth (an instant answer) is not late however late it was read.

    ``pace``: its cell's (:func:`cell_pace`). A request read in one delivery has no gap of its
    own; where the other requests of its cell streamed, a read of all its tokens after a stall
    is judged by their pace: a stall over the whole of a streamed answer (all its tokens one
    stamp, its TTFT the stall's end, no decode time) is coalesced, not an instant answer.
    """
    if rec.multi_reads is None or rec.stalls is None:  # schema 2: decided while measuring
        return min(rec.coalesced_tokens, len(rec.token_times)), rec.first_token_coalesced
    stalls, times = sorted(rec.stalls), rec.token_times
    reads = []  # (tokens, first, how long its events may have queued, tokens it holds)
    for read_at, tokens, first in rec.multi_reads:
        stamp, held, previous = _stamp(times, read_at, tokens)
        wait = queued(stalls, stamp, rec.start if first or previous is None else previous,
                      read_at)
        if wait is not None:
            reads.append((stamp, tokens, first, wait, held))
    found = deliveries(times) or [(0.0, 1)]
    late = {stamp for stamp, *_ in reads}
    gaps = sorted(b - a for (a, _), (b, _) in zip(found, found[1:], strict=False) if b not in late)
    sizes = sorted(k for _, k in found)
    gap, size = (gaps[len(gaps) // 2] if gaps else 0.0), sizes[(len(sizes) - 1) // 2]
    if len(found) == 1 and pace is not None:  # one delivery: judged by its cell's pace
        gap, size = pace
    tokens_lost, first_lost = 0, False
    for _, tokens, first, wait, held in reads:
        extra = held / size - 1  # deliveries the read holds beyond one
        if extra <= 0:
            continue
        if tokens and wait > COALESCED_ERROR * gap:
            hidden = max(1, int(min(wait / gap, extra) + 1e-9)) if gap > 0 else tokens
            tokens_lost += min(tokens, hidden * size)
        if first and rec.ttft and 0 < gap <= wait and wait > COALESCED_ERROR * rec.ttft:
            first_lost = True
    return min(tokens_lost, len(times)), first_lost


def late_firsts(records: Sequence[RequestRecord]) -> dict[int, str]:
    """The requests of a cell whose first token's time the client host took, by index, with the
    cause: ``coalesced`` (its first read took events that queued in a stall: :func:`coalesced`)
    or ``batched``: stamped inside a client stall that began long enough before to make the
    TTFT late by more than :data:`COALESCED_ERROR`, within :data:`BATCH_S` of another request's
    first token: the kernel handed their bytes over in one batch when it got a CPU, late, and
    the stamp is that batch's time, not the server's send (against the send log this, not
    coalescing, is what made TTFTs late at concurrency 8 and more on a busy 2-core host).
    Records from before schema 3 keep their decided flag."""
    pace = cell_pace(records)
    out = {r.index: "coalesced" for r in records if r.token_times and coalesced(r, pace)[1]}
    known = [r for r in records if r.token_times and r.multi_reads is not None
             and r.stalls is not None]
    stamps = sorted(r.token_times[0] for r in known)
    stalls = sorted({s for r in known for s in r.stalls or []})  # the cell's, as far as known
    for rec in known:
        t = rec.token_times[0]
        near = bisect.bisect_right(stamps, t + BATCH_S) - bisect.bisect_left(stamps, t - BATCH_S)
        if rec.index not in out and near > 1 and _starved(rec, stalls):
            out[rec.index] = "batched"
    return out


def _starved(rec: RequestRecord, stalls: Sequence[tuple[float, float]]) -> bool:
    """Whether ``rec``'s first token was stamped inside a client stall (from a watch period
    before its start) that began long enough before the stamp to make its TTFT late by more
    than :data:`COALESCED_ERROR`."""
    t, ttft = rec.token_times[0], rec.ttft or 0.0
    return any(a - WATCH_PERIOD_S < t <= b
               and t - max(a - WATCH_PERIOD_S, rec.start) > COALESCED_ERROR * ttft
               for a, b in stalls)
