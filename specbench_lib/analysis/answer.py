"""The answer of a sweep, in words: one line per panel, its claim first and at most three
clauses after it, the rest one click away; built as ``answer.json`` holds it
(:class:`~specbench_lib.model.answerfile.AnswerDoc`, written and read there).

    code/ctx256/c1: ngram-b8 at most 2.1 % slower than the best (95 %; within the 5 % margin);
    could also be the best: ngram-b4; 1.12× [1.05, 1.19] vs auto (simultaneous 95 %); decided
    in 3 m 10 s

and the rest (the spread per prompt, the configs out, late crashes, the break-even) in a closed
``<details>`` under it on a page, on the next line in text (:class:`PanelWords`).

Built from :class:`~.rounds.Contention`: each panel's claim as its last look made it
(:mod:`.claim`, at the error that look spent), the same claim every reader of the run states
(they make it again from the cells at the panel's ``alpha``). An undecided panel says about how
many more requests per config would decide it.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from ..core.display import Rendered, html_text
from ..core.durations import span
from ..core.tables import details
from ..model.answerfile import (
    AnswerDoc,
    PanelAnswer,
    PanelKey,
    RunDrift,
    answer_or_error,
)
from ..model.quantities import OUTPUT_RATE, QUANTITIES
from ..model.records import CellRecord
from .best import reason_of, speedup_words, time_parts, verdict_parts
from .claim import ALPHA, Claim, closest_call
from .drift import drift_words, panel_drift, run_drift
from .intervals import requests_n
from .metrics import PANEL
from .pairing import pairing_note
from .promptspread import panel_spread
from .rounds import Contention, PanelState, panel_of
from .stepcost import panel_split_doc, split_words
from .units import units_of

SHOWN = 3  # the clauses a panel's line carries after its claim; the rest are one click away


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


def panel_name(panel: PanelKey, *, outputs: bool = False) -> str:
    """``code/ctx256/c1`` (with ``/o128`` when output length varies, and the load point)."""
    parts = [str(panel.workload), f"ctx{panel.context}"]
    if outputs:
        parts.append(f"o{panel.output_tokens}")
    parts.append(f"c{panel.concurrency}")
    if panel.load:
        parts.append(str(panel.load))
    if panel.temperature:  # sampled (greedy panels keep their old names)
        parts.append(f"T{panel.temperature:g}")
    if panel.turn != 1:  # a conversation's second turn
        parts.append(f"turn{panel.turn}")
    return "/".join(parts)


@dataclass(frozen=True)
class PanelWords:
    """One panel's answer in words: its name, its claim (with the word CRASHED where its best
    crashed its server), then its clauses, the weightiest first: the other configs that could
    be the best, the speedup, when it was decided (or what would decide it), what limits the
    claim (one block, drift, pairing), the spread per prompt, the configs out, the late
    crashes and the break-even. Its :meth:`line` carries the first :data:`SHOWN`; the
    :meth:`rest` is one click away on a page (a second line in text)."""

    name: str
    claim: str
    clauses: tuple[str, ...]

    def line(self) -> str:
        return f"{self.name}: " + "; ".join([self.claim, *self.clauses[:SHOWN]])

    def rest(self) -> tuple[str, ...]:
        return self.clauses[SHOWN:]


def panel_words(entry: PanelAnswer, *, equivalence: float | None = None,
                quantity: str | None = None, outputs: bool = False) -> PanelWords:
    """One panel's answer (see :class:`PanelWords`), in the words of the summary's statement;
    ``equivalence`` and ``quantity``: the answer's (None: an answer written before them)."""
    name = panel_name(entry.panel, outputs=outputs)
    gone = [f"{c} (round {r}{'; still measured as the baseline' if c == entry.baseline else ''})"
            for c, r in sorted(entry.eliminated.items(), key=lambda x: x[1])]
    gone += [f"{c} ({why})" for c, why in entry.out.items()]
    late = [f"{c} ({line})" for c, line in entry.crashed.items()]
    tail = [f"out: {', '.join(gone)}" if gone else None,
            f"crashed after its cells: {', '.join(late)}" if late else None]
    if entry.best is None:
        return PanelWords(name, "undecided: no config measured ok", tuple(filter(None, tail)))
    row = {**vars(entry), "confidence_set": ", ".join(entry.confidence_set), "alpha": ALPHA,
           "quantity": quantity or OUTPUT_RATE.name, "epsilon": nan_if_none(entry.epsilon),
           **{k: nan_if_none(getattr(entry, k)) for k in ("speedup", "speedup_lo", "speedup_hi")}}
    claim, could = verdict_parts(row, float(equivalence or 0.05))
    if entry.best in entry.crashed:  # never "best" without the word
        claim = f"{entry.best} CRASHED its server after its cells; {claim}"
    method = "auto" if entry.best == entry.baseline else "spec"
    clauses = [could, speedup_words(row, method, entry.baseline or "auto"), _when(entry),
               *time_parts(row), entry.spread["words"] if entry.spread else None, *tail,
               split_words(row).removeprefix(" · ") or None]
    return PanelWords(name, claim, tuple(c for c in clauses if c))


