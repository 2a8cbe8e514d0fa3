"""A report says what it is built from: the latest complete full-plan run per phase (a
one-budget run is never taken by accident), and two runs of one phase are not averaged."""

from __future__ import annotations

from pathlib import Path

import pytest
from cellfactory import make_cell

from specbench_lib.core.errors import ValidationFailed
from specbench_lib.report.export import compare
from specbench_lib.runs.run import RunDir


def write_run(root: Path, run_id: str, *, budget: int | None = None, tok_s: float = 50.0) -> None:
    run = RunDir(root / "runs" / run_id)
    run.cells_dir.mkdir(parents=True)
    run.update_manifest(phase="tp1", status="complete", budget=budget, model={"path": "/m/x"})
    run.write_cell(make_cell("auto", "auto", None, tok_s=tok_s))


def test_the_latest_full_plan_run_is_used_and_a_one_budget_run_is_named(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_run(tmp_path, "20260101T000000Z_tp1_full", tok_s=50.0)
    write_run(tmp_path, "20260102T000000Z_tp1_b16", budget=16, tok_s=99.0)  # newer, partial
    found = compare(root=tmp_path)
    assert [r.run_id for r in found.runs] == ["20260101T000000Z_tp1_full"]
    assert any("leaving out run 20260102T000000Z_tp1_b16: it measured budget 16 only" in s
               for s in found.skipped)
    assert "leaving out run 20260102T000000Z_tp1_b16" in capsys.readouterr().err
    assert "comparing tp1: 20260101T000000Z_tp1_full" in found.text()
    named = compare("20260102T000000Z_tp1_b16", root=tmp_path)  # named: taken
    assert [r.run_id for r in named.runs] == ["20260102T000000Z_tp1_b16"]


def test_two_runs_of_one_phase_are_refused_unless_merged(tmp_path: Path) -> None:
    write_run(tmp_path, "a", tok_s=344.0)
    write_run(tmp_path, "b", tok_s=375.4)
    with pytest.raises(ValidationFailed, match=r"two runs of one phase \(tp1: a, b\)") as refused:
        compare("a,b", root=tmp_path)
    assert str(refused.value).endswith("or pass merge=True")  # the library's keyword
    merged = compare("a,b", root=tmp_path, merge=True)
    assert merged.scaling().iloc[0, 0] == pytest.approx((344.0 + 375.4) / 2)


def test_the_cli_refusal_names_its_flag(outputs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from specbench_lib import cli

    write_run(outputs, "a", tok_s=344.0)
    write_run(outputs, "b", tok_s=375.4)
    assert cli.main(["report", "a", "b"]) == 2
    err = capsys.readouterr().err
    assert "two runs of one phase (tp1: a, b)" in err and err.rstrip().endswith("or pass --merge")
    assert "merge=True" not in err
    assert cli.main(["report", "a", "b", "--merge"]) == 0


def test_the_report_carries_its_figures_with_failed_budgets_marked(
        tmp_path: Path, outputs: Path) -> None:
    import matplotlib.colors as mcolors

    from specbench_lib.report import plots
    from specbench_lib.report.export import write

    run = RunDir(outputs / "runs" / "r")
    run.cells_dir.mkdir(parents=True)
    run.update_manifest(phase="tp1", status="complete", budget=None, model={"path": "/m/x"})
    for cell in (make_cell("auto", "auto", None, tok_s=50.0),
                 make_cell("ngram-b8", "ngram", 8, tok_s=80.0),
                 make_cell("ngram-b12", "ngram", 12, "crashed", None),
                 make_cell("ngram-b16", "ngram", 16, "skipped", None)):
        run.write_cell(cell)
    comparison = compare("r", root=outputs)
    written = write(comparison, outputs / "report")
    for stem in ("speedup_vs_budget_tp1", "throughput_vs_budget_tp1"):
        for suffix in (".png", ".svg"):
            assert (outputs / "report" / f"{stem}{suffix}").stat().st_size > 5_000
        assert outputs / "report" / f"{stem}.png" in written
    page = (outputs / "report" / "results.html").read_text()
    assert 'src="speedup_vs_budget_tp1.png"' in page and 'href="speedup_vs_budget_tp1.svg"' in page
    assert "ngram-b12" in page and "skipped" in page  # the failed cells, listed
    assert written.html().count("data:image/png;base64,") == 2  # drawn in the notebook too
    index = (outputs / "index.html").read_text()
    assert 'href="report/results.html"' in index and 'src="report/speedup_vs_budget_tp1.png"' in index

    (ax,) = plots.report_figures(comparison.runs)["speedup_vs_budget_tp1"].axes
    red = [line for line in ax.get_lines() if line.get_marker() == "x"
           and mcolors.same_color(line.get_color(), "red")]
    assert sorted(float(line.get_xdata()[0]) for line in red) == [12.0, 16.0]  # marked ×
    drawn = [float(x) for line in ax.get_lines() if line not in red
             for x, y in zip(line.get_xdata(), line.get_ydata(), strict=True)
             if line.get_marker() not in ("None", "", None) and y == y]
    assert set(drawn) == {8.0}  # the point and its caps: failed budgets are never a value
    labels = [t.get_text() for t in ax.texts]
    assert "code ngram crashed" in labels and "code ngram skipped" in labels
