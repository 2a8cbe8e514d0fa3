"""How objects show themselves: the one place specbench builds HTML.

A value (plan, preview, result, comparison) mixes in :class:`Rendered` and implements ``text()``
and ``html()``; a notebook shows it with one expression, a terminal prints its text. Every table
goes through :func:`html_table`, which escapes every cell that is not already :class:`Html` (a
link built by :func:`link`, say).
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

_STYLE = "border-collapse:collapse"


class Html(str):
    """A string of HTML built here, inserted as is (every other cell is escaped)."""


def link(href: str, text: str) -> Html:
    """An ``<a>`` element, its address and text escaped."""
    return Html(f'<a href="{html.escape(href)}">{html.escape(text)}</a>')


def join(parts: Iterable[Html], sep: str = " · ") -> Html:
    """HTML fragments joined by an (escaped) separator."""
    return Html(html.escape(sep).join(parts))


def html_table(headers: Sequence[object], rows: Iterable[Sequence[object]], *,
               row_styles: Sequence[str | None] | None = None) -> str:
    """An HTML table; every header and cell is escaped unless it is :class:`Html` (``None`` is empty).

    Args:
        headers: the column titles.
        rows: one sequence of cells per row.
        row_styles: an optional CSS ``style`` per row (``None`` or empty for none).

    Example:
        >>> "<td>&lt;x&gt;</td>" in html_table(["a", "b"], [[1, "<x>"]])
        True
    """
    head = "".join(f"<th>{_cell(h)}</th>" for h in headers)
    body = []
    for i, row in enumerate(rows):
        style = row_styles[i] if row_styles is not None and i < len(row_styles) else None
        attr = f' style="{html.escape(style)}"' if style else ""
        body.append(f"<tr{attr}>" + "".join(_td(c) for c in row) + "</tr>")
    return (f'<table style="{_STYLE}"><thead><tr>{head}</tr></thead>'
            f"<tbody>{''.join(body)}</tbody></table>")


def frame_table(frame: Any, *, index: bool = False) -> str:
    """A pandas DataFrame as an escaped :func:`html_table` (missing values empty)."""
    import pandas as pd

    shown = frame.reset_index() if index else frame
    rows = [[None if _missing(v, pd) else f"{v:.4g}" if isinstance(v, float) else v for v in row]
            for row in shown.itertuples(index=False, name=None)]
    return html_table([_label(c) for c in shown.columns], rows)


def html_text(text: str, *, bold: bool = False, detail: str = "") -> str:
    """A paragraph of escaped text (bold if asked), with an optional plain detail after a dot."""
    body = f"<b>{html.escape(text)}</b>" if bold else html.escape(text)
    more = f" · {html.escape(detail)}" if detail else ""
    return f"<p>{body}{more}</p>"


def definition_list(items: Mapping[str, object]) -> str:
    """Name → value pairs as a two-column table without headers."""
    rows = "".join(f"<tr><th style='text-align:left'>{_cell(k)}</th><td>{_cell(v)}</td></tr>"
                   for k, v in items.items())
    return f'<table style="{_STYLE}"><tbody>{rows}</tbody></table>'


def image(src: str, alt: str, *, width: int | None = None) -> Html:
    """An ``<img>`` element, its address and text escaped: a file beside the page (a relative
    path) or a ``data:`` URI from :func:`png_data_uri`, never an address on the network."""
    size = f' style="max-width:100%;width:{int(width)}px"' if width else ' style="max-width:100%"'
    return Html(f'<img src="{html.escape(src)}" alt="{html.escape(alt)}"{size}>')


def png_data_uri(png: bytes) -> str:
    """PNG bytes as a ``data:`` URI: an image a page carries inside itself (works offline)."""
    import base64

    return "data:image/png;base64," + base64.b64encode(png).decode()


# the one style of a page: nothing wider than the window, long words wrapped, numbers aligned
PAGE_CSS = ("body{font-family:sans-serif;max-width:1240px;margin:8px auto;padding:0 12px}"
            "table{border-collapse:collapse;max-width:100%}"
            "td,th{padding:2px 8px;border-bottom:1px solid #ddd;text-align:left;"
            "vertical-align:top}"
            ".num{white-space:nowrap}.sb-headline{font-size:1.15em;margin:8px 0}"
            "details{margin:6px 0}summary{cursor:pointer;font-weight:bold}"
            ".sb-scroll{overflow-x:auto;max-width:100%}")


def html_page(title: str, body: str) -> str:
    """A standalone HTML page around ``body`` (already HTML) with a heading of ``title``: its one
    style is inline (:data:`PAGE_CSS`: at most 1240 px of text, long words wrapped) and it loads
    no script, style or font, so it reads the same offline."""
    name = html.escape(title)
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{name}</title>"
            f"<meta name='viewport' content='width=device-width'>"
            f"<style>{PAGE_CSS}</style></head><body><h1>{name}</h1>{body}</body></html>")


class Rendered:
    """A value that renders itself: plain text for a terminal, HTML for a notebook."""

    def text(self) -> str:
        raise NotImplementedError

    def html(self) -> str:
        raise NotImplementedError

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        return {"text/plain": self.text(), "text/html": self.html()}


LONG = 40  # a cell of more characters may break inside a word (a path, an argv): never wider


def _td(value: object) -> str:
    """A table cell; a long one (text over :data:`LONG` characters) wraps anywhere, so a path
    or an argv never widens its table past the page, while short words stay whole."""
    text = _cell(value)
    long = not isinstance(value, Html) and value is not None and len(str(value)) > LONG
    return f'<td style="overflow-wrap:anywhere">{text}</td>' if long else f"<td>{text}</td>"


def _cell(value: object) -> str:
    if isinstance(value, Html):
        return str(value)
    return "" if value is None else html.escape(str(value))


def _label(column: object) -> str:
    if isinstance(column, tuple):
        return " / ".join(str(c) for c in column if c != "")
    return str(column)


def _missing(value: object, pd: Any) -> bool:
    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):
        return False
