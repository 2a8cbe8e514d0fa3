"""What a cell rule is: one object with its code, level, what it protects against, its
thresholds (params keys and defaults) and its judge, in a module of its own in ``rules/``.

A rule judges the verdict the rules before it gave (``order``; the request problems first) and
returns it, or another: ``invalid`` with its reason appended, or, for a tolerance, ``ok``. Its
thresholds are read by key from the cell's judge inputs (:meth:`Rule.limit`), which
:mod:`~.ruleset` filled from params by key when the cell was measured (:meth:`Rule.inputs`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from ..model.catalogue import Code, Level, Threshold
from ..model.params import SweepParams
from ..model.records import CellFacts, JudgeInputs, RequestRecord
from ..model.served import PromptRecord
from ..model.verdict import Verdict

__all__ = ["Judged", "Rule", "Threshold", "param"]


@dataclass(frozen=True)
class Judged:
    """One cell as its rules see it: the stored requests, facts and judge inputs (with its
    open-loop rate and prompts), and whether a warmup request failed (which taints it)."""

    records: tuple[RequestRecord, ...]
    facts: CellFacts
    inputs: JudgeInputs
    target_rate: float | None = None
    prompts: tuple[PromptRecord, ...] = ()
    warm_bad: bool = False

    @property
    def measured(self) -> list[RequestRecord]:
        return [r for r in self.records if not r.warmup]


def param(params: SweepParams, key: str, default: Any = None) -> Any:
    """The value of a dotted params key (``host.max_other_gpu_mib``; ``thresholds.x`` reads
    params' ``thresholds`` mapping), or ``default`` where a mapping lacks it."""
    value: Any = params
    for part in key.split("."):
        if isinstance(value, dict):
            value = value.get(part, default)
        elif hasattr(value, part):
            value = getattr(value, part)
        else:
            raise AttributeError(f"params has no key {key!r}: a rule's threshold is a params key, "
                                 f"or thresholds.<name> for one of its own")
    return value


class Rule:
    """A cell rule. A subclass in a module of ``analysis/rules/`` is found by
    :mod:`~.ruleset` and judged in ``order``; it sets the class attributes and :meth:`judge`.

    ``declares`` False: the code is the catalogue's already (a request problem this rule also
    judges at the cell), so the rule adds no entry. ``host_side``: it judges the client host,
    not the config (a cell invalid for such rules alone is measured again at once)."""

    code: ClassVar[str]
    protects: ClassVar[str] = ""
    thresholds: ClassVar[tuple[Threshold, ...]] = ()
    order: ClassVar[int] = 100
    level: ClassVar[Level] = "cell"
    declares: ClassVar[bool] = True
    host_side: ClassVar[bool] = False

    def judge(self, verdict: Verdict, cell: Judged) -> Verdict:
        """The verdict after this rule (``verdict`` as it is when the rule does not apply)."""
        raise NotImplementedError

    def entry(self) -> Code:
        """The rule's catalogue entry (the rules page's row, ``Reason``'s validation)."""
        return Code(self.code, self.level, self.protects, self.thresholds, self.host_side)

    def inputs(self, params: SweepParams) -> dict[str, Any]:
        """Its thresholds' values in ``params`` by key, as a cell measured now stores them."""
        return {t.key: param(params, t.key, t.default) for t in self.thresholds if t.in_params}

    def limit(self, cell: Judged, key: str) -> Any:
        """The value of threshold ``key`` the cell was measured with (see :class:`Threshold`)."""
        threshold = next(t for t in self.thresholds if t.key == key)
        if key in cell.inputs.thresholds:
            return cell.inputs.thresholds[key]
        return threshold.default if threshold.judged_when_absent else None
