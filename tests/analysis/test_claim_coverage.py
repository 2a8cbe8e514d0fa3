"""The claim covers in simulation (a fast version of benchmarks/claim_coverage.py): the speedup
interval and the confidence set hold the truth, and a decision names the best or a config within
its ε of it; the same check fails when the standard error is too small (the old round-stratified
bootstrap's √½), so it can fail."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from claimsim import Panel, fixed, issue_design, sequential

import specbench_lib.analysis.claim as claim_module
from specbench_lib.analysis.units import log_ratios


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


def het_coverage(effect_sd: float, noise_sd: float, sweeps: int, seed: int) -> float:
    """The speedup interval's coverage in the heterogeneity model (four near-ties, 2 requests a
    round, 10 rounds, a 40 % drift): the truth is the mean over the prompt population."""
    design = replace(issue_design(4, 2, 10, drift=0.4), effect_sd=effect_sd, noise_sd=noise_sd)
    rng = np.random.default_rng(seed)
    held = 0
    for _ in range(sweeps):
        found = fixed(design, rng)
        row = found.rows[found.leader]
        truth = design.rate(found.leader) / design.rate("auto")
        held += found.leader == "auto" or row.speedup_lo <= truth <= row.speedup_hi
    return held / sweeps


@pytest.mark.parametrize(("effect_sd", "noise_sd"), [(0.2, 0.0), (0.1, 0.09), (0.25, 0.09)])
def test_the_heterogeneity_model_gives_the_per_prompt_spread_asked(effect_sd, noise_sd) -> None:
    # the per-prompt paired log ratio against auto: the prompt's own effect (sd effect_sd) and
    # two requests' noise; the shared prompt factor (0.25) cancels in the pair
    design = replace(issue_design(2, 400, 1), effect_sd=effect_sd, noise_sd=noise_sd)
    panel = Panel(design, np.random.default_rng(3))
    panel.measure(0, design.names)
    units = panel.units()
    logs, _ = log_ratios(units["ngram-b4"], units["auto"])
    want = math.sqrt(effect_sd ** 2 + 2 * noise_sd ** 2)
    assert abs(float(np.std(logs, ddof=1)) - want) < 0.1 * want
    assert abs(float(np.mean(logs)) - math.log(34.2 / 31.8)) < 3 * want / math.sqrt(400)


def test_the_speedup_interval_covers_the_prompt_population_at_heterogeneity() -> None:
    assert het_coverage(0.2, 0.09, 150, seed=13) >= 0.92


def test_the_heterogeneity_check_fails_when_the_se_is_too_small(monkeypatch) -> None:
    paired = claim_module.paired

    def shrunk(a, b):
        found = paired(a, b)
        return replace(found, se=found.se * 0.42)

    monkeypatch.setattr(claim_module, "paired", shrunk)
    assert het_coverage(0.2, 0.09, 150, seed=13) < 0.92
