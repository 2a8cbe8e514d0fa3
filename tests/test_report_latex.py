"""The report's LaTeX compiles with a real TeX engine and shows every cell: the values of the ok
cells, and each failed or skipped cell marked with its verdict and first reason; names with
``_``, ``%`` and ``&`` are escaped. Debian's pdflatex, booktabs and pdftotext are installed by
``make setup-test`` (scripts/setup_system.sh)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from cellfactory import make_cell

from specbench_lib import report
from specbench_lib.runs import RunDir

PHASE = "tp1_a%&"  # every name that LaTeX reads as a command when raw
WORKLOAD = "code_&%"
SERIES = "ngram_x&y%"
DOCUMENT = ("\\documentclass{article}\n\\usepackage{booktabs,graphicx}\n\\begin{document}\n"
            "\\input{results}\n\\end{document}\n")


def write_run(root: Path, run_id: str, phase: str, cells: list) -> None:
    run = RunDir(root / "runs" / run_id)
    run.cells_dir.mkdir(parents=True)
    run.update_manifest(phase=phase, status="complete", model={"path": "/m/x"})
    for cell in cells:
        run.write_cell(cell)


def tool(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is not installed: run 'make setup-test' (scripts/setup_system.sh)")
    return found


def pdf_text(pdf: Path) -> str:
    """The PDF's text, one table row a line; pdftotext drops the OT1 underscore (a rule, not a
    glyph), so each ``_`` reads as a space."""
    done = subprocess.run([tool("pdftotext"), "-layout", str(pdf), "-"], capture_output=True,
                          text=True, timeout=30, check=True)
    return done.stdout


def as_printed(name: str) -> str:
    return name.replace("_", " ")


@pytest.fixture
def comparison(outputs: Path) -> report.Comparison:
    s = dict(workload=WORKLOAD, series=SERIES)
    write_run(outputs, "r1", PHASE, [
        make_cell("auto", "auto", None, tok_s=50.0, workload=WORKLOAD),
        make_cell(f"{SERIES}-b8", "ngram", 8, tok_s=80.0, **s),
        make_cell(f"{SERIES}-b12", "ngram", 12, "crashed", None, **s),
        make_cell(f"{SERIES}-b16", "ngram", 16, "skipped", None, **s),
        make_cell(f"{SERIES}-b4", "ngram", 4, "invalid", None, **s)])
    write_run(outputs, "r2", "tp4", [make_cell("auto", "auto", None, tok_s=120.0, workload="chat"),
                                     make_cell("tree-b8", "tree", 8, tok_s=150.0, workload="chat")])
    return report.compare("r1,r2", root=outputs)


def test_the_latex_table_compiles_and_shows_values_and_failed_cells(
        comparison: report.Comparison, outputs: Path) -> None:
    folder = outputs / "report"
    report.write(comparison, folder)
    tex = (folder / "results.tex").read_text()
    assert "output_tok_s" not in tex and r"code\_\&\%" in tex  # escaped, never raw
    (folder / "paper.tex").write_text(DOCUMENT)
    done = subprocess.run([tool("pdflatex"), "-halt-on-error", "-interaction=nonstopmode",
                           "paper.tex"], cwd=folder, capture_output=True, text=True, timeout=120)
    log = (folder / "paper.log").read_text(errors="replace")
    assert done.returncode == 0, log[-3000:]
    assert (folder / "paper.pdf").stat().st_size > 1000
    assert "Undefined control sequence" not in log and "Missing $" not in log
    assert "Overfull \\hbox" not in log  # a wide table is scaled to the line, never cut off
    text = pdf_text(folder / "paper.pdf")
    lines = text.splitlines()

    def row(config: str, workload: str) -> list[str]:
        found = [line.split() for line in lines
                 if re.search(rf"\b{re.escape(as_printed(config))}\s", line)
                 and as_printed(workload) in line]
        assert len(found) == 1, (config, found, text)
        return found[0]

    assert "Table 1: tp1 a%&: output tokens/s" in text and "Table 2: tp4: output tokens/s" in text
    table = comparison.table()
    assert len(table) == 4
    for ok in table.to_dict("records"):  # each ok cell: its numbers as the comparison has them
        cells = row(ok["config"], ok["workload"])
        assert cells[-4:] == [f"{ok['output_tok_s']:.1f}", f"{ok['speedup']:.2f}",
                              f"{ok['acceptance_length']:.2f}", "ok"], cells
    failed = comparison.failed_cells()
    assert sorted(f["verdict"] for f in failed) == ["crashed", "invalid", "skipped"]
    for cell in failed:  # each failed or skipped cell: a row of its own, marked, no number
        cells = row(cell["config"], cell["workload"])
        marked = " ".join(cells[-5:])
        assert marked == f"– – – {cell['verdict']}: {cell['first_reason']}", cells
    order = [line for line in lines if as_printed(SERIES) in line]  # rows in budget order
    assert [re.search(r"-b(\d+)", line).group(1) for line in order] == ["4", "8", "12", "16"]


def test_a_raw_name_would_not_compile(tmp_path: Path) -> None:
    """The engine the test above relies on does reject what the escaping prevents."""
    (tmp_path / "results.tex").write_text("\\begin{tabular}{ll}\ncode_&% & 1 \\\\\n\\end{tabular}\n")
    (tmp_path / "paper.tex").write_text(DOCUMENT)
    done = subprocess.run([tool("pdflatex"), "-halt-on-error", "-interaction=nonstopmode",
                           "paper.tex"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and not (tmp_path / "paper.pdf").exists()


def test_load_points_get_a_column_of_their_own_and_still_compile(outputs: Path) -> None:
    from dataclasses import replace

    def at(cell, rate: float):  # the same spec at an open-loop load point
        return replace(cell, spec=replace(cell.spec, rate=rate))

    write_run(outputs, "r1", "tp1", [
        at(make_cell("auto", "auto", None, tok_s=50.0), 1.0),
        at(make_cell("auto", "auto", None, tok_s=40.0), 2.0),
        at(make_cell("ngram-b8", "ngram", 8, tok_s=70.0), 1.0),
        at(make_cell("ngram-b8", "ngram", 8, "crashed", None), 2.0)])
    folder = outputs / "report"
    folder.mkdir(parents=True)
    tex = report.write_latex(report.compare("r1", root=outputs), folder / "results.tex").read_text()
    assert "workload & context & concurrency & load & config &" in tex
    (folder / "paper.tex").write_text(DOCUMENT)
    done = subprocess.run([tool("pdflatex"), "-halt-on-error", "-interaction=nonstopmode",
                           "paper.tex"], cwd=folder, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, (folder / "paper.log").read_text(errors="replace")[-3000:]
    rows = [line.split() for line in pdf_text(folder / "paper.pdf").splitlines()
            if line.split()[:1] == ["code"]]
    assert [r[3:5] for r in rows] == [["1/s", "auto"], ["1/s", "ngram-b8"], ["2/s", "auto"],
                                      ["2/s", "ngram-b8"]], rows
    assert rows[3][-5:] == ["–", "–", "–", "crashed:", "x"]  # the failed load point, marked
