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

from specbench_lib.report import export as report
from specbench_lib.runs.run import RunDir

PHASE = "tp1_a%&"  # every name that LaTeX reads as a command when raw
WORKLOAD = "code_&%"
SERIES = "ngram_x&y%"
DOCUMENT = ("\\documentclass{article}\n\\usepackage{booktabs,longtable}\n\\begin{document}\n"
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


def compile_paper(folder: Path) -> tuple[str, str]:
    """Compile ``results.tex`` in ``folder`` as a paper includes it (twice, as longtable asks
    for its column widths); the PDF's text and the log."""
    (folder / "paper.tex").write_text(DOCUMENT)
    for _ in range(2):
        done = subprocess.run([tool("pdflatex"), "-halt-on-error", "-interaction=nonstopmode",
                               "paper.tex"], cwd=folder, capture_output=True, text=True,
                              timeout=180)
        log = (folder / "paper.log").read_text(errors="replace")
        assert done.returncode == 0, log[-3000:]
    assert "Undefined control sequence" not in log and "Missing $" not in log
    assert "Float too large" not in log
    assert "Overfull \\hbox" not in log and "Overfull \\vbox" not in log, log[-3000:]
    return pdf_text(folder / "paper.pdf"), log


def sections(text: str) -> dict[str, list[list[str]]]:
    """The PDF's tables: each caption's first words (phase, workload, context N) → the rows
    under it (on every page it spans), each row split into words."""
    found: dict[str, list[list[str]]] = {}
    current: list[list[str]] = []
    for line in text.splitlines():
        caption = re.match(r"\s*Table \d+: (.+?, .+?, context \d+):", line)
        if caption:
            current = found.setdefault(caption.group(1), [])
        elif len(line.split()) > 1 and line.split()[0].isdigit():  # not a page number
            current.append(line.split())
    return found


def test_the_latex_table_compiles_and_shows_values_and_failed_cells(
        comparison: report.Comparison, outputs: Path) -> None:
    folder = outputs / "report"
    report.write(comparison, folder)
    tex = (folder / "results.tex").read_text()
    assert "output_tok_s" not in tex and "output\\_tok" not in tex  # headers a reader reads
    assert r"code\_\&\%" in tex  # escaped, never raw
    text, _ = compile_paper(folder)
    tables = sections(text)
    assert set(tables) == {f"{as_printed(PHASE)}, {as_printed(WORKLOAD)}, context 256",
                           "tp4, chat, context 256"}, text
    assert "output" in text and "tok/s" in text and "TTFT p50" in text and "[95 % CI]" in text

    def row(phase: str, workload: str, config: str) -> list[str]:
        rows = tables[f"{as_printed(phase)}, {as_printed(workload)}, context 256"]
        found = [r for r in rows if " ".join(r).startswith(f"1 {as_printed(config)} ")]
        assert len(found) == 1, (config, rows)
        return found[0]

    table = comparison.table()
    assert len(table) == 4
    for ok in table.to_dict("records"):  # each ok cell: its numbers as the comparison has them
        cells = row(ok["phase"], ok["workload"], ok["config"])
        interval = ok["speedup_lo"] == ok["speedup_lo"]  # one unit: no interval, none printed
        speedup = (f"{ok['speedup']:.2f} [{ok['speedup_lo']:.2f}, {ok['speedup_hi']:.2f}]"
                   if interval else f"{ok['speedup']:.2f}").split()
        n = str(int(ok["requests_n"]))
        ttft = f"{ok['ttft_p50_s'] * 1000:.1f}"
        tail = [f"{ok['output_tok_s']:.1f}", *speedup, n, ttft, f"{ok['acceptance_length']:.2f}"]
        # the tp1 table has failed rows, so a verdict column; the all-ok tp4 table has none
        assert cells[-len(tail) - 1:] == [*tail, "ok"] if ok["phase"] == PHASE else \
            cells[-len(tail):] == tail, cells
    assert "verdict" not in " ".join(" ".join(r) for r in tables["tp4, chat, context 256"])
    failed = comparison.failed_cells()
    assert sorted(f["verdict"] for f in failed) == ["crashed", "invalid", "skipped"]
    for cell in failed:  # each failed or skipped cell: a row of its own, marked, no number
        cells = row(PHASE, cell["workload"], cell["config"])
        marked = f"– – – – – {cell['verdict']}: {cell['first_reason']}"
        # pdftotext reads LaTeX's \_ (a rule in the default font encoding) as a space
        assert " ".join(cells).endswith(marked.replace("_", " ")), cells
    order = [r for r in tables[f"{as_printed(PHASE)}, {as_printed(WORKLOAD)}, context 256"]
             if as_printed(SERIES).split()[0] in r[1]]  # rows in budget order
    assert [re.search(r"-b(\d+)", " ".join(r)).group(1) for r in order] == ["4", "8", "12", "16"]


EMBEDDED = [("auto", "auto", None), ("ngram-b4", "ngram", 4), ("ngram-b8", "ngram", 8),
            ("ngram-b16", "ngram", 16), ("ngram-b32", "ngram", 32), ("draft-b4", "draft", 4)]


def embedded_run(outputs: Path, plan: list[str], *, workloads: tuple[str, ...] = ("code", "chat"),
                 contexts: tuple[int, ...] = (256, 512),
                 concurrency: tuple[int, ...] = (1, 2, 3)) -> report.Comparison:
    """Ok cells shaped like the embedded sweep (by default 72: 6 configs x 2 workloads x 2
    contexts x concurrency 1, 2, 3), the params listing the series in ``plan`` order."""
    cells = [make_cell(config, method, budget, tok_s=40.0 + 3 * i + c, workload=w, context=ctx,
                       concurrency=c)
             for w in workloads for ctx in contexts for c in concurrency
             for i, (config, method, budget) in enumerate(EMBEDDED)]
    run = RunDir(outputs / "runs" / "r1")
    run.cells_dir.mkdir(parents=True)
    run.update_manifest(phase="embedded", status="complete", model={"path": "/m/x"},
                        params={"configs": [{"name": name} for name in plan]})
    for cell in cells:
        run.write_cell(cell)
    return report.compare("r1", root=outputs)


def test_the_72_row_embedded_table_prints_every_row_on_pages_that_fit(outputs: Path) -> None:
    comparison = embedded_run(outputs, ["auto", "ngram", "draft"])
    assert len(comparison.table()) == 72
    folder = outputs / "report"
    folder.mkdir(parents=True)
    tex = report.write_latex(comparison, folder / "results.tex").read_text()
    assert tex.count("\\begin{longtable}") == 4 and "& verdict" not in tex  # all ok: no column
    text, _ = compile_paper(folder)
    tables = sections(text)
    assert sorted(tables) == [f"embedded, {w}, context {ctx}" for w in ("chat", "code")
                              for ctx in (256, 512)], text
    printed = {(key, r[0], r[1]): r for key, rows in tables.items() for r in rows}
    assert len(printed) == 72 == sum(len(rows) for rows in tables.values())
    for ok in comparison.table().to_dict("records"):
        key = f"embedded, {ok['workload']}, context {ok['context']}"
        cells = printed[(key, str(ok["concurrency"]), ok["config"])]
        assert cells[2] == f"{ok['output_tok_s']:.1f}", cells
    for rows in tables.values():  # plan order within each concurrency: ngram-b4 before -b16
        for c in ("1", "2", "3"):
            assert [r[1] for r in rows if r[0] == c] == [name for name, _, _ in EMBEDDED]


def test_the_params_order_of_series_decides_the_row_order(outputs: Path) -> None:
    comparison = embedded_run(outputs, ["draft", "auto", "ngram"])
    tex = report.write_latex(comparison, outputs / "results.tex").read_text()
    first = tex.split("\\begin{longtable}")[1]
    configs = [line.split(" & ")[1] for line in first.splitlines() if line.startswith("1 & ")]
    assert configs == ["draft-b4", "auto", "ngram-b4", "ngram-b8", "ngram-b16", "ngram-b32"]


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
    assert "& load & config &" in tex and "load & config" not in tex.split("\\caption")[0]
    text, _ = compile_paper(folder)
    rows = sections(text)["tp1, code, context 256"]
    assert [r[1:3] for r in rows] == [["1/s", "auto"], ["1/s", "ngram-b8"], ["2/s", "auto"],
                                      ["2/s", "ngram-b8"]], rows
    # the failed load point (its reason's code: server_failed, \_ read back as a space)
    assert rows[3][-8:] == ["–", "–", "–", "–", "–", "crashed:", "server", "failed"]


def test_a_table_longer_than_a_page_breaks_and_keeps_every_row(outputs: Path) -> None:
    comparison = embedded_run(outputs, ["auto", "ngram", "draft"], workloads=("code",),
                              contexts=(256,), concurrency=tuple(range(1, 13)))
    folder = outputs / "report"
    folder.mkdir(parents=True)
    report.write_latex(comparison, folder / "results.tex")
    text, _ = compile_paper(folder)
    assert "embedded, code, context 256 (continued)" in text  # the header on the next page
    assert "continued on the next page" in text
    rows = sections(text)["embedded, code, context 256"]
    assert sorted((int(r[0]), r[1]) for r in rows) == sorted(
        (c, name) for c in range(1, 13) for name, _, _ in EMBEDDED)
