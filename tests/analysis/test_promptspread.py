"""The spread across prompts (issue 39, item 3): per-prompt speedups against the baseline as a
distribution, by category and by answer length, the answer's phrase and answer.json numbers,
and the figures, each from cells whose per-prompt effects the test sets. No server; about 10 s
on 2 cores (mostly the figures)."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import matplotlib
import numpy as np
import pytest
from cellfactory import make_cell, request

matplotlib.use("Agg")

from specbench_lib import SweepResult  # noqa: E402
from specbench_lib.analysis.analyse import analyse  # noqa: E402
from specbench_lib.analysis.answer import answer_lines
from specbench_lib.analysis.answerbuild import fixed_answer
from specbench_lib.analysis.bycategory import pooled  # noqa: E402
from specbench_lib.analysis.claim import more_units, panel_claims, quantile_level, t_quantile  # noqa: E402
from specbench_lib.analysis.promptspread import (  # noqa: E402
    PromptSpread,
    panel_spread,
    prompt_table,
    spreads,
)
from specbench_lib.analysis.units import units_of  # noqa: E402
from specbench_lib.model.answerfile import read_answer, write_answer  # noqa: E402
from specbench_lib.model.records import CellRecord  # noqa: E402
from specbench_lib.model.served import PromptRecord  # noqa: E402
from specbench_lib.report import plots  # noqa: E402
from specbench_lib.runs.run import RunDir  # noqa: E402

AUTO_RATE = 10.0


def cell(config: str, rates: list[float], tokens: list[int], *, repeat: int, repeats: int,
         workload: str = "code") -> CellRecord:
    """An ok cell whose request i (one after another) has ``tokens[i]`` tokens at ``rates[i]``
    tok/s, from the documents ``d<repeat>-<i>``."""
    method = "auto" if config == "auto" else "ngram"
    base = make_cell(config, method, None if method == "auto" else 8, repeat=repeat,
                     repeats=repeats, workload=workload, tokens=max(tokens))
    requests, t = [], 0.0
    for i, (rate, n) in enumerate(zip(rates, tokens, strict=True)):
        rec = request(i, tokens=n, last=n / rate)
        rec.max_tokens, rec.stop = max(tokens), "eos"  # an answer that ended at its EOS
        rec.final = replace(rec.final, finish_reason="stop")
        rec.start, rec.end = rec.start + t, rec.end + t
        rec.token_times = [x + t for x in rec.token_times]
        requests.append(rec)
        t = rec.end
    prompts = tuple(PromptRecord(f"{workload}{repeat}-{i}", 4, (f"d{repeat}-{i}",))
                    for i in range(len(rates)))
    return analyse(replace(base, requests=tuple(requests), prompts=prompts,
                           judge=replace(base.judge, planned=len(rates))))


def panel(effects: list[float], tokens: list[int], *, blocks: int = 3, workload: str = "code",
          factors: list[float] | None = None, config: str = "ngram-b8") -> list[CellRecord]:
    """``auto`` at 10 tok/s on every prompt and ``config`` at ``effects[i]`` × that on prompt
    i, ``factors[b]`` × more in block b, over ``blocks`` blocks."""
    cells = []
    for b, factor in enumerate(factors or [1.0] * blocks):
        cells.append(cell("auto", [AUTO_RATE] * len(effects), tokens, repeat=b, repeats=blocks,
                          workload=workload))
        cells.append(cell(config, [AUTO_RATE * e * factor for e in effects],
                          tokens, repeat=b, repeats=blocks, workload=workload))
    assert all(c.verdict.ok for c in cells), [c.verdict for c in cells]
    return cells


# half the prompts 1.3× (the long answers), half 0.8× (the short ones), in every block
EFFECTS = [1.3, 0.8, 1.3, 0.8, 1.3, 0.8]
TOKENS = [48, 12, 40, 16, 44, 8]


def test_the_distribution_recovers_per_prompt_effects_set_by_the_test() -> None:
    table = prompt_table(panel(EFFECTS, TOKENS))
    assert len(table) == 18 and set(table["config"]) == {"ngram-b8"}  # auto against itself: no row
    assert table["speedup"].to_numpy() == pytest.approx([*EFFECTS] * 3, rel=1e-6)
    assert list(table["answer_tokens"]) == [float(t) for t in TOKENS] * 3
    assert list(table["sources"])[:2] == ["d0-0", "d0-1"] and list(table["block"])[6] == 1
    row = spreads(table).iloc[0]
    assert (row["prompts"], row["blocks"], row["faster"], row["slower"]) == (18, 3, 9, 9)
    assert (row["p10"], row["p90"]) == pytest.approx((0.8, 1.3), rel=1e-6)
    assert row["p50"] == pytest.approx((0.8 + 1.3) / 2, rel=1e-6)  # between the halves
    logs = np.log([*EFFECTS] * 3)
    assert row["sd_prompt"] == pytest.approx(np.std(logs, ddof=1), rel=1e-6)
    assert row["sd_block"] == pytest.approx(0.0, abs=1e-9)  # every block alike
    assert row["speedup"] == pytest.approx(math.exp(logs.mean()), rel=1e-6)


def test_the_blocks_sd_is_that_of_the_block_means() -> None:
    table = prompt_table(panel(EFFECTS, TOKENS, factors=[1.0, 1.1, 0.95]))
    row = spreads(table).iloc[0]
    means = [math.log(f) + np.mean(np.log(EFFECTS)) for f in (1.0, 1.1, 0.95)]
    assert row["sd_block"] == pytest.approx(np.std(means, ddof=1), rel=1e-6)


def test_by_answer_length_the_terciles_split_the_gain_from_the_loss() -> None:
    effects = [1.3, 1.0, 0.8, 1.3, 1.0, 0.8]  # long answers gain, short ones lose
    tokens = [64, 32, 8, 60, 30, 10]
    split = spreads(prompt_table(panel(effects, tokens)), ["length"]).set_index("length")
    assert list(split.index) == ["long (60-64 tokens)", "medium (30-32 tokens)",
                                 "short (8-10 tokens)"]
    assert list(split["p50"]) == pytest.approx([1.3, 1.0, 0.8], rel=1e-6)
    assert list(split["prompts"]) == [6, 6, 6]
    same = prompt_table(panel(effects, [16] * 6))  # stop: length, every answer alike
    assert set(same["length"]) == {"all (16 tokens)"}


def grouped() -> list[CellRecord]:
    """Categories a (1.3× on every prompt) and b (0.8×), and the group of both."""
    return [*panel([1.3] * 4, [16] * 4, blocks=2, workload="a"),
            *panel([0.8] * 4, [16] * 4, blocks=2, workload="b")]


def test_by_category_a_groups_panel_splits_its_prompts_by_the_member_they_came_from() -> None:
    groups = {"ab": ["a", "b"]}
    pool = pooled(grouped(), groups)
    table = prompt_table(pool, groups=groups)
    assert set(table["workload"]) == {"ab"} and len(table) == 16
    split = spreads(table, ["category"]).set_index("category")
    assert split.loc["a", "p50"] == pytest.approx(1.3) and split.loc["b", "p50"] == pytest.approx(0.8)
    assert (split.loc["a", "faster"], split.loc["b", "slower"]) == (8, 8)
    whole = spreads(table).iloc[0]
    assert (whole["faster"], whole["slower"], whole["blocks"]) == (8, 8, 4)
    claim = panel_claims(pool)[("ab", 256, 16, 1, "", 0.0, 1)]
    entry = panel_spread(pool, claim, groups=groups)
    assert entry is not None and entry["by_category"] == pytest.approx({"a": 1.3, "b": 0.8})
    assert "p50 a 1.30×, b 0.80×" in entry["words"]
    shown = PromptSpread(table).text()
    assert "per-prompt speedup by category" in shown and "by answer length" not in shown
    # the categories as panels of their own: each its own distribution
    alone = spreads(prompt_table(grouped())).set_index("workload")
    assert alone.loc["a", "p50"] == pytest.approx(1.3) and alone.loc["b", "p90"] == pytest.approx(0.8)


def test_the_answer_states_the_leaders_spread_and_answer_json_holds_its_numbers(
        tmp_path: Path) -> None:
    effects, tokens = [1.3, 1.1, 0.8, 1.3, 1.1, 0.8], [64, 32, 8, 60, 30, 10]
    answer = fixed_answer(panel(effects, tokens), seconds=1.0)
    spread = answer.panels[0].spread
    assert spread is not None
    assert spread["config"] == "ngram-b8" and spread["baseline"] == "auto"
    assert (spread["prompts"], spread["faster"], spread["slower"], spread["blocks"]) == (18, 12, 6, 3)
    assert (spread["p10"], spread["p50"], spread["p90"]) == pytest.approx((0.8, 1.1, 1.3))
    assert spread["by_length"] == pytest.approx({"long (60-64 tokens)": 1.3,
                                                 "medium (30-32 tokens)": 1.1,
                                                 "short (8-10 tokens)": 0.8})
    assert spread["sd_prompt"] == pytest.approx(np.std(np.log(effects * 3), ddof=1), abs=1e-4)
    said = "\n".join(answer_lines(answer, more=True)[1:])
    assert ("per prompt 0.80-1.30× (p10-p90), 12 of 18 prompts faster; p50 long (60-64 tokens) "
            "1.30×, medium (30-32 tokens) 1.10×, short (8-10 tokens) 0.80×") in said
    write_answer(tmp_path, answer)
    back = read_answer(tmp_path)
    assert back is not None and back.panels[0].spread == spread  # read back, shape checked


def test_where_the_baseline_leads_the_phrase_names_the_config_it_describes() -> None:
    answer = fixed_answer(panel([0.9, 0.7, 1.05], [16] * 3), seconds=1.0)
    entry = answer.panels[0]
    assert entry.best == "auto" and entry.spread and entry.spread["config"] == "ngram-b8"
    assert "per prompt, ngram-b8 vs auto 0.70-1.05× (p10-p90), 3 of 9 prompts faster" in \
        "\n".join(answer_lines(answer, more=True)[1:])


def test_more_requests_come_from_the_same_spread_the_block_means_sd() -> None:
    """With the leader and auto alone, "about N more requests" is the spread's sd_block at the
    claim's t: blocks needed = (t · sd_block / (log speedup − log(1 − ε)))²."""
    cells = panel([1.04, 0.98, 1.06], [16] * 3, blocks=4, factors=[1.0, 1.2, 0.9, 1.1])
    claim = panel_claims(cells)[("code", 256, 16, 1, "", 0.0, 1)]
    assert claim.leader == "ngram-b8" and claim.decision == "undecided"
    spread = spreads(prompt_table(cells)).iloc[0]
    t = t_quantile(quantile_level(claim.alpha, 2), int(spread["blocks"]) - 1)
    blocks = (t * spread["sd_block"] / (math.log(spread["speedup"]) - math.log(0.95))) ** 2
    prompts = int(spread["prompts"])
    more = math.ceil(blocks * prompts / spread["blocks"]) - prompts  # one request a prompt
    units = {c: units_of([x for x in cells if x.spec.config == c]) for c in ("auto", "ngram-b8")}
    assert more > 0 and more_units(units, claim) == more
    assert fixed_answer(cells, seconds=1.0).panels[0].more_requests == more


