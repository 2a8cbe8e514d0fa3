"""The claim covers in simulation (a fast version of benchmarks/claim_coverage.py): the speedup
interval and the confidence set hold the truth, and a decision names the best or a config within
its ε of it; the same check fails when the standard error is too small (the old round-stratified
bootstrap's √½), so it can fail."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from claimsim import fixed, issue_design, sequential

import specbench_lib.analysis.claim as claim_module


def coverage(k: int, per_round: int, rounds: int, sweeps: int, seed: int) -> dict[str, float]:
    design = issue_design(k, per_round, rounds)
    rng = np.random.default_rng(seed)
    best = max(design.names, key=design.rate)
    held = in_set = 0
    for _ in range(sweeps):
        found = fixed(design, rng)
        row = found.rows[found.leader]
        truth = design.rate(found.leader) / design.rate("auto")
        held += found.leader == "auto" or row.speedup_lo <= truth <= row.speedup_hi
        in_set += best in found.members
    return {"speedup": held / sweeps, "set": in_set / sweeps}


def conditional_error(k: int, per_round: int, rounds: int, sweeps: int, seed: int
                      ) -> tuple[int, int]:
    design = issue_design(k, per_round, rounds)
    rng = np.random.default_rng(seed)
    decided = wrong = 0
    for _ in range(sweeps):
        found = sequential(design, rng).claim
        if found.decided:
            decided += 1
            wrong += design.rate(found.leader) < (1 - found.epsilon) * design.best
    return decided, wrong


def test_the_speedup_interval_and_the_set_cover_at_few_requests() -> None:
    # 20 paired requests a config in 10 blocks (the sample: with 3 blocks the t's 2 degrees of
    # freedom make any SE look wide enough), four near-ties
    found = coverage(6, 2, 10, 150, seed=11)
    assert found["speedup"] >= 0.92 and found["set"] >= 0.92


def test_a_decision_names_the_best_or_one_within_its_epsilon() -> None:
    # ten blocks (rounds): the claim's sample is the blocks, so a decision needs several
    decided, wrong = conditional_error(3, 4, 10, 120, seed=12)
    assert decided >= 40 and wrong <= max(2, 0.08 * decided)


def test_the_check_fails_when_the_standard_error_is_too_small(monkeypatch) -> None:
    paired = claim_module.paired

    def shrunk(a, b):  # 0.42 x the paired SE: the low end of the old round-stratified SE (0.35-0.91 x)
        found = paired(a, b)
        return replace(found, se=found.se * 0.42)

    monkeypatch.setattr(claim_module, "paired", shrunk)
    found = coverage(6, 2, 10, 150, seed=11)
    assert found["speedup"] < 0.92 or found["set"] < 0.92
    with pytest.raises(AssertionError):
        test_the_speedup_interval_and_the_set_cover_at_few_requests()
