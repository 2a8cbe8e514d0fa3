"""Rate profiles: the open-loop rate of each profile cell, from its config's closed-loop cells.

As GuideLLM's sweep profile: a config's synchronous throughput (its concurrency-1 cell) and its
saturated throughput (its highest-concurrency cell) are measured first; point k of a profile of
n runs at ``sync + k / (n + 1) * (saturated - sync)`` requests a second, uncapped (the server
queues what its slots cannot take). A profile cell whose anchors are not ``ok`` has no rate to run at: it is
``skipped``, naming the anchor and its verdict.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from ..model.catalogue import C
from ..model.cellspec import CellSpec
from ..model.params import SweepParams
from ..model.records import CellRecord
from ..model.sections import RequestRateParams
from ..model.verdict import Reason, Verdict


def anchors(spec: CellSpec, levels: tuple[int, ...]) -> tuple[str, str]:
    """The ids of the synchronous and saturated cells of profile cell ``spec``, given the plan's
    concurrency ``levels``."""
    base = replace(spec, rate=None, profile_point=None, profile_points=0)
    return (replace(base, concurrency=1).cell_id,
            replace(base, concurrency=max(levels)).cell_id)


def profile_rate(spec: CellSpec, levels: tuple[int, ...],
                 lookup: Callable[[str], CellRecord | None]) -> float | Verdict:
    """The rate of profile cell ``spec`` (requests a second), or the ``skipped`` verdict saying
    why it has none; ``lookup`` finds a cell of the run by id (None when not measured)."""
    assert spec.profile_point is not None
    rates = []
    for role, cell_id in zip(("synchronous", "saturated"), anchors(spec, levels), strict=True):
        found = lookup(cell_id)
        rps = (found.metrics or {}).get("request_throughput_rps") if found is not None else None
        if found is None or not found.verdict.ok or not rps:
            state = "not measured" if found is None else found.status
            return Verdict("skipped", (Reason(
                C.no_profile_rate, f"the {role} cell {cell_id} is {state}, so point "
                f"{spec.profile_point} of the rate profile has no rate to run at; resume the run "
                f"once it is ok"),))
        rates.append(float(rps))
    sync, saturated = rates
    return sync + spec.profile_point / (spec.profile_points + 1) * (saturated - sync)


def cell_rate(params: SweepParams, cell: CellSpec,
              lookup: Callable[[str], CellRecord | None]) -> RequestRateParams | Verdict | None:
    """An open-loop cell's arrival schedule (None: closed loop); a rate profile's point gets
    its rate from the config's closed-loop cells (``lookup``: a cell of the run by its id)."""
    load = params.request_rate
    if load is None or not cell.load:
        return None
    if cell.rate is not None:
        return load.at(cell.rate)
    found = profile_rate(cell, params.concurrency, lookup)
    return found if isinstance(found, Verdict) else load.at(found)
