"""How a config's cells are kept apart on their server: the order it measures them in (drawn
from the seed), and the isolation its engine's state needs (its adapter's ``isolation``)."""

from __future__ import annotations

import random
import zlib
from collections.abc import Sequence

from ..model.cellspec import CellSpec, ServerConfig
from ..model.params import SweepParams
from ..servers.engines import Adapter, Isolation

__all__ = ["cell_order", "isolation_of"]


def cell_order(cells: Sequence[CellSpec], params: SweepParams, salt: str) -> list[CellSpec]:
    """The order a server measures its cells in: shuffled by the seed and ``salt`` (the config
    and round) unless ``cell_order`` is ``fixed``; a rate profile's points always come after the
    closed-loop cells they are spread between."""
    anchors = [c for c in cells if c.profile_point is None]
    points = [c for c in cells if c.profile_point is not None]
    if params.cell_order == "shuffled":
        random.Random(zlib.crc32(f"{params.seed}:{salt}".encode())).shuffle(anchors)
    return [*anchors, *points]


def isolation_of(adapter: Adapter, server: ServerConfig, argv: Sequence[str]) -> Isolation:
    """The adapter's isolation for a config launched with ``argv``; an attached server cannot be
    restarted, so its cells rely on fresh prompts alone (and ``seen_prompt`` says when that
    failed). The plan's lifetimes (:mod:`.lifetimes`) may still make a ``none`` forget before
    every cell."""
    chosen = adapter.isolation(server, argv)
    if server.attach is not None and chosen.mode == "restart":
        return Isolation("none", f"{chosen.why}; but an attached server cannot be restarted, "
                         "so only fresh prompts keep its cells apart", chosen.learns)
    return chosen
