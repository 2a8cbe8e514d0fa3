"""Every aggregate carries n and a 95 % interval; speedups carry the interval of the ratio."""

from __future__ import annotations

import math
import random

import pytest
from cellfactory import make_cell, spread_cell

from specbench_lib.intervals import interval, throughput_replicates
from specbench_lib.metrics import results_table


def test_the_interval_holds_the_estimate_and_narrows_with_more_requests() -> None:
    rng = random.Random(1)
    few = spread_cell("auto", "auto", None, [rng.uniform(40, 60) for _ in range(4)])
    many = spread_cell("auto", "auto", None, [rng.uniform(40, 60) for _ in range(64)])
    import numpy as np

    widths = []
    for cell in (few, many):
        low, high = interval(throughput_replicates([cell], np.random.default_rng(0)))
        assert low <= cell.metrics["output_tok_s"] <= high
        widths.append(high - low)
    assert widths[1] < widths[0] / 2
    assert interval(None) != interval(None)  # NaN, NaN: no replicates, no interval


def test_speedup_intervals_tell_a_real_effect_from_noise() -> None:
    rng = random.Random(2)
    auto = spread_cell("auto", "auto", None, [rng.uniform(40, 60) for _ in range(24)])
    faster = spread_cell("ng-b8", "ngram", 8, [rng.uniform(60, 80) for _ in range(24)])
    same = spread_cell("ng-b4", "ngram", 4, [rng.uniform(40, 60) for _ in range(24)])
    table = results_table([auto, faster, same]).set_index("config")
    real, noise = table.loc["ng-b8"], table.loc["ng-b4"]
    assert real["speedup_lo"] <= real["speedup"] <= real["speedup_hi"] and real["speedup_lo"] > 1
    assert noise["speedup_lo"] < 1 < noise["speedup_hi"]
    assert table.loc["auto", ["speedup_lo", "speedup_hi"]].tolist() == [1.0, 1.0]  # by definition
    assert list(table["requests_n"]) == [24, 24, 24]
    assert results_table([auto, faster, same]).equals(results_table([auto, faster, same]))


def test_repeats_widen_the_interval_and_failed_cells_have_none() -> None:
    rng = random.Random(3)
    cells = [spread_cell("auto", "auto", None, [rng.uniform(45, 55) for _ in range(8)],
                         repeat=r, repeats=2) for r in range(2)]
    drifted = [spread_cell("ng-b8", "ngram", 8, [rng.uniform(45, 55) * f for _ in range(8)],
                           repeat=r, repeats=2) for r, f in enumerate((1.0, 1.6))]
    crashed = make_cell("ng-b16", "ngram", 16, "crashed", None, repeats=2)
    table = results_table([*cells, *drifted, crashed]).set_index("config")
    assert "ng-b16" not in table.index
    steady, drift = table.loc["auto"], table.loc["ng-b8"]
    assert steady["requests_n"] == 16 and drift["requests_n"] == 16
    assert (drift["output_tok_s_hi"] - drift["output_tok_s_lo"]) > \
        3 * (steady["output_tok_s_hi"] - steady["output_tok_s_lo"])
    assert drift["speedup_lo"] < 1.3 < drift["speedup_hi"]


def test_one_request_gives_a_point_not_a_fake_spread() -> None:
    single = make_cell("auto", "auto", None, tok_s=50.0)
    row = results_table([single]).iloc[0]
    assert row["requests_n"] == 1
    assert row["output_tok_s_lo"] == pytest.approx(50.0) == row["output_tok_s_hi"]
    assert not math.isnan(row["speedup_lo"])
