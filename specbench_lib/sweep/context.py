"""What every slice of a sweep needs (:class:`SweepContext`: the plan, the run, the launches,
the prompts, the time model) and a partial last round's size (:class:`Partial`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from ..core.readback import to_doc
from ..model.answerfile import PartialRound
from ..model.catalogue import C
from ..model.cellspec import CellSpec, ServerConfig
from ..model.plan import Plan
from ..model.records import CellFacts
from ..model.verdict import Reason, Verdict
from ..prompts.promptbook import PromptBook
from ..runs.run import Run
from ..servers.engines import Adapter, Launch
from .progress import Progress
from .serversweep import ServerSweep
from .timemodel import TimeModel

if TYPE_CHECKING:
    from .placement import Placer


@dataclass
class SweepContext:
    """What every slice of a sweep needs: the plan, the run, the launches, the prompts."""

    plan: Plan
    run: Run
    adapter: Adapter
    launches: dict[str, Launch]
    engine_version: str
    lines: Progress
    book: PromptBook
    retry_known_bad: bool
    began: float  # time.monotonic() when the sweep began (its budget's clock starts there)
    model: TimeModel  # the sweep's time model (the live estimate's and the budget's)
    keep: bool = False  # every config's server stays up across blocks (:mod:`.blocks`)
    live: dict[str, ServerSweep] = field(default_factory=dict)

    def sweeper(self, server: ServerConfig, number: int = 0,
                requests: int | None = None) -> ServerSweep:
        """``server``'s sweeper for round ``number``; ``requests``: a partial round's requests
        a cell (the first of the round's prompts, the same in every config), None: the plan's.
        With :attr:`keep`, a config has one sweeper, whose server outlives its blocks."""
        plan = self.plan if requests is None else replace(self.plan, params=(
            self.plan.params.model_copy(update={"requests_per_cell": requests})))
        if server.label in self.live:
            return self.live[server.label].resume(plan, number)
        found = ServerSweep(plan, server, self.launches[server.label], self.run, self.adapter,
                            self.lines, round_number=number, book=self.book, keep=self.keep)
        if self.keep:
            self.live[server.label] = found
        return found

    def record_block(self, number: int, configs: list[str]) -> None:
        """Write in the manifest the order block ``number`` measures its configs in
        (``blocks``: round, from 1, to configs; :mod:`.blocks`)."""
        blocks = dict(self.run.dir.manifest().get("blocks") or {})
        blocks[str(number + 1)] = configs
        self.run.dir.update_manifest(blocks=blocks)

    def close(self) -> None:
        """Stop every server kept up across blocks."""
        for sweeper in self.live.values():
            sweeper.close()

    def slice(self, server: ServerConfig, todo: list[CellSpec], number: int,
              placer: Placer | None, requests: int | None = None,
              gate: Callable[[CellSpec, bool], bool] | None = None) -> ServerSweep:
        """Measure ``todo`` (cells of round ``number``, ``requests`` a cell if not the plan's)
        on ``server``'s config, here or placed; a config listed under ``known_bad`` is skipped
        with the reason, never started; ``gate``: whether a cell (its server's start first:
        True) may start (the budget's, :mod:`.budget`)."""
        sweeper = self.sweeper(server, number, requests)
        sweeper.may_start, sweeper.cut = gate, False
        params = self.plan.params
        bad = None if self.retry_known_bad else next(
            (kb for kb in params.known_bad
             if kb.applies(server, engine_version=self.engine_version,
                           gpus=self.run.attempt["environment"]["gpus"])), None)
        if bad is not None:
            verdict = Verdict("skipped", (Reason(C.known_bad, bad.reason),))
            for cell in todo:
                sweeper.write(cell, CellFacts(decided=verdict))
        elif placer is None:
            sweeper.measure_all(todo)
        else:
            placer.add(sweeper, todo, number)
        return sweeper

    def skip(self, cells: list[CellSpec], reason_of: Any) -> None:
        """Write each of ``cells`` as skipped with ``reason_of(cell)`` (by design)."""
        by_config: dict[str, ServerSweep] = {}
        servers = {s.label: s for s in self.plan.servers}
        for cell in cells:
            if cell.config not in by_config:
                by_config[cell.config] = self.sweeper(servers[cell.config])
            by_config[cell.config].write(cell, CellFacts(
                decided=Verdict("skipped", (reason_of(cell),))))


Slices = list[tuple[ServerConfig, list[CellSpec]]]


@dataclass(frozen=True)
class Partial:
    """A partial last round: ``requests`` a cell (of the plan's ``of``) for ``configs``."""

    requests: int
    of: int
    configs: tuple[str, ...]

    def to_round(self, number: int) -> PartialRound:
        """As round ``number`` (from 0) of the answer holds it."""
        return PartialRound(round=number + 1, requests=self.requests, of=self.of,
                            configs=self.configs)

    def to_dict(self, number: int) -> dict[str, Any]:
        """As the manifest's looks hold it."""
        found: dict[str, Any] = to_doc(self.to_round(number))
        return found
