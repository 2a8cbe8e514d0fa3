"""Which categories a conversation workload expands into, and the groups that pool workloads.

``categories: all`` takes every category of the source; ``categories: two_turns`` the
categories whose conversations have a second turn (MT-Bench's eight; of a Spec-Bench file, those
with two-turn questions), the selector a ``turn: 2`` workload wants. ``turn: 2`` with ``all``
over a file with one-turn categories is refused, naming every one of them.

``groups`` (params) pools workloads for the reading: each group is a workload of its own whose
panels hold its members' cells (``analysis/pooling.py``), so its claim is the one claim
computation over the pooled prompts (Spec-Bench's six: ``mt_bench`` the eight MT-Bench
categories, then translation, summarization, qa, math_reasoning, rag).

A file's categories are read by its source's object (``prompts/sources/``, through
:func:`~.sources.catalogue`); each bad input (an empty or unreadable file, a malformed line, a
directory) is one line naming the file, the line and what to do, read when the params are, before
any server. Two categories that become one workload name are refused, naming both.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..core.errors import PreflightError
from .sources import catalogue
from .workloadparams import WorkloadParams

SELECTORS = ("all", "two_turns")


def listed_categories(workload: WorkloadParams) -> tuple[str, ...]:
    """The categories a workload's ``categories: all | two_turns`` names in its file (empty
    for a source whose categories are fixed, MT-Bench's eight all with two turns, and for a
    listed or absent ``categories``)."""
    if workload.categories not in SELECTORS or not workload.path:
        return ()
    try:
        turns = catalogue(workload.source, workload.path)
    except PreflightError as exc:
        raise ValueError(str(exc)) from None
    found = tuple(turns)
    if workload.categories == "all" and workload.turn != 2:
        return found
    two = tuple(c for c in found if turns[c] >= 2)
    one = [c for c in found if c not in two]
    if workload.categories == "all" and one:
        raise ValueError(f"turn 2 needs a second question, and {len(one)} categories of "
                         f"{workload.path} have none: {one}; set categories: two_turns (the "
                         f"{len(two)} with two turns: {list(two)}) or list them")
    if not two:
        raise ValueError(f"categories: two_turns, but no question of {workload.path} has two "
                         f"turns (its categories: {list(found)})")
    return two


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
        found = w.per_category(listed_categories(w))
        if not found:
            named = w.categories if isinstance(w.categories, str) else list(w.categories or ())
            raise ValueError(f"workload {w.name!r}: categories {named} names no category; "
                             f"list some, write 'all', or remove the key")
        _one_name_each(w, found)
        expanded += found
    return tuple(expanded)


def _one_name_each(workload: WorkloadParams, found: tuple[WorkloadParams, ...]) -> None:
    """Refuse two categories whose workload names are one (``a/b`` and ``a_b``: ``sb-a_b``),
    naming both categories."""
    seen: dict[str, str | None] = {}
    for w in found:
        if w.name in seen:
            raise ValueError(f"workload {workload.name!r}: categories {seen[w.name]!r} and "
                             f"{w.category!r} both become workload {w.name!r} (a character "
                             f"other than A-Z, a-z, 0-9, '_', '.', '-' becomes '_'); keep one, "
                             f"or give each a workload of its own with 'category'")
        seen[w.name] = w.category

