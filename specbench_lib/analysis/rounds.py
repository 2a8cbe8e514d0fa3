"""A sweep with a time budget: rounds across the configs, elimination, and when to stop.

**Rounds.** With ``time_budget_s`` the plan's repeats are rounds (at most ``max_rounds``, fewer
when the corpus cannot feed more fresh prompts: :class:`~specbench_lib.prompts.promptbook.PromptBook`'s
``rounds_fed``). A round measures, in every panel still open, one cell of each config still in
contention and of the baseline (``auto``: the speedup needs it), each on the round's fresh prompts.

**Elimination.** After every round from the second, each open panel's confidence set for the
best (:func:`~.selection.select`: Holm over the comparisons with the leader, simultaneous over
the configs still in) is taken at the look's error α_look = α / looks (Bonferroni spending: by
the union bound the best is dropped at any look with probability at most α in all, whenever the
sweep stops). looks = rounds − 1, and rounds is fixed after the first round, before any look:
the fewest of ``max_rounds``, the rounds the corpus feeds, and twice the rounds of the first
round's cost that fit in the budget. The comparisons pool the rounds as strata
(:func:`pooled`): each round's blocks resampled (paired across configs by panel and round), the
rounds averaged, the units every round's blocks, so the rounds' shared drift cancels in the
ratios and a look has the requests' degrees of freedom, not the rounds'. A config that left the
set is out of that panel for good (``eliminated``: the round); a config out of every panel's set
is not started again (each slice starts and stops its own server, so that is its server
stopped). A config whose cell crashed (or was skipped) is ``out`` with its reason, not
eliminated. An open-loop point (a fixed rate or a rate profile's) is not contested: it is
measured while its config is still in some panel.

**Decided.** A panel is decided when its set holds one config, or its members tie within
``equivalence`` (:mod:`~specbench_lib.analysis.selection`); its configs are then no longer measured in it.

**Stopping and overshoot.** The sweep stops when every panel is decided, the rounds run out, or
the budget is spent. A round starts only when its predicted time fits what is left of the
budget, and a config's slice of a round (its server start-up, warmup and cells, as measured in
the round before) only while its predicted end is within the budget plus 10 %; the first round
always starts. So a run overshoots by at most one slice's misprediction, never by more than one
round, and server start-up (minutes for vLLM) is in every prediction.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..core.errors import ParamsError
from ..model.catalogue import C
from ..model.params import CellSpec
from ..model.records import CellRecord, Reason
from .intervals import independent_units, panel_seed, throughput_replicates
from .metrics import PANEL
from .selection import ALPHA, EQUIVALENCE, select

OVERSHOOT = 0.10  # a slice starts only while its predicted end is within the budget + 10 %
Panel = tuple[Any, ...]


def panel_of(spec: CellSpec) -> Panel:
    """A cell's panel: its values of :data:`~specbench_lib.analysis.metrics.PANEL`."""
    row = spec.row()
    return tuple(row[k] for k in PANEL)


def look_alpha(looks: int, alpha: float = ALPHA) -> float:
    """The error one look may spend: α / ``looks`` (Bonferroni over the looks planned)."""
    if looks < 1:
        raise ParamsError(f"{looks} looks: a sweep in rounds looks at least once", key="max_rounds",
                          value=looks + 1)
    return alpha / looks


@dataclass
class PanelState:
    """One panel's contest: its configs (plan order), those still in, and what left when."""

    panel: Panel
    configs: tuple[str, ...]
    baseline: str | None
    members: list[str]
    eliminated: dict[str, int] = field(default_factory=dict)  # config: the round it left after
    out: dict[str, str] = field(default_factory=dict)  # config: why it cannot be measured
    decision: str = "undecided"
    leader: str | None = None
    decided_round: int | None = None
    decided_s: float | None = None
    bounds: dict[str, tuple[float, float]] = field(default_factory=dict)

    @property
    def open(self) -> bool:
        return self.decision == "undecided"

    def needs(self, config: str) -> bool:
        """Whether ``config`` is measured in the panel's next round."""
        return self.open and (config in self.members
                              or (config == self.baseline and config not in self.out))


