"""An axis that differs by the level of another: ``concurrency_cap``, the most requests in flight
measured at a context (the KV pool holds no more of that length: :mod:`~specbench_lib.sweep.kvpool`).

At a context with a cap, each concurrency level above it is measured at the cap, once; the
other contexts keep every level. ``concurrency: [1, 4, 16]`` with ``concurrency_cap: {25600: 8}``
measures 1, 4 and 16 at 3072, and 1, 4 and 8 at 25600: the panels say what was measured. A
cap at a context the plan does not measure caps nothing (a file that ``extends`` one with a cap
may narrow its contexts; a stage's plan drops it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence


def capped(levels: Sequence[int], cap: int | None) -> tuple[int, ...]:
    """``levels`` with each above ``cap`` at ``cap``, each once, in order (None: as they are)."""
    if cap is None:
        return tuple(levels)
    return tuple(dict.fromkeys(min(level, cap) for level in levels))


def check_caps(caps: Mapping[int, int]) -> None:
    """Refuse a cap, or a context, that is not positive (a ValueError, which the params loader
    names with the file and key)."""
    for context, cap in caps.items():
        if cap < 1 or context < 1:
            raise ValueError(f"concurrency_cap {{{context}: {cap}}}: a context in tokens and the "
                             f"most requests in flight there (the KV pool's), both positive")


__all__ = ["capped", "check_caps"]
