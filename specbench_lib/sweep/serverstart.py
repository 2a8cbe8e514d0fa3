"""A server config's first phase: its server started and waited for until ready, then its
info, the prompt book's check and its warmup (:func:`~.liveserver.warm_up`); the started
server is the sweep's ``live`` from its first moment, so a failure on the way stops it
(:mod:`.serverstop`)."""

from __future__ import annotations

import time

import httpx

from ..core.store import redact
from ..host.cpuset import CpuSplit, pinned
from ..servers.facts import before_cells
from ..servers.process import open_server
from .liveserver import LiveServer, warm_up
from .requestshape import ServerText
from .serverstate import ServerState


def start_server(sweep: ServerState) -> LiveServer:
    """Start ``sweep``'s server and wait until it is ready, then warm it up (:func:`warm`)."""
    params, server, launch = sweep.plan.params, sweep.server, sweep.launch
    log_path = sweep.run.dir.log_path(sweep.key)
    cpus = launch.cpus or CpuSplit(None, None, "an attached server: nothing pinned")
    proc = open_server(server.label, server.attach,
                       (launch.argv, launch.base_url, launch.health_path), log_path,
                       sweep.adapter.crash_signatures, params.redact, cpus=cpus.server,
                       env=params.engine.env)
    record = sweep.record
    record.cpus, record.controlled = cpus.to_dict(), server.attach is None
    if server.attach is None:
        record.argv = list(sweep.argv)
    else:
        record.url, record.unit = server.attach.url, server.attach.unit
    record.log, record.timing = str(log_path.relative_to(sweep.run.dir.path)), sweep.timing
    # this server's log starts here (a config's servers share one)
    sweep.live = live = LiveServer(proc, cpus, proc.log_size())
    began = time.perf_counter()
    sweep.progress.server(sweep.key, f"starting, waiting up to "
                          f"{params.engine.ready_timeout_s:.0f} s for it to be ready")
    proc.start()
    record.pid, record.starts = proc.pid, record.starts + 1
    record.ready_s = round(proc.wait_ready(params.engine.ready_timeout_s), 2)
    sweep.progress.server(sweep.key, f"ready in {record.ready_s} s")
    sweep.timing["start_s"] = round(time.perf_counter() - began, 4)
    sweep.slice_fixed += sweep.timing["start_s"]
    live.client = httpx.Client(base_url=launch.base_url, timeout=params.request_timeout_s,
                               headers=proc.headers)
    with pinned(cpus.client):
        warm(sweep, live)
    return live


def warm(sweep: ServerState, live: LiveServer) -> None:
    """The started server: its info, the prompt book's check and the warmup; a crash
    before the first cell is kept as ``live.early``."""
    record, proc, client = sweep.record, live.proc, live.http
    ready_at = proc.log_size()
    info = sweep.adapter.server_info(client)
    live.adapter, live.context = sweep.adapter.for_server(info), info.context_per_request
    record.speculative = live.adapter.check_spec(sweep.server, sweep.argv, info,
                                                 proc.log_tail(4000))
    sweep.seeds_paired = live.adapter.pairs_seeds(info, sweep.argv)
    sweep.kv_tokens = info.kv_tokens  # the KV pool each cell's concurrency must fit in
    record.context_per_request, record.reported_version = info.context_per_request, info.version
    record.effective = redact(info.raw, extra=sweep.plan.params.redact)
    began = time.perf_counter()
    text = ServerText(live.adapter, client, sweep.tokens)
    sweep.book.check(text.tokenize, url=sweep.launch.base_url, render=text.render)
    record.warmup, live.warmup, live.history = warm_up(
        sweep.plan, proc, client, live.adapter, sweep.book.warmup(text.tokenize, text.render))
    sweep.timing["warmup_s"] = round(time.perf_counter() - began, 4)
    sweep.slice_fixed += sweep.timing["warmup_s"]
    sweep.store()
    live.early = before_cells(proc, live.base, ready_at, proc.log_size())
    sweep.progress.warmed(sweep.key, sweep.server.label, live.warmup)


__all__ = ["start_server", "warm"]
