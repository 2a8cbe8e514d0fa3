"""The desk as a researcher reads it: tables that fit (an interval in one cell, headers in words,
configs in plan order, no empty column, the rest collapsed), one live progress output kept
whole, the run listing that tells runs apart, and a compare page that says what changed."""

from __future__ import annotations

import io
import re
import threading
import time
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from cellfactory import make_cell, spread_cell

from specbench_lib import SweepResult, cli
from specbench_lib.analysis.metricset import RESULTS
from specbench_lib.core.tables import config_rank, interval_text, plan_sorted, readable
from specbench_lib.kernelrun import Echo
from specbench_lib.livelog import LiveLog, log_section
from specbench_lib.notebook import LOG_ATTRIBUTE, appendix
from specbench_lib.report.diff import RunDiff
from specbench_lib.report.pages import relative_paths, run_summaries
from specbench_lib.runs.run import RunDir

PLAN = {"configs": [{"name": "auto"}, {"name": "ngram"}, {"name": "draft"}]}


def compact_part(page: str) -> str:
    """What shows before the collapsed full table."""
    return page.split("<details>")[0]


def test_an_interval_is_one_cell_with_worded_headers_in_plan_order_and_no_empty_column() -> None:
    frame = pd.DataFrame({
        "config": ["ngram-b16", "draft-b4", "ngram-b4", "auto"],
        "workload": ["code"] * 4, "context": [256] * 4, "concurrency": [1, 1, 1, 1],
        "load": [""] * 4, "output_tok_s": [80.0, 60.0, 70.0, 50.0],
        "output_tok_s_lo": [58.0, 50.0, 60.0, 45.0], "output_tok_s_hi": [119.0, 70.0, 80.0, 55.0],
        "speedup": [1.6, 1.2, 1.4, 1.0], "speedup_lo": [1.1, 1.0, 1.2, 1.0],
        "speedup_hi": [2.0, 1.3, 1.5, 1.0]})
    ordered = plan_sorted(frame, ["auto", "ngram", "draft"], ["workload"])
    assert list(ordered["config"]) == ["auto", "ngram-b4", "ngram-b16", "draft-b4"]
    page = readable(ordered, RESULTS)
    shown = compact_part(page)
    assert "output tok/s [95 %]" in shown and "speedup vs auto [95 %]" in shown
    assert "80.0 [58.0, 119.0]" in shown and "1.60 [1.10, 2.00]" in shown
    assert "output_tok_s_lo" not in shown and "<th>load</th>" not in shown  # raw, empty: gone
    assert "every row: workload code · context 256 · concurrency 1" in shown  # said once
    assert "<th>context</th>" not in shown
    rows = re.findall(r"<tr><td>([\w-]+)</td>", shown)
    assert rows == ["auto", "ngram-b4", "ngram-b16", "draft-b4"]
    full = page.split("<details>", 1)[1]  # every column, one click away
    assert "the full table: 4 rows × 11 columns" in full and "output_tok_s_lo" in full
    assert interval_text(0.83, 0.58, 1.19) == "0.83 [0.58, 1.19]"
    assert interval_text(float("nan"), 0.5, 1.0) is None
    assert interval_text(0.83, float("nan"), float("nan")) == "0.83"
    assert config_rank("ngram-b4", ["auto", "ngram"]) < config_rank("ngram-b16", ["auto", "ngram"])


def run_with(root: Path, run_id: str, cells: list[Any], **manifest: Any) -> Path:
    run = RunDir(root / "runs" / run_id)
    run.cells_dir.mkdir(parents=True)
    run.update_manifest(**{"phase": "t", "status": "complete", "model": {"path": "/m/x.gguf"},
                           "engine": {"version": "b1"}, "params": PLAN, **manifest})
    for cell in cells:
        run.write_cell(cell)
    return run.path


def test_the_notebook_summary_lists_configs_in_plan_order(tmp_path: Path) -> None:
    rates = [40.0, 50.0, 60.0]
    path = run_with(tmp_path, "r", [spread_cell("ngram-b16", "ngram", 16, rates),
                                    spread_cell("ngram-b4", "ngram", 4, rates),
                                    spread_cell("auto", "auto", None, rates)])
    result = SweepResult(path)
    shown = compact_part(result.summary().html())
    assert re.findall(r"<tr><td>([\w-]+)</td>", shown) == ["auto", "ngram-b4", "ngram-b16"]
    verdicts = result.html()
    assert [verdicts.find(f"<td>{c}</td>") for c in ("auto", "ngram-b4", "ngram-b16")] == sorted(
        verdicts.find(f"<td>{c}</td>") for c in ("auto", "ngram-b4", "ngram-b16"))


