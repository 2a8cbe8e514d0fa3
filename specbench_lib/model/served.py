"""What a cell's server was sent and had answered: the prompts of a cell as sent
(:class:`PromptRecord`) and the server's history before the cell (:class:`ServedBefore`), as
stored in a cell record; the ``seen_prompt`` rule (:mod:`~specbench_lib.analysis.rules.seen_prompt`) reads
them. And a cell's earlier attempts (:class:`Remeasured`): measured, found invalid for the client
host alone, and measured again with fresh prompts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..core.shapes import known_fields as _known


@dataclass(frozen=True)
class PromptRecord:
    """A prompt as sent: the sha of its token ids, its length and where its text came from."""

    sha: str
    tokens: int
    sources: tuple[str, ...] = ()

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PromptRecord:
        return cls(str(data["sha"]), int(data["tokens"]), tuple(data.get("sources") or ()))


@dataclass(frozen=True)
class ServedBefore:
    """What the cell's server had answered before the cell (its warmup included): the earlier
    cells, how many requests, and the prompts (token-id shas) and documents they carried."""

    cells: tuple[str, ...] = ()
    requests: int = 0
    prompts: tuple[str, ...] = ()
    documents: tuple[str, ...] = ()

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ServedBefore:
        values = _known(cls, data)
        return cls(tuple(str(c) for c in values.get("cells") or ()), int(values.get("requests", 0)),
                   tuple(str(p) for p in values.get("prompts") or ()),
                   tuple(str(d) for d in values.get("documents") or ()))


@dataclass(frozen=True)
class Remeasured:
    """An earlier attempt of a cell that host-side rules alone made invalid (the client stalled,
    the host was busy: ``catalogue.host_side()``), kept when the cell was measured again: its
    reasons, its requests and the prompts (shas) it sent."""

    attempt: int
    reasons: tuple[str, ...] = ()
    requests: int = 0
    prompts: tuple[str, ...] = ()
    started: str | None = None

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Remeasured:
        values = _known(cls, data)
        return cls(int(values.get("attempt", 0)), tuple(str(r) for r in values.get("reasons") or ()),
                   int(values.get("requests", 0)),
                   tuple(str(p) for p in values.get("prompts") or ()), values.get("started"))
