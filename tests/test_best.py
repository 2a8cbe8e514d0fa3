"""The best-config statement: the fastest config per panel, its speedup interval, the configs the
data cannot tell from it, and the flags that limit the claim."""

from __future__ import annotations

import random
from dataclasses import replace

from cellfactory import make_cell, spread_cell

from specbench_lib.best import Summary, best_configs, crossovers
from specbench_lib.metrics import GROUP, results_table


def rates(mean: float, n: int, seed: int, spread: float = 0.1) -> list[float]:
    rng = random.Random(seed)
    return [mean * rng.uniform(1 - spread, 1 + spread) for _ in range(n)]


def best(cells: list) -> dict:
    table = results_table(cells)
    frame = best_configs(cells, table, GROUP)
    assert len(frame) == 1
    return frame.iloc[0].to_dict()


def test_a_clear_winner_with_a_tied_runner_up_and_a_slower_config() -> None:
    cells = [spread_cell("auto", "auto", None, rates(50, 24, 1)),
             spread_cell("ng-b4", "ngram", 4, rates(75, 24, 2)),
             spread_cell("ng-b8", "ngram", 8, rates(74, 24, 3)),  # within the noise of b4
             spread_cell("ng-b16", "ngram", 16, rates(55, 24, 4))]
    row = best(cells)
    assert row["best"] == "ng-b4"
    assert row["speedup_lo"] < row["speedup"] < row["speedup_hi"]
    assert row["speedup_lo"] > 1.3  # 75 vs 50 with ±10 % noise: clearly faster
    assert row["indistinguishable"] == "ng-b8"  # b16 and auto are slower beyond the interval
    assert 0 < row["half_width_pct"] < 10 and row["requests_n"] == 24
    assert row["statement"].startswith("code/ctx256/c1: best ng-b4, 1.")
    assert "indistinguishable from it: ng-b8" in row["statement"]
    assert "UNSTABLE" not in row["statement"]


def test_when_auto_is_fastest_no_config_beats_it() -> None:
    auto = rates(60, 16, 1)
    cells = [spread_cell("auto", "auto", None, auto),  # b4: the same spread, 1 % slower
             spread_cell("ng-b4", "ngram", 4, [0.99 * r for r in reversed(auto)]),
             spread_cell("ng-b32", "ngram", 32, rates(30, 16, 3))]
    row = best(cells)
    assert row["best"] == "auto" and row["indistinguishable"] == "ng-b4"
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
    assert "code/ctx256/c1: best ng-b4" in text and "code/ctx512/c1: no config beats auto" in text
    assert "<li>code/ctx256/c1: best ng-b4" in html and "<table" in html


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
