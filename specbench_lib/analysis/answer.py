"""The answer of a sweep, in words: one line per panel, its claim first and at most three
clauses after it, the rest one click away; said from ``answer.json`` as it holds it
(:class:`~specbench_lib.model.answerfile.AnswerDoc`, written and read there).

    code/ctx256/c1: ngram-b8 at most 2.1 % slower than the best (95 %; within the 5 % margin);
    could also be the best: ngram-b4; 1.12× [1.05, 1.19] vs auto (simultaneous 95 %); decided
    in 3 m 10 s

and the rest (the spread per prompt, the configs out, late crashes, the break-even) in a closed
``<details>`` under it on a page, on the next line in text (:class:`PanelWords`).

The answer is built by :mod:`.answerbuild`.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..core.display import Rendered, html_text
from ..core.durations import span
from ..core.tables import details
from ..model.answerfile import AnswerDoc, PanelAnswer, PanelKey, answer_or_error
from ..model.quantities import OUTPUT_RATE, QUANTITIES
from .best import reason_of, speedup_words, time_parts, verdict_parts
from .claim import ALPHA
from .drift import drift_words, run_drift
from .stepcost import split_words

SHOWN = 3  # the clauses a panel's line carries after its claim; the rest are one click away


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
