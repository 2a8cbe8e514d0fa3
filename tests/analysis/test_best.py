"""The best-config statement: the fastest config per panel, the confidence set for the best
(Holm), its decision (decided / tie / undecided), the selection-aware speedup interval, and the
flags that limit the claim."""

from __future__ import annotations

import random
from dataclasses import replace

import numpy as np
import pytest
from cellfactory import blocked_cells, make_cell, spread_cell
from scipy.special import stdtrit

from specbench_lib.analysis.best import Summary, best_configs
from specbench_lib.analysis.claim import Units, claim, look_alpha, more_units, paired, spent, units_of
from specbench_lib.analysis.crossover import crossovers
from specbench_lib.analysis.metrics import GROUP, results_table
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
    cells = [*blocked_cells("auto", "auto", None, rates(50, 24, 1)),
             *blocked_cells("ng-b4", "ngram", 4, rates(90, 24, 2)),
             *blocked_cells("ng-b16", "ngram", 16, rates(60, 24, 4))]
    row = best(cells)
    assert row["best"] == "ng-b4" and row["confidence_set"] == "ng-b4"
    assert row["decision"] == "decided"
    assert row["speedup_lo"] < row["speedup"] < row["speedup_hi"] and row["speedup_lo"] > 1.5
    assert 0 < row["half_width_pct"] < 10 and row["requests_n"] == 24
    assert row["statement"].startswith("code/ctx256/c1: ng-b4 best: every other config shown "
                                       "slower (95 %); 1.")
    assert "vs auto (simultaneous 95 %), n=24 requests" in row["statement"]
    assert row["epsilon"] == 0
    assert "UNSTABLE" not in row["statement"]


def close_pair() -> list:
    return [*blocked_cells("auto", "auto", None, rates(50, 24, 1)),
            *blocked_cells("ng-b4", "ngram", 4, rates(75, 24, 2)),
            *blocked_cells("ng-b8", "ngram", 8, rates(74, 24, 3)),  # within the noise of b4
            *blocked_cells("ng-b16", "ngram", 16, rates(55, 24, 4))]


def test_two_close_configs_are_both_in_the_set_a_tie_or_undecided_by_the_margin() -> None:
    cells = close_pair()
    table = results_table(cells)
    wide = best_configs(cells, table, GROUP, equivalence=0.5).iloc[0]
    tiny = best_configs(cells, table, GROUP, equivalence=0.001).iloc[0]
    for row in (wide, tiny):  # b16 and auto are excluded either way; the margin decides the rest
        assert row["best"] == "ng-b4" and row["confidence_set"] == "ng-b4, ng-b8"
    assert wide["decision"] == "tie" and tiny["decision"] == "undecided"
    assert wide["statement"].startswith("code/ctx256/c1: ng-b4 at most ")
    assert "slower than the best (95 %; within the 50 % margin); could also be the best: " \
        "ng-b8; 1." in wide["statement"]
    assert tiny["statement"].startswith("code/ctx256/c1: undecided: ng-b4 fastest, at most ")
    assert "(95 %; decided at <= 0.1 %); could be the best: ng-b4, ng-b8; 1." in tiny["statement"]
    with pytest.raises(ParamsError, match="equivalence margin -0.1"):
        best_configs(cells, table, GROUP, equivalence=-0.1)


def test_the_best_speedup_is_the_tables_row_paired_and_simultaneous() -> None:
    cells = close_pair()
    table = results_table(cells)
    row = best(cells)
    mine = table.set_index("config").loc["ng-b4"]
    # one claim: the best's figure is its table row's, point and interval
    assert (row["speedup"], row["speedup_lo"], row["speedup_hi"]) == (
        mine["speedup"], mine["speedup_lo"], mine["speedup_hi"])
    # a paired t interval of the log ratio, two-sided, Bonferroni over the 3 other configs
    a, b = (units_of([c for c in cells if c.spec.config == n]) for n in ("ng-b4", "auto"))
    diff, se, n = paired(a, b).values()
    assert n == 24 and se > 0
    reach = stdtrit(n - 1, 1 - 0.05 / 2 / 3) * se
    assert row["speedup_lo"] == pytest.approx(np.exp(diff - reach))
    assert row["speedup_hi"] == pytest.approx(np.exp(diff + reach))


