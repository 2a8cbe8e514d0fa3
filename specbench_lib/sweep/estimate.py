"""How long a plan will take, before any server starts (the dry run, ``specbench doctor``), and
whether it can answer in its budget: the plan priced by the one time model (:mod:`.timemodel`),
each figure's speed named (calibrated here, or a stated default with its source).

**The judgement.** A time-budgeted plan answers at its first look, after two rounds (a look
needs two blocks, :mod:`~specbench_lib.analysis.units`): when two rounds at the speeds assumed do
not fit its budget, the plan cannot answer in it, and the doctor says so as a PROBLEM (its
check ``time`` fails, so it exits non-zero) with what it would take and the reductions that would
make it fit: fewer requests a cell (the most that fit), or one value fewer of an axis (the
costliest value of each axis, the axes that cost most first). A fixed plan has no budget to
judge: its time is said, not judged.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ..core.display import Rendered, html_table, html_text
from ..core.durations import span as _span
from ..model.cellspec import CellSpec
from ..model.plan import Plan
from .speeds import Speed, speed_of
from .timemodel import TimeModel, cell_seconds, prompt_lengths

LOOK_ROUNDS = 2  # a look needs two blocks: the first answer comes after two rounds
_AXES: dict[str, Callable[[CellSpec], Any]] = {
    "configs": lambda c: c.config, "workloads": lambda c: c.workload,
    "contexts": lambda c: c.context, "concurrency": lambda c: c.concurrency,
    "output_tokens": lambda c: c.output_tokens, "temperature": lambda c: c.temperature,
    "load points": lambda c: c.load or "closed loop",
}


def span(seconds: float) -> str:
    """``3 m 10 s`` under two hours, ``34.4 h`` from there."""
    return _span(seconds) if seconds < 7200 else f"{seconds / 3600:.1f} h"


def starts_of(plan: Plan, restarts: Mapping[str, bool]) -> dict[str, int]:
    """Server starts per config: one a round of repeats (each round on a fresh server), or one
    a cell where it is restarted before each."""
    rounds = plan.params.repeats if plan.params.repeat_order == "rounds" else 1
    return {s.label: len(plan.cells_for(s)) if restarts.get(s.label) else rounds
            for s in plan.servers}


class Estimate(Rendered):
    """Minutes by config × workload (and in all), with the prompt lengths and the speed used; for
    a budgeted plan, a round's time and whether its first answer fits (:attr:`problem`)."""

    def __init__(self, plan: Plan, speed: Speed, restarts: Mapping[str, bool] | None = None
                 ) -> None:
        self.plan, self.speed, self.lengths = plan, speed, prompt_lengths(plan)
        self.model = TimeModel(plan, speed, self.lengths)
        self.restarts = dict(restarts or {})
        starts = starts_of(plan, self.restarts)
        self.rows: dict[tuple[str, str], float] = {}  # the cells' seconds, server starts aside
        for cell in plan.cells:
            key = (cell.config, cell.workload)
            self.rows[key] = self.rows.get(key, 0.0) + self.model.slice_s(cell.config, [cell],
                                                                          starts=0)
        self.starts_s = sum(self.model.slice_s(label, [], starts=n) for label, n in starts.items())
        self.total_s = sum(self.model.slice_s(s.label, plan.cells_for(s), starts=starts[s.label])
                           for s in plan.servers)
        self.budget_s = plan.params.time_budget_s
        first = [c for c in plan.cells if c.repeat == 0]
        self.round_s = self.round_seconds(first)
        self.problem = self._judge(first) if self.budget_s is not None else None

    def round_seconds(self, cells: list[CellSpec], share: float = 1.0) -> float:
        """One round of ``cells`` (``share`` of their requests): each cell, and each config's
        server start (one a cell where it restarts before each); placed on Ray, the longest
        config's slice (as many GPUs as configs assumed)."""
        by_config: dict[str, list[CellSpec]] = {}
        for cell in cells:
            by_config.setdefault(cell.config, []).append(cell)
        slices = [self.model.slice_s(config, todo, share=share,  # its cells and its starts
                                     starts=len(todo) if self.restarts.get(config) else 1)
                  for config, todo in by_config.items()]
        if self.plan.params.placement.engine == "ray":  # placed: the slices run at once
            return max(slices, default=0.0)
        return sum(slices)

    def _judge(self, first: list[CellSpec]) -> str | None:
        """None when the first look fits the budget, else the PROBLEM's words (see the module)."""
        budget = float(self.budget_s or 0)
        looks = min(LOOK_ROUNDS, self.plan.params.repeats)  # one round planned: its look
        need = looks * self.round_s
        if need <= budget:
            return None
        return (f"the plan cannot answer in its {span(budget)} budget at the speeds assumed: its "
                f"first answer needs {looks} round{'s' if looks > 1 else ''}"
                f"{' (a look needs two blocks)' if looks > 1 else ''}, {span(need)} (a round "
                f"{span(self.round_s)}, {len(first)} cells); to fit: "
                + "; or ".join(self.reductions(first, budget / looks)))

    def reductions(self, first: list[CellSpec], per_round: float) -> list[str]:
        """What would make a round fit ``per_round`` seconds: the most requests a cell that fit,
        then each axis's costliest value dropped (the axes that save most first)."""
        params = self.plan.params
        found = []
        whole = params.requests_per_cell
        fitting = [r for r in range(whole - 1, 0, -1)
                   if self.round_seconds(first, r / whole) <= per_round]
        found.append(f"requests_per_cell {fitting[0]} (of {whole})" if fitting else
                     f"not by requests_per_cell alone (1 a cell: a round "
                     f"{span(self.round_seconds(first, 1 / whole))})")
        drops = []
        for axis, value_of in _AXES.items():
            values = {value_of(c) for c in first}
            if len(values) < 2:
                continue
            values.discard("closed loop")  # a rate profile's anchors: never dropped alone
            if not values:
                continue
            costs = {v: self.round_s - self.round_seconds([c for c in first if value_of(c) != v])
                     for v in values}
            value = max(costs, key=lambda v: costs[v])
            drops.append((costs[value], axis, value))
        for saved, axis, value in sorted(drops, key=lambda d: -d[0])[:4]:
            after = self.round_s - saved
            found.append(f"{axis} without {value} (a round {span(after)}, "
                         f"{100 * saved / self.round_s:.0f} % less"
                         f"{', fits' if after <= per_round else ''})")
        return found

    def minutes(self) -> dict[tuple[str, str], float]:
        return {k: v / 60 for k, v in self.rows.items()}

    def head(self) -> str:
        text = (f"time estimate: about {self.total_s / 60:.1f} min ({span(self.total_s)}; "
                f"{self.starts_s / 60:.1f} min of it server starts and warmups) at "
                f"{self.speed.kind} engine speeds")
        if self.budget_s is not None:
            text += (f"; the rounds: {self.plan.params.repeats} at most, a round about "
                     f"{span(self.round_s)}, the budget {span(self.budget_s)}: "
                     + (f"PROBLEM: {self.problem}" if self.problem else
                        "its first answer fits"))
        return text

    def text(self) -> str:
        lines = [self.head(), f"  engine speed {self.speed.words()}",
                 "  prompt tokens (mean): " + ", ".join(
                     f"{w}/ctx{c} {v:.0f}" for (w, c), v in self.lengths.items())]
        lines += [f"  {config} {workload}: {s / 60:.1f} min" for (config, workload), s
                  in self.rows.items()]
        return "\n".join(lines)

    def html(self) -> str:
        rows = [[config, workload, f"{s / 60:.1f}"] for (config, workload), s in self.rows.items()]
        head = self.text().splitlines()
        return (html_text(head[0], bold=True) + html_text(head[1].strip())
                + html_text(head[2].strip())
                + html_table(["config", "workload", "minutes"], rows))


def estimate(plan: Plan, restarts: Mapping[str, bool] | None = None,
             root: Path | None = None) -> Estimate:
    """The plan's time estimate at this machine's measured speed (else the stated default)."""
    return Estimate(plan, speed_of(plan, root), restarts)


def restarts_of(lifetimes: Any) -> dict[str, bool]:
    """Which configs are started again before each cell (isolation ``restart``)."""
    return {label: i.mode == "restart" for label, i in lifetimes.isolations.items()}


def measured_speed(plan: Plan, root: Path | None = None) -> Speed:
    """The speed the plan is priced at (:func:`.speeds.speed_of`)."""
    return speed_of(plan, root)


__all__ = ["Estimate", "Speed", "cell_seconds", "estimate", "measured_speed", "restarts_of",
           "span", "starts_of"]