class Contention:
    """Every panel's confidence set for the best config, updated after each round."""

    def __init__(self, cells: Sequence[CellSpec], *, rounds: int,
                 equivalence: float = EQUIVALENCE, alpha: float = ALPHA) -> None:
        self.alpha, self.equivalence = alpha, equivalence
        self.rounds = rounds
        self.looked = 0
        self.panels: dict[Panel, PanelState] = {}
        for spec in cells:
            if spec.repeat != 0 or spec.load:  # an open-loop point compares latency: it follows
                continue
            state = self.panels.setdefault(panel_of(spec), PanelState(
                panel_of(spec), (), None, []))
            state.configs += (spec.config,)
            state.members.append(spec.config)
            if spec.method == "auto" and state.baseline is None:
                state.baseline = spec.config

    def cap(self, rounds: int) -> None:
        """Fewer rounds than planned (the corpus ran out): fewer looks, each given more error;
        only before the first look, so the error spent stays within α."""
        if self.looked == 0:
            self.rounds = min(self.rounds, rounds)

    @property
    def alpha_look(self) -> float:
        return look_alpha(max(1, self.rounds - 1), self.alpha)

    @property
    def done(self) -> bool:
        return not any(s.open for s in self.panels.values())

    def needed(self, config: str) -> bool:
        return any(s.needs(config) for s in self.panels.values())

    def wanted(self, cells: Iterable[CellSpec], number: int) -> list[CellSpec]:
        """The cells of round ``number`` among ``cells`` that the contest still needs (an
        open-loop point, not contested, while its config is still needed in some panel)."""
        return [c for c in cells if c.repeat == number and (
            self.panels[panel_of(c)].needs(c.config) if panel_of(c) in self.panels
            else self.needed(c.config))]

    def observe(self, cells: Sequence[CellRecord], number: int, elapsed_s: float) -> None:
        """Round ``number`` (from 0) ended at ``elapsed_s``: mark what crashed, then look (from
        the second round on) at every open panel."""
        for cell in cells:
            state = self.panels.get(panel_of(cell.spec))
            if (state is None or cell.spec.repeat != number or cell.verdict.ok
                    or cell.status == "invalid" or cell.verdict.by_design):
                continue  # an invalid cell is a unit missing, not a config out
            if cell.spec.config in state.members and state.open:
                state.members.remove(cell.spec.config)
                state.out[cell.spec.config] = str(cell.verdict.reasons[0]) if cell.verdict.reasons \
                    else cell.status
        if number < 1:
            return
        self.looked += 1
        for state in self.panels.values():
            if state.open:
                self._look(state, cells, number, elapsed_s)

    def _look(self, state: PanelState, cells: Sequence[CellRecord], number: int,
              elapsed_s: float) -> None:
        mine = [c for c in cells if panel_of(c.spec) == state.panel]
        pool = pooled(mine, state.members)
        if not pool.means:
            return
        leader = max(pool.means, key=lambda c: pool.means[c])
        chosen = select(state.members, pool.replicates, pool.units, leader,
                        equivalence=self.equivalence, alpha=self.alpha_look)
        for config in state.members:
            if config not in chosen.members:
                state.eliminated[config] = number + 1
        state.members = list(chosen.members)
        state.leader, state.bounds = chosen.leader, chosen.bounds
        if chosen.decision != "undecided" and all(c in pool.means for c in state.members):
            state.decision, state.decided_round, state.decided_s = (
                chosen.decision, number + 1, elapsed_s)

    def reason(self, cell: CellSpec, *, budget_spent: bool, rounds_fed: int) -> Reason:
        """Why a cell of the plan was never measured (a skipped, by-design verdict)."""
        state = self.panels.get(panel_of(cell))
        if state is None:  # an open-loop point: it followed its config's contests
            if cell.repeat >= rounds_fed or not budget_spent:
                return Reason(C.decided, f"the contests of {cell.config} ended before this round")
            return Reason(C.time_budget, "the time budget was spent before this round")
        if cell.config in state.out:
            return Reason(C.config_out, f"{cell.config} was out of this panel: {state.out[cell.config]}")
        if cell.config in state.eliminated:
            return Reason(C.eliminated, f"{cell.config} left the confidence set for the best of "
                          f"its panel after round {state.eliminated[cell.config]}")
        if not state.open:
            return Reason(C.decided, f"the panel was decided ({state.decision}) after round "
                          f"{state.decided_round}: this round was not needed")
        if cell.repeat >= rounds_fed:
            return Reason(C.corpus_exhausted, f"the corpus feeds fresh prompts for {rounds_fed} "
                          "rounds; this round would have resent text")
        if cell.repeat >= self.rounds:
            return Reason(C.time_budget, f"past the {self.rounds} rounds the budget affords (the "
                          "looks' error is spread over them)")
        if budget_spent:
            return Reason(C.time_budget, "the time budget was spent before this round")
        return Reason(C.decided, "the contest ended before this round")


