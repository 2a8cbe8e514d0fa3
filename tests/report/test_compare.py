"""Two runs side by side: metrics matched by spec with their ratio B / A and its own interval
(a difference only where it excludes 1), a headline with the geometric mean, verdict changes,
and what differs in the setup; `specbench compare A B`."""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import pytest
from cellfactory import make_cell, spread_cell

from specbench_lib import SweepResult
from specbench_lib.report.diff import RunDiff, write_diff
from specbench_lib.runs.run import RunDir

ROOT = Path(__file__).resolve().parents[2]


def write_run(root: Path, run_id: str, engine: str, cells: list) -> Path:
    run = RunDir(root / "runs" / run_id)
    run.cells_dir.mkdir(parents=True)
    run.update_manifest(phase="t", model={"path": "/m/x.gguf"}, engine={"version": engine},
                        params={"output_tokens": 16},
                        servers={"ngram-b8": {"argv": ["llama-server", "--draft-max", "8"]}})
    for cell in cells:
        run.write_cell(cell)
    return run.path


def test_metrics_verdict_changes_and_setup_differences(tmp_path: Path) -> None:
    same = [40.0, 50.0, 60.0] * 4
    a = write_run(tmp_path, "a", "b4000", [
        spread_cell("auto", "auto", None, same), spread_cell("ngram-b8", "ngram", 8, same),
        make_cell("ngram-b16", "ngram", 16, tok_s=70.0)])
    b = write_run(tmp_path, "b", "b4100", [
        spread_cell("auto", "auto", None, same),
        spread_cell("ngram-b8", "ngram", 8, [2 * r for r in same]),  # twice as fast: a change
        make_cell("ngram-b16", "ngram", 16, "crashed", None)])
    comparison = RunDiff(SweepResult(a), SweepResult(b))
    rows = comparison.metrics().set_index("config")
    assert rows.loc["ngram-b8", "b_over_a"] == 2.0 and rows.loc["ngram-b8", "differs"]
    assert rows.loc["ngram-b8", "b_over_a_lo"] > 1  # beyond the noise
    # the same requests in both runs: B / A is 1, and its interval (independent draws) holds it
    assert rows.loc["auto", "b_over_a"] == 1.0 and not rows.loc["auto", "differs"]
    assert rows.loc["auto", "b_over_a_lo"] < 1 < rows.loc["auto", "b_over_a_hi"]
    assert "ngram-b16" not in rows.index  # ok in one run only: no ratio to give
    (change,) = comparison.verdict_changes().to_dict("records")
    assert (change["config"], change["verdict_a"], change["verdict_b"]) == ("ngram-b16", "ok",
                                                                            "crashed")
    setup = comparison.setup().set_index("what")
    assert setup.loc["engine.version", "a"] == "b4000" and setup.loc["engine.version", "b"] == "b4100"
    assert "params.output_tokens" not in setup.index  # the same in both: not a difference
    page = write_diff(comparison, tmp_path / "compare")
    html = page.read_text()
    assert page.name == "a__vs__b.html" and "data:image/png;base64," in html
    assert "http://" not in html and "https://" not in html  # nothing fetched: works offline
    assert "<td>ngram-b16</td>" in html and "crashed" in html
    assert "B slower in 0/2 matched rows, faster in 1/2, no difference shown in 1/2" in html


def rates(mean: float, n: int, seed: int) -> list[float]:
    rng = random.Random(seed)
    return [mean * rng.uniform(0.9, 1.1) for _ in range(n)]


