"""The answer of a time-budgeted sweep, first: ``answer.json`` and one line per panel.

    code/ctx256/c1: ngram-b8 best, 1.31× [1.22, 1.40] vs auto · decided in 3 m 10 s ·
    out: draft-b4 (round 1), ngram-b32 (round 3)

Built from :class:`~.rounds.Contention` (the confidence sets as the last look left them) and the
run's cells. The speedup is the best's mean output tok/s over the baseline's, its interval
simultaneous over the panel's configs at the look's error (:func:`~.selection.selected_interval`
with α / looks), so neither the pick nor the stopping shrinks it. An undecided panel says about
how many more requests per config would decide it.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..core.display import Rendered, html_text
from ..core.durations import span
from ..core.errors import StoreError
from ..core.readback import ANSWER, ANSWER_FIX, read_doc
from ..core.store import write_json_atomic
from ..model.records import CellRecord
from .intervals import interval, requests_n
from .metrics import PANEL
from .rounds import Contention, PanelState, Pooled, panel_of, pooled
from .selection import ratio, selected_interval

ANSWER_FILE = "answer.json"


def build_answer(contest: Contention, cells: Sequence[CellRecord], *, seconds: float,
                 budget_s: float, rounds: int, stopped: str) -> dict[str, Any]:
    """The answer document (see the module): the run's figures and one entry per panel."""
    panels = [_panel(contest, state, cells) for state in contest.panels.values()]
    return {"seconds": round(seconds, 1), "budget_s": budget_s, "rounds": rounds,
            "stopped": stopped, "alpha": contest.alpha, "looks": max(1, contest.rounds - 1),
            "panels": panels}


def _panel(contest: Contention, state: PanelState, cells: Sequence[CellRecord]) -> dict[str, Any]:
    mine = [c for c in cells if panel_of(c.spec) == state.panel]
    members = pooled(mine, state.members)
    best = max(members.means, key=lambda c: members.means[c]) if members.means else None
    entry: dict[str, Any] = {
        "panel": dict(zip(PANEL, state.panel, strict=True)),
        "decided": state.decision in ("decided", "tie"), "decision": state.decision,
        "best": best, "confidence_set": list(state.members),
        "speedup": None, "speedup_lo": None, "speedup_hi": None,
        "baseline": state.baseline,
        "requests": {c: requests_n([x for x in mine if x.spec.config == c and x.verdict.ok])
                     for c in state.configs},
        "eliminated": dict(state.eliminated), "out": dict(state.out),
        "decided_s": None if state.decided_s is None else round(state.decided_s, 1),
        "decided_round": state.decided_round, "more_requests": None}
    base = state.baseline
    pair = pooled(mine, [best, base]) if best is not None and base is not None else None
    if pair is not None and best in pair.means and base in pair.means:
        low, high = selected_interval(ratio(pair.replicates[best], pair.replicates[base]),
                                      min(pair.units[best], pair.units[base]),
                                      len(state.configs), alpha=contest.alpha_look)
        entry.update(speedup=_num(pair.means[best] / pair.means[base]), speedup_lo=_num(low),
                     speedup_hi=_num(high))
    if state.open and best is not None:
        entry["more_requests"] = _more(contest, state, members, best, mine)
    return entry


def _more(contest: Contention, state: PanelState, pool: Pooled, best: str,
          cells: Sequence[CellRecord]) -> int | None:
    """About how many more requests per config would decide the panel: the units its widest
    comparison needs to clear 1 (or the equivalence margin) as intervals narrow with √n."""
    need = 1.0
    for other in state.members:
        if other == best or other not in pool.means:
            continue
        units = min(pool.units[best], pool.units[other])
        low, high = interval(ratio(pool.replicates[best], pool.replicates[other]), units,
                             level=1 - contest.alpha_look / max(1, len(state.members) - 1))
        if not (low > 0 and high > 0) or units < 2:
            return None
        reach = (math.log(high) - math.log(low)) / 2
        gap = max(abs(math.log((high * low) ** 0.5)), math.log1p(contest.equivalence))
        need = max(need, (reach / gap) ** 2)
    units_now = min(pool.units[c] for c in state.members if c in pool.units)
    per_unit = max(1, round(requests_n([c for c in cells if c.verdict.ok
                                        and c.spec.config == best]) / max(1, pool.units[best])))
    return max(1, math.ceil(units_now * (need - 1)) * per_unit)


def _num(value: float) -> float | None:
    return None if value is None or value != value else round(float(value), 4)


def write_answer(run_dir: Path, answer: dict[str, Any]) -> Path:
    """``answer.json`` in the run directory (atomic)."""
    path = Path(run_dir) / ANSWER_FILE
    try:
        write_json_atomic(path, answer)
    except OSError as exc:
        raise StoreError(f"cannot write the answer ({exc.strerror or exc}); the cells are "
                         f"intact: free disk space, then resume this run", path=path) from exc
    return path


