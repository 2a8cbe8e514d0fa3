"""Which categories a conversation workload expands into, and the groups that pool workloads.

``categories: all`` takes every category of the source; ``categories: two_turns`` the
categories whose conversations have a second turn (MT-Bench's eight; of a Spec-Bench file, those
with two-turn questions), the selector a ``turn: 2`` workload wants. ``turn: 2`` with ``all``
over a file with one-turn categories is refused, naming every one of them.

``groups`` (params) pools workloads for the reading: each group is a workload of its own whose
panels hold its members' cells (``analysis/pooling.py``), so its claim is the one claim
computation over the pooled prompts (Spec-Bench's six: ``mt_bench`` the eight MT-Bench
categories, then translation, summarization, qa, math_reasoning, rag).

Each bad input (an empty or unreadable file, a malformed line, a directory) is one line naming
the file, the line and what to do, read when the params are, before any server.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..core.errors import PreflightError
from ..core.paths import resolve_project_path
from .sections import WorkloadParams
from .speedbench import speed_categories, speed_rows

SELECTORS = ("all", "two_turns")


def listed_categories(workload: Any, file_categories: Callable[[str], tuple[str, ...]]
                      ) -> tuple[str, ...]:
    """The categories a workload's ``categories: all | two_turns`` names in its file (empty
    for MT-Bench, whose eight all have two turns, and for a listed or absent ``categories``)."""
    if workload.categories not in SELECTORS or not workload.path:
        return ()
    speed = workload.source == "speed_bench"
    try:
        found = speed_categories(workload.path) if speed else file_categories(workload.path)
    except PreflightError as exc:
        raise ValueError(str(exc)) from None
    if workload.categories == "all" and workload.turn != 2:
        return found
    turns = ({c: max(len(t) for _, k, t in speed_rows(workload.path) if k == c) for c in found}
             if speed else turn_counts(workload.path))
    two = tuple(c for c in found if turns.get(c, 1) >= 2)
    one = [c for c in found if c not in two]
    if workload.categories == "all" and one:
        raise ValueError(f"turn 2 needs a second question, and {len(one)} categories of "
                         f"{workload.path} have none: {one}; set categories: two_turns (the "
                         f"{len(two)} with two turns: {list(two)}) or list them")
    if not two:
        raise ValueError(f"categories: two_turns, but no question of {workload.path} has two "
                         f"turns (its categories: {list(found)})")
    return two


def turn_counts(path: str) -> dict[str, int]:
    """The most turns a question of each category of a ``question.jsonl`` has."""
    file = resolve_project_path(path)
    most: dict[str, int] = {}
    try:
        for line in file.read_text(encoding="utf-8").splitlines():
            row = json.loads(line) if line.strip() else None
            if isinstance(row, dict) and isinstance(row.get("category"), str):
                turns = row.get("turns")
                count = len(turns) if isinstance(turns, list) else 1
                most[row["category"]] = max(most.get(row["category"], 0), count)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"categories reads {file}: {exc}") from None
    return most


def check_groups(groups: Mapping[str, Sequence[str]], workloads: Sequence[str]) -> None:
    """Refuse a group with no members, a member that is no workload of the plan (after
    categories are expanded), a member in two groups, or a group named as a workload."""
    seen: dict[str, str] = {}
    for name, members in groups.items():
        if not members:
            raise ValueError(f"groups.{name}: lists no workload")
        if name in workloads:
            raise ValueError(f"groups.{name}: a workload has that name; name the group apart")
        unknown = [m for m in members if m not in workloads]
        if unknown:
            raise ValueError(f"groups.{name}: {unknown} are no workloads of the plan (after "
                             f"categories are expanded: {list(workloads)})")
        for member in members:
            if member in seen:
                raise ValueError(f"groups: {member!r} is in both {seen[member]!r} and {name!r}")
            seen[member] = name


def per_category(workloads: tuple[WorkloadParams, ...]) -> tuple[WorkloadParams, ...]:
    """Each workload with ``categories`` as one workload per category; ``categories: []``
    (no category) is refused, as is a file whose ``all`` finds none."""
    expanded: list[WorkloadParams] = []
    for w in workloads:
        found = w.per_category(listed_categories(w, _file_categories))
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
