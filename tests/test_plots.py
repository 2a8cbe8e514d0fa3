"""The plot draws ok cells only: failed budgets are marked, never drawn as a value."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

from specbench_lib import SweepResult, plots  # noqa: E402


def make_run(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    (run / "cells").mkdir(parents=True)
    (run / "manifest.json").write_text(json.dumps({"phase": "t", "model": {"path": "/m/x.gguf"},
                                                   "engine": {"kind": "llamacpp"}}))
    cells = [("auto", None, "ok", 50.0), ("ngram-b4", 4, "ok", 60.0),
             ("ngram-b8", 8, "crashed", None), ("ngram-b16", 16, "ok", 70.0)]
    for label, budget, status, tok_s in cells:
        spec = {"config": label, "series": label.split("-")[0], "budget": budget,
                "method": "auto" if budget is None else "ngram", "workload": "code",
                "context": 256, "concurrency": 1}
        data = {"cell_id": label, "spec": spec, "verdict": {"status": status, "reasons": ["x"]},
                "metrics": None if tok_s is None else {"output_tok_s": tok_s}}
        (run / "cells" / f"{label}.json").write_text(json.dumps(data))
    return run


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
