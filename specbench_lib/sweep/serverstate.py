"""What one server config's sweep holds while it measures (:class:`ServerState`): its plan,
server and launch, the run it writes to, its live server, its manifest entry, the cells it
wrote, and where the budget stopped it. Each phase of a server's life takes it:
:mod:`.serverstart` (start and warm), :mod:`.cellmeasure` (measure), :mod:`.serverstop` (stop);
:mod:`.serversweep` runs them in order."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from ..core.store import redact
from ..model.cellspec import CellSpec, ServerConfig
from ..model.plan import Plan
from ..model.records import CellFacts, CellRecord
from ..model.verdict import Verdict
from ..prompts.promptbook import PromptBook
from ..runs.manifest import ServerRecord
from ..runs.run import RunWriter
from ..servers.engines import Adapter, Launch
from .cellrecord import Measured, analysed_record
from .isolation import isolation_of
from .liveserver import LiveServer
from .progress import Progress


class ServerState:
    """One server config's sweep as it stands: what it measures, where it writes, what it wrote."""

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
        # keep: the server stays up after a slice, for the next block (``ServerSweep.resume``)
        self.keep = keep and self.isolation.mode != "restart"
        self.live: LiveServer | None = None
        self.slice_fixed = 0.0  # this slice's seconds of server start, warmup and stop
        self.seeds_paired: bool = True  # the started server draws by a request's seed (issue 38)
        self.kv_tokens: int | None = None
        self.may_start: Callable[[CellSpec, bool], bool] | None = None  # the budget's (budget.py)
        self.cut = False  # the budget refused a cell (or its server's start): the slice ends

    def write(self, cell: CellSpec, facts: CellFacts, measured: Measured | None = None) -> Verdict:
        """``cell``'s record, analysed, written to the run and said; its verdict."""
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

    def may(self, cell: CellSpec, start: bool) -> bool:
        """Whether the budget lets ``cell`` (``start``: its server first) start; the first
        refusal is the slice's :attr:`cut`."""
        self.cut = self.cut or (self.may_start is not None and not self.may_start(cell, start))
        return not self.cut

    def store(self) -> None:
        """The config's manifest entry, as it stands."""
        self.run.store_server(self.key, self.record)


__all__ = ["ServerState"]
