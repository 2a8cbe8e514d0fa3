"""Tables a researcher reads at 1280 px: the key columns first, an interval as one cell
(``0.83 [0.58, 1.19]``), headers in words, configs in plan order, no empty column, and the
whole table (every column, raw names) one click away in a ``<details>``.

Every HTML page and notebook output of specbench that shows a results table goes through
:func:`readable`; the plan order is :func:`plan_sorted`'s (a series as the params list it, its
budgets ascending: ``ngram-b4`` before ``ngram-b16``, never string order).
"""

from __future__ import annotations

import html
import math
import numbers
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .display import Html, frame_table, html_table


@dataclass(frozen=True)
class Column:
    """One column of a readable table: the frame's column ``name`` (for an interval, its middle;
    the bounds are ``name_lo`` and ``name_hi``), its header, and how a number is written."""

    name: str
    header: str
    form: str = "{:.3g}"
    interval: bool = False
    scale: float = 1.0  # 1000: seconds shown in ms

    def text(self, row: Mapping[str, Any]) -> str | None:
        value = row.get(self.name)
        if missing(value):
            return None
        if not isinstance(value, numbers.Real) or isinstance(value, bool):
            return str(value)
        shown = self.form.format(float(value) * self.scale)
        low, high = row.get(f"{self.name}_lo"), row.get(f"{self.name}_hi")
        if self.interval and low is not None and high is not None and not missing(low) \
                and not missing(high):
            shown += (f" [{self.form.format(low * self.scale)}, "
                      f"{self.form.format(high * self.scale)}]")
        return shown


# a table row's keys (a config in a panel)
ROW_KEYS = (Column("config", "config"), Column("workload", "workload"),
            Column("context", "context", "{:g}"), Column("output_tokens", "output tokens", "{:g}"),
            Column("concurrency", "concurrency", "{:g}"), Column("load", "load"))
_SAID_ONCE = {"phase", "workload", "context", "output_tokens", "concurrency", "load"}
# (the lead results table, RESULTS, is the metrics' own: analysis/metricset.py)


def count(n: int, word: str) -> str:
    """``1 cell``, ``3 cells``: a number and its noun."""
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def missing(value: Any) -> bool:
    """None, NaN, pandas' NA or an empty string: nothing to show."""
    if value is None or (isinstance(value, str) and value == ""):
        return True
    try:
        return bool(value != value) or (isinstance(value, float) and math.isnan(value))
    except (TypeError, ValueError):  # pandas.NA compares to nothing
        return True


def interval_text(middle: Any, low: Any, high: Any, form: str = "{:.2f}") -> str | None:
    """``0.83 [0.58, 1.19]``: a value with its interval in one cell (None when not measured)."""
    return Column("v", "", form, interval=True).text({"v": middle, "v_lo": low, "v_hi": high})


def config_rank(label: str, names: Sequence[str]) -> tuple[int, float]:
    """Where a config label stands in the plan: the index of its series among the params'
    ``names`` (the longest name the label is, or starts with ``name-b``), then its budget."""
    best = (len(names), -1.0)
    for index, name in enumerate(names):
        if label == name:
            return (index, -1.0)
        found = re.fullmatch(re.escape(name) + r"-b(\d+)", label)
        if found:
            best = min(best, (index, float(found.group(1))))
    if best[0] == len(names):  # a label the params do not name: its own budget, after them
        found = re.search(r"-b(\d+)$", label)
        best = (len(names), float(found.group(1)) if found else -1.0)
    return best


def plan_names(params: Mapping[str, Any] | None) -> list[str]:
    """The config names of a run's params (``configs[].name``), in their order."""
    return [str(c.get("name")) for c in (params or {}).get("configs") or []
            if isinstance(c, Mapping)]


def plan_sorted(frame: Any, names: Sequence[str], by: Sequence[str] = (), *,
                config_first: bool = False) -> Any:
    """``frame`` sorted by the columns ``by`` (those it has), then its ``config`` in plan
    order (:func:`config_rank`), or the config first when ``config_first``; a stable sort."""
    if not len(frame) or "config" not in frame:
        return frame
    keys = [k for k in by if k in frame]
    ranked = frame.assign(_rank=[config_rank(str(c), names) for c in frame["config"]])
    order = ["_rank", *keys] if config_first else [*keys, "_rank"]
    return ranked.sort_values(order, kind="stable").drop(columns="_rank")


def readable(frame: Any, columns: Sequence[Column], *, full: bool = True,
             what: str = "rows", row_styles: Sequence[str | None] | None = None) -> str:
    """``frame`` as a table that fits: ``columns`` (their headers, intervals in one cell), less
    any column empty in every row, and a panel key (workload, context, …) the same in every row
    said once above the table; then, when ``full``, the whole frame (every column, raw names)
    inside a closed ``<details>``, scrolling within itself when wide."""
    records = frame.to_dict("records")
    shown = [c for c in columns if any(not missing(c.text(r)) for r in records)]
    same = [c for c in shown if c.name in _SAID_ONCE and records
            and len({c.text(r) for r in records}) == 1]
    shown = [c for c in shown if c not in same]
    rows = [[_number(c.text(r)) for c in shown] for r in records]
    table = html_table([c.header for c in shown], rows, row_styles=row_styles)
    if same:
        table = ("<p>every row: " + html.escape(" · ".join(
            f"{c.header} {c.text(records[0])}" for c in same)) + "</p>" + table)
    if not full:
        return table
    count = len(frame.columns)
    return table + details(f"the full table: {len(records)} {what} × {count} columns",
                           f"<div class='sb-scroll' style='overflow-x:auto'>"
                           f"{frame_table(frame)}</div>")


def details(summary: str, body: str, *, open_: bool = False) -> Html:
    """A collapsed section (``<details>``): ``summary`` (escaped) shows, ``body`` (HTML) on a
    click; it needs no script, so it works offline and in a saved notebook."""
    flag = " open" if open_ else ""
    return Html(f"<details{flag}><summary>{html.escape(summary)}</summary>{body}</details>")


def headline(text_or_html: str, *, is_html: bool = False) -> Html:
    """The page's conclusion, where a reader looks first (class ``sb-headline``)."""
    body = text_or_html if is_html else html.escape(text_or_html)
    return Html(f"<div class='sb-headline'>{body}</div>")


def bullets(lines: Iterable[str]) -> str:
    """Escaped lines as a list."""
    return "<ul>" + "".join(f"<li>{html.escape(str(s))}</li>" for s in lines) + "</ul>"


def _number(text: str | None) -> object:
    """A cell: a number (or an interval) right-aligned and kept on one line."""
    if text is None:
        return None
    if re.fullmatch(r"-?[\d.,e+-]+( \[[^\]]*\])?", text):
        return Html(f"<span class='num' style='white-space:nowrap'>{html.escape(text)}</span>")
    return text
