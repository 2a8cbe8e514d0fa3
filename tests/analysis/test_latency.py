"""Latency percentiles of a table row: TTFT, ITL and E2E p50/p90 with bootstrap intervals over
the requests, and p99 only with at least 100 requests behind it (else the maximum of n)."""

from __future__ import annotations

import random

import numpy as np
import pytest
from cellfactory import spread_cell

from specbench_lib.analysis.latency import QUANTILES, _replicates, quantile
from specbench_lib.analysis.metrics import results_table


def rates(n: int, seed: int) -> list[float]:
    rng = random.Random(seed)
    return [50 * rng.uniform(0.5, 1.5) for _ in range(n)]


def row(cells: list) -> dict:
    (found,) = results_table(cells).to_dict("records")
    return found


def test_p99_is_hidden_with_20_requests_and_the_maximum_is_labelled_with_its_n() -> None:
    speeds = rates(20, 1)
    found = row([spread_cell("auto", "auto", None, speeds)])
    for metric in ("ttft", "itl", "e2e", "tpot", "delivery_gap"):
        assert np.isnan(found[f"{metric}_p99_s"]), metric
    assert np.isnan(found["ttft_p99_s_lo"]) and np.isnan(found["e2e_p99_s_hi"])
    assert found["max_n"] == 20
    assert found["e2e_max_s"] == pytest.approx(max(16 / r for r in speeds))
    assert found["ttft_max_s"] == pytest.approx(max(1 / r for r in speeds))
    for metric in ("ttft", "itl", "e2e"):
        for q in (50, 90):
            low, value, high = (found[f"{metric}_p{q}_s{end}"] for end in ("_lo", "", "_hi"))
            assert low < value < high, (metric, q)


def test_p99_is_shown_with_120_requests_even_over_two_repeats_of_60() -> None:
    speeds = rates(120, 2)
    cells = [spread_cell("auto", "auto", None, speeds[:60], repeat=0, repeats=2),
             spread_cell("auto", "auto", None, speeds[60:], repeat=1, repeats=2)]
    found = row(cells)
    e2e = [16 / r for r in speeds]  # pooled over the repeats, not a mean of two p99s of 60
    assert found["max_n"] == 120 and found["e2e_p99_s"] == pytest.approx(quantile(e2e, 0.99))
    assert found["e2e_p99_s_lo"] <= found["e2e_p99_s"] <= found["e2e_p99_s_hi"]
    assert found["e2e_p50_s"] == pytest.approx(quantile(e2e, 0.5))
    few = row([spread_cell("auto", "auto", None, speeds[:20])])
    width = found["e2e_p50_s_hi"] - found["e2e_p50_s_lo"]
    assert width < few["e2e_p50_s_hi"] - few["e2e_p50_s_lo"]  # more requests, a narrower interval


def test_the_weighted_replicates_are_the_quantiles_of_the_resampled_requests() -> None:
    rng = np.random.default_rng(3)
    values = [list(rng.uniform(0, 1, size=int(k))) for k in rng.integers(0, 6, size=9)]
    counts = rng.multinomial(9, [1 / 9] * 9, size=40).astype(float)
    found = _replicates(values, counts)
    for i, draw in enumerate(counts):
        pooled = [v for vs, c in zip(values, draw, strict=True) for v in vs * int(c)]
        for q in QUANTILES:
            expected = np.quantile(pooled, q / 100) if pooled else np.nan
            assert found[q][i] == pytest.approx(expected, nan_ok=True), (i, q)