@dataclass
class Pooled:
    """Configs' throughput over the rounds they all have ok: the mean of the rounds' output
    tok/s, its replicates (paired across the configs) and the independent units behind it."""

    rounds: tuple[int, ...]
    means: dict[str, float]
    replicates: dict[str, Any]
    units: dict[str, int]


def pooled(cells: Sequence[CellRecord], configs: Sequence[str]) -> Pooled:
    """The rounds as strata: over the rounds where every one of ``configs`` with an ok cell has
    one, each round's replicates (its blocks resampled, seeded by the panel and the round, so
    paired across configs) averaged round by round; the units are the blocks of every round
    (requests at concurrency 1). The drift between rounds is shared by a round's configs and
    cancels in their ratios, as for one repeat's speedup (:mod:`~specbench_lib.analysis.intervals`)."""
    import numpy as np

    ok: dict[str, dict[int, CellRecord]] = {}
    for cell in cells:
        if cell.verdict.ok and cell.spec.config in configs and (cell.metrics or {}).get(
                "output_tok_s"):
            ok.setdefault(cell.spec.config, {})[cell.spec.repeat] = cell
    if not ok:
        return Pooled((), {}, {}, {})
    common = sorted(set.intersection(*(set(v) for v in ok.values())))
    means, replicates, units = {}, {}, {}
    for config, by_round in ok.items():
        reps = [throughput_replicates([by_round[r]], panel_seed(by_round[r])) for r in common]
        if not common or any(r is None for r in reps):
            continue
        means[config] = statistics.fmean(float(by_round[r].metrics["output_tok_s"])
                                         for r in common)
        replicates[config] = np.mean(np.vstack(reps), axis=0)
        units[config] = sum(independent_units([by_round[r]]) for r in common)
    return Pooled(tuple(common), means, replicates, units)


class Budget:
    """The wall clock of a budgeted sweep and what each config's slice of a round costs."""

    def __init__(self, seconds: float, *, clock: Callable[[], float] = time.monotonic,
                 began: float | None = None) -> None:
        """``began``: when the sweep began on ``clock`` (preflight counts against the budget)."""
        self.seconds, self.clock = seconds, clock
        self.began = clock() if began is None else began
        self.costs: dict[str, tuple[float, float]] = {}  # config: (fixed s, s per cell)
        self.spent = False

    @property
    def elapsed(self) -> float:
        return self.clock() - self.began

    @property
    def left(self) -> float:
        return self.seconds - self.elapsed

    def learn(self, config: str, seconds: float, cells: int, fixed: float) -> None:
        """A slice of ``config`` took ``seconds`` for ``cells`` cells, ``fixed`` of them server
        start, warmup and stop."""
        fixed = min(max(0.0, fixed), seconds)
        self.costs[config] = (fixed, (seconds - fixed) / max(1, cells))

    def estimate(self, config: str, cells: int) -> float:
        """A slice's predicted seconds; a config not yet seen costs the mean of those seen."""
        known = self.costs.get(config)
        if known is None:
            if not self.costs:
                return 0.0
            fixed = statistics.fmean(f for f, _ in self.costs.values())
            per = statistics.fmean(p for _, p in self.costs.values())
            known = (fixed, per)
        return known[0] + known[1] * cells

    def round_fits(self, slices: dict[str, int], *, parallel: bool = False) -> bool:
        """Whether a round of these slices (config: cells) is predicted to end in the budget
        (``parallel``: placed slices run at once, the longest decides)."""
        costs = [self.estimate(c, n) for c, n in slices.items()]
        need = (max(costs) if parallel else sum(costs)) if costs else 0.0
        fits = self.elapsed + need <= self.seconds
        self.spent = self.spent or not fits
        return fits

    def slice_fits(self, config: str, cells: int) -> bool:
        """Whether one slice may start: the budget not spent, its predicted end within 10 %."""
        fits = (self.elapsed < self.seconds and self.elapsed + self.estimate(config, cells)
                <= self.seconds * (1 + OVERSHOOT))
        self.spent = self.spent or not fits
        return fits