class Handle:
    """IPython's display handle, as a test sees it: every view it was updated to."""

    def __init__(self, first: Any) -> None:
        self.views = [first]

    def update(self, view: Any) -> None:
        self.views.append(view)


def test_the_live_log_is_one_output_updated_per_line_and_kept_whole(tmp_path: Path) -> None:
    handles: list[Handle] = []

    def show(view: Any, display_id: bool) -> Handle:
        assert display_id is True
        handles.append(Handle(view))
        return handles[-1]

    echo = (tmp_path / "echo.log").open("a")  # closed by finish()
    log = LiveLog(show, echo=echo, tidy=lambda s: s.replace("/tmp/x/outputs", "outputs"))
    log.write("  server auto: ready in 0.2 s\n[1/2] auto code ctx16 c1: ok, 9.0 tok/s")
    log.write(" · 1s, about 1s left\n[2/2] ngram-b4 code ctx16 c1: ok · 2s\n")
    log.write("run r: complete, ok 2 in 2 s\nrun directory: /tmp/x/outputs/runs/r\n")
    lines = log.finish()
    assert len(handles) == 1  # one output, however many lines
    (handle,) = handles
    assert len(handle.views) == 5  # the first view, one update per write with whole lines, done
    running = handle.views[2].html()  # the latest cell's line leads while it runs, over the rest
    assert "<b>[2/2] ngram-b4 code ctx16 c1: ok · 2s</b>" in running
    assert "[1/2] auto code ctx16 c1: ok, 9.0 tok/s · 1s, about 1s left\n" in running
    assert lines[-1] == "run directory: outputs/runs/r" and len(lines) == 5
    done = handle.views[-1]
    assert done.text() == "\n".join(lines)  # the whole log, as plain text
    assert "run r: complete, ok 2 in 2 s · the whole progress log (5 lines)" in done.html()
    assert echo.closed and (tmp_path / "echo.log").read_text().endswith(
        "run r: complete, ok 2 in 2 s\nrun directory: /tmp/x/outputs/runs/r\n")  # as printed
    section = log_section(lines)
    assert section.startswith("<details><summary>The progress log (5 lines): run r: complete")
    assert "[2/2] ngram-b4" in section


def test_a_stopped_sweep_says_so_and_the_appendix_collapses_log_and_verdicts(
        tmp_path: Path) -> None:
    handles: list[Handle] = []
    log = LiveLog(lambda view, display_id: handles.append(Handle(view)) or handles[-1])
    log.write("[1/4] auto code ctx16 c1: ok")  # no newline yet: kept at the end
    lines = log.finish(failed=KeyboardInterrupt())
    assert lines == ["[1/4] auto code ctx16 c1: ok"]
    assert "the sweep stopped: KeyboardInterrupt" in handles[0].views[-1].html()
    result = SweepResult(run_with(tmp_path, "r", [make_cell("auto", "auto", None),
                                                  make_cell("ngram-b4", "ngram", 4, "crashed",
                                                            None)]))
    vars(result)[LOG_ATTRIBUTE] = lines
    page = appendix(result).html()
    assert page.count("<details>") == 2 and "[1/4] auto" in page
    assert "Every cell&#x27;s verdict (2 cells: ok 1, crashed 1)" in page
    assert appendix(SweepResult(result.run_dir)).html().count("<details>") == 1  # no log kept


def test_the_terminal_echo_prints_whole_lines_as_the_file_grows(tmp_path: Path) -> None:
    path = tmp_path / "progress.log"
    path.touch()
    out = io.StringIO()
    seen: list[str] = []
    with Echo(path, out, poll_s=0.02):
        with path.open("a") as file:
            file.write("[1/2] auto: ok\n[2/2] ngr")
            file.flush()
            deadline = time.monotonic() + 5
            while "[1/2]" not in out.getvalue() and time.monotonic() < deadline:
                time.sleep(0.02)
            seen.append(out.getvalue())
            file.write("am-b4: ok\n")
    assert seen == ["[1/2] auto: ok\n"]  # a line only once it is whole
    assert out.getvalue() == "[1/2] auto: ok\n[2/2] ngram-b4: ok\n"
    assert not any(t.name == "specbench-echo" for t in threading.enumerate())


def test_paths_are_written_as_a_reader_sees_them(outputs: Path) -> None:
    assert relative_paths(f"run directory: {outputs.resolve()}/runs/r") == \
        "run directory: outputs/runs/r"


