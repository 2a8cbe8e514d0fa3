"""The best-config statement: the fastest config per panel, the confidence set for the best
(Holm), its decision (decided / tie / undecided), the selection-aware speedup interval, and the
flags that limit the claim."""

from __future__ import annotations

import random
from dataclasses import replace

import numpy as np
import pytest
from cellfactory import make_cell, spread_cell

from specbench_lib.analysis.best import Summary, best_configs, crossovers
from specbench_lib.analysis.intervals import group_replicates, interval, ok_groups
from specbench_lib.analysis.metrics import GROUP, results_table
from specbench_lib.analysis.selection import holm_excluded, select
from specbench_lib.core.errors import ParamsError


def rates(mean: float, n: int, seed: int, spread: float = 0.1) -> list[float]:
    rng = random.Random(seed)
    return [mean * rng.uniform(1 - spread, 1 + spread) for _ in range(n)]


def best(cells: list) -> dict:
    table = results_table(cells)
    frame = best_configs(cells, table, GROUP)
    assert len(frame) == 1
    return frame.iloc[0].to_dict()


def test_a_clear_winner_is_a_set_of_one_decided() -> None:
    cells = [spread_cell("auto", "auto", None, rates(50, 24, 1)),
             spread_cell("ng-b4", "ngram", 4, rates(90, 24, 2)),
             spread_cell("ng-b16", "ngram", 16, rates(60, 24, 4))]
    row = best(cells)
    assert row["best"] == "ng-b4" and row["confidence_set"] == "ng-b4"
    assert row["decision"] == "decided"
    assert row["speedup_lo"] < row["speedup"] < row["speedup_hi"] and row["speedup_lo"] > 1.5
    assert 0 < row["half_width_pct"] < 10 and row["requests_n"] == 24
    assert row["statement"].startswith("code/ctx256/c1: ng-b4 best, 1.")
    assert "vs auto (simultaneous 95 %, n=24 requests" in row["statement"]
    assert row["statement"].endswith("; every other config excluded")
    assert "UNSTABLE" not in row["statement"]


def close_pair() -> list:
    return [spread_cell("auto", "auto", None, rates(50, 24, 1)),
            spread_cell("ng-b4", "ngram", 4, rates(75, 24, 2)),
            spread_cell("ng-b8", "ngram", 8, rates(74, 24, 3)),  # within the noise of b4
            spread_cell("ng-b16", "ngram", 16, rates(55, 24, 4))]


def test_two_close_configs_are_both_in_the_set_a_tie_or_undecided_by_the_margin() -> None:
    cells = close_pair()
    table = results_table(cells)
    wide = best_configs(cells, table, GROUP, equivalence=0.5).iloc[0]
    tiny = best_configs(cells, table, GROUP, equivalence=0.001).iloc[0]
    for row in (wide, tiny):  # b16 and auto are excluded either way; the margin decides the rest
        assert row["best"] == "ng-b4" and row["confidence_set"] == "ng-b4, ng-b8"
    assert wide["decision"] == "tie" and tiny["decision"] == "undecided"
    assert wide["statement"].startswith("code/ctx256/c1: tie within ±50 %: ng-b4, ng-b8: ng-b4 "
                                        "fastest, 1.")
    assert tiny["statement"].startswith("code/ctx256/c1: undecided between ng-b4, ng-b8: ng-b4 "
                                        "fastest, 1.")
    with pytest.raises(ParamsError, match="equivalence margin -0.1"):
        best_configs(cells, table, GROUP, equivalence=-0.1)


def test_the_best_speedup_interval_is_simultaneous_so_wider_than_the_tables() -> None:
    cells = close_pair()
    table = results_table(cells)
    row = best(cells)
    mine = table.set_index("config").loc["ng-b4"]
    assert row["speedup"] == mine["speedup"]  # the point is the table's; its interval is not
    assert row["speedup_lo"] < mine["speedup_lo"] and row["speedup_hi"] > mine["speedup_hi"]
    level = 1 - 0.05 / 4  # Bonferroni over the panel's 4 configs
    reps = group_replicates(ok_groups(cells, GROUP))
    keys = {k[0]: k for k in reps}
    assert (row["speedup_lo"], row["speedup_hi"]) == interval(
        reps[keys["ng-b4"]] / reps[keys["auto"]], 24, level=level)


def marginal(mu: float, seed: int) -> np.ndarray:
    """Replicates of a ratio leader / config: log-normal around ``mu`` with sd 0.05."""
    return np.exp(mu + 0.05 * np.random.default_rng(seed).standard_normal(2000))


def test_holm_keeps_what_three_unadjusted_comparisons_would_exclude() -> None:
    ratios = {c: marginal(0.05 * 2.15, seed) for seed, c in enumerate(("b", "c", "d"))}
    units = dict.fromkeys(ratios, 1000)
    # each alone: above 1 at 95 % (z 1.96), not at 1 - 0.05 / 3 (z 2.39)
    assert all(interval(r, 1000)[0] > 1 for r in ratios.values())
    assert holm_excluded(ratios, units) == set()
    leader = np.full(2000, 100.0)
    reps = {"a": leader, **{c: leader / r for c, r in ratios.items()}}
    chosen = select(["a", "b", "c", "d"], reps, {"a": 1000, **units}, "a")
    assert chosen.members == ("a", "b", "c", "d") and chosen.decision == "undecided"


