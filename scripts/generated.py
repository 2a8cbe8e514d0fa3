"""A docs page's generated part: the text between two markers, printed or written in place.

    generated.main(DOC, START, END, text)   # prints text; with --write, replaces it in DOC
"""

from __future__ import annotations

import sys
from pathlib import Path


def replace_between(doc: Path, start: str, end: str, text: str) -> None:
    """Write ``text`` between the ``start`` and ``end`` markers of ``doc``."""
    page = doc.read_text()
    head, rest = page.split(start, 1)
    _, tail = rest.split(end, 1)
    doc.write_text(f"{head}{start}\n{text}{end}{tail}")


def main(doc: Path, start: str, end: str, text: str) -> None:
    """Print ``text``, or with ``--write`` on the command line refresh it in ``doc``."""
    if "--write" not in sys.argv:
        print(text, end="")
        return
    replace_between(doc, start, end, text)
