"""A cell's record as a server sweep writes it: what its requests produced (:class:`Measured`),
the rules' inputs of its server (:func:`judge_inputs`), and the record with its verdict decided
on it (:func:`analysed_record`)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Protocol

from ..analysis.analyse import analyse
from ..analysis.ruleset import thresholds_of
from ..core.store import utc_now
from ..model.cellspec import CellSpec, ServerConfig
from ..model.plan import Plan
from ..model.records import CellFacts, CellRecord, JudgeInputs, Provenance
from ..model.served import PromptRecord
from ..model.verdict import Verdict
from ..runs.run import RunWriter
from ..servers.engines import Adapter
from .requestshape import workload_of


@dataclass
class Measured:
    """What one cell's requests produced, before it becomes a record."""
    facts: CellFacts
    requests: tuple[Any, ...] = ()
    prompts: tuple[PromptRecord, ...] = ()
    target_rate: float | None = None
    started: str | None = None
    timing: dict[str, Any] | None = None


class Sweeper(Protocol):
    """What a record needs of its server's sweep (:class:`~.serversweep.ServerSweep`)."""
    plan: Plan
    server: ServerConfig
    run: RunWriter
    adapter: Adapter
    argv: tuple[str, ...]
    seeds_paired: bool


def judge_inputs(sweep: Sweeper, cell: CellSpec) -> JudgeInputs:
    """The rules' inputs of ``cell`` on ``sweep``'s server."""
    params = sweep.plan.params
    return JudgeInputs(
        planned=params.requests_for(cell), speculative=sweep.server.method != "auto",
        spec_stats="per_request" if sweep.adapter.spec_stats_per_request else "counters",
        prefix_cache=params.engine.prefix_cache, thresholds=thresholds_of(params),
        reasoning=workload_of(params, cell).thinking,
        seeds_paired=cell.temperature == 0 or sweep.seeds_paired)


def analysed_record(sweep: Sweeper, cell: CellSpec, facts: CellFacts, m: Measured) -> CellRecord:
    """The cell's record as it would be written, with its verdict decided on it."""
    return analyse(CellRecord(
        run_id=sweep.run.dir.run_id, spec=cell, fingerprint=sweep.run.fingerprints[cell.cell_id],
        server_label=sweep.server.label, server_argv=sweep.argv,
        verdict=Verdict("invalid"), judge=judge_inputs(sweep, cell), facts=facts,
        provenance=Provenance(**{**asdict(sweep.run.provenance()), "started": m.started,
                                 "ended": utc_now("milliseconds")}),
        requests=tuple(m.requests), prompts=m.prompts, target_rate=m.target_rate,
        timing=m.timing or {}))
