"""A server config's middle phase: its cells measured on its live server, one after another in
the seeded order, each let in by the budget (:meth:`~.serverstate.ServerState.may`), measured
again at once when host-side rules alone made it invalid, and written; a crash gives the rest
of the config's cells its verdict without a request."""

from __future__ import annotations

import time
from dataclasses import replace

import httpx

from ..analysis.analyse import analyse
from ..analysis.validate import context_guard, kv_guard
from ..client.dispatch import dispatch_cell
from ..core.store import utc_now
from ..host.load import HostSampler
from ..model.catalogue import host_side_only
from ..model.cellspec import CellSpec
from ..model.records import CellFacts, CellRecord, RequestRecord
from ..model.served import PromptRecord, Remeasured
from ..model.verdict import Verdict
from ..prompts.conversations import plain_render
from ..prompts.history import History as _History
from ..prompts.workload import Prompt
from ..servers.engines import Adapter
from ..servers.facts import DIED_EARLIER, dead_facts, measured_facts
from ..servers.process import Server
from .cellrecord import Measured, analysed_record
from .liveserver import LiveServer
from .loadprofile import cell_rate
from .requestshape import ServerText, workload_of
from .serverstate import ServerState
from .turns import second_turns


def measure_cells(sweep: ServerState, live: LiveServer, cells: list[CellSpec]) -> CellFacts | None:
    """``cells`` on the live server; the facts that end the config (a crash), None if none."""
    proc, client, adapter, base = live.proc, live.http, live.adapter, live.base
    assert adapter is not None
    if live.early is not None:
        for cell in cells:
            sweep.write(cell, live.early, Measured(live.early, live.warmup))
        return dead_facts(proc, Verdict("crashed", (DIED_EARLIER,)), base)
    dead: Verdict | None = None
    offset = proc.log_size()
    for cell in cells:
        if dead is not None:
            sweep.write(cell, dead_facts(proc, dead, base))
            continue
        if not sweep.may(cell, False):
            break
        if sweep.isolation.mode == "flush":  # the engine's own reset, before every cell
            adapter.reset(client)
            live.history = _History()
            live.history.add("flush", ())
        measured = _attempts(sweep, cell, proc, client, adapter, live.context, live.warmup,
                             offset, live.history)
        offset = proc.log_size()
        verdict = sweep.write(cell, measured.facts, measured)
        if verdict.status == "crashed":
            dead = Verdict("crashed", (DIED_EARLIER, *verdict.reasons))
    sweep.store()
    sweep.after = None if dead is not None else proc.log_size()
    return None if dead is None else dead_facts(proc, dead, base)


def _attempts(sweep: ServerState, cell: CellSpec, proc: Server, client: httpx.Client,
              adapter: Adapter, context: int, warmup: tuple[RequestRecord, ...], since: int,
              history: _History) -> Measured:
    """The cell measured; one that host-side rules alone made invalid (the client stalled,
    the host was busy: ``catalogue.host_side()``) is measured again at once with fresh
    prompts, ``retries`` times at most, its earlier attempts kept in its facts."""
    retries = sweep.plan.params.retries
    earlier: list[Remeasured] = []
    measured = measure_cell(sweep, cell, proc, client, adapter, context, warmup, since, history)
    for attempt in range(retries + 1):
        if attempt:
            text = ServerText(adapter, client, sweep.tokens)
            fresh = sweep.book.retry(cell, attempt, text.tokenize, text.render)
            if fresh is None:  # no fresh documents left: the last attempt's verdict stands
                break
            measured = measure_cell(sweep, cell, proc, client, adapter, context, warmup, since,
                                    history, fresh)
        since = proc.log_size()
        history.add(cell.cell_id if attempt == 0 else f"{cell.cell_id}#{attempt}",
                    measured.prompts)
        verdict = analysed_record(sweep, cell, measured.facts, measured).verdict
        if measured.facts.decided is not None or not host_side_only(verdict.codes):
            break
        if attempt == retries:
            break
        earlier.append(Remeasured(attempt, tuple(str(r) for r in verdict.reasons),
                                  len(measured.requests) - len(warmup),
                                  tuple(p.sha for p in measured.prompts), measured.started))
        sweep.progress.note(f"{cell.cell_id}: invalid for the client host alone "
                            f"({', '.join(sorted(verdict.codes))}); measuring it again "
                            f"({attempt + 1} of {retries})")
    if earlier:
        measured.facts = replace(measured.facts, remeasured=tuple(earlier))
    if sweep.kv_tokens and cell.closed_loop and measured.facts.decided is None:  # an open
        # loop's server queues what its pool cannot hold: its load is the rate, not a count
        per = cell.context + cell.output_tokens
        measured.facts = replace(measured.facts, kv_fit={
            "kv_tokens": sweep.kv_tokens, "needed": cell.concurrency * per, "per_request": per})
    return measured


