"""The workloads ``categories`` expands into (one per category of a conversation source), and
the categories of a Spec-Bench ``question.jsonl`` (``categories: all``), each bad input one
line naming the file, the line and what to do (read when the params are, before any server)."""

from __future__ import annotations

import json

from ..core.paths import resolve_project_path
from .sections import WorkloadParams


def per_category(workloads: tuple[WorkloadParams, ...]) -> tuple[WorkloadParams, ...]:
    """Each workload with ``categories`` as one workload per category; ``categories: []``
    (no category) is refused, as is a file whose ``all`` finds none."""
    expanded: list[WorkloadParams] = []
    for w in workloads:
        found = w.per_category(
            _file_categories(w.path) if w.categories == "all" and w.path else ())
        if not found:
            raise ValueError(f"workload {w.name!r}: categories {list(w.categories or ())} "
                             f"names no category; list some, write 'all', or remove the key")
        expanded += found
    return tuple(expanded)


def _file_categories(path: str) -> tuple[str, ...]:
    """The categories of a Spec-Bench ``question.jsonl`` in their first order (``categories:
    all``); a file that cannot be read, a row that is not one, or a file with none is refused
    with its name (and the line)."""
    file = resolve_project_path(path)
    found: dict[str, None] = {}
    if file.is_dir():
        raise ValueError(f"categories 'all' reads {file}: a directory, not a file; give the "
                         f"path of the question.jsonl in it")
    try:
        lines = file.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"categories 'all' reads {file}: {exc}") from None
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{file}:{n}: not a JSON object ({exc.msg} at column {exc.colno}): "
                             f"fix or remove the line") from None
        if not isinstance(row, dict) or not isinstance(row.get("category"), str):
            raise ValueError(f"{file}:{n}: no 'category' string; a Spec-Bench "
                             f"question.jsonl row has question_id, category, turns")
        found[row["category"]] = None
    if not found:
        raise ValueError(f"categories 'all' reads {file}: it has no question rows, so no "
                         f"category; give a Spec-Bench question.jsonl with rows")
    return tuple(found)
