"""The answer of a time-budgeted sweep, first: ``answer.json`` and one line per panel.

    code/ctx256/c1: ngram-b8 at most 2.1 % slower than the best (95 %; within the 5 % margin);
    could also be the best: ngram-b4; 1.12× [1.05, 1.19] vs auto (simultaneous 95 %) ·
    decided in 3 m 10 s · out: draft-b4 (round 1), ngram-b32 (round 3)

Built from :class:`~.rounds.Contention`: each panel's claim as its last look made it
(:mod:`.claim`, at the error that look spent), the same claim every reader of the run states
(they make it again from the cells at the panel's ``alpha``). An undecided panel says about how
many more requests per config would decide it.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

from ..core.display import Rendered, html_text
from ..core.durations import span
from ..core.errors import StoreError
from ..core.readback import ANSWER, ANSWER_FIX, read_doc
from ..core.store import write_json_atomic
from ..model.quantities import OUTPUT_RATE, QUANTITIES
from ..model.records import CellRecord
from .best import speedup_words, time_words, verdict_words
from .claim import ALPHA, Claim, closest_call
from .drift import drift_words, panel_drift, run_drift
from .intervals import requests_n
from .metrics import PANEL
from .pairing import pairing_note
from .promptspread import panel_spread
from .rounds import Contention, PanelState, panel_of
from .stepcost import panel_split_doc
from .units import units_of

ANSWER_FILE = "answer.json"


def build_answer(contest: Contention, cells: Sequence[CellRecord], *, seconds: float,
                 budget_s: float | None, rounds: int, stopped: str,
                 crashed: dict[str, str] | None = None) -> dict[str, Any]:
    """The answer document (see the module): the run's figures and one entry per panel
    (``crashed``: config → the crash line its server logged after its cells)."""
    panels = [_panel(contest, state, cells) for state in contest.panels.values()]
    drift = run_drift(cells)
    for entry, state in zip(panels, contest.panels.values(), strict=True):
        entry["crashed"] = {c: line for c, line in (crashed or {}).items() if c in state.configs}
    return {"seconds": round(seconds, 1), "budget_s": budget_s, "rounds": rounds,
            "stopped": stopped, "alpha": contest.alpha, "looks": contest.looked,
            "spending": contest.spending, "equivalence": contest.equivalence,
            "quantity": contest.quantity,
            "panels": panels, "drift": {
                "cells": drift.cells, "slowest": _num(drift.slowest),
                "fastest": _num(drift.fastest), "trend": _num(drift.trend),
                "words": drift_words(drift)}}


def fixed_answer(cells: Sequence[CellRecord], *, seconds: float, equivalence: float = 0.05,
                 quantity: str = OUTPUT_RATE.name) -> dict[str, Any]:
    """A fixed plan's answer, from the same builder: every panel's claim on ``quantity`` at one
    look at α over all its cells (``budget_s`` None, ``stopped`` "complete")."""
    contest = Contention([c.spec for c in cells], rounds=1, equivalence=equivalence,
                         quantity=quantity)
    contest.observe(cells, 0, seconds, last=True)
    return build_answer(contest, cells, seconds=seconds, budget_s=None, rounds=1,
                        stopped="complete")


def _panel(contest: Contention, state: PanelState, cells: Sequence[CellRecord]) -> dict[str, Any]:
    mine = [c for c in cells if panel_of(c.spec) == state.panel]
    found: Claim | None = state.claim
    entry: dict[str, Any] = {
        "panel": dict(zip(PANEL, state.panel, strict=True)),
        "decided": bool(found and found.decided), "decision": state.decision,
        "best": found.leader if found else None,
        "confidence_set": list(found.members) if found else list(state.members),
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
        "decided_round": state.decided_round, "more_requests": None, "closest_call": None,
        "blocks": found.blocks if found else None, "drift": None, "drift_prefill": None}
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
    return entry


def _num(value: float) -> float | None:
    """A figure as computed (None for NaN): rounded here and again when shown, a 1.3050 read
    as 1.31 where every other reader of the same claim said 1.30 (test_one_claim, CI)."""
    return None if value is None or value != value else float(value)


def write_answer(run_dir: Path, answer: dict[str, Any]) -> Path:
    """``answer.json`` in the run directory (atomic)."""
    path = Path(run_dir) / ANSWER_FILE
    try:  # no NaN in the file: it is not JSON, and NaN != NaN makes a replayed answer unequal
        write_json_atomic(path, _no_nan(answer))
    except OSError as exc:
        raise StoreError(f"cannot write the answer ({exc.strerror or exc}); the cells are "
                         f"intact: free disk space, then resume this run", path=path) from exc
    return path


def _no_nan(value: Any) -> Any:
    """``value`` with every NaN float inside it as None."""
    if isinstance(value, float) and value != value:
        return None
    if isinstance(value, dict):
        return {k: _no_nan(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_no_nan(v) for v in value]
    return value


def read_answer(run_dir: Path | str) -> dict[str, Any] | None:
    """The run's answer, or None for a fixed-plan run (no ``answer.json``); a
    :class:`~specbench_lib.core.errors.StoreError` naming it and the fix when it is not of its shape."""
    path = Path(run_dir) / ANSWER_FILE
    return read_doc(path, ANSWER, name="answer", fix=ANSWER_FIX) if path.is_file() else None


def answer_or_error(run_dir: Path | str) -> tuple[dict[str, Any] | None, str | None]:
    """:func:`read_answer`, its error as one line instead (the rest of a report goes on)."""
    try:
        return read_answer(run_dir), None
    except StoreError as exc:
        return None, str(exc)


def panel_name(panel: dict[str, Any], *, outputs: bool = False) -> str:
    """``code/ctx256/c1`` (with ``/o128`` when output length varies, and the load point)."""
    parts = [str(panel["workload"]), f"ctx{panel['context']}"]
    if outputs:
        parts.append(f"o{panel['output_tokens']}")
    parts.append(f"c{panel['concurrency']}")
    if panel.get("load"):
        parts.append(str(panel["load"]))
    if panel.get("temperature"):  # sampled (greedy panels keep their old names)
        parts.append(f"T{panel['temperature']:g}")
    if panel.get("turn", 1) != 1:  # a conversation's second turn
        parts.append(f"turn{panel['turn']}")
    return "/".join(parts)


def panel_line(entry: dict[str, Any], *, outputs: bool = False) -> str:
    """One panel's answer in a line (see the module): the same words as the summary's."""
    name = panel_name(entry["panel"], outputs=outputs)
    if entry["best"] is None:
        head = "undecided: no config measured ok"
    else:
        row = {**entry, "confidence_set": ", ".join(entry["confidence_set"]),
               "alpha": ALPHA, "epsilon": nan_if_none(entry.get("epsilon")),
               **{k: nan_if_none(entry[k]) for k in ("speedup", "speedup_lo", "speedup_hi")}}
        method = "auto" if entry["best"] == entry["baseline"] else "spec"
        head = (f"{verdict_words(row, float(entry.get('equivalence') or 0.05))}; "
                f"{speedup_words(row, method, entry['baseline'] or 'auto')}")
        head += f"; {entry['spread']['words']}" if entry.get("spread") else ""
        if entry["best"] in entry.get("crashed", {}):  # never "best" without the word
            head = f"{entry['best']} CRASHED its server after its cells; {head}"
        if entry["decided"]:
            head += f" · decided in {span(entry['decided_s'] or 0)}"
        else:
            more, against = entry.get("more_requests"), entry.get("closest_call")
            head += (f" · about {more} more requests per config would decide it" if more else
                     " · more requests would decide it")
            head += f" (the closest call: {entry['best']} vs {against})" if more and against else ""
    gone = [f"{c} (round {r}{'; still measured as the baseline' if c == entry['baseline'] else ''})"
            for c, r in sorted(entry["eliminated"].items(), key=lambda x: x[1])]
    gone += [f"{c} ({why})" for c, why in entry.get("out", {}).items()]
    crashed = [f"{c} ({line})" for c, line in entry.get("crashed", {}).items()]
    return (f"{name}: {head}" + (f" · out: {', '.join(gone)}" if gone else "")
            + (f" · crashed after its cells: {', '.join(crashed)}" if crashed else "")
            + time_words(entry))


def nan_if_none(value: Any) -> float:
    return float("nan") if value is None else float(value)


def answer_lines(answer: dict[str, Any]) -> list[str]:
    """The answer's head line and one line per panel."""
    on = answer.get("quantity") or OUTPUT_RATE.name  # an answer before quantities: end to end
    panels = [{**p, "equivalence": answer.get("equivalence"), "quantity": on}
              for p in answer["panels"]]
    outputs = len({p["panel"]["output_tokens"] for p in panels}) > 1
    decided = sum(p["decided"] for p in panels)
    budget = (f"of a {span(answer['budget_s'])} budget" if answer["budget_s"] is not None
              else "(a fixed plan: one look)")
    if answer["stopped"] == "running":  # written after a look while the sweep goes on
        head = (f"answer so far (written at a look while the sweep ran): after {span(answer['seconds'])} "
                f"{budget}, {answer['rounds']} rounds: {decided}/{len(panels)} panels decided"
                + (f" ({', '.join(panel_name(p['panel']) for p in panels if p['decided'])})"
                   if decided else "") + f", {len(panels) - decided} open")
    else:
        head = (f"answer: {decided}/{len(panels)} panels decided in {span(answer['seconds'])} "
                f"{budget}, {answer['rounds']} rounds ({answer['stopped']})")
    if on != OUTPUT_RATE.name:  # the end-to-end claim keeps its old words
        head += f"; the claims are on the {QUANTITIES[on].label}"
    part = answer.get("partial")
    if part:  # the last round sent fewer requests a cell: the counts per config say how many
        head += (f"; round {part['round']} partial: {part['requests']} of {part['of']} requests "
                 f"a cell, for {', '.join(part['configs'])}")
    drift = answer.get("drift")
    if drift and drift.get("words"):  # an answer written before blocks has none
        head += f"; {drift['words']}"
    return [head, *_time_lines(answer), *(panel_line(p, outputs=outputs) for p in panels)]


