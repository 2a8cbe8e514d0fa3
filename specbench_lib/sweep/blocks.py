"""Blocks against time: each repeat (a fixed plan's) or round (a budgeted sweep's) is a block
that measures every config of its panels once, in an order drawn afresh for each block from the
plan's seed, so that no change of the machine's speed lines up with a config. Where the machine
holds every config's server at once (CPU engines) and no config needs a fresh server per cell
(the driver checks the isolation plan), each config's server is started once and kept up across
the blocks, each on its own port, so interleaving costs no start a block.

The analysis matches the design: a comparison of two configs takes the block as its unit of
replication (:mod:`~specbench_lib.analysis.units`), and the run's drift is measured on work
every config does alike (:mod:`~specbench_lib.analysis.drift`).
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Sequence
from typing import TypeVar

from ..model.params import SweepParams
from ..model.plan import Plan
from ..servers.engines import Adapter

T = TypeVar("T")

__all__ = ["block_order", "keeps_servers"]


def block_order(items: Sequence[T], params: SweepParams, number: int,
                label: str = "block") -> list[T]:
    """The order block ``number`` measures ``items`` (its configs, or their slices) in: drawn
    from the plan's seed and the block's number (``cell_order: shuffled``, the default), or the
    plan's order (``cell_order: fixed``)."""
    found = list(items)
    if params.cell_order == "shuffled":
        random.Random(zlib.crc32(f"{params.seed}:{label}:{number}".encode())).shuffle(found)
    return found


def keeps_servers(plan: Plan, adapter: Adapter) -> bool:
    """Whether every config's server stays up from block to block (so interleaving costs no
    server start a block): on this machine (not placed), for an engine that needs no GPU (a CPU
    server of each config fits beside the others; GPU servers hold their GPUs, so they start
    again each block), when the plan has blocks to keep them for (rounds, or repeats in rounds)."""
    params = plan.params
    blocks = params.time_budget_s is not None or (
        params.repeats > 1 and params.repeat_order == "rounds")
    return (blocks and params.placement.engine == "local" and not adapter.needs_gpu
            and sum(s.attach is None for s in plan.servers) > 1)
