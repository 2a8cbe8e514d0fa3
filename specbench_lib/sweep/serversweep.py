"""One server config measured, its phases in order: start its server and warm it up
(:mod:`.serverstart`; or, kept from an earlier block, go on with it: :meth:`ServerSweep.resume`),
measure its cells in their seeded order (:mod:`.cellmeasure`), stop (:mod:`.serverstop`); with
isolation ``restart``, those phases once per cell. What it holds meanwhile, and how it records
what it saw as :class:`~specbench_lib.model.records.CellRecord` facts, is :mod:`.serverstate`'s.
:mod:`~specbench_lib.sweep.driver` drives the configs of a plan through it, and so does
:mod:`~.placement` on a Ray worker: both hand it a
:class:`~specbench_lib.runs.run.RunWriter` (the run directory, or the worker's event queue),
the only thing it writes to."""

from __future__ import annotations

from ..core.errors import EngineError, ServerError, StoreError
from ..host.cpuset import pinned
from ..model.catalogue import C
from ..model.cellspec import CellSpec
from ..model.plan import Plan
from ..model.records import CellFacts
from ..model.verdict import Reason, Verdict
from ..servers.facts import failed_facts
from .cellmeasure import measure_cells
from .isolation import cell_order
from .liveserver import LiveServer, idle_death
from .serverstart import start_server
from .serverstate import ServerState
from .serverstop import stop_server

__all__ = ["ServerSweep", "cell_order"]


class ServerSweep(ServerState):
    """One server config: start it, warm it up, measure its cells, stop it; with isolation
    ``restart``, a fresh server (and warmup) for every cell."""

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

    def _serve(self, cells: list[CellSpec]) -> CellFacts | None:
        """A server's life, or a slice of it: start and warm up (or, kept from an earlier
        block, go on with it), measure ``cells``, stop unless kept; the facts that end the
        config (a crash, a server that failed or answers what its adapter cannot read), None
        if none."""
        live = self._kept()
        if live is None and not self.may(cells[0], True):
            return None
        dead: CellFacts | None = None
        try:
            live = live or start_server(self)
            with pinned(live.cpus.client):
                dead = measure_cells(self, live, cells)
        except (ServerError, EngineError) as exc:
            if self.live is None:  # no process was made: nothing of this config's to judge
                raise
            dead = self._failed(cells, exc)
        finally:
            if dead is not None or not self.keep:
                self.close()
        return dead

    def resume(self, plan: Plan, round_number: int) -> ServerSweep:
        """The same config in a later block (``plan``: a partial round's requests a cell): its
        live server, if still up, measures the block's cells with no start."""
        self.plan, self.round_number, self.slice_fixed, self.cut = plan, round_number, 0.0, False
        return self

    def _kept(self) -> LiveServer | None:
        """The server kept up from an earlier block, if still alive; one that died while idle,
        between blocks, is said in the manifest (``died_idle``) and stopped."""
        if self.live is not None and self.live.proc.alive():
            return self.live
        if self.live is not None:
            death, said = idle_death(self.live, self.round_number + 1)  # as manifest blocks
            self.record.died_idle.append(death)
            self.store()
            self.progress.server(self.key, said)
            self.close()
        return None

    def close(self) -> None:
        """Stop the live server (if any), and say what it left behind (:mod:`.serverstop`)."""
        stop_server(self)

    def _failed(self, cells: list[CellSpec], exc: ServerError | EngineError) -> CellFacts:
        """The live server failed (or answers what its adapter cannot read): its error in the
        manifest, and the facts that end the config for every cell not yet written."""
        assert self.live is not None
        proc = self.live.proc
        self.record.error = f"{type(exc).__name__}: {exc}"
        self.record.returncode = proc.returncode
        self.store()
        dead = failed_facts(proc, exc, self.live.base)
        for cell in cells:
            if cell.cell_id not in self.written:
                self.write(cell, dead)
        return dead

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
