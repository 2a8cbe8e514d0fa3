"""An open-loop cell's rate (asked for, drawn, achieved) and its latencies timed from each
request's *scheduled* arrival; nothing for a closed loop."""

from __future__ import annotations

from typing import Any

from ...model.catalogue import RATE_TOLERANCE
from ...model.records import RequestRecord
from ..metric import Computed, Family, Metric, Requests
from .latencies import declared, statistics_of

_SCHEDULED = {"ttft": "TTFT: timed from the request's scheduled arrival (open loop)",
              "e2e": "E2E: timed from the request's scheduled arrival (open loop)"}


def rate_shortfall(records: list[RequestRecord], target_rate: float | None) -> dict[str, Any]:
    """Target vs achieved send rate of an open-loop cell's measured requests (empty if closed loop).

    The achieved rate is (n - 1) / (last send - first send); it is compared with the rate of the
    drawn schedule itself (Poisson draws of a few requests differ from the target), and
    ``rate_not_reached`` is set when it falls more than ``RATE_TOLERANCE`` below it.
    """
    sent = [r for r in records if not r.warmup and r.scheduled is not None]
    if target_rate is None or len(sent) < 2:
        return {}
    starts = sorted(r.start for r in sent)
    planned = sorted(r.scheduled for r in sent if r.scheduled is not None)
    achieved = (len(sent) - 1) / (starts[-1] - starts[0]) if starts[-1] > starts[0] else None
    scheduled = (len(sent) - 1) / (planned[-1] - planned[0]) if planned[-1] > planned[0] else None
    late = max(r.start - (r.scheduled or 0.0) for r in sent)
    short = achieved is not None and scheduled is not None and (
        achieved < (1 - RATE_TOLERANCE) * scheduled)
    return {"target_rate_rps": target_rate, "scheduled_rate_rps": scheduled,
            "achieved_rate_rps": achieved, "max_send_lag_s": late, "rate_not_reached": short,
            "rate_note": (f"rate_not_reached: sent {achieved:.3g}/s of a scheduled {scheduled:.3g}/s "
                          f"(target {target_rate:g}/s)") if short else None}


def _open_loop(cell: Requests) -> Computed:
    """The rate, then TTFT and E2E from each request's scheduled arrival, so time spent waiting
    for a free slot counts (no coordinated omission)."""
    found = rate_shortfall(cell.records, cell.target_rate)
    timed = [(r, r.scheduled) for r in cell.measured if r.scheduled is not None]
    if timed:
        found.update(statistics_of("ttft_sched", [r.token_times[0] - at for r, at in timed
                                                  if r.token_times]))
        found.update(statistics_of("e2e_sched", [r.end - at for r, at in timed]))
    return found


FAMILY = Family(50, (
    Metric("target_rate_rps", "requests/s", "the request rate asked for", "open_loop"),
    Metric("achieved_rate_rps", "requests/s", "(n − 1) / (last send − first send)", "open_loop"),
    Metric("rate_not_reached", "bool", "sent more than 5 % slower than the drawn schedule",
           "open_loop"),
    *declared(_SCHEDULED, "_sched", "open_loop"),
    Metric("scheduled_rate_rps", "requests/s", "the drawn schedule's own rate (Poisson draws of "
           "a few requests differ from the target)", "open_loop"),
    Metric("max_send_lag_s", "s", "the latest a request was sent after its scheduled arrival",
           "open_loop"),
    Metric("rate_note", "text", "why the rate was not reached, in words (empty when it was)",
           "open_loop"),
), requests=_open_loop)
