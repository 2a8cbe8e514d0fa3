"""When the client did not run: the intervals in which an event loop (or its process) stalled.

A read's kernel stamp is its last TCP segment's arrival, so stream events that queued in a socket
while the client did not run all carry the last one's time; the dispatcher asks
:meth:`StallWatch.covers` whether a read came right after such a stall (``coalesced_reads``).
"""

from __future__ import annotations

import asyncio
import bisect
import time

WATCH_PERIOD_S = 0.002  # how often the stall watch ticks (about 0.9 % of a core when idle)
STALL_S = 0.002  # a tick later than this: the client did not run, reads may have queued


class StallWatch:
    """The intervals in which this event loop (or its whole process) did not run on time.

    A callback every :data:`WATCH_PERIOD_S`; when one comes more than :data:`STALL_S` late,
    the stall is kept from when the tick was due until the loop has made the reads that follow
    it: a tick with no delay closes it, and a timer runs after the I/O callbacks of its loop
    iteration, so the reads of whatever queued meanwhile fall inside.

    The kernel merges queued segments' stamps, so nothing tells events that queued from a
    server's burst read in the same stall: both are counted. With these settings the counted
    tokens covered every token stamped over 0.5 ms late against a server's logged send times
    (concurrency 64, 5 ms apart, busy loops on the client's CPU); a 5 ms threshold left 2-3 % of
    the tokens 2-5 ms late uncounted (benchmarks/timing_fidelity.py --hog).
    """

    def __init__(self) -> None:
        self.stalls: list[tuple[float, float]] = []  # (due, read after) on the perf_counter clock
        self._last = 0.0
        self._open: float | None = None  # a stall's start, until the reads after it are made
        self._handle: asyncio.TimerHandle | None = None

    def start(self) -> None:
        self._last = time.perf_counter()
        self._handle = asyncio.get_running_loop().call_later(WATCH_PERIOD_S, self._tick)

    def _tick(self) -> None:
        late = self._check()
        self._handle = asyncio.get_running_loop().call_later(0 if late else WATCH_PERIOD_S,
                                                             self._tick)

    def _check(self) -> bool:
        """Close an open stall, or open one when this tick is late; True when one opened."""
        now = time.perf_counter()
        opened = self._open is None and now - self._last > WATCH_PERIOD_S + STALL_S
        if opened:
            self._open = self._last + WATCH_PERIOD_S
        elif self._open is not None:
            self.stalls.append((self._open, now))
            self._open = None
        self._last = now
        return opened

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
            if self._check():  # a stall still going on at the end
                self._check()

    def covers(self, when: float) -> bool:
        """Whether a read at ``when`` (perf_counter) came inside a stall."""
        return self.waited(when) is not None

    def waited(self, when: float) -> float | None:
        """How long bytes read at ``when`` may have queued: from the start of the stall the read
        came in (the most any of its stamps can be late), or None after no stall."""
        i = bisect.bisect_left(self.stalls, (when, float("inf"))) - 1
        if i >= 0 and self.stalls[i][0] < when <= self.stalls[i][1]:
            return when - self.stalls[i][0]
        return None