def measure_cell(sweep: ServerState, cell: CellSpec, proc: Server, client: httpx.Client,
                 adapter: Adapter, context: int, warmup: tuple[RequestRecord, ...], since: int,
                 history: _History, fresh: list[Prompt] | None = None) -> Measured:
    """One attempt at ``cell``: its prompts (``fresh`` ones for a retry), a conversation's
    first turn, its requests dispatched with the host sampled; or the guard's refusal."""
    params = sweep.plan.params
    refused = context_guard(prompt_tokens=cell.context, output_tokens=cell.output_tokens,
                            reserve=adapter.speculative_reserve(sweep.server), context=context
                            ) or kv_guard(prompt_tokens=cell.context, concurrency=cell.concurrency,
                                          output_tokens=cell.output_tokens, kv_tokens=sweep.kv_tokens,
                                          closed=cell.closed_loop)
    if refused is not None:  # never sent: the context, or the KV pool, cannot hold it
        return Measured(CellFacts(decided=refused))
    rate = cell_rate(params, cell, lambda cell_id: _cell(sweep, cell_id))
    if isinstance(rate, Verdict):  # a rate profile's point whose anchors are not ok
        return Measured(CellFacts(decided=rate))
    began, workload = time.perf_counter(), workload_of(params, cell)
    text = ServerText(adapter, client, sweep.tokens)
    prompts = (fresh or sweep.book.for_cell(cell, text.tokenize, text.render)
               )[:params.requests_for(cell)]  # a partial round's: the first, paired
    first: tuple[RequestRecord, ...] = ()
    timing = {"prompts_s": round(time.perf_counter() - began, 4)}
    if workload.turn == 2:  # each conversation's turn 1 first, untimed (turns.py)
        first, turn2, timing["first_turn_s"] = second_turns(
            adapter, proc.base_url, proc.headers, params, cell, workload, prompts,
            text.render if workload.template == "chat" else plain_render(text.tokenize))
        if turn2 is None:  # turn 1 failed and the server could not build turn 2: its crash
            return Measured(measured_facts(proc, since, {}, None, history.before()),
                            (*warmup, *first), (), None, utc_now(), timing)
        prompts = turn2
    started = utc_now("milliseconds")  # the claim orders blocks by it (units.py)
    counters = adapter.metrics_snapshot(client)
    began = time.perf_counter()
    with HostSampler.of_server(proc.pid, proc.base_url,
                               params.host.sample_interval_s) as host:  # what else ran
        dispatch = dispatch_cell(adapter, proc.base_url, [p.tokens for p in prompts], warmup=0,
                                 concurrency=cell.concurrency, max_tokens=cell.output_tokens,
                                 timeouts=params.request_timeouts(),
                                 request_rate=rate, seed=params.seed,
                                 headers=proc.headers, stop=workload.stop,
                                 sampling=params.sampling(cell),
                                 turn=workload.turn if workload.conversational else None)
    timing["dispatch_s"] = round(time.perf_counter() - began, 4)
    timing["window_s"] = round(dispatch.window_end - dispatch.window_start, 4)
    # the client did not run on time (its reads may have coalesced: coalesced_reads)
    timing["client_stall_s"] = round(sum(b - a for a, b in dispatch.stalls), 4)
    facts = measured_facts(proc, since, adapter.cell_spec_stats(
        counters, adapter.metrics_snapshot(client)), host.load, history.before())
    return Measured(facts, (*warmup, *first, *dispatch.records),
                    tuple(PromptRecord(p.sha, len(p.tokens), tuple(p.sources)) for p in prompts),
                    dispatch.target_rate, started, timing)


def _cell(sweep: ServerState, cell_id: str) -> CellRecord | None:
    """A cell of this run: measured by this sweeper, or kept from an earlier attempt."""
    if cell_id not in sweep.done:
        cells, _ = sweep.run.dir.read_cells()
        sweep.done.update((c.cell_id, analyse(c)) for c in cells if c.cell_id == cell_id)
    return sweep.done.get(cell_id)


__all__ = ["measure_cell", "measure_cells"]
