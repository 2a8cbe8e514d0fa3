"""The rounds of a sweep: the fixed plan's (every repeat of every config) and a time budget's
(rounds across the configs still in contention until every panel is decided or the time is
spent, :mod:`~specbench_lib.analysis.rounds`), both through :class:`SweepContext`, which measures one
config's slice."""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from ..analysis.answer import answer_lines, build_answer, write_answer
from ..analysis.rounds import Budget, Contention, panel_of
from ..core.durations import span
from ..core.readback import CONTEST, problem
from ..model.catalogue import C
from ..model.params import CellSpec, ServerConfig
from ..model.plan import Plan
from ..model.records import CellFacts, Reason, Verdict
from ..prompts.promptbook import PromptBook
from ..report.outcome import SweepResult
from ..runs.manifest import Manifest
from ..runs.run import Run
from ..servers.engines import Adapter, Launch
from .blocks import block_order
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
              placer: Placer | None, requests: int | None = None) -> ServerSweep:
        """Measure ``todo`` (cells of round ``number``, ``requests`` a cell if not the plan's)
        on ``server``'s config, here or placed; a config listed under ``known_bad`` is skipped
        with the reason, never started."""
        sweeper = self.sweeper(server, number, requests)
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

    def to_dict(self, number: int) -> dict[str, Any]:
        return {"round": number + 1, "requests": self.requests, "of": self.of,
                "configs": list(self.configs)}


def budgeted_rounds(ctx: SweepContext, placer: Placer | None) -> dict[str, Any]:
    """Rounds until every panel is decided, the rounds run out or the budget is spent (the
    last one partial when a whole one would not fit but a smaller one does); writes
    ``answer.json`` (and the manifest's ``answer``) and returns the answer."""
    params = ctx.plan.params
    # a resumed run's budget counts what its earlier attempts spent
    # (and, until this attempt has timed a slice, what its cells cost a cell)
    kept = len(ctx.run.kept)
    budget = Budget(float(params.time_budget_s or 0), began=ctx.began - ctx.run.spent_s,
                    prior_per_cell=ctx.run.spent_s / kept if kept else 0.0)
    contest = Contention(ctx.plan.cells, rounds=params.repeats, equivalence=params.equivalence,
                         spending=params.alpha_spending,  # the first look after two blocks
                         quantity=params.claim_quantity)
    number, stopped, partial, parallel = 0, "rounds", None, placer is not None
    took: list[float] = []  # each round's seconds, this attempt's
    log = Looks(_prior(ctx))  # an earlier attempt's looks: replayed while this one measures nothing
    while number < contest.rounds:
        slices = _slices(ctx, contest, number)
        if log.replays(number, bool(slices)):
            ended, partial = log.replay(ctx, contest, number)
            number += 1
            if ended:
                stopped = "decided" if contest.done else log.stopped(number, contest, partial)
                break
            continue
        log.prior = []  # this attempt measures: its own looks from here on
        if number > 0 and slices and not budget.would_fit(_sizes(slices), parallel=parallel):
            partial = _partial(ctx, contest, budget, slices, parallel)
            if partial is None:  # not even one request of the two leading configs fits: the
                # look before becomes the last, once more on its data with all the error left
                log.observe(ctx, contest, number - 1, budget.elapsed, last=True)
                stopped = "budget"
                break
            slices = [(s, [c for c in t if panel_of(c) in contest.panels])
                      for s, t in slices if s.label in partial.configs]
        before = budget.elapsed
        whole = _round(ctx, placer, budget, slices, number, partial)
        took.append(max(budget.elapsed - before, 1e-3))
        _afford(contest, ctx.book.rounds_fed, budget.seconds, took)
        last = (partial is not None or not whole or number + 1 >= contest.rounds
                or not _smallest_fits(contest, budget, params.requests_per_cell, parallel))
        log.observe(ctx, contest, number, budget.elapsed, last=last, partial=partial)
        ctx.lines.note(round_line(contest, number, budget, partial))
        number += 1
        if contest.done:
            stopped = "decided"
            break
        if last:
            stopped = "budget" if number < contest.rounds or partial is not None else "rounds"
            break
    return _finish(ctx, contest, budget, number, stopped, partial)


def _afford(contest: Contention, fed: int, seconds: float, took: list[float]) -> None:
    """The looks the sweep can afford, fixed before its first look (after its second round):
    the rounds the corpus feeds, and about twice the rounds of the cheaper of its first two
    rounds' cost that fit (eliminations make later rounds cheaper). The cheaper: a first round
    slowed by a busy host's re-measurements, or by costs paid once, capped a whole run at 6
    rounds where 9 fitted (`make run`, 2026-12-04)."""
    if len(took) == 1:
        contest.cap(fed)  # the corpus alone: round 1 is measured whatever its cost
    elif len(took) == 2:
        contest.cap(min(fed, max(2, math.ceil(2 * seconds / min(took)))))


