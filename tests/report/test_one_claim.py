"""Every reader states the one claim (issue 29): the answer, answer.json, the summary, the table,
results.csv, the LaTeX table and the claims under it, results.html, comparison.json, the figures' rings
and compare, over the same run directories: a budgeted run (fake servers), a fixed plan with
repeats and a failed config, a fixed plan whose leader is decided alone, a fixed plan of one
block (undecided, and every reader says why) and a fixed plan with repeats swept on fake servers
(two workloads, 3 repeats: its answer.json is over every block, issue 49; it was over the
first)."""

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
from fakeparams import fake_argv
from paramsfiles import fake_plan, write_params
from ports import free_port

matplotlib.use("Agg")

import specbench_lib as sb  # noqa: E402
from specbench_lib.analysis.answer import answer_lines, answer_of
from specbench_lib.analysis.answerbuild import fixed_answer
from specbench_lib.analysis.best import verdict_words  # noqa: E402
from specbench_lib.analysis.claim import ONE_BLOCK  # noqa: E402
from specbench_lib.model.answerfile import read_answer, write_answer  # noqa: E402
from specbench_lib.report import plots  # noqa: E402
from specbench_lib.report.comparison import Comparison  # noqa: E402
from specbench_lib.report.diff import RunDiff  # noqa: E402
from specbench_lib.report.export import write_page, write_summary  # noqa: E402
from specbench_lib.report.latex import text as latex_text  # noqa: E402
from specbench_lib.report.latex import write_latex  # noqa: E402
from specbench_lib.report.writers import write_tables  # noqa: E402
from specbench_lib.runs.run import RunDir  # noqa: E402


def fixed_run(folder: Path, means: dict[str, float], *, repeats: int, requests: int,
              crashed: tuple[str, ...] = (), seed: int = 0, late: tuple[str, ...] = ()) -> Path:
    """A fixed plan: per repeat the same prompts (a shared speed factor) to every config
    (``crashed``: configs whose only cell crashed; ``late``: configs whose last repeat crashed),
    with its answer.json as the sweep writes it."""
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
    for config in late:
        run.write_cell(make_cell(config, "ngram", int(config.split("-b")[1]), "crashed", None,
                                 repeat=repeats - 1, repeats=repeats))
    cells = sb.SweepResult(run.path).cells
    write_answer(run.path, fixed_answer(cells, seconds=1.0, equivalence=0.05))
    return run.path


def fixed_params(folder: Path, *, repeats: int) -> Path:
    """A fixed plan on fake servers (ngram-b8 1.35x auto, b4 1.05x, noisy tokens): two
    workloads, so two panels, each config measured ``repeats`` times (blocks)."""
    noise = ("--nodelay", "--jitter", "0.3")
    argv = fake_argv(*noise, "--speedups", "4:1.05,8:1.35", "--noise-seed", "5:{budget}",
                     interval=0.004, budget=True)
    base = fake_argv(*noise, "--noise-seed", "5:auto", interval=0.004)
    configs = [{"name": "auto", "method": "auto", "argv": json.loads(base)},
               {"name": "ngram", "method": "ngram", "budgets": [4, 8], "argv": json.loads(argv)}]
    plan = fake_plan(free_port(), argv=base, phase="fixed", configs=configs,
                     workloads=[{"name": "chat", "source": "sharegpt"},
                                {"name": "code", "source": "humaneval"}],
                     contexts=[32], output_tokens=32, requests_per_cell=3, warmup_requests=1,
                     repeats=repeats, seed=5)
    return write_params(folder, plan, name=f"fixed-{repeats}.yaml")


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, sb.SweepResult]:
    root = tmp_path_factory.mktemp("claims")
    budgeted = sb.run_sweep(sb.load_plan(budget_params(root, seed=0, budget="25s", jitter=0.3)),
                            outputs=root / "out", progress=False)
    swept = sb.run_sweep(sb.load_plan(fixed_params(root, repeats=3)), outputs=root / "out",
                         progress=False)
    return {
        "budgeted": budgeted,
        "fixed_repeats": swept,
        "repeats_and_failed": sb.SweepResult(fixed_run(
            root / "fixed", {"auto": 31.8, "ngram-b4": 34.2, "ngram-b8": 33.4, "ngram-b32": 29.5},
            repeats=2, requests=8, crashed=("ngram-b16",))),
        "decided": sb.SweepResult(fixed_run(root / "clear", {"auto": 30.0, "ngram-b8": 45.0},
                                            repeats=3, requests=6, seed=3)),
        "one_block": sb.SweepResult(fixed_run(root / "once", {"auto": 30.0, "ngram-b8": 45.0},
                                              repeats=1, requests=6, seed=3)),
        "late_crash": sb.SweepResult(fixed_run(
            root / "late", {"auto": 30.0, "ngram-b4": 33.0, "ngram-b8": 45.0}, repeats=3,
            requests=6, seed=4, late=("ngram-b4",))),
    }


def claim_of(result: sb.SweepResult) -> list[dict]:
    best = result.best()
    assert len(best), "every run here has a panel"
    return best.to_dict("records")


