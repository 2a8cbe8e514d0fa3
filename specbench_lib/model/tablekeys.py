"""The keys of the results table: what a panel and a row are, and each row's load point.

Below both :mod:`~specbench_lib.analysis.metrics` (which builds the table) and
:mod:`~specbench_lib.analysis.slo` (which reads its load
points), so neither imports the other to know them.
"""

from __future__ import annotations

from typing import Any

# a panel: the cells every config is compared within (``load``: an open-loop load point, "" for
# a closed loop; ``temperature``: a claim never mixes sampling temperatures); a table row: a
# config in a panel; ``turn``: a conversation's timed turn, so turn 2 never pairs with turn 1
PANEL = ["workload", "context", "output_tokens", "concurrency", "load", "temperature", "turn"]
GROUP = ["config", "series", "method", "budget", *PANEL]
# what a panel key written before it existed stands for (answer.json of an earlier run:
# model/answerfile.py's PanelKey)
PANEL_DEFAULTS: dict[str, Any] = {"load": "", "temperature": 0.0, "turn": 1}


def load_points(table: Any) -> Any:
    """``table`` with each row's load on its axis: ``load_axis`` "concurrency" (closed loop) or
    "rate" (open loop), and ``load_value`` (the concurrency, or the rate asked for)."""
    open_loop = table["load"].astype(str) != ""
    return table.assign(load_axis=["rate" if o else "concurrency" for o in open_loop],
                        load_value=table["target_rate_rps"].where(open_loop, table["concurrency"]))
