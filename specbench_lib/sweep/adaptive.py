"""A time budget's rounds: across the configs still in contention until every panel is decided
or the time is spent (:mod:`~specbench_lib.analysis.rounds`), each config's slice measured through
:class:`~.context.SweepContext`, every cell and server start let in by the budget
(:mod:`.budget`); ``answer.json`` after every look (``stopped``: running) and at the end."""

from __future__ import annotations

import math
import re
import time
from dataclasses import replace
from typing import TYPE_CHECKING

from ..analysis.answer import answer_lines
from ..analysis.answerbuild import build_answer
from ..analysis.rounds import Contention, panel_of
from ..core.durations import span
from ..model.answerfile import ANSWER_FILE, AnswerDoc, Cut, PanelKey, write_answer
from ..model.catalogue import C
from ..model.cellspec import CellSpec
from ..model.records import CellRecord
from ..model.verdict import Reason
from ..report.outcome import SweepResult
from ..runs.manifest import Manifest
from ..runs.run import Run
from .blocks import block_order
from .budget import Budget, cut_words, more_time
from .context import Partial, Slices, SweepContext
from .looks import Looks, measured, prior_looks

if TYPE_CHECKING:
    from .placement import Placer


def budgeted_rounds(ctx: SweepContext, placer: Placer | None) -> AnswerDoc:
    """Rounds until every panel is decided, the rounds run out or the budget is spent (the
    last one partial when a whole one would not fit but a smaller one does); writes
    ``answer.json`` (and the manifest's ``answer``) and returns the answer."""
    params = ctx.plan.params
    # a resumed run's budget counts what its earlier attempts spent
    budget = Budget(float(params.time_budget_s or 0), ctx.model, began=ctx.began - ctx.run.spent_s,
                    overrun_s=float(ctx.run.dir.manifest().get("overrun_s") or 0.0))
    ctx.lines.listeners.append(lambda record: _ended(ctx, budget, record))
    contest = Contention(ctx.plan.cells, rounds=params.repeats, equivalence=params.equivalence,
                         spending=params.alpha_spending,  # the first look after two blocks
                         quantity=params.claim_quantity)
    number, stopped, partial, parallel = 0, "rounds", None, placer is not None
    took: list[float] = []  # each round's seconds, this attempt's
    log = Looks(prior_looks(ctx))  # an earlier attempt's looks: replayed while this one measures nothing
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
        ctx.lines.note(round_plan(contest, number, budget, slices, partial))
        before = budget.elapsed
        whole = _round(ctx, placer, budget, slices, number, partial)
        took.append(max(budget.elapsed - before, 1e-3))
        _afford(contest, ctx.book.rounds_fed, budget.seconds, took)
        last = (partial is not None or not whole or number + 1 >= contest.rounds
                or not _smallest_fits(contest, budget, params.requests_per_cell, parallel))
        log.observe(ctx, contest, number, budget.elapsed, last=last, partial=partial)
        ctx.lines.note(round_line(contest, number, budget, partial))
        number += 1
        if not (contest.done or last):  # the answer so far, readable while the sweep runs
            _write(ctx, _answer(ctx, contest, budget, number, "running", partial))
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
            stopped: str, partial: Partial | None) -> AnswerDoc:
    """Stop the servers kept up (a crash at shutdown is then known), skip what was never
    measured (what the budget cut, said so), then write and print the answer."""
    ctx.close()
    written = {c.cell_id for c in SweepResult(ctx.run.dir.path).cells} | set(ctx.run.kept)
    spent = stopped == "budget"
    unmeasured = [c for c in ctx.plan.cells if c.cell_id not in written]
    why = {c.cell_id: _skip_reason(contest, budget, c, spent, ctx.book.rounds_fed)
           for c in unmeasured}
    cut = _cut(ctx, budget, unmeasured, why)
    ctx.skip(unmeasured, lambda c: why[c.cell_id])
    restarts = {k: i.mode == "restart" for k, i in ctx.book.lifetimes.isolations.items()}
    answer = replace(_answer(ctx, contest, budget, rounds, stopped, partial), cut=cut,
                     more_time=None if not spent or ctx.model is None else more_time(
                         ctx.model, [c for c in unmeasured if why[c.cell_id].code == C.time_budget],
                         restarts))
    ctx.run.dir.update_manifest(contest={**(ctx.run.dir.manifest().get("contest") or {}),
                                         "end": {"rounds": rounds, "stopped": stopped}})
    _write(ctx, answer)
    for line in answer_lines(answer, more=True):
        ctx.lines.note(line)
    return answer


def _answer(ctx: SweepContext, contest: Contention, budget: Budget, rounds: int, stopped: str,
            partial: Partial | None) -> AnswerDoc:
    """The answer as the contest stands after ``rounds`` rounds (``stopped``: why it ended, or
    ``running``: the answer so far)."""
    cells = SweepResult(ctx.run.dir.path).cells
    answer = build_answer(contest, cells, seconds=budget.elapsed, budget_s=budget.seconds,
                          rounds=rounds, stopped=stopped, crashed=_late_crashes(ctx.run))
    done = measured(cells, ctx.run, budget.elapsed)
    return replace(answer, partial=None if partial is None else partial.to_round(rounds - 1),
                   measured=done, rounds=max(rounds, done.rounds),  # a resumed run's too
                   overrun=budget.overrun_doc(),
                   time_model=None if ctx.model is None else ctx.model.words())


