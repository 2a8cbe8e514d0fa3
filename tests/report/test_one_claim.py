"""Every reader states the one claim (issue 29): the answer, answer.json, the summary, the table,
results.csv, the LaTeX table and its caption, results.html, comparison.json, the figures' rings
and compare, over the same run directories: a budgeted run (fake servers), a fixed plan with
repeats and a failed config, and a fixed plan whose leader is decided alone."""

from __future__ import annotations

import html
import json
from pathlib import Path

import matplotlib
import numpy as np
import pandas as pd
import pytest
from budgetparams import budget_params
from cellfactory import make_cell, spread_cell

matplotlib.use("Agg")

import specbench_lib as sb  # noqa: E402
from specbench_lib.analysis.answer import answer_of, read_answer  # noqa: E402
from specbench_lib.analysis.best import verdict_words  # noqa: E402
from specbench_lib.report import plots  # noqa: E402
from specbench_lib.report.comparison import Comparison  # noqa: E402
from specbench_lib.report.diff import RunDiff  # noqa: E402
from specbench_lib.report.export import write_page, write_summary  # noqa: E402
from specbench_lib.report.latex import text as latex_text  # noqa: E402
from specbench_lib.report.latex import write_latex  # noqa: E402
from specbench_lib.report.writers import write_tables  # noqa: E402
from specbench_lib.runs.run import RunDir  # noqa: E402


def fixed_run(folder: Path, means: dict[str, float], *, repeats: int, requests: int,
              crashed: tuple[str, ...] = (), seed: int = 0) -> Path:
    """A fixed plan: per repeat the same prompts (a shared speed factor) to every config."""
    run = RunDir(folder)
    run.cells_dir.mkdir(parents=True)
    run.update_manifest(phase="t", model={"path": "/m/x.gguf"}, engine={"kind": "llamacpp"},
                        params={"equivalence": 0.05})
    rng = np.random.default_rng(seed)
    for repeat in range(repeats):
        shared = np.exp(0.25 * rng.standard_normal(requests))
        for config, mean in means.items():
            budget = None if config == "auto" else int(config.split("-b")[1])
            noise = np.exp(0.05 * rng.standard_normal(requests))
            run.write_cell(spread_cell(config, "auto" if budget is None else "ngram", budget,
                                       list(mean * shared * noise), repeat=repeat,
                                       repeats=repeats))
    for config in crashed:
        run.write_cell(make_cell(config, "ngram", int(config.split("-b")[1]), "crashed", None))
    return run.path


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, sb.SweepResult]:
    root = tmp_path_factory.mktemp("claims")
    budgeted = sb.run_sweep(sb.load_plan(budget_params(root, seed=0, budget="25s", jitter=0.3)),
                            outputs=root / "out", progress=False)
    return {
        "budgeted": budgeted,
        "repeats_and_failed": sb.SweepResult(fixed_run(
            root / "fixed", {"auto": 31.8, "ngram-b4": 34.2, "ngram-b8": 33.4, "ngram-b32": 29.5},
            repeats=2, requests=8, crashed=("ngram-b16",))),
        "decided": sb.SweepResult(fixed_run(root / "clear", {"auto": 30.0, "ngram-b8": 45.0},
                                            repeats=1, requests=6, seed=3)),
    }


def claim_of(result: sb.SweepResult) -> list[dict]:
    best = result.best()
    assert len(best), "every run here has a panel"
    return best.to_dict("records")


def figures(row: dict) -> tuple[str, str]:
    return (f"{row['speedup']:.2f}", f"[{row['speedup_lo']:.2f}, {row['speedup_hi']:.2f}]")


@pytest.mark.parametrize("name", ["budgeted", "repeats_and_failed", "decided"])
def test_every_reader_states_the_same_claim(runs, name: str, tmp_path: Path) -> None:
    result = runs[name]
    rows = claim_of(result)
    table = result.table()
    summary = result.summary().text()
    answer = answer_of(result).text()
    comparison = Comparison([result])
    tex = write_latex(comparison, tmp_path / "results.tex").read_text()
    written = json.loads(write_summary(comparison, tmp_path / "comparison.json").read_text())
    page = write_page(comparison, tmp_path / "results.html", []).read_text()
    csv = pd.read_csv(write_tables(result))
    claims = RunDiff(result, result).claims()
    stored = read_answer(result.run_dir)
    for row in rows:
        members = row["confidence_set"].split(", ")
        assert row["best"] in members or row["decision"] == "undecided"
        # the summary, the answer, the results page and compare state the one statement
        assert row["statement"] in summary and f"A: {row['statement']}" in claims
        assert html.escape(row["statement"]) in page
        words = verdict_words(row, row["equivalence"])
        assert words in answer
        # the tables: the leader's speedup and interval are the claim's, to the digit
        leader = table[(table["config"] == row["best"]) & (table["context"] == row["context"])
                       & (table["concurrency"] == row["concurrency"])].iloc[0]
        assert (leader["speedup"], leader["speedup_lo"], leader["speedup_hi"]) == (
            row["speedup"], row["speedup_lo"], row["speedup_hi"])
        on_disk = csv[csv["config"] == row["best"]].iloc[0]
        assert on_disk["speedup_lo"] == pytest.approx(row["speedup_lo"], rel=1e-9)
        point, span = figures(row)
        if row["best"] != "auto":
            assert f"{point} {span}" in tex and f"{point}× {span}" in answer
        # the LaTeX caption states the claim and what the interval is over
        assert latex_text(words) in tex and "paired t over the blocks' means" in tex
        (entry,) = [b for b in written["best"] if b["context"] == row["context"]]
        assert entry["confidence_set"] == row["confidence_set"]
        assert (entry["decision"], entry["best"]) == (row["decision"], row["best"])
        assert entry["speedup_lo"] == pytest.approx(row["speedup_lo"], rel=1e-9)
        rings(result, row)
        if stored is not None:  # a budgeted run: its answer.json is the same claim
            (panel,) = stored["panels"]
            assert panel["confidence_set"] == members and panel["decision"] == row["decision"]
            assert panel["speedup_lo"] == pytest.approx(row["speedup_lo"], abs=1e-4)
            assert panel["epsilon"] == pytest.approx(row["epsilon"], abs=1e-4)
            assert written["answers"][result.run_id]["panels"][0]["best"] == row["best"]


def rings(result: sb.SweepResult, row: dict) -> None:
    """The throughput figure rings exactly the claim's set (auto, as a band, unringed)."""
    fig = plots.throughput_vs_budget(result)
    ringed = set()
    table = result.table()
    for ax in fig.axes:
        for line in ax.get_lines():
            if line.get_markersize() == 15:
                y = float(line.get_ydata()[0])
                ringed |= set(table.loc[np.isclose(table["output_tok_s"], y), "config"])
    assert ringed == set(row["confidence_set"].split(", ")) - {"auto"}
    matplotlib.pyplot.close(fig)


def test_the_runs_cover_a_decision_a_failed_config_and_a_budget(runs) -> None:
    assert claim_of(runs["decided"])[0]["decision"] == "decided"
    failed = runs["repeats_and_failed"]
    assert "ngram-b16" not in claim_of(failed)[0]["confidence_set"]
    assert failed.counts()["crashed"] == 1 and read_answer(runs["budgeted"].run_dir) is not None
    # repeats add units, as rounds do: a fixed plan and a budgeted run differ in nothing else
    assert claim_of(failed)[0]["requests_n"] == 16
