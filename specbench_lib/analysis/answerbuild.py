"""The answer of a sweep built as ``answer.json`` holds it
(:class:`~specbench_lib.model.answerfile.AnswerDoc`): the run's figures and one entry per panel;
:mod:`.answer` says it in words.

Built from :class:`~.rounds.Contention`: each panel's claim as its last look made it
(:mod:`.claim`, at the error that look spent), the same claim every reader of the run states
(they make it again from the cells at the panel's ``alpha``). An undecided panel says about how
many more requests per config would decide it. A fixed plan's answer comes from the same
builder (:func:`fixed_answer`).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any

from ..model.answerfile import AnswerDoc, PanelAnswer, PanelKey, RunDrift
from ..model.quantities import OUTPUT_RATE
from ..model.records import CellRecord
from .claim import Claim, closest_call
from .drift import drift_words, panel_drift, run_drift
from .intervals import requests_n
from .metrics import PANEL
from .pairing import pairing_note
from .promptspread import panel_spread
from .rounds import Contention, PanelState, panel_of
from .stepcost import panel_split_doc
from .units import units_of


def build_answer(contest: Contention, cells: Sequence[CellRecord], *, seconds: float,
                 budget_s: float | None, rounds: int, stopped: str,
                 crashed: dict[str, str] | None = None) -> AnswerDoc:
    """The answer (see the module): the run's figures and one entry per panel (``crashed``:
    config → the crash line its server logged after its cells)."""
    panels = tuple(_panel(contest, state, cells, {c: line for c, line in (crashed or {}).items()
                                                  if c in state.configs})
                   for state in contest.panels.values())
    drift = run_drift(cells)
    return AnswerDoc(seconds=round(seconds, 1), budget_s=budget_s, rounds=rounds,
                     stopped=stopped, alpha=contest.alpha, looks=contest.looked,
                     spending=contest.spending, equivalence=contest.equivalence,
                     quantity=contest.quantity, panels=panels, drift=RunDrift(
                         cells=drift.cells, slowest=_num(drift.slowest),
                         fastest=_num(drift.fastest), trend=_num(drift.trend),
                         words=drift_words(drift)))


def fixed_answer(cells: Sequence[CellRecord], *, seconds: float, equivalence: float = 0.05,
                 quantity: str = OUTPUT_RATE.name) -> AnswerDoc:
    """A fixed plan's answer, from the same builder: every panel's claim on ``quantity`` at one
    look at α over all its cells, every repeat a block (``budget_s`` None, ``stopped``
    "complete"): each repeat is observed in turn for what is out (a config with no ok cell in
    the panel), and the last is the look."""
    blocks = 1 + max((c.spec.repeat for c in cells), default=0)
    contest = Contention([c.spec for c in cells], rounds=1, equivalence=equivalence,
                         quantity=quantity, first_look=blocks)
    # a config with an ok cell in its panel stays in it, as every reader has it (claim.py's
    # panel_claims): a failed repeat is units missing, not a reason to leave
    measured = {(panel_of(c.spec), c.spec.config) for c in cells if c.verdict.ok}
    seen = [c for c in cells if c.verdict.ok or (panel_of(c.spec), c.spec.config) not in measured]
    for number in range(blocks):
        contest.observe(seen, number, seconds, last=number == blocks - 1)
    return build_answer(contest, cells, seconds=seconds, budget_s=None, rounds=blocks,
                        stopped="complete")


def _panel(contest: Contention, state: PanelState, cells: Sequence[CellRecord],
           crashed: dict[str, str]) -> PanelAnswer:
    mine = [c for c in cells if panel_of(c.spec) == state.panel]
    found: Claim | None = state.claim
    entry: dict[str, Any] = {
        "panel": PanelKey(**dict(zip(PANEL, state.panel, strict=True))),
        "decided": bool(found and found.decided), "decision": state.decision,
        "best": found.leader if found else None,
        "confidence_set": tuple(found.members) if found else tuple(state.members),
        "epsilon": _num(found.epsilon) if found else None,
        # 12 significant digits: an early look's error is tiny (1e-5), and every reader makes
        # the claim again at it
        "alpha": float(f"{state.alpha:.12g}"), "alpha_spent": float(f"{state.spent:.12g}"),
        "speedup": None, "speedup_lo": None, "speedup_hi": None,
        "baseline": state.baseline,
        "requests": {c: requests_n([x for x in mine if x.spec.config == c and x.verdict.ok])
                     for c in state.configs},
        "eliminated": dict(state.eliminated), "out": dict(state.out),
        "decided_s": None if state.decided_s is None else round(state.decided_s, 1),
        "decided_round": state.decided_round,
        "blocks": found.blocks if found else None, "reason": found.reason if found else None,
        "crashed": crashed}
    if found is not None and found.leader is not None:
        ratio, reason = panel_drift(mine, found)
        entry.update(speedup=_num(found.speedup), speedup_lo=_num(found.speedup_lo),
                     speedup_hi=_num(found.speedup_hi), drift_prefill=_num(ratio),
                     drift=None if reason is None else str(reason), pairing=pairing_note(mine),
                     split=panel_split_doc(mine, state.baseline, alpha=state.alpha,
                                           configs=len(found.rows)) or None,
                     spread=panel_spread(mine, found, units=partial(units_of,
                                                                    of=contest.quantity)))
        if not found.decided:
            units = {c: units_of([x for x in mine if x.spec.config == c], contest.quantity)
                     for c in state.configs}
            entry["more_requests"], entry["closest_call"] = closest_call(units, found)
    return PanelAnswer(**entry)


def _num(value: float) -> float | None:
    """A figure as computed (None for NaN): rounded here and again when shown, a 1.3050 read
    as 1.31 where every other reader of the same claim said 1.30 (test_one_claim, CI)."""
    return None if value is None or value != value else float(value)
