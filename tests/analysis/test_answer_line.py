"""The answer line readable (issue 50): a panel's line is its claim and at most three clauses;
the clauses it drops are one click away on the page (a closed ``<details>`` under the line), on
the next line in text. Checked on the answer ``make run`` wrote on 2026-12-06, whose line
carried seven clauses before."""

from __future__ import annotations

import html
import json
import re
import shutil
from pathlib import Path

from specbench_lib.analysis.answer import SHOWN, Answer, answers_html, panel_line, panel_words
from specbench_lib.model.answerfile import ANSWER_FILE, AnswerDoc

MAKE_RUN = Path(__file__).parents[1] / "data" / "answers" / "make_run_20261206.json"


def clauses(line: str) -> list[str]:
    """A line's clauses after its panel's name: split at "; " and " · " outside brackets."""
    text, depth, parts, start = line.split(": ", 1)[1], 0, [], 0
    for i, ch in enumerate(text):
        depth += 1 if ch in "([" else -1 if ch in ")]" else 0
        if depth == 0 and (text.startswith("; ", i) or text.startswith(" · ", i)):
            parts.append(text[start:i])
            start = i + (2 if text[i] == ";" else 3)
    return [*parts, text[start:]]


def made() -> AnswerDoc:
    return AnswerDoc.from_dict(json.loads(MAKE_RUN.read_text()))


def test_the_line_is_the_claim_and_at_most_three_clauses() -> None:
    (panel,) = made().panels
    line = panel_line(panel, equivalence=0.05, quantity="decode_rate")
    said = clauses(line)
    assert len(said) <= 1 + SHOWN, said  # the line of before carried 7
    assert said[0] == ("ngram-b8 at most 2.9 % slower than the best (95 %; within the 5 % "
                       "margin)")  # the claim first
    assert said[1:] == ["could also be the best: ngram-b4",
                        "1.28× [1.08, 1.53] vs auto (simultaneous 95 %)", "decided in 7 m 13 s"]


def test_the_dropped_clauses_are_one_click_away_on_the_page(tmp_path: Path) -> None:
    answer = made()
    (words,) = [panel_words(p, equivalence=answer.equivalence, quantity=answer.quantity)
                for p in answer.panels]
    rest = words.rest()
    assert [c.split(" ", 1)[0] for c in rest] == ["per", "out:", "ngram-b8's"]  # spread, out, break-even
    page = Answer(answer).html()
    shown, hidden = page.split("<details>", 1)
    assert html.escape(words.line()) in shown
    for clause in rest:  # each under the line, in the closed section, none on the line itself
        assert html.escape(clause) in hidden and clause not in words.line()
    assert re.search(r"<details><summary>3 more on copyedit/ctx256/c1</summary>", page)
    # the report's page: the run's answer leads it, with the same section
    (tmp_path / "run").mkdir()
    shutil.copy(MAKE_RUN, tmp_path / "run" / ANSWER_FILE)

    class Run:
        run_dir = tmp_path / "run"

    report = answers_html([Run()])
    assert all(html.escape(c) in report for c in rest) and "<details>" in report
    # in text (the CLI, the live log) the rest is the next line
    text = Answer(answer).text().splitlines()
    assert text[text.index(words.line()) + 1] == f"    also: {'; '.join(rest)}"


def test_a_panel_with_few_clauses_has_nothing_to_open() -> None:
    """A decided panel with its speedup and decision time only: all on the line, no section."""
    bare = AnswerDoc.from_dict({**made().to_dict(), "panels": [{
        "panel": {"workload": "code", "context": 128, "output_tokens": 64, "concurrency": 1},
        "decided": True, "decision": "decided", "best": "ngram-b8",
        "confidence_set": ["ngram-b8"], "speedup": 1.3, "speedup_lo": 1.1, "speedup_hi": 1.5,
        "baseline": "auto", "eliminated": {}, "decided_s": 30.0}]})
    (words,) = [panel_words(p) for p in bare.panels]
    assert words.rest() == () and "<details>" not in Answer(bare).html()
    assert len(clauses(words.line())) == 3  # the claim, the speedup, when it was decided
