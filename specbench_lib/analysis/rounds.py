"""A sweep with a time budget: rounds across the configs, elimination, and when to stop.

**Rounds.** With ``time_budget_s`` the plan's repeats are rounds (at most ``max_rounds``, fewer
when the corpus cannot feed more fresh prompts: :class:`~specbench_lib.prompts.promptbook.PromptBook`'s
``rounds_fed``). A round measures, in every panel still open, one cell of each config still in
contention and of the baseline (``auto``: the speedup needs it), each on the round's fresh prompts.

**Elimination.** After every round from the second (a look needs two blocks: one cannot tell
a config from the time it was measured at, :mod:`.units`), each open panel's claim
(:func:`~.claim.claim`: multiple comparisons with the best over every config of the panel
measured so far, paired by prompt, nested in rounds) is made at the look's error: the
Lan-DeMets spending function's share of α at the information τ = rounds seen / rounds planned,
and all that is left at the sweep's last look (:func:`~.claim.look_alpha`); by the union bound
every look's claim holds together with probability ≥ 1 − α, whenever the sweep stops. rounds is
fixed after the first round, before any look: the fewest of ``max_rounds``, the rounds the
corpus feeds, and twice the rounds of the first round's cost that fit in the budget. A config
out of the set is not measured in that panel (``eliminated``: the round; it comes back if a later
look puts it back); a config out of every panel's set is not started again (each slice starts
and stops its own server, so that is its server stopped). A config whose cell crashed (or was
skipped), whose cell is invalid for a config-level reason (``missing_endpoint``: every round
would be the same), or that has no ok request in the panel after a round, is ``out`` with its
reason after that round, not eliminated, never started again for it (:func:`out_reason`;
readers leave a config with no ok request out too: ``claim.panel_claims``). A look sees the
cells of the rounds up to its own, so a resume that replays the looks (``sweep/adaptive.py``'s
``Looks``, from the manifest's ``contest``) makes the same claims. An open-loop point (a fixed rate or a rate
profile's) is not contested: it is measured while its config is still in some panel.

**Decided.** A panel is decided when its set is the leader alone (``decided``), or at the
sweep's last look when its leader is shown ε-good with ε <= ``equivalence`` (``tie``: within
the margin; before the last look a tie goes on, as the budget may still shrink its set); its
configs are then no longer measured in it.

**Stopping.** The sweep stops when every panel is decided, the rounds run out, or the budget is
spent. The budget's scheduling is the sweep's (``sweep/budget.py``): no cell and no server start
that the time model says cannot end within the budget, so a round that cannot finish is cut
where it stands (even the first).

**The last look and a partial last round.** A look is the last (it spends all the error left)
when not even the smallest round it could leave would fit: one request a cell of the two
cheapest configs still needed in each open panel. That depends on the clock, not on the look's
data. Otherwise the next round is planned with the configs still in after the look: whole if
it fits, else a **partial last round**: the leading configs (:meth:`Contention.ranked`, as many
as fit, at least two) with fewer requests a cell (the first of the round's prompts, the same in
every config), whose look is the last.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..model.catalogue import C, host_side_only, level
from ..model.cellspec import CellSpec
from ..model.quantities import OUTPUT_RATE
from ..model.records import CellRecord
from ..model.verdict import Reason
from .claim import ALPHA, EQUIVALENCE, MIN_LOOK_ALPHA, Claim, claim, look_alpha
from .metrics import PANEL
from .units import units_of

Panel = tuple[Any, ...]


def out_reason(cell: CellRecord, mine: Sequence[CellRecord]) -> str | None:
    """Why ``cell``'s config leaves its panel after the cell's round (``mine``: its cells in
    the panel so far), or None: a crash or a skip not by design (its first reason); an invalid
    cell with a config-level reason (``missing_endpoint``: every round would be the same); or
    no ok request in any of its cells (an invalid cell otherwise is a unit missing, as is one
    judged invalid only for the client host's state: the config is not at fault)."""
    verdict = cell.verdict
    if verdict.ok or verdict.by_design or host_side_only(verdict.codes):
        return None
    first = str(verdict.reasons[0]) if verdict.reasons else cell.status
    if cell.status != "invalid":
        return first
    config = next((r for r in verdict.reasons if level(r.code) == "config"), None)
    if config is not None:
        return str(config)
    return None if units_of(mine).n else f"no ok request: {first}"


def panel_of(spec: CellSpec) -> Panel:
    """A cell's panel: its values of :data:`~.metrics.PANEL`."""
    row = spec.row()
    return tuple(row[k] for k in PANEL)


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
    claim: Claim | None = None  # the last look's
    alpha: float = ALPHA  # the error of the last look's claim
    spent: float = 0.0  # the error the looks have spent so far

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
                 equivalence: float = EQUIVALENCE, alpha: float = ALPHA,
                 spending: str = "obf", first_look: int = 1,
                 quantity: str = OUTPUT_RATE.name) -> None:
        """``first_look``: the round (from 0) of the first look: 1, as a look needs two blocks
        (rounds) to tell a config from the time it was measured at (:mod:`.units`);
        ``quantity``: what the claims are made on (the plan's ``claim_quantity``)."""
        self.alpha, self.equivalence, self.spending = alpha, equivalence, spending
        self.quantity = quantity
        self.first_look = first_look
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
    def done(self) -> bool:
        return not any(s.open for s in self.panels.values())

    def needed(self, config: str) -> bool:
        return any(s.needs(config) for s in self.panels.values())

    def ranked(self) -> list[str]:
        """The configs still needed, leaders first: by their best place in an open panel's
        set (fastest first after a look), then the baselines measured only for the speedup."""
        rank: dict[str, float] = {}
        for state in self.panels.values():
            for place, config in enumerate(state.members if state.open else ()):
                rank[config] = min(rank.get(config, math.inf), place)
            if state.baseline is not None and state.needs(state.baseline):
                rank.setdefault(state.baseline, math.inf)
        return sorted(rank, key=lambda c: rank[c])

    def wanted(self, cells: Iterable[CellSpec], number: int) -> list[CellSpec]:
        """The cells of round ``number`` among ``cells`` that the contest still needs (an
        open-loop point, not contested, while its config is still needed in some panel)."""
        return [c for c in cells if c.repeat == number and (
            self.panels[panel_of(c)].needs(c.config) if panel_of(c) in self.panels
            else self.needed(c.config))]

    def observe(self, cells: Sequence[CellRecord], number: int, elapsed_s: float, *,
                last: bool = False) -> None:
        """Round ``number`` (from 0) ended at ``elapsed_s``: mark what is out (:func:`out_reason`),
        then look (from round ``first_look`` on, or at a ``last`` look) at every open panel
        with the cells of the rounds up to ``number`` (a replay's later cells are not its)."""
        cells = [c for c in cells if c.spec.repeat <= number]
        for cell in cells:
            state = self.panels.get(panel_of(cell.spec))
            config = cell.spec.config
            if (state is None or cell.spec.repeat != number or not state.open
                    or config in state.out
                    or (config not in state.members and config != state.baseline)):
                continue
            why = out_reason(cell, [c for c in cells if c.spec.config == config
                                    and panel_of(c.spec) == state.panel])
            if why is not None:
                if config in state.members:
                    state.members.remove(config)
                state.out[config] = why
        if number < self.first_look and not last:
            return
        self.looked += 1
        for state in self.panels.values():
            if state.open:
                self._look(state, cells, number, elapsed_s, last=last)

    def _look(self, state: PanelState, cells: Sequence[CellRecord], number: int,
              elapsed_s: float, *, last: bool) -> None:
        mine = [c for c in cells if panel_of(c.spec) == state.panel]
        units = {c: units_of([x for x in mine if x.spec.config == c], self.quantity)
                 for c in state.configs if c not in state.out}
        if not any(u.n for u in units.values()):
            return
        alpha = look_alpha(min(number + 1, self.rounds), self.rounds, state.spent, last=last,
                           alpha=self.alpha, kind=self.spending)
        if alpha < MIN_LOOK_ALPHA:
            return
        state.spent += alpha
        found = claim(units, list(units), state.baseline, alpha=alpha,
                      equivalence=self.equivalence, quantity=self.quantity)
        for config in state.members:
            if config not in found.members:
                state.eliminated[config] = number + 1
        for config in found.members:
            state.eliminated.pop(config, None)
        state.members = list(found.members)
        state.leader, state.claim, state.alpha = found.leader, found, alpha
        # a tie ends the panel only at the last look: while the budget affords another round,
        # the contenders are measured on (their set may still shrink to the best alone)
        if found.decision == "decided" or (found.decided and last):
            state.decision, state.decided_round, state.decided_s = (
                found.decision, number + 1, elapsed_s)

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

    def alphas(self) -> dict[Panel, float]:
        """The error of each contested panel's last claim (what every reader states it at)."""
        return {p: s.alpha for p, s in self.panels.items() if s.claim is not None}