def read_answer(run_dir: Path | str) -> dict[str, Any] | None:
    """The run's answer, or None for a fixed-plan run (no ``answer.json``); a
    :class:`~.errors.StoreError` naming it and the fix when it is not of its shape."""
    path = Path(run_dir) / ANSWER_FILE
    return read_doc(path, ANSWER, name="answer", fix=ANSWER_FIX) if path.is_file() else None


def _answer_or_error(run_dir: Path | str) -> tuple[dict[str, Any] | None, str | None]:
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
    return "/".join(parts)


def panel_line(entry: dict[str, Any], *, outputs: bool = False) -> str:
    """One panel's answer in a line (see the module)."""
    name = panel_name(entry["panel"], outputs=outputs)
    members = entry["confidence_set"]
    if entry["speedup"] is not None and entry["best"] != entry["baseline"]:
        figure = (f", {entry['speedup']:.2f}× [{entry['speedup_lo'] or math.nan:.2f}, "
                  f"{entry['speedup_hi'] or math.nan:.2f}] vs {entry['baseline']}")
    else:
        figure = ""
    if entry["decision"] == "decided":
        head = f"{entry['best']} best{figure} · decided in {span(entry['decided_s'] or 0)}"
    elif entry["decision"] == "tie":
        head = (f"tie of {', '.join(members)} (within the equivalence margin); {entry['best']} "
                f"fastest{figure} · decided in {span(entry['decided_s'] or 0)}")
    elif entry["best"] is None:
        head = "undecided: no config measured ok"
    else:
        more = entry.get("more_requests")
        hint = (f"; about {more} more requests per config would decide it" if more else
                "; more requests would decide it")
        head = (f"undecided between {', '.join(members)}; {entry['best']} fastest so far"
                f"{figure}{hint}")
    gone = [f"{c} (round {r})" for c, r in sorted(entry["eliminated"].items(), key=lambda x: x[1])]
    gone += [f"{c} ({why})" for c, why in entry.get("out", {}).items()]
    return f"{name}: {head}" + (f" · out: {', '.join(gone)}" if gone else "")


def answer_lines(answer: dict[str, Any]) -> list[str]:
    """The answer's head line and one line per panel."""
    panels = answer["panels"]
    outputs = len({p["panel"]["output_tokens"] for p in panels}) > 1
    decided = sum(p["decided"] for p in panels)
    head = (f"answer: {decided}/{len(panels)} panels decided in {span(answer['seconds'])} of a "
            f"{span(answer['budget_s'])} budget, {answer['rounds']} rounds ({answer['stopped']})")
    return [head, *(panel_line(p, outputs=outputs) for p in panels)]


class Answer(Rendered):
    """A run's answer for a notebook: its lines (or why a run has none). A fixed-plan run has
    no ``answer.json``: its answer is the best-config statements (``statements``)."""

    def __init__(self, answer: dict[str, Any] | None, *, measured: bool = True,
                 statements: Sequence[str] = (), counts: dict[str, int] | None = None,
                 damaged: str | None = None) -> None:
        self.answer, self.measured = answer, measured
        self.statements, self.counts = list(statements), counts
        self.damaged = damaged  # answer.json could not be read: the error's one line

    def lines(self) -> list[str]:
        if not self.measured:
            return ["a dry run measures nothing: no answer"]
        if self.damaged is not None:
            return [f"no answer: {self.damaged}", *self.statements]
        if self.answer is None and self.statements:
            cells = ", ".join(f"{k} {v}" for k, v in (self.counts or {}).items() if v)
            panels = f"{len(self.statements)} panel{'s' if len(self.statements) != 1 else ''}"
            return [f"answer: the best config of {panels} (fixed plan"
                    f"{f': {cells}' if cells else ''}; confidence sets simultaneous 95 %)",
                    *self.statements]
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
    """The answer of a :class:`~specbench_lib.runs.results.SweepResult` (a dry run's preview has none): its
    ``answer.json``, or for a fixed-plan run its best-config statements."""
    run_dir = getattr(result, "run_dir", None)
    if run_dir is None:
        return Answer(None, measured=False)
    found, damaged = _answer_or_error(run_dir)
    if found is not None:
        return Answer(found)
    best = result.best()
    statements = list(best["statement"]) if "statement" in best else []
    return Answer(None, statements=statements, counts=result.counts(), damaged=damaged)


def answers_html(runs: Sequence[Any]) -> str:
    """The answers of the time-budgeted runs among ``runs`` (each with a ``run_dir``), for the
    head of the report's page; "" when none has one."""
    parts = []
    for run in runs:
        if getattr(run, "run_dir", None) is None:
            continue
        found, damaged = _answer_or_error(run.run_dir)
        if found is not None or damaged is not None:
            parts.append(html_text(f"run {run.run_dir.name}", bold=True)
                         + Answer(found, damaged=damaged).html())
    return "".join(parts)


def answers_json(runs: Sequence[Any]) -> dict[str, Any]:
    """Run id → answer, for the time-budgeted runs among ``runs``."""
    found = {}
    for run in runs:
        if getattr(run, "run_dir", None) is not None:
            answer, damaged = _answer_or_error(run.run_dir)
            if answer is not None or damaged is not None:
                found[run.run_dir.name] = answer if damaged is None else {"damaged": damaged}
    return found
