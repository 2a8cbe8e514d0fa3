"""A run's config-level faults its cells do not show (:class:`ConfigFault`): a server that
crashed after its last cell, read from the manifest's ``late_crash``, with the ``known_bad``
entry that would skip it next time.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from ..model.catalogue import C
from ..model.records import CellRecord
from ..model.verdict import Reason
from .manifest import Manifest


@dataclass(frozen=True)
class ConfigFault:
    """A config-level failure its cells do not show: a server that crashed after its last cell
    (``crashed_after_cells``), with the ``known_bad`` entry that would skip it next time."""

    server: str
    config: str
    budget: int | None
    reason: Reason
    known_bad: str

    def __str__(self) -> str:
        return (f"config {self.server}: {self.reason}; to skip it on this engine, add under "
                f"known_bad: {self.known_bad}")



def late_crashes(info: Manifest, cells: Sequence[CellRecord]) -> tuple[ConfigFault, ...]:
    """The configs whose server crashed after their last cell (idle or at shutdown)."""
    faults = []
    for key, entry in info.servers.items():
        if entry.late_crash is None:
            continue
        spec = next((c.spec for c in cells if c.server_label == key.split(".r")[0]), None)
        config = spec.series if spec is not None else key
        budget = spec.budget if spec is not None else None
        version = entry.reported_version or info.engine.get("version") or "unknown"
        reason = Reason(C.crashed_after_cells, f"the server logged {entry.late_crash!r} after "
                        f"its last cell ended (while idle or at shutdown)")
        words = f"crashed its server after its cells: {entry.late_crash}"[:200]
        budgets = "" if budget is None else f", budgets: [{budget}]"
        faults.append(ConfigFault(key, config, budget, reason, (
            f"{{config: {config}{budgets}, engine_version: {json.dumps(str(version))}, "
            f"reason: {json.dumps(words)}}}")))
    return tuple(faults)
