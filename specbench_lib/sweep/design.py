"""A phase's design priced before anything starts: each stage's plan (:mod:`~specbench_lib.model.stages`)
with its time estimate at every round it may take (:mod:`.estimate`: the worst case, nothing
eliminated), its own time budget, and the stages' sum against the phase's. A stage whose
contenders are not known yet is priced at its ``max_contenders`` configs.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core.display import Rendered, html_table, html_text
from ..core.errors import SpecbenchError
from ..model.plan import Plan, build_plan
from ..model.staging import apply_stage
from ..servers.engines import get_adapter
from .estimate import estimate, restarts_of, span
from .lifetimes import launch_argvs, plan_lifetimes


@dataclass(frozen=True)
class StageCost:
    """One stage's plan in figures: cells, configs, rounds at most, seconds at most, budget."""

    name: str
    question: str
    configs: int
    cells: int
    rounds: int
    seconds: float  # every round of every cell, server starts and warmups included
    budget_s: float
    note: str
    problem: str | None = None  # the time model's PROBLEM: its first answer cannot fit


class DesignEstimate(Rendered):
    """Every stage of ``plan``'s phase priced (see the module); empty for a phase without stages."""

    def __init__(self, plan: Plan) -> None:
        self.stages: list[StageCost] = []
        self.speed = ""
        phase = plan.phase_params
        if phase is None:
            self.budget_s = plan.params.time_budget_s
            return
        self.budget_s = phase.time_budget_s
        for stage in phase.stages:
            params, found = apply_stage(phase, stage.name, source=plan.source)
            staged = build_plan(params, source=plan.source)
            try:
                adapter = get_adapter(params.engine)
                restarts = restarts_of(plan_lifetimes(staged, adapter,
                                                      launch_argvs(staged, adapter)))
            except SpecbenchError:
                restarts = {}
            priced = estimate(staged, restarts)
            self.speed = priced.speed.kind  # calibrated (measured here) or the stated default
            self.stages.append(StageCost(
                stage.name, stage.question, len(staged.servers), len(staged.cells),
                params.repeats if params.time_budget_s is None else params.max_rounds,
                priced.total_s, float(params.time_budget_s or stage.time_budget_s), found.note,
                priced.problem))

    @property
    def total_s(self) -> float:
        """The stages' seconds at most, each within its budget (a stage stops at its budget)."""
        return sum(min(s.seconds, s.budget_s) for s in self.stages)

    def lines(self) -> list[str]:
        if not self.stages:
            return []
        head = (f"design: {len(self.stages)} stages, {span(sum(s.budget_s for s in self.stages))}"
                f" of stage budgets in the phase's {span(self.budget_s or 0)}; every round of "
                f"every stage would take {span(sum(s.seconds for s in self.stages))} at the "
                f"{self.speed} engine speeds above")
        found = [head]
        for number, s in enumerate(self.stages, 1):
            fits = ("fits" if s.seconds <= s.budget_s else "the budget stops it sooner") + (
                f"; PROBLEM: {s.problem}" if s.problem else "")
            found.append(f"  {number}. {s.name}: {s.configs} configs, {s.cells} cells in at most "
                         f"{s.rounds} rounds: {span(s.seconds)} at most, budget "
                         f"{span(s.budget_s)} ({fits})" + (f" [{s.note}]" if s.note else ""))
            found.append(f"     {s.question}")
        return found

    def text(self) -> str:
        return "\n".join(self.lines())

    def html(self) -> str:
        if not self.stages:
            return ""
        rows = [[s.name, s.question, s.configs, s.cells, s.rounds, span(s.seconds),
                 span(s.budget_s)] for s in self.stages]
        return (html_text(self.lines()[0], bold=True)
                + html_table(["stage", "question", "configs", "cells", "rounds",
                              "every round", "budget"], rows))


__all__ = ["DesignEstimate", "StageCost"]
