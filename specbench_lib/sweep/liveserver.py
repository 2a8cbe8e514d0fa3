"""A started server, as a config's sweep holds it: its process, CPUs, client, adapter, warmup
and history (what it answered), kept across blocks where the machine holds every config's
server at once (:mod:`.blocks`); and the warmup every server answers before its first cell."""

from __future__ import annotations

import signal
from dataclasses import dataclass, field
from typing import Any

import httpx

from ..client.dispatch import dispatch_cell
from ..client.warmclient import warm_client
from ..host.cpuset import CpuSplit
from ..model.plan import Plan
from ..model.records import CellFacts, RequestRecord
from ..prompts.history import History as _History
from ..prompts.history import prompt_records as _prompt_records
from ..prompts.workload import Prompt
from ..servers.engines import Adapter
from ..servers.process import Server

__all__ = ["LiveServer", "idle_death", "warm_up"]


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


def idle_death(live: LiveServer, block: int) -> tuple[dict[str, Any], str]:
    """A kept server found dead before ``block`` (it died while idle, between blocks, where no
    cell saw it: a SIGKILL leaves no crash line): its exit status and signal for the manifest,
    and the line that says it. The config's server is started again, so its server lifetimes
    differ from the other configs' (docs/faults.md)."""
    code = getattr(live.proc, "returncode", None)
    name = None
    if code is not None and code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
    how = f"return code {code}" + (f", {name}" if name else "")
    return ({"block": block, "returncode": code, "signal": name},
            f"died while idle before block {block} ({how}); starting it again: this config's "
            f"later cells run on a new server, its server lifetimes differ from the others'")