def _write(ctx: SweepContext, answer: AnswerDoc) -> None:
    write_answer(ctx.run.dir.path, answer)
    ctx.run.dir.update_manifest(answer={
        "file": ANSWER_FILE, "rounds": answer.rounds, "stopped": answer.stopped,
        "alphas": {_key(p.panel): p.alpha for p in answer.panels},
        "eliminated": {_key(p.panel): p.eliminated for p in answer.panels}})


def _skip_reason(contest: Contention, budget: Budget, cell: CellSpec, spent: bool,
                 fed: int) -> Reason:
    """Why ``cell`` was never measured: the contest's reason, or the cut of its round."""
    found = contest.reason(cell, budget_spent=spent, rounds_fed=fed)
    cut = budget.cut
    if cut is not None and found.code == C.time_budget and cell.repeat + 1 == cut["round"]:
        return Reason(C.time_budget, f"round {cut['round']} was cut by the budget at "
                      f"{cut['config']}: {cut['predicted_s']:.0f} s predicted, "
                      f"{max(0.0, cut['left_s']):.0f} s left")
    return found


def _cut(ctx: SweepContext, budget: Budget, unmeasured: list[CellSpec],
         why: dict[str, Reason]) -> Cut | None:
    """``answer.json``'s ``cut`` (:func:`.budget.cut_words`), None when no round was cut."""
    cut = budget.cut
    if cut is None:
        return None
    number = cut["round"] - 1
    block = (ctx.run.dir.manifest().get("blocks") or {}).get(str(cut["round"])) or []
    done = {c.spec.config for c in SweepResult(ctx.run.dir.path).cells
            if c.spec.repeat == number and not c.verdict.by_design}
    cells = sum(1 for c in unmeasured if c.repeat == number
                and why[c.cell_id].detail.startswith(f"round {cut['round']} was cut"))
    return cut_words(cut, [c for c in block if c in done], [c for c in block if c not in done],
                     cells)


def _ended(ctx: SweepContext, budget: Budget, record: CellRecord) -> None:
    """A cell ended: its overrun past the budget, kept in the manifest when the largest (a
    resume's budget counts it)."""
    before = budget.overrun["largest_s"]
    budget.cell_ended(record)
    if budget.overrun["largest_s"] > before:
        ctx.run.dir.update_manifest(overrun_s=budget.overrun["largest_s"])


def _late_crashes(run: Run) -> dict[str, str]:
    """Each config whose server crashed after its cells (the manifest's ``late_crash``, at
    idle or shutdown, in any round): its first crash line."""
    found: dict[str, str] = {}
    for key, entry in Manifest.from_dict(run.dir.manifest()).servers.items():
        if entry.late_crash:
            found.setdefault(re.sub(r"\.r\d+$", "", key), entry.late_crash)
    return found


def _key(panel: PanelKey) -> str:
    return "|".join(str(getattr(panel, k)) for k in ("workload", "context", "output_tokens",
                                                     "concurrency", "load", "temperature"))


def _round(ctx: SweepContext, placer: Placer | None, budget: Budget, slices: Slices,
           number: int, partial: Partial | None = None) -> bool:
    """One round's slices (``partial``: fewer requests a cell); False when the budget cut it
    (a cell or a server start it did not let in). Costs are learnt per whole cell."""
    requests = None if partial is None else partial.requests
    share = 1.0 if partial is None else partial.requests / partial.of
    ctx.record_block(number, [server.label for server, _ in slices])
    if placer is not None:  # placed slices run at once: the budget lets in the round, whole
        if not budget.round_may_start({s.label: t for s, t in slices}, share):
            return False
        began = time.monotonic()
        for server, todo in slices:
            ctx.slice(server, todo, number, placer, requests)
        placer.run_round()
        took = time.monotonic() - began
        for server, todo in slices:
            budget.learn(server.label, took, len(todo) * share, fixed=0.0)
        return True
    for server, todo in slices:  # every cell and server start let in by the budget
        began = time.monotonic()
        sweeper = ctx.slice(server, todo, number, None, requests, gate=lambda cell, start: (
            _beat(ctx) and budget.may_start(cell, start=start, share=share)))
        done = len([c for c in todo if c.cell_id in sweeper.written])
        if done:
            budget.learn(server.label, time.monotonic() - began, done * share,
                         fixed=sweeper.slice_fixed)
        if sweeper.cut:  # the round is cut where it stands (budget.py)
            return False
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


def _beat(ctx: SweepContext) -> bool:
    """The attempt is alive (a resume counts its time to here: ``Run.heartbeat``)."""
    ctx.run.heartbeat()
    return True


def round_plan(contest: Contention, number: int, budget: Budget, slices: Slices,
               partial: Partial | None) -> str:
    """Before a round: its cells and configs, what the time model says it takes, the time left."""
    share = 1.0 if partial is None else partial.requests / partial.of
    need = sum(budget.estimate(s.label, len(t) * share) for s, t in slices)
    model = f" ({'calibrated' if budget.model.calibrated else 'default speeds'})"
    return (f"round {number + 1}/{contest.rounds}: {sum(len(t) for _, t in slices)} cells of "
            f"{len(slices)} configs, about {span(need)} by the time model{model}; "
            f"{span(max(0.0, budget.left))} of the budget left")
