"""A started server, as a config's sweep holds it: its process, CPUs, client, adapter, warmup
and history (what it answered), kept across blocks where the machine holds every config's
server at once (:mod:`.blocks`); and the warmup every server answers before its first cell."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import httpx

from ..client.dispatch import dispatch_cell, warm_client
from ..host.cpuset import CpuSplit
from ..model.plan import Plan
from ..model.records import CellFacts, RequestRecord
from ..prompts.history import History as _History
from ..prompts.history import prompt_records as _prompt_records
from ..prompts.workload import Prompt
from ..servers.engines import Adapter
from ..servers.process import Server

__all__ = ["LiveServer", "warm_up"]


@dataclass
class LiveServer:
    """A started server: its process, CPUs, where its log starts, and once ready its client,
    adapter, context, warmup and history (what it answered); kept across blocks when the
    machine holds every config's server at once."""

    proc: Server
    cpus: CpuSplit
    base: int
    client: httpx.Client | None = None
    adapter: Adapter | None = None
    context: int = 0
    warmup: tuple[RequestRecord, ...] = ()
    history: _History = field(default_factory=_History)
    early: CellFacts | None = None  # a crash logged before the first cell

    @property
    def http(self) -> httpx.Client:
        assert self.client is not None
        return self.client


def warm_up(plan: Plan, proc: Server, client: httpx.Client, adapter: Adapter,
            prompts: list[Prompt]) -> tuple[dict[str, Any], tuple[RequestRecord, ...], _History]:
    """Requests sent once per server before its first cell, excluded from every statistic; their
    records go into each cell of the server, whose verdict a failed warmup makes invalid. The
    history starts with them: a cell must not send what the warmup sent (``seen_prompt``)."""
    params = plan.params
    history = _History()
    warm_client(proc.base_url)  # the client's first-time work, before any measured request
    if not prompts:
        return {"requests": 0}, (), history
    dispatch = dispatch_cell(adapter, proc.base_url, [p.tokens for p in prompts],
                             warmup=len(prompts), concurrency=1,
                             max_tokens=params.warmup_output_tokens or min(params.output_lengths),
                             timeouts=params.request_timeouts(), headers=proc.headers)
    errors = [r.error for r in dispatch.records if r.error]
    summary = {"requests": len(prompts), "seconds": round(dispatch.window_start, 2),
               "errors": errors}
    history.add("warmup", _prompt_records(prompts))
    return summary, tuple(dispatch.records), history
