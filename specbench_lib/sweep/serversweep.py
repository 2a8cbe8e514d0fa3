"""One server config measured: start its server (or a fresh one per cell), warm it up, measure
its cells in their seeded order, record what it saw as :class:`~specbench_lib.model.records.CellRecord`
facts, stop. :mod:`~specbench_lib.sweep.driver` drives the configs of a plan through it, and so does
:mod:`~.placement` on a Ray worker: both hand it a :class:`RunWriter` (the run directory, or the
worker's event queue), the only thing it writes to."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, replace
from typing import Any

import httpx

from ..analysis.analyse import analyse
from ..analysis.validate import context_guard, kv_guard
from ..client.dispatch import dispatch_cell
from ..core.errors import EngineError, ServerError, StoreError
from ..core.store import redact, utc_now
from ..host.cpuset import CpuSplit, pinned
from ..host.load import HostSampler
from ..model.catalogue import C, host_side_only
from ..model.params import CellSpec, ServerConfig
from ..model.plan import Plan
from ..model.records import CellFacts, CellRecord, Reason, RequestRecord, Verdict
from ..model.served import PromptRecord, Remeasured
from ..prompts.conversations import plain_render
from ..prompts.history import History as _History
from ..prompts.promptbook import PromptBook
from ..prompts.workload import Prompt
from ..runs.manifest import ServerRecord
from ..runs.run import RunWriter
from ..servers.engines import Adapter, Launch
from ..servers.facts import DIED_EARLIER, after_cells, before_cells, dead_facts, failed_facts, measured_facts
from ..servers.process import Server, open_server
from .cellrecord import Measured, analysed_record
from .isolation import cell_order, isolation_of
from .liveserver import LiveServer, idle_death, warm_up
from .loadprofile import cell_rate
from .progress import Progress
from .requestshape import ServerText, workload_of
from .turns import second_turns


class ServerSweep:
    """One server config: start it, warm it up, measure its cells, stop it; with isolation
    ``restart``, a fresh server (and warmup) for every cell."""

    def __init__(self, plan: Plan, server: ServerConfig, launch: Launch, run: RunWriter,
                 adapter: Adapter, progress: Progress, *, round_number: int = 0,
                 book: PromptBook | None = None, keep: bool = False) -> None:
        self.plan, self.server, self.launch, self.run = plan, server, launch, run
        # a server of a later round of repeats has its own manifest entry and log
        self.key = server.label if round_number == 0 else f"{server.label}.r{round_number}"
        self.round_number = round_number
        self.adapter, self.progress = adapter, progress
        self.book = book or PromptBook(plan.params, plan.cells)
        # as the plan's lifetimes planned it (lifetimes.py), else the adapter's
        self.isolation = (self.book.lifetimes.isolations.get(server.label)
                          or isolation_of(adapter, server, launch.argv))
        self.argv = tuple(redact(launch.argv, extra=plan.params.redact))
        self.written: set[str] = set()
        self.done: dict[str, CellRecord] = {}  # this sweeper's cells, as analysed
        self.tokens: dict[str, list[int]] = {}
        self.timing: dict[str, Any] = {"cells": {}}  # seconds: where the sweep's wall time goes
        self.record = ServerRecord(self.isolation.to_dict())
        self.after: int | None = None  # the log offset after the last cell, while no crash
        # keep: the server stays up after a slice, for the next block (:meth:`resume`)
        self.keep = keep and self.isolation.mode != "restart"
        self.live: LiveServer | None = None
        self.slice_fixed = 0.0  # this slice's seconds of server start, warmup and stop
        self.seeds_paired: bool = True  # the started server draws by a request's seed (issue 38)
        self.kv_tokens: int | None = None
        self.may_start: Callable[[CellSpec, bool], bool] | None = None  # the budget's (budget.py)
        self.cut = False  # the budget refused a cell (or its server's start): the slice ends

    def resume(self, plan: Plan, round_number: int) -> ServerSweep:
        """The same config in a later block (``plan``: a partial round's requests a cell): its
        live server, if still up, measures the block's cells with no start."""
        self.plan, self.round_number, self.slice_fixed, self.cut = plan, round_number, 0.0, False
        return self

    def write(self, cell: CellSpec, facts: CellFacts, measured: Measured | None = None) -> Verdict:
        began = time.perf_counter()
        m = measured or Measured(facts)
        analysed = analysed_record(self, cell, facts, m)
        self.run.write_cell(analysed)
        self.done[cell.cell_id] = analysed
        self.timing["cells"][cell.cell_id] = {**(m.timing or {}),
                                              "store_s": round(time.perf_counter() - began, 4)}
        self.written.add(cell.cell_id)
        self.progress.cell(analysed)
        return analysed.verdict

    def measure_all(self, cells: list[CellSpec]) -> None:
        """Measure ``cells`` in the seeded order (:func:`cell_order`), on one server or, with
        isolation ``restart``, each on its own; after a crash (or a config-level failure) the
        rest of the config's cells keep that verdict without a server."""
        order = cell_order(cells, self.plan.params, f"{self.server.label}:{self.round_number}")
        self.record.order += [c.cell_id for c in order]
        try:
            if self.isolation.mode != "restart":
                self._serve(order)
                return
            dead: CellFacts | None = None
            for cell in order:
                if self.cut:
                    break
                if dead is not None:
                    self.write(cell, dead)
                    continue
                dead = self._serve([cell])
        except StoreError as exc:  # a write failed (a full disk): the run cannot go on
            self._unwritten(order, exc)
            raise

    def _unwritten(self, cells: list[CellSpec], exc: StoreError) -> None:
        """The config's cells not written when a write failed: ``crashed`` with the error,
        as far as the disk still takes them (a resume measures them again)."""
        facts = CellFacts(decided=Verdict("crashed", (Reason(C.write_failed, str(exc)[:300]),)))
        for cell in cells:
            if cell.cell_id not in self.written:
                try:
                    self.write(cell, facts)
                except StoreError:
                    return

    def _serve(self, cells: list[CellSpec]) -> CellFacts | None:
        """A server's life, or a slice of it: start and warm up (or, kept from an earlier
        block, go on with it), measure ``cells``, stop unless kept; the facts that end the
        config (a crash, a server that failed or answers what its adapter cannot read), None
        if none."""
        live = self.live if self.live is not None and self.live.proc.alive() else None
        if live is None and self.live is not None:  # it died while idle, between blocks
            death, said = idle_death(self.live, self.round_number + 1)  # as manifest blocks
            self.record.died_idle.append(death)
            self.run.store_server(self.key, self.record)
            self.progress.server(self.key, said)
            self.close()
        if live is None and not self._may(cells[0], True):
            return None
        dead: CellFacts | None = None
        try:
            live = live or self._start()
            with pinned(live.cpus.client):
                dead = self._cells(live, cells)
        except (ServerError, EngineError) as exc:
            if self.live is None:  # no process was made: nothing of this config's to judge
                raise
            proc = self.live.proc
            self.record.error = f"{type(exc).__name__}: {exc}"
            self.record.returncode = proc.returncode
            self.run.store_server(self.key, self.record)
            dead = failed_facts(proc, exc, self.live.base)
            for cell in cells:
                if cell.cell_id not in self.written:
                    self.write(cell, dead)
        finally:
            if dead is not None or not self.keep:
                self.close()
        return dead

    def _start(self) -> LiveServer:
        """Start the server and wait until it is ready, then its info and warmup
        (:meth:`_prepare`); it is :attr:`live` from the start, so a failure stops it."""
        params, server, launch = self.plan.params, self.server, self.launch
        log_path = self.run.dir.log_path(self.key)
        cpus = launch.cpus or CpuSplit(None, None, "an attached server: nothing pinned")
        proc = open_server(server.label, server.attach,
                           (launch.argv, launch.base_url, launch.health_path), log_path,
                           self.adapter.crash_signatures, params.redact, cpus=cpus.server,
                           env=params.engine.env)
        record = self.record
        record.cpus, record.controlled = cpus.to_dict(), server.attach is None
        if server.attach is None:
            record.argv = list(self.argv)
        else:
            record.url, record.unit = server.attach.url, server.attach.unit
        record.log, record.timing = str(log_path.relative_to(self.run.dir.path)), self.timing
        # this server's log starts here (a config's servers share one)
        self.live = live = LiveServer(proc, cpus, proc.log_size())
        began = time.perf_counter()
        self.progress.server(self.key, f"starting, waiting up to "
                             f"{params.engine.ready_timeout_s:.0f} s for it to be ready")
        proc.start()
        record.pid, record.starts = proc.pid, record.starts + 1
        record.ready_s = round(proc.wait_ready(params.engine.ready_timeout_s), 2)
        self.progress.server(self.key, f"ready in {record.ready_s} s")
        self.timing["start_s"] = round(time.perf_counter() - began, 4)
        self.slice_fixed += self.timing["start_s"]
        live.client = httpx.Client(base_url=launch.base_url, timeout=params.request_timeout_s,
                                   headers=proc.headers)
        with pinned(cpus.client):
            self._prepare(live)
        return live

    def close(self) -> None:
        """Stop the live server (if any), and say what it left behind: processes out of its
        group, a crash after its last cell."""
        live, self.live = self.live, None
        if live is None:
            return
        if live.client is not None:
            live.client.close()
        began = time.perf_counter()
        live.proc.stop()
        self.timing["stop_s"] = round(time.perf_counter() - began, 4)
        self.slice_fixed += self.timing["stop_s"]
        self._ended(live.proc)
        self._late_crash(live.proc)

    def _late_crash(self, proc: Server) -> None:
        """A crash logged after the last cell (idle, or at shutdown): the config's, in the
        manifest (``late_crash``), and said at once."""
        since, self.after = self.after, None
        late = None if since is None else after_cells(proc, since)
        if late is not None:
            if self.record.late_crash is None:  # the first server's (restart: one a cell)
                self.record.late_crash = late
            self.run.store_server(self.key, self.record)
            self.progress.server(self.key, f"crashed after its last cell: {late['line']}")

    def _ended(self, proc: Server) -> None:
        """Name in the manifest what had left the server's process group and had to be ended."""
        if proc.ended:
            self.record.ended_after_stop += [asdict(e) for e in proc.ended]
            self.run.store_server(self.key, self.record)

    def _prepare(self, live: LiveServer) -> None:
        """The started server: its info, the prompt book's check and the warmup; a crash
        before the first cell is kept as ``live.early``."""
        record, proc, client = self.record, live.proc, live.http
        ready_at = proc.log_size()
        info = self.adapter.server_info(client)
        live.adapter, live.context = self.adapter.for_server(info), info.context_per_request
        record.speculative = live.adapter.check_spec(self.server, self.argv, info,
                                                     proc.log_tail(4000))
        self.seeds_paired = live.adapter.pairs_seeds(info, self.argv)
        self.kv_tokens = info.kv_tokens  # the KV pool each cell's concurrency must fit in
        record.context_per_request, record.reported_version = info.context_per_request, info.version
        record.effective = redact(info.raw, extra=self.plan.params.redact)
        began = time.perf_counter()
        text = ServerText(live.adapter, client, self.tokens)
        self.book.check(text.tokenize, url=self.launch.base_url, render=text.render)
        record.warmup, live.warmup, live.history = warm_up(
            self.plan, proc, client, live.adapter, self.book.warmup(text.tokenize, text.render))
        self.timing["warmup_s"] = round(time.perf_counter() - began, 4)
        self.slice_fixed += self.timing["warmup_s"]
        self.run.store_server(self.key, record)
        live.early = before_cells(proc, live.base, ready_at, proc.log_size())
        self.progress.warmed(self.key, self.server.label, live.warmup)

    def _may(self, cell: CellSpec, start: bool) -> bool:  # ``start``: its server first
        self.cut = self.cut or (self.may_start is not None and not self.may_start(cell, start))
        return not self.cut

    def _cells(self, live: LiveServer, cells: list[CellSpec]) -> CellFacts | None:
        """``cells`` on the live server (see :meth:`_serve`)."""
        proc, client, adapter, base = live.proc, live.http, live.adapter, live.base
        assert adapter is not None
        if live.early is not None:
            for cell in cells:
                self.write(cell, live.early, Measured(live.early, live.warmup))
            return dead_facts(proc, Verdict("crashed", (DIED_EARLIER,)), base)
        dead: Verdict | None = None
        offset = proc.log_size()
        for cell in cells:
            if dead is not None:
                self.write(cell, dead_facts(proc, dead, base))
                continue
            if not self._may(cell, False):
                break
            if self.isolation.mode == "flush":  # the engine's own reset, before every cell
                adapter.reset(client)
                live.history = _History()
                live.history.add("flush", ())
            measured = self._attempts(cell, proc, client, adapter, live.context, live.warmup,
                                      offset, live.history)
            offset = proc.log_size()
            verdict = self.write(cell, measured.facts, measured)
            if verdict.status == "crashed":
                dead = Verdict("crashed", (DIED_EARLIER, *verdict.reasons))
        self.run.store_server(self.key, self.record)
        self.after = None if dead is not None else proc.log_size()
        return None if dead is None else dead_facts(proc, dead, base)

    def _attempts(self, cell: CellSpec, proc: Server, client: httpx.Client, adapter: Adapter,
                  context: int, warmup: tuple[RequestRecord, ...], since: int,
                  history: _History) -> Measured:
        """The cell measured; one that host-side rules alone made invalid (the client stalled,
        the host was busy: ``catalogue.host_side()``) is measured again at once with fresh
        prompts, ``retries`` times at most, its earlier attempts kept in its facts."""
        earlier: list[Remeasured] = []
        measured = self._measure(cell, proc, client, adapter, context, warmup, since, history)
        for attempt in range(self.plan.params.retries + 1):
            if attempt:
                text = ServerText(adapter, client, self.tokens)
                fresh = self.book.retry(cell, attempt, text.tokenize, text.render)
                if fresh is None:  # no fresh documents left: the last attempt's verdict stands
                    break
                measured = self._measure(cell, proc, client, adapter, context, warmup, since,
                                         history, fresh)
            since = proc.log_size()
            history.add(cell.cell_id if attempt == 0 else f"{cell.cell_id}#{attempt}",
                        measured.prompts)
            verdict = analysed_record(self, cell, measured.facts, measured).verdict
            if measured.facts.decided is not None or not host_side_only(verdict.codes):
                break
            if attempt == self.plan.params.retries:
                break
            earlier.append(Remeasured(attempt, tuple(str(r) for r in verdict.reasons),
                                      len(measured.requests) - len(warmup),
                                      tuple(p.sha for p in measured.prompts), measured.started))
            self.progress.note(f"{cell.cell_id}: invalid for the client host alone "
                               f"({', '.join(sorted(verdict.codes))}); measuring it again "
                               f"({attempt + 1} of {self.plan.params.retries})")
        if earlier:
            measured.facts = replace(measured.facts, remeasured=tuple(earlier))
        if self.kv_tokens and measured.facts.decided is None:
            per = cell.context + cell.output_tokens
            measured.facts = replace(measured.facts, kv_fit={
                "kv_tokens": self.kv_tokens, "needed": cell.concurrency * per, "per_request": per})
        return measured

    def _measure(self, cell: CellSpec, proc: Server, client: httpx.Client, adapter: Adapter,
                 context: int, warmup: tuple[RequestRecord, ...], since: int,
                 history: _History, fresh: list[Prompt] | None = None) -> Measured:
        params = self.plan.params
        refused = context_guard(prompt_tokens=cell.context, output_tokens=cell.output_tokens,
                                reserve=adapter.speculative_reserve(self.server), context=context
                                ) or kv_guard(kv_tokens=self.kv_tokens, concurrency=cell.concurrency,
                                              prompt_tokens=cell.context,
                                              output_tokens=cell.output_tokens)
        if refused is not None:  # nothing sent: its requests could not be what it names
            return Measured(CellFacts(decided=refused))
        rate = cell_rate(self.plan.params, cell, self._cell)
        if isinstance(rate, Verdict):  # a rate profile's point whose anchors are not ok
            return Measured(CellFacts(decided=rate))
        began, workload = time.perf_counter(), workload_of(params, cell)
        text = ServerText(adapter, client, self.tokens)
        prompts = (fresh or self.book.for_cell(cell, text.tokenize, text.render)
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
                         tuple(PromptRecord(p.sha, len(p.tokens), tuple(p.sources))
                               for p in prompts),
                         dispatch.target_rate, started, timing)

    def _cell(self, cell_id: str) -> CellRecord | None:
        """A cell of this run: measured by this sweeper, or kept from an earlier attempt."""
        if cell_id not in self.done:
            cells, _ = self.run.dir.read_cells()
            self.done.update((c.cell_id, analyse(c)) for c in cells if c.cell_id == cell_id)
        return self.done.get(cell_id)
