"""The rounds of a sweep: the fixed plan's (every repeat of every config) and a time budget's
(rounds across the configs still in contention until every panel is decided or the time is
spent, :mod:`~.rounds`), both through :class:`SweepContext`, which measures one config's slice."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..analysis.answer import answer_lines, build_answer, write_answer
from ..analysis.rounds import Budget, Contention
from ..core.durations import span
from ..model.catalogue import C
from ..model.params import CellSpec, ServerConfig
from ..model.plan import Plan
from ..model.records import CellFacts, Reason, Verdict
from ..prompts.promptbook import PromptBook
from ..report.outcome import SweepResult
from ..runs.run import Run
from ..servers.engines import Adapter, Launch
from .progress import Progress
from .serversweep import ServerSweep

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

    def sweeper(self, server: ServerConfig, number: int = 0) -> ServerSweep:
        return ServerSweep(self.plan, server, self.launches[server.label], self.run,
                           self.adapter, self.lines, round_number=number, book=self.book)

    def slice(self, server: ServerConfig, todo: list[CellSpec], number: int,
              placer: Placer | None) -> ServerSweep:
        """Measure ``todo`` (cells of round ``number``) on ``server``'s config, here or placed;
        a config listed under ``known_bad`` is skipped with the reason, never started."""
        sweeper = self.sweeper(server, number)
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


def budgeted_rounds(ctx: SweepContext, placer: Placer | None) -> dict[str, Any]:
    """Rounds until every panel is decided, the rounds run out or the budget is spent; writes
    ``answer.json`` (and the manifest's ``answer``) and returns the answer."""
    params = ctx.plan.params
    # a resumed run's budget counts what its earlier attempts spent
    budget = Budget(float(params.time_budget_s or 0), began=ctx.began - ctx.run.spent_s)
    contest = Contention(ctx.plan.cells, rounds=params.repeats, equivalence=params.equivalence,
                         spending=params.alpha_spending,
                         first_look=0 if params.requests_per_cell >= 2 else 1)
    number, stopped = 0, "rounds"
    while number < contest.rounds:
        slices = [(s, contest.wanted([c for c in ctx.plan.cells_for(s)
                                      if c.cell_id not in ctx.run.kept], number))
                  for s in ctx.plan.servers if contest.needed(s.label)]
        slices = [(s, todo) for s, todo in slices if todo]
        if number > 0 and slices and not budget.round_fits(
                {s.label: len(t) for s, t in slices}, parallel=placer is not None):
            stopped = "budget"
            break
        before = budget.elapsed
        whole = _round(ctx, placer, budget, slices, number)
        if number == 0:  # the looks it can afford: the rounds the corpus feeds, and about twice
            # the rounds of this one's cost that fit (eliminations make later rounds cheaper)
            took = max(budget.elapsed - before, 1e-3)
            contest.cap(min(ctx.book.rounds_fed,
                            max(2, math.ceil(2 * budget.seconds / took))))
        last = not whole or number + 1 >= contest.rounds or not _next_fits(
            ctx, contest, budget, number + 1, placer)
        contest.observe(SweepResult(ctx.run.dir.path).cells, number, budget.elapsed, last=last)
        ctx.lines.note(round_line(contest, number, budget))
        number += 1
        if contest.done:
            stopped = "decided"
            break
        if last:
            stopped = "budget" if number < contest.rounds else "rounds"
            break
    return _finish(ctx, contest, budget, number, stopped)


def _next_fits(ctx: SweepContext, contest: Contention, budget: Budget, number: int,
               placer: Placer | None) -> bool:
    """Whether round ``number`` at the configs still in (before this look) would fit the
    budget: if not, this look is the last and spends all the error left."""
    slices = {s.label: len(contest.wanted([c for c in ctx.plan.cells_for(s)
                                           if c.cell_id not in ctx.run.kept], number))
              for s in ctx.plan.servers if contest.needed(s.label)}
    slices = {k: v for k, v in slices.items() if v}  # none: kept from an earlier attempt
    return not slices or budget.would_fit(slices, parallel=placer is not None)


def _finish(ctx: SweepContext, contest: Contention, budget: Budget, rounds: int,
            stopped: str) -> dict[str, Any]:
    """Skip what was never measured, then write and print the answer."""
    written = {c.cell_id for c in SweepResult(ctx.run.dir.path).cells} | set(ctx.run.kept)
    spent = stopped == "budget"
    ctx.skip([c for c in ctx.plan.cells if c.cell_id not in written],
             lambda c: contest.reason(c, budget_spent=spent, rounds_fed=ctx.book.rounds_fed))
    cells = SweepResult(ctx.run.dir.path).cells
    answer = build_answer(contest, cells, seconds=budget.elapsed, budget_s=budget.seconds,
                          rounds=rounds, stopped=stopped)
    answer["measured"] = measured(cells, ctx.run, budget.elapsed)
    answer["rounds"] = max(rounds, answer["measured"]["rounds"])  # a resumed run's too
    write_answer(ctx.run.dir.path, answer)
    ctx.run.dir.update_manifest(answer={
        "file": "answer.json", "rounds": answer["rounds"], "stopped": stopped,
        "alphas": {_key(p["panel"]): p["alpha"] for p in answer["panels"]},
        "eliminated": {_key(p["panel"]): p["eliminated"] for p in answer["panels"]}})
    for line in answer_lines(answer):
        ctx.lines.note(line)
    return answer


def measured(cells: list[Any], run: Run, seconds: float) -> dict[str, Any]:
    """What the run measured, over all its attempts: the rounds with a measured cell, the cells,
    the wall seconds (the earlier attempts' included) and the attempts."""
    done = [c for c in cells if c.status != "skipped"]
    return {"rounds": len({c.spec.repeat for c in done}), "cells": len(done),
            "seconds": round(seconds, 1), "earlier_attempts_s": round(run.spent_s, 1),
            "attempts": run.number}


def _key(panel: dict[str, Any]) -> str:
    return "|".join(str(panel.get(k, 0.0)) for k in ("workload", "context", "output_tokens",
                                                     "concurrency", "load", "temperature"))


def _round(ctx: SweepContext, placer: Placer | None, budget: Budget,
           slices: list[tuple[ServerConfig, list[CellSpec]]], number: int) -> bool:
    """One round's slices; False when the budget stopped it before its last slice."""
    if placer is not None:
        began = time.monotonic()
        for server, todo in slices:
            ctx.slice(server, todo, number, placer)
        placer.run_round()
        took = time.monotonic() - began
        for server, todo in slices:
            budget.learn(server.label, took, len(todo), fixed=0.0)
        return True
    for server, todo in slices:
        if number > 0 and not budget.slice_fits(server.label, len(todo)):
            return False  # the first round always starts: a budget never measures nothing
        began = time.monotonic()
        sweeper = ctx.slice(server, todo, number, None)
        timing = sweeper.timing
        fixed = sum(float(timing.get(k) or 0) for k in ("start_s", "warmup_s", "stop_s"))
        budget.learn(server.label, time.monotonic() - began, len(todo), fixed=fixed)
    return True


def round_line(contest: Contention, number: int, budget: Budget) -> str:
    """After a round: per panel the configs still in (or its decision), and the time left."""
    parts = []
    for state in contest.panels.values():
        name = "/".join([str(state.panel[0]), f"ctx{state.panel[1]}", f"c{state.panel[3]}",
                         *([str(state.panel[4])] if state.panel[4] else []),
                         *([f"T{state.panel[5]:g}"] if state.panel[5:] and state.panel[5] else [])])
        if state.open:
            parts.append(f"{name}: in {', '.join(state.members)}")
        else:
            parts.append(f"{name}: {state.decision} {', '.join(state.members)}")
    left = budget.left
    clock = (f"{span(budget.elapsed)} of {span(budget.seconds)}, "
             + (f"{span(left)} left" if left >= 0 else f"{span(-left)} over"))
    return f"round {number + 1}/{contest.rounds} · {clock} · " + " · ".join(parts)
