"""A time budget is honest across a resume (issue 32): the time the earlier attempts spent
counts against it, and ``answer.json`` says what the run measured (its rounds, cells and
seconds over every attempt), also after a SIGKILL while the answer was being written. And a
budget smaller than the first round cuts it where it stands, saying what was cut (issue 46)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from budgetparams import budget_params

import specbench_lib as sb


def _answer(result: sb.SweepResult) -> dict[str, Any]:
    return json.loads((result.run_dir / "answer.json").read_text())


def _killed_while_writing_the_answer(run_dir: Path) -> None:
    """What a SIGKILL during ``answer.json``'s atomic write leaves: no answer (its temporary
    file instead), the attempt without an end, the run ``running``."""
    answer = run_dir / "answer.json"
    (run_dir / ".answer.json.999999.tmp").write_text(answer.read_text()[:50])
    answer.unlink()
    manifest = json.loads((run_dir / "manifest.json").read_text())
    manifest["attempts"][-1].update(ended=None, status=None)
    manifest.update(status="running", ended=None)
    manifest.pop("answer", None)
    (run_dir / "manifest.json").write_text(json.dumps(manifest))


# near-ties with noisy tokens that no round of this budget can decide (issue 29's claim decides
# the clear b8 of the default speedups at round 1's last look): the budget is what stops them
NEAR_TIES: dict[str, Any] = {"speedups": {4: 1.0, 8: 1.01, 16: 1.02}, "jitter": 0.3,
                             "equivalence": 0.001}


def test_a_resumed_budgeted_run_counts_the_time_spent_and_says_what_it_measured(
        tmp_path: Path) -> None:
    plan = sb.load_plan(budget_params(tmp_path, seed=2, budget="4s", **NEAR_TIES))
    first = sb.run_sweep(plan, outputs=tmp_path / "out", progress=False)
    before = _answer(first)
    assert before["stopped"] == "budget" and before["measured"]["attempts"] == 1
    measured = {c.cell_id for c in first.cells if c.status != "skipped"}
    _killed_while_writing_the_answer(first.run_dir)

    again = sb.run_sweep(plan, resume=first.run_id, outputs=tmp_path / "out", progress=False)
    after = _answer(again)
    # the budget was spent by the first attempt: the resume measures nothing more
    assert {c.cell_id for c in again.cells if c.status != "skipped"} == measured
    assert after["stopped"] == "budget"
    assert after["measured"]["rounds"] == before["measured"]["rounds"] == before["rounds"]
    assert after["rounds"] >= before["rounds"]
    assert after["measured"]["cells"] == len(measured)
    assert after["measured"]["attempts"] == 2
    # the first attempt's time (to its last cell, it has no end) is in the answer's seconds
    assert after["measured"]["earlier_attempts_s"] >= 1
    # the same claim as the one it replaces: the looks replayed as they were taken (the
    # manifest's contest), not every kept cell pooled into one look at the resume's clock
    assert after["panels"] == before["panels"] and after["looks"] == before["looks"]
    assert after["stopped"] == before["stopped"] and after["rounds"] == before["rounds"]
    assert after["seconds"] > after["measured"]["earlier_attempts_s"]  # and this attempt's
    assert not list(first.run_dir.glob(".*.tmp"))  # the stray temporary file is gone


def test_a_budget_below_one_rounds_cost_cuts_the_first_round_and_says_what_was_cut(
        tmp_path: Path) -> None:
    """Issue 46: "the first round always starts", so a budget below one round's cost ran the
    whole round past it (tp1 on a fast test server: 6 m 40 s into a 120 s budget, still in the
    first config's slice). Now no server and no cell starts that the time model says cannot
    end in the budget: the round is cut where it stands, and the answer says what was cut."""
    # a cell of 3 requests × 200 tokens at 4 ms is 2.4 s: round 1 (4 configs, each a start and a
    # cell) is over 10 s on any host, so an 8 s budget cannot hold it (a short warmup: the first
    # start fits the stated default's price of it)
    plan = sb.load_plan(budget_params(tmp_path, seed=4, budget="8s", tokens=200,
                                      warmup_output_tokens=8, **NEAR_TIES))
    result = sb.run_sweep(plan, outputs=tmp_path / "out", progress=False)
    answer = _answer(result)
    first = [c for c in result.cells if c.spec.repeat == 0]
    measured = [c for c in first if not c.verdict.by_design]
    cut = answer["cut"]
    assert cut is not None and cut["round"] == 1 and cut["missing"], cut
    assert cut["measured"] == sorted({c.spec.config for c in measured},
                                     key=cut["measured"].index)
    assert set(cut["missing"]).isdisjoint(c.spec.config for c in measured)
    assert len(measured) < len(first)  # the old code measured all of round 1
    skipped = [c for c in first if c.verdict.by_design]
    assert skipped and all("round 1 was cut by the budget" in c.verdict.reasons[0]
                           for c in skipped), [c.verdict for c in skipped]
    assert cut["cells"] == len(skipped)
    assert answer["stopped"] == "budget" and answer["rounds"] <= 1
    assert set(answer["overrun"]) == {"largest_s", "cell", "end_s", "allowed_s"}
    assert answer["overrun"]["allowed_s"] == 0.8
    lines = "\n".join(sb.answer_of(result).lines())
    assert "cut: round 1 cut at" in lines and "another hour would measure" in lines


def test_a_resume_that_measures_nothing_rewrites_a_damaged_answer_with_the_same_claim(
        tmp_path: Path) -> None:
    """Issue 42: the resume replays the looks as they were taken (the manifest's ``contest``:
    each look's round, its rounds planned, its clock, whether it was the last). Before, it pooled
    every kept cell into its first look at its own clock: "ngram-b8 best" became "ngram-b8 at
    most … slower; could also be the best: ngram-b16", the eliminations a round earlier."""
    plan = sb.load_plan(budget_params(tmp_path, seed=1, budget="120s", jitter=0.3))
    first = sb.run_sweep(plan, outputs=tmp_path / "out", progress=False)
    before = _answer(first)
    assert before["looks"] >= 2 and before["stopped"] == "decided"  # looks to replay
    (first.run_dir / "answer.json").write_text('{"panels": [{"panel": "damaged"')
    again = sb.run_sweep(plan, resume=first.run_id, outputs=tmp_path / "out", progress=False)
    after = _answer(again)
    assert after["measured"]["cells"] == before["measured"]["cells"]  # nothing measured
    assert after["panels"] == before["panels"]
    assert (after["looks"], after["rounds"], after["stopped"]) == (
        before["looks"], before["rounds"], before["stopped"])


def test_a_resume_ends_where_the_earlier_attempts_last_look_ended_it(tmp_path: Path) -> None:
    """A killed attempt's clock is counted only to its last cell, so a resume can think time is
    left where the earlier attempt had stopped for the budget (seen in CI: the resume measured
    the one cell the first left out of its cut last round, after a look that spent all the
    error). The resume replays the looks up to that last one and measures nothing. Here the
    earlier attempt is made to look as if it took no time at all."""
    plan = sb.load_plan(budget_params(tmp_path, seed=2, budget="4s", **NEAR_TIES))
    first = sb.run_sweep(plan, outputs=tmp_path / "out", progress=False)
    before = _answer(first)
    assert before["stopped"] == "budget"
    measured = {c.cell_id for c in first.cells if c.status != "skipped"}
    _killed_while_writing_the_answer(first.run_dir)
    manifest = json.loads((first.run_dir / "manifest.json").read_text())
    ends = [c.provenance.ended for c in first.cells if c.provenance.ended]
    manifest["attempts"][-1]["started"] = max(ends)  # the clock says: nothing spent
    (first.run_dir / "manifest.json").write_text(json.dumps(manifest))

    again = sb.run_sweep(plan, resume=first.run_id, outputs=tmp_path / "out", progress=False)
    after = _answer(again)
    assert after["measured"]["earlier_attempts_s"] < 1  # the budget looks unspent
    assert {c.cell_id for c in again.cells if c.status != "skipped"} == measured
    assert after["panels"] == before["panels"] and after["looks"] == before["looks"]
    assert after["stopped"] == "budget" and after["rounds"] == before["rounds"]
