"""What a cell's rules are judged with besides its requests and facts: the config's kind and
each cell rule's thresholds by params key, as they were when the cell was measured.

:mod:`~specbench_lib.analysis.ruleset` fills them from params by key; the rules
(``analysis/rules/``) read them by key. Stored in a cell file as ``judge``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from ..core.shapes import known_fields as _known


@dataclass(frozen=True)
class JudgeInputs:
    """What the analysis-time rules need besides the requests, fixed when the cell was measured:
    the config's kind and, by params key, each cell rule's thresholds (``analysis/rules/``; a
    key a cell lacks reads as its rule says, :class:`~.catalogue.Threshold`)."""
    planned: int  # measured requests planned
    speculative: bool = False  # the config drafts (every method but auto)
    spec_stats: Literal["per_request", "counters"] = "per_request"  # where its spec stats come from
    prefix_cache: bool = False
    thresholds: dict[str, Any] = field(default_factory=dict)
    reasoning: bool = False  # its workload asks for answers that reason first (enable_thinking)
    # its requests' seeds decide their draws on its server (greedy, or an engine that honours a
    # request's seed): a sampled cell without it shares no randomness with another config's
    seeds_paired: bool = True

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> JudgeInputs:
        """A cell's judge inputs; schema 2 and 3 stored each threshold as a field of its own,
        absent where it was not recorded (:data:`SCHEMA3_THRESHOLDS`)."""
        values = _known(cls, data)
        if "thresholds" not in data:
            values["thresholds"] = {key: data.get(name, absent)
                                    for name, (key, absent) in SCHEMA3_THRESHOLDS.items()}
        values["thresholds"] = dict(values["thresholds"])
        return cls(**values)


# schema 3's judge fields (name: params key, what an older cell without it reads as), frozen:
# the thresholds of rules added since are in ``thresholds`` only
SCHEMA3_THRESHOLDS: dict[str, tuple[str, float | bool | None]] = {
    "max_failed_fraction": ("max_failed_fraction", 0.0),
    "max_coalesced_fraction": ("max_coalesced_fraction", 0.05),
    "max_coalesced_first_fraction": ("max_coalesced_first_fraction", 0.01),
    "max_other_cpu_cores": ("host.max_other_cpu_cores", None),
    "max_other_gpu_mib": ("host.max_other_gpu_mib", None),
    "prompt_reuse": ("prompt_reuse", False),
}
