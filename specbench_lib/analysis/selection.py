"""A best that survives its selection: per panel, the confidence set for the fastest config (Holm),
its decision (decided / tie / undecided), and the selected config's speedup with an interval
simultaneous over the configs it was picked from.

The *leader* is the config with the highest mean output tok/s. Each other config j is compared
with it by the paired bootstrap replicates of the ratio leader / j (:mod:`~.intervals`: the
configs of a panel resample the same prompts). A config is *excluded* (shown slower than the
leader) when the lower end of that ratio's interval is above 1; the k − 1 comparisons are made
together by Holm's step-down: with r configs excluded so far, every remaining comparison is
tested by its interval at level 1 − α / (k − 1 − r), and the step repeats until none is excluded
(the same as ordering by p-values). The intervals are two-sided, so each exclusion is one-sided
at half its level (conservative). The **confidence set** is the leader and every config not
excluded: the configs that cannot be excluded as the fastest at 1 − α together.

The **decision**: ``decided`` when the set is the leader alone; ``tie`` when every other config
in it is within ±``equivalence`` of the leader by its Bonferroni interval of leader / config
(level 1 − α / (k − 1), simultaneous over the comparisons); otherwise ``undecided``. A
comparison without an interval (one request, no spread) can neither exclude nor tie.

The selected config's speedup over ``auto`` has an interval simultaneous over the k configs'
speedups (Bonferroni, level 1 − α / k): whichever config the data picks, its interval covers
with at least 1 − α, so picking the fastest point estimate does not shrink it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..core.errors import ParamsError
from .intervals import interval

ALPHA = 0.05
EQUIVALENCE = 0.03  # a tie: every config in the set within ±3 % of the leader
DECISIONS = ("decided", "tie", "undecided")


@dataclass(frozen=True)
class Selection:
    """A panel's confidence set (``members``, in the panel's order, the leader among them),
    its ``decision`` and, per other member, the simultaneous interval of leader / member."""

    leader: str
    members: tuple[str, ...]
    decision: str
    bounds: dict[str, tuple[float, float]]


def ratio(top: Any, other: Any) -> Any:
    """The paired replicates of ``top / other`` (None when either has none)."""
    return None if top is None or other is None else top / other


def holm_excluded(ratios: Mapping[str, Any], units: Mapping[str, int],
                  alpha: float = ALPHA) -> set[str]:
    """The configs whose ratio leader / config is above 1 by Holm's step-down at ``alpha``
    (``ratios``: replicates per config; ``units``: the independent units behind each)."""
    excluded: set[str] = set()
    while True:
        left = [c for c in ratios if c not in excluded]
        if not left:
            return excluded
        level = 1 - alpha / len(left)
        found = {c for c in left if interval(ratios[c], units[c], level=level)[0] > 1}
        if not found:
            return excluded
        excluded |= found


def select(order: Sequence[str], replicates: Mapping[str, Any], units: Mapping[str, int],
           leader: str, *, equivalence: float = EQUIVALENCE, alpha: float = ALPHA) -> Selection:
    """The confidence set for the fastest of ``order`` (a panel's configs, the ``leader``
    among them) from each config's throughput ``replicates`` and ``units`` (see the module)."""
    if not equivalence >= 0:
        raise ParamsError(f"equivalence margin {equivalence!r}: it must be a fraction >= 0 "
                          f"(0.03 is ±3 %); give a non-negative number", key="equivalence",
                          value=equivalence)
    others = [c for c in order if c != leader]
    ratios = {c: ratio(replicates.get(leader), replicates.get(c)) for c in others}
    pair = {c: min(units.get(leader, 0), units.get(c, 0)) for c in others}
    excluded = holm_excluded(ratios, pair, alpha)
    members = tuple(c for c in order if c not in excluded)
    level = 1 - alpha / max(1, len(others))
    bounds = {c: interval(ratios[c], pair[c], level=level) for c in members if c != leader}
    if len(members) == 1:
        decision = "decided"
    elif all(1 - equivalence <= low and high <= 1 + equivalence
             for low, high in bounds.values()):  # NaN bounds compare False: no tie
        decision = "tie"
    else:
        decision = "undecided"
    return Selection(leader, members, decision, bounds)


def selected_interval(speedup: Any, units: int, k: int,
                      alpha: float = ALPHA) -> tuple[float, float]:
    """The interval of a selected config's speedup replicates, simultaneous over the ``k``
    configs it was picked from (Bonferroni: level 1 − ``alpha`` / k)."""
    return interval(speedup, units, level=1 - alpha / max(1, k))
