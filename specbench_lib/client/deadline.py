"""A measured request's time limits (first token, between tokens, whole request) as one timer.

The dispatcher (:mod:`~.dispatch`) sets a :class:`Deadline` when a request starts and tells it
when the first token came; everything else is decided when its timer fires. A request over a
limit is cancelled and recorded as ``timeout`` with the limit it ran over.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from ..model.records import RequestRecord
from ..model.sections import TimeoutParams


def resolve_timeouts(timeouts: TimeoutParams | None, timeout_s: float | None) -> TimeoutParams:
    """The limits a cell runs with: ``timeouts`` (its whole-request limit ``timeout_s`` or 120 s
    when unset), else ``timeout_s`` for the first-token, between-tokens and whole-request limits."""
    if timeouts is not None:
        return timeouts if timeouts.request_s is not None else timeouts.model_copy(
            update={"request_s": timeout_s or 120.0})
    if timeout_s is None:
        return TimeoutParams(request_s=120.0)
    return TimeoutParams(first_token_s=timeout_s, between_tokens_s=timeout_s, request_s=timeout_s)


class Deadline:
    """The limit that applies now to a request (first token, between tokens or whole request).

    One timer per request, set for the limit due when it is set. When it fires and the limit has
    moved on (tokens came since), it is set again for the new one; only when it has not is the
    request's task cancelled (:meth:`expired` tells that cancellation from any other, as
    ``asyncio.timeout`` does). So no timer is moved per network read (that cost CPU at thousands
    of reads a second), and no ``asyncio.timeout`` is entered per request. A limit comes sooner
    only at the first token (a between-tokens limit shorter than what is left of the first-token
    one): :meth:`first_token` moves it then.

    Args:
        rec: the request; its ``start`` and ``token_times`` (on ``clock``) say where it stands.
        limits: the cell's limits (``request_s`` set).
        clock: the cell's clock, seconds.
        loop: the running loop (found when not given).
    """

    def __init__(self, rec: RequestRecord, limits: TimeoutParams, clock: Callable[[], float],
                 loop: asyncio.AbstractEventLoop | None = None) -> None:
        self.rec, self.limits, self.clock = rec, limits, clock
        self.which, self.gap = "request", 0.0
        self.loop = loop or asyncio.get_running_loop()
        self.task = asyncio.current_task(self.loop)
        self.cancelling = self.task.cancelling() if self.task is not None else 0
        self.fired = False  # the limit ran out and the task was cancelled for it
        self.handle: asyncio.TimerHandle | None = None
        self.at = 0.0  # when the timer fires (the loop's clock)
        self.tokens = False  # the first token was taken into account

    def _left(self) -> float:
        """Seconds until the limit that applies now runs out; sets :attr:`which` and :attr:`gap`."""
        rec, limits = self.rec, self.limits
        total = float(limits.request_s or 0.0)
        if rec.token_times:
            which, since, gap = "between_tokens", rec.token_times[-1], limits.between_tokens_s
        else:
            which, since, gap = "first_token", rec.start, limits.first_token_s
        if rec.start + total < since + gap:
            which, since, gap = "request", rec.start, total
        self.which, self.gap = which, gap
        return since + gap - self.clock()

    def arm(self) -> None:
        """Set the timer for the limit that applies now."""
        self.cancel()
        self.at = self.loop.time() + self._left()
        self.handle = self.loop.call_at(self.at, self._fire)

    def first_token(self) -> None:
        """After the read that brought the first token(s): the limit may now come sooner."""
        self.tokens = True
        if self.loop.time() + self._left() < self.at:
            self.arm()

    def _fire(self) -> None:
        self.handle = None
        if self._left() > 0:
            self.arm()
        elif self.task is not None:
            self.fired = True
            self.task.cancel()

    def expired(self) -> bool:
        """Whether a CancelledError in the request is this limit's, and no other cancellation's
        (Ctrl-C's): then it is taken back."""
        return (self.fired and self.task is not None
                and self.task.uncancel() <= self.cancelling)

    def message(self) -> str:
        return (f"{self.which} limit of {self.gap:g} s exceeded after "
                f"{len(self.rec.token_times)} tokens")

    def cancel(self) -> None:
        if self.handle is not None:
            self.handle.cancel()
            self.handle = None