def _slices(ctx: SweepContext, contest: Contention, number: int) -> Slices:
    """Round ``number``'s slices: each config's cells the contest still needs (not kept), the
    configs in the block's own order (:mod:`.blocks`)."""
    slices = [(s, contest.wanted([c for c in ctx.plan.cells_for(s)
                                  if c.cell_id not in ctx.run.kept], number))
              for s in block_order(ctx.plan.servers, ctx.plan.params, number)
              if contest.needed(s.label)]
    return [(s, todo) for s, todo in slices if todo]


def _sizes(slices: Slices, share: float = 1.0) -> dict[str, float]:
    return {s.label: len(todo) * share for s, todo in slices}


def _smallest_fits(contest: Contention, budget: Budget, per_cell: int, parallel: bool) -> bool:
    """Whether the smallest next round this look could leave would fit the budget: one
    request a cell of the two cheapest configs still needed in each open panel. If not, this
    look is the last and spends all the error left. Which configs stay depends on this look's
    data; this does not, so the error spent stays what the spending function allows
    (docs/uncertainty.md)."""
    sizes: dict[str, float] = {}
    for state in contest.panels.values():
        if state.open:
            needed = sorted((c for c in state.configs if state.needs(c)),
                            key=lambda c: budget.estimate(c, 1))
            for config in needed[:2]:
                sizes[config] = sizes.get(config, 0.0) + 1 / per_cell
    return not sizes or budget.would_fit(sizes, parallel=parallel)


def _partial(ctx: SweepContext, contest: Contention, budget: Budget, slices: Slices,
             parallel: bool) -> Partial | None:
    """The largest partial last round that fits: the configs still needed, leaders first
    (:meth:`~specbench_lib.analysis.rounds.Contention.ranked`), as many as fit at one request a cell or more
    (at least two), each with the most requests a cell that fit; None if none does."""
    full = ctx.plan.params.requests_per_cell
    contested = [(s, [c for c in t if panel_of(c) in contest.panels]) for s, t in slices]
    order = [s for s in contest.ranked() if any(x.label == s and t for x, t in contested)]
    for size in range(len(order), 1, -1):
        chosen = [(s, t) for s, t in contested if s.label in order[:size]]
        for requests in range(full - 1, 0, -1):
            if budget.would_fit(_sizes(chosen, requests / full), parallel=parallel):
                return Partial(requests, full, tuple(order[:size]))
    return None


def _finish(ctx: SweepContext, contest: Contention, budget: Budget, rounds: int,
            stopped: str, partial: Partial | None) -> dict[str, Any]:
    """Stop the servers kept up (a crash at shutdown is then known), skip what was never
    measured, then write and print the answer."""
    ctx.close()
    written = {c.cell_id for c in SweepResult(ctx.run.dir.path).cells} | set(ctx.run.kept)
    spent = stopped == "budget"
    ctx.skip([c for c in ctx.plan.cells if c.cell_id not in written],
             lambda c: contest.reason(c, budget_spent=spent, rounds_fed=ctx.book.rounds_fed))
    cells = SweepResult(ctx.run.dir.path).cells
    answer = build_answer(contest, cells, seconds=budget.elapsed, budget_s=budget.seconds,
                          rounds=rounds, stopped=stopped, crashed=_late_crashes(ctx.run))
    answer["partial"] = None if partial is None else partial.to_dict(rounds - 1)
    answer["measured"] = measured(cells, ctx.run, budget.elapsed)
    answer["rounds"] = max(rounds, answer["measured"]["rounds"])  # a resumed run's too
    ctx.run.dir.update_manifest(contest={**(ctx.run.dir.manifest().get("contest") or {}),
                                         "end": {"rounds": rounds, "stopped": stopped}})
    write_answer(ctx.run.dir.path, answer)
    ctx.run.dir.update_manifest(answer={
        "file": "answer.json", "rounds": answer["rounds"], "stopped": stopped,
        "alphas": {_key(p["panel"]): p["alpha"] for p in answer["panels"]},
        "eliminated": {_key(p["panel"]): p["eliminated"] for p in answer["panels"]}})
    for line in answer_lines(answer):
        ctx.lines.note(line)
    return answer


def _late_crashes(run: Run) -> dict[str, str]:
    """Each config whose server crashed after its cells (the manifest's ``late_crash``, at
    idle or shutdown, in any round): its first crash line."""
    found: dict[str, str] = {}
    for key, entry in Manifest.from_dict(run.dir.manifest()).servers.items():
        if entry.late_crash:
            found.setdefault(re.sub(r"\.r\d+$", "", key), entry.late_crash)
    return found


