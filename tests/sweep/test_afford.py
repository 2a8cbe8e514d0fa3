"""The looks a budgeted sweep can afford are fixed before its first look, from the cheaper of
its first two rounds (issue 39): a first round slowed by a busy host's re-measurements capped a
whole `make run` at 6 rounds where 9 fitted."""

from __future__ import annotations

from specbench_lib.analysis.rounds import Contention
from specbench_lib.model.cellspec import CellSpec
from specbench_lib.sweep.adaptive import _afford


def _contest(rounds: int = 40) -> Contention:
    cells = [CellSpec(config=c, series=c.split("-")[0], method=m, budget=b, workload="chat",
                      context=256, concurrency=1, repeat=r, repeats=rounds, output_tokens=64)
             for r in range(rounds) for c, m, b in (("auto", "auto", None), ("ngram-b4", "ngram", 4))]
    return Contention(cells, rounds=rounds)


def test_a_slow_first_round_does_not_cap_the_run() -> None:
    contest = _contest()
    took = [161.7]  # round 0 with three busy-host re-measurements
    _afford(contest, 40, 450.0, took)
    assert contest.rounds == 40  # round 0 alone fixes nothing but the corpus's rounds
    took.append(35.3)
    _afford(contest, 40, 450.0, took)
    assert contest.rounds == 26  # 2 × 450 / 35.3, not 2 × 450 / 161.7 = 6


def test_the_corpus_and_the_first_look_bound_it() -> None:
    contest = _contest()
    _afford(contest, 5, 450.0, [30.0])
    assert contest.rounds == 5  # the rounds the corpus feeds
    contest = _contest()
    contest.looked = 1  # a look taken: the rounds stay, so the error spent stays within alpha
    _afford(contest, 40, 450.0, [30.0, 30.0])
    assert contest.rounds == 40