def run_of(tmp_path: Path, cells: list[CellRecord]) -> SweepResult:
    run = RunDir(tmp_path / "run")
    run.cells_dir.mkdir(parents=True)
    run.update_manifest(phase="t", model={"path": "/m/x.gguf"}, engine={"kind": "llamacpp"})
    for one in cells:
        run.write_cell(one)
    return SweepResult(run.path)


def test_the_figures_draw_every_prompt_by_category_and_are_saved_with_the_run(
        tmp_path: Path) -> None:
    result = run_of(tmp_path, [*panel(EFFECTS, TOKENS, workload="code"),
                               *panel([1.1, 0.9, 1.2], [16] * 3, workload="chat")])
    figures = plots.standard(result)
    fig = figures["speedup_per_prompt"]
    axes = [ax for ax in fig.axes if ax.get_visible()]
    assert len(axes) == 2 and all(ax.get_yscale() == "log" for ax in axes)
    points = {ax.get_title().split("\n")[0]: sorted(y for line in ax.get_lines()
                                                    if line.get_label().startswith("category")
                                                    for y in line.get_ydata()) for ax in axes}
    assert points["code/ctx256/c1"] == pytest.approx(sorted([*EFFECTS] * 3), rel=1e-6)
    assert points["chat/ctx256/c1"] == pytest.approx(sorted([1.1, 0.9, 1.2] * 3), rel=1e-6)
    assert "auto 10.0 tok/s" in axes[0].get_title()  # the machine's speed (and its load)
    assert any(line.get_ydata()[0] == 1.0 for line in axes[0].get_lines())  # the line at 1×
    length = figures["speedup_vs_answer_length"]
    xs = sorted(x for line in length.axes[1].get_lines() if line.get_label() == "ngram-b8"
                for x in line.get_xdata())
    assert xs == pytest.approx(sorted(TOKENS * 3))
    saved = result.save_figures({k: figures[k] for k in ("speedup_per_prompt",
                                                          "speedup_vs_answer_length")})
    assert [p.name for p in saved] == ["speedup_per_prompt.png", "speedup_vs_answer_length.png"]
    assert all(p.stat().st_size > 5000 and p.parent.name == "plots" for p in saved)
    shown = result.prompt_spread()
    assert "every prompt, fastest first" in shown.text() and "<details>" in shown.html()