def _when(entry: PanelAnswer) -> str | None:
    """When the panel was decided, or about how many more requests would decide it (None where
    more of its one block would not)."""
    if entry.decided:
        return f"decided in {span(entry.decided_s or 0)}"
    if reason_of({"reason": entry.reason}):
        return None
    more, against = entry.more_requests, entry.closest_call
    return ((f"about {more} more requests per config would decide it" if more else
             "more requests would decide it")
            + (f" (the closest call: {entry.best} vs {against})" if more and against else ""))


def panel_line(entry: PanelAnswer, *, equivalence: float | None = None,
               quantity: str | None = None, outputs: bool = False) -> str:
    """One panel's answer in a line: its claim and at most :data:`SHOWN` clauses
    (:class:`PanelWords`)."""
    return panel_words(entry, equivalence=equivalence, quantity=quantity, outputs=outputs).line()


def nan_if_none(value: Any) -> float:
    return float("nan") if value is None else float(value)


def answer_panels(answer: AnswerDoc) -> list[PanelWords]:
    """Each panel's answer in words (:class:`PanelWords`), as :func:`answer_lines` says them."""
    outputs = len({p.panel.output_tokens for p in answer.panels}) > 1
    return [panel_words(p, equivalence=answer.equivalence, quantity=answer.quantity,
                        outputs=outputs) for p in answer.panels]


def answer_head(answer: AnswerDoc) -> str:
    """The answer's head line: the panels decided, the time, the rounds, and what holds for
    all of them (the quantity, a partial round, the machine's drift)."""
    on = answer.quantity or OUTPUT_RATE.name  # an answer before quantities: end to end
    panels = answer.panels
    decided = sum(p.decided for p in panels)
    budget = (f"of a {span(answer.budget_s)} budget" if answer.budget_s is not None
              else "(a fixed plan: one look)")
    if answer.stopped == "running":  # written after a look while the sweep goes on
        head = (f"answer so far (written at a look while the sweep ran): after {span(answer.seconds)} "
                f"{budget}, {answer.rounds} rounds: {decided}/{len(panels)} panels decided"
                + (f" ({', '.join(panel_name(p.panel) for p in panels if p.decided)})"
                   if decided else "") + f", {len(panels) - decided} open")
    else:
        head = (f"answer: {decided}/{len(panels)} panels decided in {span(answer.seconds)} "
                f"{budget}, {answer.rounds} rounds ({answer.stopped})")
    if on != OUTPUT_RATE.name:  # the end-to-end claim keeps its old words
        head += f"; the claims are on the {QUANTITIES[on].label}"
    part = answer.partial
    if part:  # the last round sent fewer requests a cell: the counts per config say how many
        head += (f"; round {part.round} partial: {part.requests} of {part.of} requests "
                 f"a cell, for {', '.join(part.configs)}")
    if answer.drift and answer.drift.words:  # an answer written before blocks has none
        head += f"; {answer.drift.words}"
    return head


def answer_lines(answer: AnswerDoc, *, more: bool = False) -> list[str]:
    """The answer's head line, what the budget cut and overran, and one line per panel;
    ``more``: each panel's other clauses on an indented line after it (text has no click)."""
    lines = [answer_head(answer), *_time_lines(answer)]
    for words in answer_panels(answer):
        lines.append(words.line())
        if more and words.rest():
            lines.append(f"    also: {'; '.join(words.rest())}")
    return lines


def _time_lines(answer: AnswerDoc) -> list[str]:
    """What the budget cut, its largest overrun, and what another hour would buy (an answer
    written before the budget was kept to the cell has none of them)."""
    lines = []
    if answer.cut:
        lines.append(f"cut: {answer.cut.words}")
    over = answer.overrun
    if over is not None and over.largest_s:
        lines.append(f"overrun: at most {over.largest_s:.1f} s past the budget"
                     + (f" (cell {over.cell})" if over.cell else "")
                     + f"; allowed {over.allowed_s:.1f} s")
    if answer.more_time:
        lines.append(answer.more_time.words)
    return lines


