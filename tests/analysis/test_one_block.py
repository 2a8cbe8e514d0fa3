"""No "decided" from one block (issue 46), and configs measured exactly alike are a tie (issue 49).

One block measures each config in one stretch of time (so do repeats measured back to back): a
change of the machine's speed between the stretches is the same for all the prompts of the
block, so the prompts cannot tell it from an effect. Such a claim is undecided, no config is
shown slower, and every reader says why (``claim.ONE_BLOCK``, through ``best.verdict_words``).
Before, a clear difference within one block was "decided" ("every other config shown slower
(95 %)"), with the warning in parentheses.

Configs measured exactly alike (zero spread: an n-gram drafter that never drafts has τ 1.00 in
every prompt, as auto) have every bound 0; before, a config was in the set only above 0, so the
set was empty ("could be the best: ").
"""

from __future__ import annotations

import datetime as dt
from dataclasses import replace

import numpy as np
from cellfactory import spread_cell
from claimsim import Design, fixed

from specbench_lib.analysis.answer import answer_lines
from specbench_lib.analysis.answerbuild import fixed_answer
from specbench_lib.analysis.best import best_configs
from specbench_lib.analysis.claim import ONE_BLOCK, Units, claim
from specbench_lib.analysis.metrics import GROUP, results_table


def units(means: dict[str, float], n: int, *, blocks: int, seed: int = 0) -> dict[str, Units]:
    """Paired units, prompt i in block i mod ``blocks``: a shared prompt factor, 5 % noise."""
    rng = np.random.default_rng(seed)
    shared = np.exp(0.25 * rng.standard_normal(n))
    ids = tuple((i % blocks, i) for i in range(n))
    return {c: Units(ids, np.full(n, 64.0),
                     64.0 / (m * shared * np.exp(0.05 * rng.standard_normal(n))), n)
            for c, m in means.items()}


def test_a_clear_difference_in_one_block_is_undecided_and_says_why() -> None:
    means = {"auto": 30.0, "b4": 45.0, "b8": 36.0}
    once = claim(units(means, 12, blocks=1), list(means), "auto")
    assert (once.decision, once.reason, once.blocks) == ("undecided", ONE_BLOCK, 1)
    assert once.members == ("b4", "b8", "auto") and once.epsilon == 1.0  # nothing excluded
    assert once.speedup_lo > 1.3  # the prompts' interval is kept, worded as one block's
    # the same prompts in four blocks: decided, with no reason
    four = claim(units(means, 12, blocks=4), list(means), "auto")
    assert (four.decision, four.members, four.reason) == ("decided", ("b4",), None)


def test_every_reader_of_a_one_block_claim_gives_the_reason() -> None:
    cells = [spread_cell("auto", "auto", None, [30.0, 31.0, 29.0, 30.5, 30.2, 29.8]),
             spread_cell("ng-b8", "ngram", 8, [45.0, 46.0, 44.0, 45.5, 45.2, 44.8])]
    (row,) = best_configs(cells, results_table(cells), GROUP).to_dict("records")
    assert row["decision"] == "undecided" and row["reason"] == ONE_BLOCK
    assert row["statement"].startswith(
        f"code/ctx256/c1: undecided: ng-b8 fastest, but {ONE_BLOCK}; could be the best: "
        "ng-b8, auto; 1.50× [")
    answer = fixed_answer(cells, seconds=1.0)
    (panel,) = answer.panels
    assert (panel.decided, panel.reason, panel.confidence_set) == (
        False, ONE_BLOCK, ("ng-b8", "auto"))
    head, line, *more = answer_lines(answer, more=True)
    assert head.startswith("answer: 0/1 panels decided") and ONE_BLOCK in line
    everything = "\n".join([line, *more])
    assert "more requests" not in everything  # more of one block would not decide it
    assert "counts as an effect" not in everything  # said once, not again in the time words


def test_one_block_never_decides_on_a_drifting_machine_of_equal_configs() -> None:
    """The claim's units simulated (tests/support/claimsim.py): three configs equally fast, the
    machine 40 % faster by the end of the run, 6 prompts a config: 200 fixed plans of one block.
    Before, 136 of the 200 were decided: 69 with one config shown the best, 67 a tie."""
    design = Design((("auto", 30.0), ("b4", 30.0), ("b8", 30.0)), per_round=6, rounds=1,
                    drift=0.4)
    rng = np.random.default_rng(46)
    found = [fixed(design, rng) for _ in range(200)]
    assert not any(f.decided for f in found)
    assert all(f.reason == ONE_BLOCK and len(f.members) == 3 for f in found)


def test_configs_measured_exactly_alike_are_a_tie() -> None:
    ids = tuple((b, i) for b in range(3) for i in range(4))
    same = Units(ids, np.full(12, 16.0), np.full(12, 16.0), 12)  # τ 1.00 in every prompt
    found = claim({"auto": same, "ngram-b8": same}, ["auto", "ngram-b8"], "auto")
    assert set(found.members) == {"auto", "ngram-b8"}
    assert (found.decision, found.epsilon, found.speedup) == ("tie", 0.0, 1.0)
    assert found.rows["ngram-b8"].in_set and found.rows["auto"].in_set
    # through the readers: two repeats of the same per-request rates in both configs
    rates = [20.0, 24.0, 22.0]
    cells = [spread_cell(c, m, b, rates, repeat=r, repeats=2)
             for c, m, b in (("auto", "auto", None), ("ng-b8", "ngram", 8)) for r in (0, 1)]
    (row,) = best_configs(cells, results_table(cells), GROUP).to_dict("records")
    assert row["confidence_set"] == "auto, ng-b8" and row["decision"] == "tie"
    assert "could also be the best: ng-b8" in row["statement"]
    (panel,) = fixed_answer(cells, seconds=1.0).panels
    assert panel.confidence_set == ("auto", "ng-b8") and panel.decision == "tie"


def at(cell, seconds: float):  # noqa: ANN001, ANN201 - a test cell, started at ``seconds``
    began = dt.datetime(2026, 12, 6, tzinfo=dt.UTC) + dt.timedelta(seconds=seconds)
    return replace(cell, provenance=replace(cell.provenance, started=began.isoformat()))


def test_repeats_measured_back_to_back_are_one_block() -> None:
    """Three repeats of auto, then three of ng-b8 (``repeat_order: back_to_back``): one stretch
    of time each, so one block; the same cells with the repeats interleaved are three blocks.
    Before, the repeats counted as blocks whenever they ran: "decided"."""
    rates = {"auto": [30.0, 31.0, 29.0], "ng-b8": [45.0, 46.5, 43.5]}
    made = {(c, r): spread_cell(c, "auto" if c == "auto" else "ngram", None if c == "auto" else 8,
                                [v * (1 + 0.01 * r) for v in rates[c]], repeat=r, repeats=3)
            for c in rates for r in range(3)}
    apart = [at(cell, 10.0 * r + (0 if c == "auto" else 100)) for (c, r), cell in made.items()]
    mixed = [at(cell, 10.0 * r + (0 if c == "auto" else 5)) for (c, r), cell in made.items()]
    (one,) = best_configs(apart, results_table(apart), GROUP).to_dict("records")
    (three,) = best_configs(mixed, results_table(mixed), GROUP).to_dict("records")
    assert (one["blocks"], one["decision"], one["reason"]) == (1, "undecided", ONE_BLOCK)
    assert (three["blocks"], three["decision"], three["reason"]) == (3, "decided", None)
    assert fixed_answer(apart, seconds=1.0).panels[0].reason == ONE_BLOCK