def test_a_clear_change_differs_and_noise_does_not(tmp_path: Path) -> None:
    before = [spread_cell("auto", "auto", None, rates(50, 24, 1)),
              spread_cell("ngram-b8", "ngram", 8, rates(70, 24, 2))]
    after = [spread_cell("auto", "auto", None, rates(50, 24, 3)),  # new noise, the same speed
             spread_cell("ngram-b8", "ngram", 8, rates(0.8 * 70, 24, 4))]  # 0.8x: slower
    comparison = RunDiff(SweepResult(write_run(tmp_path, "a", "b1", before)),
                               SweepResult(write_run(tmp_path, "b", "b2", after)))
    rows = comparison.metrics().set_index("config")
    slow, same = rows.loc["ngram-b8"], rows.loc["auto"]
    assert slow["differs"] and slow["b_over_a_lo"] < 0.8 * 1.05 and slow["b_over_a_hi"] < 1
    assert not same["differs"] and same["b_over_a_lo"] < 1 < same["b_over_a_hi"]
    headline = comparison.headline()
    assert headline.startswith("output tok/s, B / A: B slower in 1/2 matched rows, faster in "
                               "0/2, no difference shown in 1/2")
    geo = float(headline.split("geometric mean ")[1].split()[0])
    assert geo == pytest.approx((slow["b_over_a"] * same["b_over_a"]) ** 0.5, abs=0.005)
    low, high = (float(x) for x in headline.split("[")[1].split("]")[0].split(", "))
    assert low < geo < high < 1  # the two rows together: slower, beyond the noise
    assert headline in comparison.text()


def test_the_cli_prints_the_comparison_and_writes_its_page(tmp_path: Path) -> None:
    cells = [spread_cell("auto", "auto", None, [40.0, 50.0, 60.0])]
    write_run(tmp_path, "a", "b1", cells)
    write_run(tmp_path, "b", "b2", cells)
    done = subprocess.run([sys.executable, "-m", "specbench_lib.cli", "compare", "a", "b"],
                          capture_output=True, text=True, cwd=ROOT, timeout=120,
                          env={"SPECBENCH_OUTPUTS": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    assert "run A a vs run B b" in done.stdout and "engine.version" in done.stdout
    assert (tmp_path / "compare" / "a__vs__b.html").is_file()
    missing = subprocess.run([sys.executable, "-m", "specbench_lib.cli", "compare", "a", "zz"],
                             capture_output=True, text=True, cwd=ROOT, timeout=120,
                             env={"SPECBENCH_OUTPUTS": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert missing.returncode == 2 and "no such runs: zz" in missing.stderr


def test_the_index_links_the_comparison_pages(tmp_path: Path) -> None:
    from specbench_lib.report.export import build_index

    cells = [spread_cell("auto", "auto", None, [40.0, 50.0, 60.0])]
    comparison = RunDiff(SweepResult(write_run(tmp_path, "a", "b1", cells)),
                               SweepResult(write_run(tmp_path, "b", "b2", cells)))
    write_diff(comparison, tmp_path / "compare")
    html = build_index(tmp_path).read_text()
    assert '<a href="compare/a__vs__b.html">a__vs__b.html</a>' in html


def test_the_figure_leaves_out_a_cell_ok_in_one_run_only_and_a_run_with_no_ok_cell_compares(
        tmp_path: Path) -> None:
    a = write_run(tmp_path, "a", "b1", [make_cell("auto", "auto", None, tok_s=40.0),
                                        make_cell("ngram-b8", "ngram", 8, tok_s=70.0)])
    b = write_run(tmp_path, "b", "b2", [make_cell("auto", "auto", None, tok_s=40.0),
                                        make_cell("ngram-b8", "ngram", 8, "crashed", None)])
    comparison = RunDiff(SweepResult(a), SweepResult(b))
    (ax,) = comparison.figure().axes  # a forest of B / A: matched rows only
    assert [t.get_text() for t in ax.get_yticklabels()] == ["auto code ctx256 c1",
                                                           "geometric mean (1 row)"]
    assert "1 cell ok in one run only: not drawn" in ax.get_title()  # said, never a value
    (point,) = [line for line in ax.get_lines() if line.get_marker() == "o"]
    assert float(point.get_xdata()[0]) == pytest.approx(1.0)  # auto: the same speed in both
    assert "ngram-b8" in comparison.html() and "crashed" in comparison.html()  # listed
    # every cell of B crashed: nothing in common, and the page is still written
    c = write_run(tmp_path, "c", "b3", [make_cell("auto", "auto", None, "crashed", None),
                                        make_cell("ngram-b8", "ngram", 8, "crashed", None)])
    page = write_diff(RunDiff(SweepResult(a), SweepResult(c)), tmp_path / "compare")
    html = page.read_text()
    assert "data:image/png;base64," in html and html.count("crashed") >= 2
    assert "no row is ok in both runs" in html