def test_runs_are_told_apart_by_plan_budget_and_time(outputs: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    cells = [make_cell("auto", "auto", None)]
    run_with(outputs, "20260101T000000Z_t_full", cells, elapsed_s=578.2,
             plan_fingerprints={f"c{i}": "fp" for i in range(24)})
    run_with(outputs, "20260102T000000Z_t_b16", cells, elapsed_s=95, budget=16,
             verdict_counts={"ok": 1, "invalid": 0, "crashed": 0, "skipped": 0},
             plan_fingerprints={f"c{i}": "fp" for i in range(8)})
    run_with(outputs, "20260103T000000Z_t_rounds", cells, elapsed_s=450,
             plan_fingerprints={f"c{i}": "fp" for i in range(120)},
             params={**PLAN, "time_budget_s": 450})
    summaries = {r["run_id"]: (r["plan"], r["elapsed"]) for r in run_summaries(outputs)}
    assert summaries == {"20260101T000000Z_t_full": ("24 cells", "9 m 38 s"),
                         "20260102T000000Z_t_b16": ("8 cells · budget 16 only", "1 m 35 s"),
                         "20260103T000000Z_t_rounds": ("≤ 120 cells in rounds · 7 m 30 s budget",
                                                       "7 m 30 s")}
    assert cli.main(["runs"]) == 0
    printed = capsys.readouterr().out
    assert re.search(r"20260102T000000Z_t_b16\s+t\s+complete\s+8 cells · budget 16 only\s+"
                     r"1 m 35 s\s+1\b", printed), printed


def write_pair(tmp_path: Path) -> RunDiff:
    same = [40.0, 50.0, 60.0] * 4
    first = [spread_cell("auto", "auto", None, same), spread_cell("ngram-b16", "ngram", 16, same),
             spread_cell("ngram-b4", "ngram", 4, same), make_cell("draft-b8", "draft", 8, tok_s=70.0),
             make_cell("draft-b8", "draft", 8, tok_s=70.0, context=512),
             make_cell("ngram-b8", "ngram", 8, tok_s=70.0)]
    second = [spread_cell("auto", "auto", None, same),
              spread_cell("ngram-b16", "ngram", 16, [0.5 * r for r in same]),
              spread_cell("ngram-b4", "ngram", 4, same),
              make_cell("ngram-b8", "ngram", 8, "crashed", None)]
    a, b = (run_with(tmp_path, run_id, cells, budget=budget,
                     plan_fingerprints={c.cell_id: c.fingerprint for c in cells})
            for run_id, cells, budget in (("a", first, None), ("b", second, 16)))
    return RunDiff(SweepResult(a), SweepResult(b))


def test_compare_names_the_plan_difference_one_line_per_config(tmp_path: Path) -> None:
    comparison = write_pair(tmp_path)
    lines = comparison.plan_difference()
    assert lines == ["cells planned: A 6, B 4", "budget filter: A every budget, B budget 16 only",
                     "draft-b8: only in A (2 cells: ok 2)"]
    changed = comparison.changed()
    assert list(changed["config"]) == ["ngram-b8"]  # ok → crashed: a real change, kept as a row
    page = comparison.html()
    assert page.index("sb-headline") < page.index("How the plans differ")
    assert "absent" not in page  # cells one run lacks are a line each, never rows
    shown = compact_part(page.split("Matched rows")[1])
    assert re.findall(r"<tr><td>([\w-]+)</td>", shown) == ["auto", "ngram-b4", "ngram-b16"]
    assert "B slower" in shown and "B / A [95 %]" in shown and "b_over_a_lo" not in shown


def test_the_compare_figure_is_a_forest_of_matched_rows_with_a_line_at_one(
        tmp_path: Path) -> None:
    comparison = write_pair(tmp_path)
    (ax,) = comparison.figure().axes
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels == ["auto code ctx256 c1", "ngram-b4 code ctx256 c1", "ngram-b16 code ctx256 c1",
                      "geometric mean (3 rows)"]
    assert ax.get_xscale() == "log"
    assert any(list(line.get_xdata()) == [1.0, 1.0] for line in ax.get_lines())  # the line at 1
    rows = comparison.metrics().set_index("config")
    points = {round(float(line.get_ydata()[0])): float(line.get_xdata()[0])
              for line in ax.get_lines() if line.get_marker() in ("o", "D")}
    assert points[2] == pytest.approx(rows.loc["ngram-b16", "b_over_a"])  # 0.5: B at half
    mean = comparison.geometric_mean()
    assert mean is not None and points[3] == pytest.approx(mean[0])
    assert "3 cells ok in one run only: not drawn" in ax.get_title()