def figures(row: dict) -> tuple[str, str]:
    return (f"{row['speedup']:.2f}", f"[{row['speedup_lo']:.2f}, {row['speedup_hi']:.2f}]")


@pytest.mark.parametrize("name", ["budgeted", "fixed_repeats", "repeats_and_failed", "decided",
                                  "one_block", "late_crash"])
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
    lines = answer_lines(stored) if stored is not None else []
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
                       & (table["concurrency"] == row["concurrency"])
                       & (table["workload"] == row["workload"])].iloc[0]
        assert (leader["speedup"], leader["speedup_lo"], leader["speedup_hi"]) == (
            row["speedup"], row["speedup_lo"], row["speedup_hi"])
        on_disk = csv[(csv["config"] == row["best"]) & (csv["workload"] == row["workload"])].iloc[0]
        assert on_disk["speedup_lo"] == pytest.approx(row["speedup_lo"], rel=1e-9)
        point, span = figures(row)
        if row["best"] != "auto":
            assert f"{point} {span}" in tex and f"{point}× {span}" in answer
        # the LaTeX table states the claim (under it) and what the interval is over (caption)
        assert latex_text(words) in tex and "paired t over the blocks' means" in tex
        (entry,) = [b for b in written["best"] if b["context"] == row["context"]
                    and b["workload"] == row["workload"]]
        assert entry["confidence_set"] == row["confidence_set"]
        assert (entry["decision"], entry["best"]) == (row["decision"], row["best"])
        assert entry["speedup_lo"] == pytest.approx(row["speedup_lo"], rel=1e-9)
        rings(result, row)
        if stored is not None:  # a swept run: its answer.json is the same claim
            (panel,) = [p for p in stored.panels if p.panel.workload == row["workload"]
                        and p.panel.context == row["context"]]
            assert list(panel.confidence_set) == members and panel.decision == row["decision"]
            assert panel.best == row["best"] and panel.blocks == row["blocks"]
            assert panel.speedup_lo == pytest.approx(row["speedup_lo"], abs=1e-4)
            assert panel.speedup_hi == pytest.approx(row["speedup_hi"], abs=1e-4)
            assert panel.epsilon == pytest.approx(row["epsilon"], abs=1e-4)
            assert panel.requests[row["best"]] == row["requests_n"]
            (mine,) = [p for p in written["answers"][result.run_id]["panels"]
                       if p["panel"]["workload"] == row["workload"]]
            assert (mine["best"], mine["confidence_set"]) == (row["best"], members)
            # the answer line (the CLI's, and results.html's head) says the statement's words
            assert any(words in line and line.startswith(f"{row['workload']}/")
                       for line in lines[1:])


def rings(result: sb.SweepResult, row: dict) -> None:
    """The throughput figure rings exactly the claim's set (auto, as a band, unringed), read
    from the rings at this panel's throughputs (the other panels' rings are theirs)."""
    fig = plots.throughput_vs_budget(result)
    ringed = set()
    table = result.table()
    table = table[(table["workload"] == row["workload"]) & (table["context"] == row["context"])
                  & (table["concurrency"] == row["concurrency"])]
    for ax in fig.axes:
        for line in ax.get_lines():
            if line.get_markersize() == 15:
                y = float(line.get_ydata()[0])
                ringed |= set(table.loc[np.isclose(table["output_tok_s"], y), "config"])
    assert ringed == set(row["confidence_set"].split(", ")) - {"auto"}
    matplotlib.pyplot.close(fig)


def test_the_runs_cover_a_decision_a_failed_config_and_a_budget(runs) -> None:
    assert claim_of(runs["decided"])[0]["decision"] == "decided"
    # the same effect in one block: undecided, every config in the set, and the row says why
    (once,) = claim_of(runs["one_block"])
    assert (once["decision"], once["reason"], once["blocks"]) == ("undecided", ONE_BLOCK, 1)
    assert once["confidence_set"] == "ngram-b8, auto" and ONE_BLOCK in once["statement"]
    swept = claim_of(runs["fixed_repeats"])
    assert sorted(r["workload"] for r in swept) == ["chat", "code"]
    assert all(r["blocks"] == 3 and r["requests_n"] == 9 and not r["reason"] for r in swept)
    stored = read_answer(runs["fixed_repeats"].run_dir)
    assert stored is not None and stored.rounds == 3 and len(stored.panels) == 2
    # a config whose last repeat crashed is in its panel with the repeats it has, in every reader
    (late,) = claim_of(runs["late_crash"])
    assert "ngram-b4" in late["confidence_set"] or late["decision"] == "decided"
    late_answer = read_answer(runs["late_crash"].run_dir)
    assert late_answer is not None
    (panel,) = late_answer.panels
    assert panel.out == {} and panel.requests["ngram-b4"] == 12
    failed = runs["repeats_and_failed"]
    assert "ngram-b16" not in claim_of(failed)[0]["confidence_set"]
    assert failed.counts()["crashed"] == 1 and read_answer(runs["budgeted"].run_dir) is not None
    # repeats add units, as rounds do: a fixed plan and a budgeted run differ in nothing else
    assert claim_of(failed)[0]["requests_n"] == 16