def test_holm_steps_down_after_a_clear_exclusion() -> None:
    # 2 comparisons: the clear one goes at 1 - 0.05 / 2, then the marginal one is tested at
    # 95 % and goes too (Bonferroni alone would keep it: not above 1 at 97.5 %)
    ratios = {"clear": marginal(1.0, 1), "near": marginal(0.05 * 2.1, 2)}
    units = dict.fromkeys(ratios, 1000)
    assert interval(ratios["near"], 1000, level=0.975)[0] < 1 < interval(ratios["near"], 1000)[0]
    assert holm_excluded(ratios, units) == {"clear", "near"}
    assert holm_excluded({"near": ratios["near"], "x": marginal(0.0, 3)},
                         dict.fromkeys(("near", "x"), 1000)) == set()  # no clear one first


def test_when_auto_is_fastest_no_config_beats_it() -> None:
    auto = rates(60, 16, 1)
    cells = [spread_cell("auto", "auto", None, auto),  # b4: the same spread, 1 % slower
             spread_cell("ng-b4", "ngram", 4, [0.99 * r for r in reversed(auto)]),
             spread_cell("ng-b32", "ngram", 32, rates(30, 16, 3))]
    row = best(cells)
    assert row["best"] == "auto" and row["confidence_set"] == "auto, ng-b4"
    assert "no config beats auto" in row["statement"]


def test_a_failed_repeat_and_differing_outputs_are_flagged() -> None:
    same, other = [[1, 2, 3, 4]] * 2, [[1, 2, 3, 4], [9, 9, 9, 9]]
    cells = [make_cell("auto", "auto", None, tok_s=50, repeat=r, repeats=2, outputs=same)
             for r in (0, 1)]
    cells += [make_cell("ng-b4", "ngram", 4, tok_s=80, repeats=2, outputs=other),
              make_cell("ng-b4", "ngram", 4, "crashed", None, repeat=1, repeats=2)]
    row = best(cells)
    assert row["best"] == "ng-b4" and row["unstable"] and row["lossless"] == 0.5
    assert "UNSTABLE" in row["statement"] and "50 % of outputs differ from auto's" in row["statement"]
    assert row["repeats_n"] == 1


def test_one_row_per_panel_and_the_summary_shows_the_statements() -> None:
    cells = [spread_cell("auto", "auto", None, rates(50, 8, 1)),
             spread_cell("ng-b4", "ngram", 4, rates(90, 8, 2))]
    cells += [make_cell("auto", "auto", None, tok_s=40, context=512),
              make_cell("ng-b4", "ngram", 4, tok_s=20, context=512)]
    table = results_table(cells)
    frame = best_configs(cells, table, GROUP)
    assert list(frame["context"]) == [256, 512] and list(frame["best"]) == ["ng-b4", "auto"]
    summary = Summary(frame, table)
    text, html = summary.text(), summary.html()
    assert "code/ctx256/c1: ng-b4 best" in text
    # one request a cell is one unit: no interval, so nothing can be excluded or decided
    assert "code/ctx512/c1: undecided between auto, ng-b4: no config beats auto" in text
    assert "<li>code/ctx256/c1: ng-b4 best" in html and "<table" in html


def test_crossover_says_where_a_config_stops_beating_auto_as_the_load_grows() -> None:
    cells = []
    for c, (auto, b8, b4, b2) in {1: (50, 75, 52, 51), 2: (90, 120, 91, 91),
                                  4: (150, 110, 151, 220)}.items():
        made = [spread_cell("auto", "auto", None, rates(auto, 16, c)),
                spread_cell("ng-b8", "ngram", 8, rates(b8, 16, 10 + c)),
                spread_cell("ng-b4", "ngram", 4, rates(b4, 16, 20 + c)),
                spread_cell("ng-b2", "ngram", 2, rates(b2, 16, 30 + c))]
        cells += [replace(cell, spec=replace(cell.spec, concurrency=c)) for cell in made]
    table = results_table(cells)
    found = crossovers(table).set_index("config")
    assert found.loc["ng-b8", "statement"] == ("ng-b8 code/ctx256: beats auto up to concurrency 2; "
                                               "loses from concurrency 4")
    assert found.loc["ng-b8", "beats_up_to"] == 2 and found.loc["ng-b8", "loses_from"] == 4
    assert found.loc["ng-b4", "statement"].endswith("indistinguishable from auto at every "
                                                    "concurrency measured (1-4)")
    # it pays only at the highest load: "at", not "up to" (which would claim the lower ones)
    assert found.loc["ng-b2", "statement"] == ("ng-b2 code/ctx256: beats auto at concurrency 4; "
                                               "indistinguishable from auto at concurrency 1, "
                                               "concurrency 2")
    text = Summary(best_configs(cells, table, GROUP), table, crossovers(table)).text()
    assert "speedup vs load (95 % intervals):\n  ng-b" in text