class Answer(Rendered):
    """A run's answer for a notebook: its lines (or why a run has none). A fixed-plan run's
    answer is its best-config statements (``statements``)."""

    def __init__(self, answer: AnswerDoc | None, *, measured: bool = True,
                 statements: Sequence[str] = (), counts: dict[str, int] | None = None,
                 damaged: str | None = None, drift: str | None = None) -> None:
        self.answer, self.measured = answer, measured
        self.statements, self.counts = list(statements), counts
        self.damaged = damaged  # answer.json could not be read: the error's one line
        self.drift = drift  # a fixed plan's: the machine's drift in words (drift.drift_words)

    def lines(self) -> list[str]:
        """The answer in text: each panel's line, its other clauses on the line after it."""
        if not self.measured:
            return ["a dry run measures nothing: no answer"]
        if self.damaged is not None:
            return [f"no answer: {self.damaged}", *self.statements]
        if self.answer is None and self.statements:
            cells = ", ".join(f"{k} {v}" for k, v in (self.counts or {}).items() if v)
            panels = f"{len(self.statements)} panel{'s' if len(self.statements) != 1 else ''}"
            return [f"answer: the best config of {panels} (fixed plan"
                    f"{f': {cells}' if cells else ''}; confidence sets simultaneous 95 %)"
                    + (f"; {self.drift}" if self.drift else ""), *self.statements]
        if self.answer is None:
            return ["no answer: a fixed-plan run with no ok panel; see the cells' verdicts"]
        return answer_lines(self.answer, more=True)

    def text(self) -> str:
        return "\n".join(self.lines())

    def html(self) -> str:
        """The head in bold, then an item a line; a panel's other clauses one click away (a
        closed ``<details>`` under its line)."""
        if self.answer is None or not self.measured or self.damaged is not None:
            head, *rest = self.lines()
            items = [html.escape(line) for line in rest]
        else:
            head = answer_head(self.answer)
            items = [html.escape(line) for line in _time_lines(self.answer)]
            items += [html.escape(w.line()) + (details(
                f"{len(w.rest())} more on {w.name}",
                "<ul>" + "".join(f"<li>{html.escape(c)}</li>" for c in w.rest()) + "</ul>")
                if w.rest() else "") for w in answer_panels(self.answer)]
        body = html_text(head, bold=True) + (
            f"<ul>{''.join(f'<li>{i}</li>' for i in items)}</ul>" if items else "")
        return f"<div class='sb-headline'>{body}</div>"


def answer_of(result: Any) -> Answer:
    """The answer of a :class:`~specbench_lib.report.outcome.SweepResult` (a dry run's preview has none): its
    ``answer.json``, or for a fixed-plan run its best-config statements."""
    run_dir = getattr(result, "run_dir", None)
    if run_dir is None:
        return Answer(None, measured=False)
    found, damaged = answer_or_error(run_dir)
    if found is not None and found.budget_s is not None:  # a fixed plan's: statements
        return Answer(found)
    best = result.best()
    statements = list(best["statement"]) if "statement" in best else []
    return Answer(None, statements=statements, counts=result.counts(), damaged=damaged,
                  drift=drift_words(run_drift(result.cells)))


def answers_html(runs: Sequence[Any]) -> str:
    """The answers of the time-budgeted runs among ``runs`` (each with a ``run_dir``), for the
    head of the report's page; "" when none has one."""
    parts = []
    for run in runs:
        if getattr(run, "run_dir", None) is None:
            continue
        found, damaged = answer_or_error(run.run_dir)
        if found is not None or damaged is not None:
            parts.append(html_text(f"run {run.run_dir.name}", bold=True)
                         + Answer(found, damaged=damaged).html())
    return "".join(parts)


def answers_json(runs: Sequence[Any]) -> dict[str, Any]:
    """Run id → answer (as its file holds it), for the runs among ``runs`` that have one."""
    found: dict[str, Any] = {}
    for run in runs:
        if getattr(run, "run_dir", None) is not None:
            answer, damaged = answer_or_error(run.run_dir)
            if answer is not None:
                found[run.run_dir.name] = answer.to_dict()
            elif damaged is not None:
                found[run.run_dir.name] = {"damaged": damaged}
    return found