class Looks:
    """The looks of a budgeted sweep as they were taken (the manifest's ``contest``: each
    look's round, whether it was the last, the rounds planned then, its clock and a partial
    round's size; ``end``: the rounds and why it stopped), so that a resume replays them, not
    the clock: while an attempt measures nothing, its contest is the earlier one's, and it ends
    where the earlier one's last look ended it."""

    def __init__(self, prior: dict[str, Any]) -> None:
        self.prior: list[dict[str, Any]] = list(prior.get("looks") or [])
        self.end: dict[str, Any] = prior.get("end") or {}
        self.taken: list[dict[str, Any]] = []

    def observe(self, ctx: SweepContext, contest: Contention, number: int, elapsed_s: float, *,
                last: bool, partial: Partial | None = None) -> None:
        """``contest.observe`` on the run's cells, recorded in the manifest."""
        contest.observe(SweepResult(ctx.run.dir.path).cells, number, elapsed_s, last=last)
        self._record(ctx, {"round": number, "last": last, "rounds": contest.rounds,
                           "elapsed_s": round(elapsed_s, 3),
                           "partial": None if partial is None else partial.to_dict(number)})

    def replay(self, ctx: SweepContext, contest: Contention,
               number: int) -> tuple[bool, Partial | None]:
        """The earlier attempt's looks after round ``number``, on the same cells: whether the
        contest ended there, and its partial round."""
        cells, ended, partial = SweepResult(ctx.run.dir.path).cells, False, None
        while self.prior and self.prior[0]["round"] == number:
            look = self.prior.pop(0)
            contest.rounds = int(look["rounds"])
            contest.observe(cells, number, float(look["elapsed_s"]), last=bool(look["last"]))
            part = look.get("partial")
            partial = None if not part else Partial(int(part["requests"]), int(part["of"]),
                                                    tuple(part["configs"]))
            ended = ended or bool(look["last"])
            self._record(ctx, look)
        return ended or contest.done, partial

    def replays(self, number: int, unmeasured: bool) -> bool:
        """Whether round ``number``'s looks are the earlier attempt's: when it left nothing to
        measure, or when its look there was the last (its error was spent, so a resume that
        thinks time is left, its clock counted only to its last cell, measures no more)."""
        look = self.prior[0] if self.prior else None
        return bool(look and look["round"] == number and (not unmeasured or look["last"]))

    def stopped(self, number: int, contest: Contention, partial: Partial | None) -> str:
        """Why the replayed contest stopped: the earlier attempt's word, or as the loop says."""
        return str(self.end.get("stopped") or (
            "budget" if number < contest.rounds or partial is not None else "rounds"))

    def _record(self, ctx: SweepContext, look: dict[str, Any]) -> None:
        self.taken.append(look)
        ctx.run.dir.update_manifest(contest={"looks": self.taken, "end": None})


def _prior(ctx: SweepContext) -> dict[str, Any]:
    """The earlier attempts' looks (the manifest's ``contest``), none when it is not of its
    shape (then the contest is taken again, from the clock)."""
    found = ctx.run.dir.manifest().get("contest")
    return found if found is not None and problem(found, CONTEST) is None else {}


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


def _round(ctx: SweepContext, placer: Placer | None, budget: Budget, slices: Slices,
           number: int, partial: Partial | None = None) -> bool:
    """One round's slices (``partial``: fewer requests a cell); False when the budget stopped
    it before its last slice. Costs are learnt per whole cell (the plan's requests)."""
    requests = None if partial is None else partial.requests
    share = 1.0 if partial is None else partial.requests / partial.of
    ctx.record_block(number, [server.label for server, _ in slices])
    if placer is not None:
        began = time.monotonic()
        for server, todo in slices:
            ctx.slice(server, todo, number, placer, requests)
        placer.run_round()
        took = time.monotonic() - began
        for server, todo in slices:
            budget.learn(server.label, took, len(todo) * share, fixed=0.0)
        return True
    for server, todo in slices:
        if number > 0 and not budget.slice_fits(server.label, len(todo) * share):
            return False  # the first round always starts: a budget never measures nothing
        began = time.monotonic()
        sweeper = ctx.slice(server, todo, number, None, requests)
        budget.learn(server.label, time.monotonic() - began, len(todo) * share,
                     fixed=sweeper.slice_fixed)
    return True


def round_line(contest: Contention, number: int, budget: Budget,
               partial: Partial | None = None) -> str:
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
    part = (f" (partial: {partial.requests} of {partial.of} requests a cell)"
            if partial is not None else "")
    return f"round {number + 1}/{contest.rounds}{part} · {clock} · " + " · ".join(parts)