def panel_units(means: dict[str, float], n: int, *, noise: float = 0.05, prompt: float = 0.25,
                seed: int = 0, blocks: int | None = None) -> dict[str, Units]:
    """Paired units: per prompt a speed factor shared by the configs, per request noise; prompt
    i in block i mod ``blocks`` (None: every prompt its own block)."""
    rng = np.random.default_rng(seed)
    shared = np.exp(prompt * rng.standard_normal(n))
    ids = tuple((i % (blocks or n), i) for i in range(n))
    return {c: Units(ids, np.full(n, 64.0), 64.0 / (m * shared * np.exp(
        noise * rng.standard_normal(n))), n) for c, m in means.items()}


def test_the_prompt_factor_cancels_in_the_paired_comparison() -> None:
    units = panel_units({"auto": 30.0, "b4": 33.0}, 12, noise=0.02, prompt=0.4)
    diff, se, _ = paired(units["b4"], units["auto"]).values()
    assert diff == pytest.approx(np.log(1.1), abs=0.03) and se < 0.01  # unpaired: ~0.16
    found = claim(units, ["auto", "b4"], "auto")
    assert found.decision == "decided" and found.members == ("b4",) and found.epsilon == 0


def test_a_near_tie_is_a_tie_within_the_margin_not_an_exclusion() -> None:
    units = panel_units({"auto": 31.8, "b4": 34.2, "b8": 34.0, "b32": 29.5}, 40, seed=3)
    found = claim(units, list(units), "auto", equivalence=0.05)
    assert set(found.members) == {"b4", "b8"} and found.leader in found.members
    assert found.decision == "tie" and 0 < found.epsilon <= 0.05
    assert found.rows["b32"].in_set is False and found.rows["b8"].behind_max < 0.1
    tight = claim(units, list(units), "auto", equivalence=0.001)
    assert tight.decision == "undecided" and tight.epsilon == found.epsilon
    assert more_units(units, tight) is None or more_units(units, tight) > 40


def test_one_request_a_config_bounds_nothing() -> None:
    found = claim(panel_units({"auto": 30.0, "b4": 60.0}, 1), ["auto", "b4"], "auto")
    assert found.members == ("b4", "auto") and found.decision == "undecided"  # fastest first
    assert found.epsilon == 1.0 and found.speedup == pytest.approx(2.0, rel=0.2)
    assert found.speedup_lo != found.speedup_lo  # NaN: no interval from one unit


def test_alpha_is_spent_over_the_looks_taken_and_all_of_it_at_the_last() -> None:
    looks = [look_alpha(1, 10, 0.0, last=False)]
    looks.append(look_alpha(2, 10, sum(looks), last=False))
    looks.append(look_alpha(3, 10, sum(looks), last=True))
    assert sum(looks) == pytest.approx(0.05) and looks[0] == pytest.approx(spent(0.1))
    assert spent(1.0) == pytest.approx(0.05) and spent(1.0, kind="obf") == pytest.approx(0.05)
    assert spent(0.2, kind="obf") < spent(0.2, kind="pocock") < 0.05
    with pytest.raises(ParamsError, match="alpha spending 'x'"):
        spent(0.5, kind="x")


def test_when_auto_is_fastest_no_config_beats_it() -> None:
    auto = rates(60, 16, 1)
    cells = [*blocked_cells("auto", "auto", None, auto),  # b4: the same spread, 1 % slower
             *blocked_cells("ng-b4", "ngram", 4, [0.99 * r for r in reversed(auto)]),
             *blocked_cells("ng-b32", "ngram", 32, rates(30, 16, 3))]
    row = best(cells)
    assert row["best"] == "auto" and row["confidence_set"] == "auto, ng-b4"
    assert "auto itself is the fastest" in row["statement"]


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
    cells = [*blocked_cells("auto", "auto", None, rates(50, 8, 1)),
             *blocked_cells("ng-b4", "ngram", 4, rates(90, 8, 2))]
    cells += [make_cell("auto", "auto", None, tok_s=40, context=512),
              make_cell("ng-b4", "ngram", 4, tok_s=20, context=512)]
    table = results_table(cells)
    frame = best_configs(cells, table, GROUP)
    assert list(frame["context"]) == [256, 512] and list(frame["best"]) == ["ng-b4", "auto"]
    summary = Summary(frame, table)
    text, html = summary.text(), summary.html()
    assert "code/ctx256/c1: ng-b4 best: every other config shown slower" in text
    # one cell a config at ctx512: one block, so nothing is excluded or decided, and it says why
    assert ("code/ctx512/c1: undecided: auto fastest, but one block: each config was measured "
            "in one stretch of time, so a change of the machine's speed between them cannot be "
            "told from an effect (measure in two blocks or more: repeats 2, or a time budget); "
            "could be the best: auto, ng-b4") in text
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