def _time_lines(answer: dict[str, Any]) -> list[str]:
    """What the budget cut, its largest overrun, and what another hour would buy (an answer
    written before the budget was kept to the cell has none of them)."""
    lines = []
    if answer.get("cut"):
        lines.append(f"cut: {answer['cut']['words']}")
    over = answer.get("overrun") or {}
    if over.get("largest_s"):
        lines.append(f"overrun: at most {over['largest_s']:.1f} s past the budget"
                     + (f" (cell {over['cell']})" if over.get("cell") else "")
                     + f"; allowed {over.get('allowed_s', 0):.1f} s")
    if answer.get("more_time"):
        lines.append(answer["more_time"]["words"])
    return lines


class Answer(Rendered):
    """A run's answer for a notebook: its lines (or why a run has none). A fixed-plan run has
    no ``answer.json``: its answer is the best-config statements (``statements``)."""

    def __init__(self, answer: dict[str, Any] | None, *, measured: bool = True,
                 statements: Sequence[str] = (), counts: dict[str, int] | None = None,
                 damaged: str | None = None, drift: str | None = None) -> None:
        self.answer, self.measured = answer, measured
        self.statements, self.counts = list(statements), counts
        self.damaged = damaged  # answer.json could not be read: the error's one line
        self.drift = drift  # a fixed plan's: the machine's drift in words (drift.drift_words)

    def lines(self) -> list[str]:
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
        return answer_lines(self.answer)

    def text(self) -> str:
        return "\n".join(self.lines())

    def html(self) -> str:
        head, *rest = self.lines()
        items = "".join(f"<li>{html.escape(line)}</li>" for line in rest)
        body = html_text(head, bold=True) + (f"<ul>{items}</ul>" if items else "")
        return f"<div class='sb-headline'>{body}</div>"


def answer_of(result: Any) -> Answer:
    """The answer of a :class:`~specbench_lib.report.outcome.SweepResult` (a dry run's preview has none): its
    ``answer.json``, or for a fixed-plan run its best-config statements."""
    run_dir = getattr(result, "run_dir", None)
    if run_dir is None:
        return Answer(None, measured=False)
    found, damaged = answer_or_error(run_dir)
    if found is not None and found.get("budget_s") is not None:  # a fixed plan's: statements
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
    """Run id → answer, for the time-budgeted runs among ``runs``."""
    found = {}
    for run in runs:
        if getattr(run, "run_dir", None) is not None:
            answer, damaged = answer_or_error(run.run_dir)
            if answer is not None or damaged is not None:
                found[run.run_dir.name] = answer if damaged is None else {"damaged": damaged}
    return found
