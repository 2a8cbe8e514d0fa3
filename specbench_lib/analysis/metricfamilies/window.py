"""The measurement window: from the first request sent to the last token received."""

from __future__ import annotations

from ..metric import Computed, Family, Metric, Requests


def _window(cell: Requests) -> Computed:
    return {"window_s": cell.window}


FAMILY = Family(80, (
    Metric("window_s", "s", "the measurement window: first request sent → last token received"),
), requests=_window)
