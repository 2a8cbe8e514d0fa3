"""Sharing: the files written from a comparison of runs, and the index.

:func:`compare` (:mod:`~.comparison`) reads any set of runs (default: the latest complete run of
each phase) into a :class:`Comparison`. The writers are functions apart from it: :func:`write`
(``results.tex``, ``comparison.json``, the figures as PNG and SVG, ``results.html`` and the
index); :func:`build_index` (``outputs/index.html``) and :func:`render_html` (an executed
notebook as HTML) are :mod:`~.pages`'. Every page written here works offline: it loads no script,
style or font from the network, and its figures are files beside it or embedded in it.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..core.display import Rendered, html_page, html_table, html_text, image, join, link, png_data_uri
from ..core.paths import outputs_dir
from ..core.tables import readable
from .comparison import FAILURES, Comparison, compare, latest_runs
from .latex import write_latex
from .pages import HIDE_INPUT_TAG, build_index, render_html

__all__ = ["HIDE_INPUT_TAG", "Comparison", "Written", "build_index", "compare", "latest_runs",
           "render_html", "write", "write_figures", "write_latex", "write_page", "write_summary"]


class Written(list[Path], Rendered):
    """The files :func:`write` wrote, in order; in a notebook they show as a list with the
    report's figures drawn inline (embedded, so the notebook's HTML carries them too)."""

    def text(self) -> str:
        return "\n".join(f"wrote {p}" for p in self)

    def html(self) -> str:
        files = html_table(["wrote"], [[str(p)] for p in self])
        figures = "".join(html_text(p.stem) + image(png_data_uri(p.read_bytes()), p.stem)
                          for p in self if p.suffix == ".png" and p.is_file())
        return files + figures


def write(comparison: Comparison, folder: Path | None = None) -> Written:
    """Write the report into ``folder`` (``outputs/report/``): ``results.tex`` (a LaTeX
    ``longtable`` per phase × workload × context, :mod:`~.latex`), ``comparison.json``, the
    figures (PNG and SVG, :func:`~.plots.report_figures`), ``results.html`` (the tables and
    figures on one page), then refresh the index."""
    target = folder or outputs_dir() / "report"
    target.mkdir(parents=True, exist_ok=True)
    figures = write_figures(comparison, target)
    return Written([write_latex(comparison, target / "results.tex"),
                    write_summary(comparison, target / "comparison.json"), *figures,
                    write_page(comparison, target / "results.html", figures), build_index()])


def write_figures(comparison: Comparison, folder: Path) -> list[Path]:
    """Each report figure as ``<stem>.png`` and ``<stem>.svg`` in ``folder``; the PNG paths.
    Failed and skipped budgets are marked on the figures, never drawn as values (see
    :mod:`~specbench_lib.report.plots`)."""
    import matplotlib.pyplot as plt

    from .plots import report_figures

    pngs = []
    # a run-like value that holds only a table (no cell records) has no figures to draw
    drawn = [run for run in comparison.runs if hasattr(run, "verdicts")]
    for stem, fig in report_figures(drawn).items():
        fig.savefig(folder / f"{stem}.svg", bbox_inches="tight")
        fig.savefig(folder / f"{stem}.png", dpi=120, bbox_inches="tight")
        plt.close(fig)
        pngs.append(folder / f"{stem}.png")
    return pngs


def write_page(comparison: Comparison, path: Path, figures: list[Path]) -> Path:
    """``results.html``: what the report is built from, its warnings, the best budgets, every
    failed cell with its reasons and the figures (the PNG files beside it, each linked to its
    SVG). It loads nothing from the network: share the folder and it reads the same offline."""
    files = [p for p in (path.parent / "results.tex", path.parent / "comparison.json")
             if p.is_file()]
    shown = "".join(
        html_text(png.stem, bold=True)
        + str(link(png.with_suffix(".svg").name, "SVG")) + "<br>" + image(png.name, png.stem)
        for png in figures)
    failures = comparison.failures()
    from ..analysis.answer import answers_html  # a time-budgeted run's answer leads the page

    body = (answers_html(comparison.runs) + comparison.html()
            + html_text("Failed and skipped cells", bold=True,
                        detail=f"{len(failures)} (never a value in a table or figure)")
            + (readable(failures, FAILURES, what="cells") if len(failures) else "")
            + html_text("Figures", bold=True) + shown
            + html_text("Files", bold=True) + join(link(p.name, p.name) for p in files))
    path.write_text(html_page("specbench report", body))
    return path


def write_summary(comparison: Comparison, path: Path) -> Path:
    """``comparison.json``: the runs compared, the best budget of each group (ok cells only) and
    every failed cell of the compared runs (``failures``: phase, run id, cell, config, verdict
    and reasons), so a failure is listed, never left out or ranked."""
    failures = [{k: f[k] for k in ("phase", "run_id", "cell", "config", "verdict", "reasons")}
                for f in comparison.failed_cells()]
    best = comparison.best_budgets().astype(object)
    best = best.where(best.notna(), None)  # NaN is not JSON: a missing value is null
    crossing = comparison.crossovers().astype(object)
    crossing = crossing.where(crossing.notna(), None)
    from ..analysis.answer import answers_json

    path.write_text(json.dumps({"runs": [r.run_id for r in comparison.runs],
                                "answers": answers_json(comparison.runs),
                                "best": best.to_dict("records"),
                                "crossovers": crossing.to_dict("records"), "failures": failures},
                               indent=2, default=str, allow_nan=False))
    return path


