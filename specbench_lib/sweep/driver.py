"""The orchestration: for each server config, start it, run its cells, record them, stop it.

The run directory is :mod:`~specbench_lib.runs.run`' business, the checks before anything starts are
:mod:`~.preflight`'s, the verdict and metrics :mod:`~specbench_lib.analysis`'; this module only drives servers
and requests and turns what it saw into :class:`~specbench_lib.model.records.CellRecord` facts.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ..analysis.answerbuild import fixed_answer
from ..analysis.intervals import ok_groups, row_bounds, sequential_level
from ..analysis.metrics import GROUP, PANEL
from ..core.errors import ParamsError, StoreError
from ..model.answerfile import write_answer
from ..model.catalogue import C
from ..model.fingerprint import Components, cell_fingerprints
from ..model.params import SweepParams
from ..model.plan import Plan
from ..model.verdict import Reason
from ..prompts.promptbook import PromptBook
from ..report.outcome import Outcome, SweepResult
from ..runs.provenance import file_identity, measurement_code_hash
from ..runs.run import Run, check_run_id
from ..servers.engines import get_adapter, server_launch
from ..servers.process import PortLease, port_lease
from .adaptive import budgeted_rounds
from .blocks import block_order, keeps_servers
from .context import SweepContext
from .lifetimes import plan_lifetimes
from .preflight import launches_servers, require
from .preview import PlanPreview
from .progress import Progress
from .serverports import server_ports, with_free_port
from .speeds import speed_of
from .timemodel import TimeModel

if TYPE_CHECKING:
    from .placement import Placer


def run_sweep(plan: Plan, *, run_id: str | None = None, resume: str | None = None,
              retry_known_bad: bool = False, reuse: bool = False, dry_run: bool = False,
              outputs: Path | None = None, progress: bool = True) -> Outcome:
    """Run the cells of ``plan`` in a run directory and return its result.

    Args:
        plan: from :func:`specbench_lib.load_plan`.
        run_id: the new run directory's name; a new ``<UTC time>_<phase>_<id>`` when empty.
        resume: the id of an earlier run to continue: its ok cells whose fingerprint matches
            the plan are kept; missing, invalid, crashed and stale cells run again (the old
            files move to ``cells/history/``).
        retry_known_bad: run configs listed under ``known_bad`` instead of skipping them.
        reuse: copy ok cells with a matching fingerprint from earlier runs instead of measuring
            them again (the manifest's attempt lists which cell came from which run).
        dry_run: start nothing; return a :class:`PlanPreview` of the cells, the argv per config
            and the context guard's outcome.
        outputs: the outputs folder (default: ``outputs/`` of the project or $SPECBENCH_OUTPUTS).
        progress: print a line per server start and per finished cell (:mod:`~specbench_lib.sweep.progress`).
    """
    if dry_run:
        return PlanPreview(plan)
    if plan.stage is not None and plan.stage.missing:  # priced for a dry run, not runnable
        raise ParamsError(f"stage {plan.stage.name} carries the contenders of an earlier stage: "
                          f"{plan.stage.source}; or name its run with -p contenders_run <run id>",
                          key="stage", value=plan.stage.name)
    for key, value in (("run_id", run_id), ("resume", resume)):
        if value is not None:  # a name, never a path out of outputs/runs: refused before anything
            check_run_id(value, key=key)
    plan = with_free_port(plan) if launches_servers(plan) else plan  # the next, if it is taken
    engine = plan.params.engine
    ports = sorted(set(server_ports(plan, keeps_servers(plan, get_adapter(engine))).values()))
    with contextlib.ExitStack() as stack:  # the ports are this sweep's until it returns
        held = [stack.enter_context(port_lease(engine.host, p))
                for p in (ports if launches_servers(plan) else [])]
        return _sweep(plan, run_id=run_id, resume=resume, retry_known_bad=retry_known_bad,
                      reuse=reuse, outputs=outputs, progress=progress, held=held)


def _sweep(plan: Plan, *, run_id: str | None, resume: str | None, retry_known_bad: bool,
           reuse: bool, outputs: Path | None, progress: bool,
           held: Sequence[PortLease] = ()) -> SweepResult:
    ctx = _prepare(plan, run_id=run_id, resume=resume, retry_known_bad=retry_known_bad,
                   reuse=reuse, outputs=outputs, progress=progress)
    run = ctx.run
    for lease in held:  # the port's lock names this run to a second sweep it refuses
        lease.name(run.dir.run_id)
    started = time.monotonic()
    status = "failed"
    placer: Placer | None = None
    try:
        placer = _placer(plan, run, ctx.lines)  # None: each config here, one after another
        if plan.params.time_budget_s is None:
            _fixed_rounds(ctx, placer)
            ctx.close()  # the servers kept up across blocks: a crash at shutdown is known now
        else:  # rounds until every panel is decided or the budget is spent
            budgeted_rounds(ctx, placer)
        status = "complete"
    except KeyboardInterrupt:
        status = "interrupted"
        raise
    except StoreError as exc:  # a write failed (a full disk): what was written is safe
        status = "interrupted"
        print(f"run {run.dir.run_id}: interrupted: {exc}", file=sys.stderr, flush=True)
        raise
    finally:
        ctx.close()  # the servers kept up across blocks
        if placer is not None:
            placer.close()
        result = _close(run, status, time.monotonic() - started)
    if result is None:
        raise StoreError("the run's results could not be read back; its cell files are intact",
                         path=run.dir.path)
    return result


def _prepare(plan: Plan, *, run_id: str | None, resume: str | None, retry_known_bad: bool,
             reuse: bool, outputs: Path | None, progress: bool) -> SweepContext:
    """Preflight, launches, fingerprints and the run directory: what every slice needs."""
    began = time.monotonic()
    params = plan.params
    adapter = get_adapter(params.engine)
    ready = require(plan, outputs=outputs)
    identity = ready.identity or adapter.identity(ready.binary)
    model = file_identity(ready.model)
    local = params.placement.engine == "local"
    keep = keeps_servers(plan, adapter)
    ports = server_ports(plan, keep)
    launches = {s.label: server_launch(
        adapter, s, params.engine.model_copy(update={"port": ports.get(s.label, 0)}),
        parallel=max(params.concurrency), model=ready.model, binary=ready.binary, local=local)
        for s in plan.servers}
    components = Components(
        engine=identity.to_dict(), model=model["fingerprint"], code=measurement_code_hash(),
        request=adapter.generation_request([0], max_tokens=params.output_lengths[0])[1])
    # a kept server's own port reads as the plan's: the cell's fingerprint is the same
    argvs = {k: [str(params.engine.port) if k in ports and a == str(ports[k]) else a
                 for a in v.argv] for k, v in launches.items()}
    lifetimes = plan_lifetimes(plan, adapter, argvs)  # refused here when the corpus cannot feed it
    # servers of one lifetime in every config: where one config needs a fresh server per cell
    # (ngram-mod's pool), none is kept up across blocks (a long-lived server beside fresh ones
    # prefilled 5-6 % slower in two make runs: docs/drift.md)
    keep = keep and not any(i.mode == "restart" for i in lifetimes.isolations.values())
    fingerprints = cell_fingerprints(plan, argvs, components, ready.attached, isolation={
        label: i.mode for label, i in lifetimes.isolations.items()})
    for warning in ready.warnings:
        print(f"WARNING: {warning}", file=sys.stderr, flush=True)
    run = Run.start(plan, fingerprints, run_id=run_id, resume=resume, reuse=reuse,
                    outputs=outputs, engine=identity.to_dict(), model=model,
                    fingerprint_components=components.to_dict(), warnings=ready.warnings)
    kept = run.kept
    budget = params.time_budget_s
    print(f"run {run.dir.run_id}: {len(plan.cells) - len(kept)} cells to measure"
          + (f" at most, in rounds within a {budget:.0f} s budget" if budget else "")
          + f"{f', {len(kept)} kept' if kept else ''} → {run.dir.path}", flush=True)
    todo = [c for c in plan.cells if c.cell_id not in kept]
    timed = TimeModel(plan, speed_of(plan, outputs))  # the live estimate's and the budget's
    lines = Progress(len(plan.cells), done=len(kept), enabled=progress,
                     cells=None if budget else todo, budget_s=budget, model=timed)
    return SweepContext(plan, run, adapter, launches, identity.version, lines,
                        PromptBook(params, plan.cells, lifetimes), retry_known_bad, began,
                        keep=keep, model=timed)


def _fixed_rounds(ctx: SweepContext, placer: Placer | None) -> None:
    """The fixed plan: every config's cells, round by round of repeats, each round a block with
    its configs in an order drawn for it (:mod:`.blocks`; adaptive repeats may stop after a
    round, :func:`_enough_repeats`)."""
    plan, run, params = ctx.plan, ctx.run, ctx.plan.params
    rounds = params.repeats if params.repeat_order == "rounds" else 1
    for number in range(rounds):  # each round a block, its configs in an order of its own
        order = block_order(plan.servers, params, number)
        ctx.record_block(number, [s.label for s in order])
        for server in order:
            todo = [c for c in plan.cells_for(server) if c.cell_id not in run.kept
                    and (rounds == 1 or c.repeat == number)]
            if todo:
                ctx.slice(server, todo, number, placer)
        if placer is not None:  # the round's configs at once, on the GPUs Ray gives them
            placer.run_round()
        enough = _enough_repeats(run, params, number)
        if enough is not None:
            ctx.skip([c for s in plan.servers for c in plan.cells_for(s)
                      if c.repeat > number and c.cell_id not in run.kept], lambda _, why=enough: why)
            return


def _placer(plan: Plan, run: Run, lines: Progress) -> Placer | None:
    """The placement of a ``placement.engine: ray`` sweep (Ray is imported only then)."""
    if plan.params.placement.engine != "ray":
        return None
    from .placement import Placer

    return Placer(plan, run, lines)


def _enough_repeats(run: Run, params: SweepParams, number: int) -> Reason | None:
    """Adaptive repeats: after round ``number`` (from the second), a reason to stop when every
    speculative row's speedup interval is within ``repeat_until_half_width``; else None. Each
    round from the second is a look, judged at its alpha-spending level
    (:func:`~specbench_lib.analysis.intervals.sequential_level`), so stopping at a narrow look does not
    shrink the coverage the look promised."""
    target = params.repeat_until_half_width
    if target is None or number < 1 or number + 1 >= params.repeats:
        return None
    level = sequential_level(number, params.repeats - 1)
    cells = SweepResult(run.dir.path).cells
    groups = ok_groups(cells, GROUP)
    halves = [(b.speedup_hi - b.speedup_lo) / (b.speedup_hi + b.speedup_lo)
              for key, b in row_bounds(groups, PANEL, GROUP, level=level).items()
              if key[GROUP.index("method")] != "auto" and not key[GROUP.index("load")]]
    # (open-loop rows are compared by latency at equal load, not by a speedup: not judged here)
    if not halves or any(not h <= target for h in halves):  # NaN: no interval yet
        return None
    return Reason(C.enough_repeats, f"after {number + 1} of {params.repeats} rounds every "
                  f"speedup interval at the look's level {100 * level:.2f} % was within "
                  f"±{100 * max(halves):.1f} % (repeat_until_half_width {target:g}); this repeat "
                  "was not needed")


def _close(run: Run, status: str, elapsed_s: float) -> SweepResult | None:
    """Write the results and close the attempt; the lock is released whatever happens."""
    try:
        result = SweepResult(run.dir.path)
        counts = result.counts()
        if result.info.params.get("time_budget_s") is None:  # a fixed plan's answer.json too
            write_answer(run.dir.path, fixed_answer(result.cells, seconds=elapsed_s,
                                                    equivalence=result.equivalence,
                                                    quantity=result.quantity))
        try:
            result.write_results()
        finally:  # the attempt's status is recorded whatever writing the tables met
            run.finish(status, elapsed_s=elapsed_s, counts=counts)
        result.manifest = run.dir.manifest()
    except (OSError, StoreError) as exc:
        run.dir.release()
        print(f"run {run.dir.run_id}: could not write results or manifest ({exc}); the cell "
              f"files are intact", file=sys.stderr, flush=True)
        return None
    text = ", ".join(f"{k} {v}" for k, v in counts.items())
    print(f"run {run.dir.run_id}: {status}, {text} in {elapsed_s:.0f} s\nrun directory: "
          f"{run.dir.path}", flush=True)
    return result
