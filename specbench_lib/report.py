"""Sharing: cross-run tables, and the files written from them and from runs.

``compare`` reads any set of runs (default: the latest complete run of each phase) into a
:class:`Comparison`, a value that answers the questions a paper asks: the best budget per phase ×
workload × context × concurrency, the speedups, TP1 → TP4 → TP8 scaling, acceptance length by
budget, and every cell that failed. The writers are functions apart from it: :func:`write`
(``results.tex``, ``comparison.json``, the figures as PNG and SVG, ``results.html`` and the
index), :func:`build_index` (``outputs/index.html``) and :func:`render_html` (an executed
notebook as HTML). Every page written here works offline: it loads no script, style or font from
the network, and its figures are files beside it or embedded in it.
"""

from __future__ import annotations

import datetime as dt
import html
import json
import sys
from functools import cached_property
from pathlib import Path
from typing import Any

from .attempts import attempt_labels
from .display import (
    Rendered,
    frame_table,
    html_page,
    html_table,
    html_text,
    image,
    join,
    link,
    png_data_uri,
)
from .errors import StoreError, ValidationFailed
from .latex import write_latex
from .metrics import PANEL
from .params import check_notebook_parameters
from .paths import outputs_dir
from .results import SweepResult
from .runs import RunDir, list_runs, runs_root

HIDE_INPUT_TAG = "hide-input"
_KEYS = ["phase", *PANEL]


# The lab template, less what it fetches from a CDN: require.js, MathJax, Mermaid and the widget
# manager. Inline CSS and embedded images stay, so the page reads the same offline.
_OFFLINE_TEMPLATE = """{%- extends 'index.html.j2' -%}
{%- block html_head_js_requirejs -%}{%- endblock html_head_js_requirejs -%}
{%- block jupyter_widgets -%}{%- endblock jupyter_widgets -%}
{%- block html_head_js_mathjax -%}{%- endblock html_head_js_mathjax -%}
{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}
"""
_WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def render_html(notebook: Path) -> Path:
    """Render an executed notebook to HTML beside it (inputs of ``hide-input`` cells hidden).

    The page is self-contained: styles inline, images embedded as ``data:`` URIs, and none of the
    scripts the stock template loads from a CDN (require.js, MathJax, Mermaid, the widget
    manager); a widget's output shows its text form (a saved widget has no state to draw).
    """
    import jinja2
    import nbformat
    from nbconvert import HTMLExporter
    from nbconvert.preprocessors import TagRemovePreprocessor

    exporter = HTMLExporter(template_name="lab", embed_images=True,
                            extra_loaders=[jinja2.DictLoader({"specbench.html.j2":
                                                              _OFFLINE_TEMPLATE})],
                            template_file="specbench.html.j2")
    exporter.register_preprocessor(TagRemovePreprocessor(remove_input_tags={HIDE_INPUT_TAG}),
                                   enabled=True)
    nb = nbformat.read(notebook, as_version=4)
    nb.metadata.pop("widgets", None)
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            data = output.get("data")
            if data is not None and _WIDGET_VIEW in data:
                del data[_WIDGET_VIEW]
                data.setdefault("text/plain", "(an interactive widget: not kept in a saved page)")
    body, _ = exporter.from_notebook_node(nb)
    target = notebook.with_suffix(".html")
    target.write_text(body)
    return target


def build_index(root: Path | None = None) -> Path:
    """Write ``outputs/index.html``: every run with its status, counts (numbers, 0 included),
    commit and links, then the report's files (its pages first, each figure with a thumbnail)
    and the ``specbench compare`` pages. Every address is relative: the folder can be shared."""
    out = root or outputs_dir()
    rows = []
    for run in reversed(list_runs(out)):
        run_dir = RunDir(Path(run["path"]))
        labels = attempt_labels(run_dir)  # which attempt a notebook shows, when there are several
        commit = f"{run['commit']}{' (dirty)' if run['dirty'] else ''}"
        rows.append([run["run_id"], run["phase"], run["started"], run["status"],
                     *_counts(run["counts"]), commit,
                     join(link(str(p.relative_to(out)),
                               f"{p.name}: {labels[p.name]}" if p.name in labels else p.name)
                          for p in run_dir.shared_files())])
    stamp = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    table = html_table(["run", "phase", "started", "status", "ok", "invalid", "crashed", "skipped",
                        "commit", "files"], rows)
    shared = [("report", sorted((p for p in (out / "report").glob("*") if p.is_file()),
                                key=lambda p: (p.suffix != ".html", p.name))),
              ("comparisons", sorted((out / "compare").glob("*.html")))]
    extra = "".join(html_text(title, bold=True) + html_table(
        ["file", "figure"] if title == "report" else ["file"],
        [[link(str(p.relative_to(out)), p.name),
          *([image(str(p.relative_to(out)), p.stem, width=240) if p.suffix == ".png" else None]
            if title == "report" else [])] for p in files])
        for title, files in shared if files)
    page = html_page("specbench runs", html_text(f"{len(rows)} runs · written {stamp}") + table
                     + extra)
    out.mkdir(parents=True, exist_ok=True)
    index = out / "index.html"
    index.write_text(page)
    return index


def _counts(counts: dict[str, int] | None) -> list[int | str]:
    """A run's cells per verdict for the index: a number each (0, never a blank); ``?`` while
    the run has recorded no counts (running, or stopped before it finished)."""
    if counts is None:
        return ["?"] * 4
    return [int(counts.get(k) or 0) for k in ("ok", "invalid", "crashed", "skipped")]


def latest_runs(root: Path | None = None, *, skipped: list[str] | None = None) -> list[SweepResult]:
    """The newest ``complete`` full-plan run of each phase that can be read.

    A run of one budget (``-p budget 16``) covers part of its phase's plan: it is left out with
    a warning naming it (name its id to compare it), never taken for the phase by accident.

    A run whose manifest cannot be read is skipped with a warning naming it (and appended to
    ``skipped``); so is a phase's newest complete run that cannot be read, in favour of the one
    before it. Unreadable cell files of a run read are named by :func:`_read`.
    """
    notes = skipped if skipped is not None else []
    complete: dict[str, list[str]] = {}
    for run in list_runs(root):
        if run["error"]:
            _warn(notes, f"skipping run {run['run_id']}: {run['error']}")
        elif run["status"] == "complete" and run["phase"] and run["budget"] is not None:
            _warn(notes, f"leaving out run {run['run_id']}: it measured budget {run['budget']} "
                  f"only (name its id to compare it)")
        elif run["status"] == "complete" and run["phase"]:
            complete.setdefault(run["phase"], []).append(run["path"])
    results = []
    for paths in complete.values():
        for path in reversed(paths):
            result = _read(path, notes)
            if result is not None:
                results.append(result)
                break
    return results


def _read(path: str | Path, notes: list[str]) -> SweepResult | None:
    """The run at ``path``, or None with a warning when its manifest cannot be read; each cell
    file that cannot be read is named in a warning (it is left out of every table)."""
    try:
        result = SweepResult(path)
    except StoreError as exc:
        _warn(notes, f"skipping run {Path(path).name}: {exc}")
        return None
    for error in result.damaged:
        _warn(notes, f"run {result.run_id}: leaving out an unreadable cell file: {error}")
    return result


def _warn(notes: list[str], message: str) -> None:
    notes.append(message)
    print(f"specbench: warning: {message}", file=sys.stderr, flush=True)


class Comparison(Rendered):
    """Tables across runs (one run per phase, typically); each method returns a DataFrame.

    Writing them out is :func:`write`'s job; in a notebook the comparison shows its best budgets.
    """

    def __init__(self, runs: list[SweepResult], *, skipped: list[str] | None = None,
                 merge: bool = False, merge_hint: str = "merge=True") -> None:
        self.skipped = list(skipped or [])  # warnings: runs and cell files that could not be read
        if not runs:
            also = f" ({'; '.join(self.skipped)})" if self.skipped else ""
            raise ValidationFailed(f"no runs to compare: run a phase first or name run ids{also}",
                                   run_dir=str(runs_root()), counts={})
        phases: dict[str, list[str]] = {}
        for run in runs:
            phases.setdefault(str(run.manifest.get("phase")), []).append(run.run_id)
        twice = {p: ids for p, ids in phases.items() if len(ids) > 1}
        if twice and not merge:  # their rows would be averaged without a word
            named = "; ".join(f"{p}: {', '.join(ids)}" for p, ids in twice.items())
            raise ValidationFailed(f"two runs of one phase ({named}): a report would average "
                                   f"them; name one run per phase, use 'specbench compare A B' "
                                   f"to put two side by side, or pass {merge_hint}",
                                   run_dir=str(runs_root()), counts={})
        self.runs = runs

    @cached_property
    def _table(self) -> Any:
        import pandas as pd

        frames = [r.table().assign(phase=r.manifest.get("phase"), run_id=r.run_id) for r in self.runs]
        return pd.concat(frames, ignore_index=True)

    def table(self) -> Any:
        """The ok cells of every run, with its phase and run id."""
        return self._table.copy()

    def best_budgets(self) -> Any:
        """Per run's phase × workload × context × concurrency: the best config with its
        selection-aware speedup interval, the confidence set and its decision, and n
        (:meth:`SweepResult.best`); when ``auto`` is fastest the row says no config beats it,
        never ranks it as a budget."""
        import pandas as pd

        frames = [r.best().assign(phase=r.manifest.get("phase"), run_id=r.run_id)
                  for r in self.runs]
        table = pd.concat(frames, ignore_index=True)
        return table[["phase", "run_id", *PANEL, "best", "speedup", "speedup_lo", "speedup_hi",
                      "confidence_set", "decision", "requests_n", "unstable", "statement"]]

    def crossovers(self) -> Any:
        """Per run's phase: where each speculative config stops beating ``auto`` as the load
        grows (:func:`~.best.crossovers`), one statement a row."""
        import pandas as pd

        from .best import crossovers

        frames = [crossovers(r.table()).assign(phase=r.manifest.get("phase"), run_id=r.run_id)
                  for r in self.runs]
        table = pd.concat(frames, ignore_index=True)
        return table[["phase", "run_id", "config", "workload", "context", "output_tokens",
                      "load_axis", "beats_up_to", "loses_from", "statement"]]

    def speedups(self) -> Any:
        """Speedup vs ``auto``: a row per phase × panel (workload × context × output tokens ×
        concurrency × load point), a column per config."""
        return self._table.pivot_table(index=_KEYS, columns="config", values="speedup")

    def scaling(self) -> Any:
        """Output tok/s per config across phases (TP1 → TP4 → TP8) at equal workload/context/concurrency."""
        return self._table.pivot_table(index=[*PANEL, "config"], columns="phase",
                                       values="output_tok_s")

    def acceptance(self) -> Any:
        """Mean acceptance length by budget (columns) per phase, config series and workload."""
        table = self._table
        spec = table[table["budget"].notna()]
        return spec.pivot_table(index=["phase", "series", "workload"], columns="budget",
                                values="acceptance_length")

    def failed_cells(self) -> list[dict[str, Any]]:
        """Every crashed, skipped or invalid cell of the compared runs: its phase, run id, cell
        id, spec, verdict and every reason (the first is the one a table shows)."""
        found = []
        for run in self.runs:
            # a run-like value that holds only a table (no cell records) has no failed cells
            for cell in getattr(run, "cells", ()):
                if cell.status == "ok" or cell.verdict.by_design:
                    continue
                spec = cell.spec
                found.append({"phase": run.manifest.get("phase"), "run_id": run.run_id,
                              "cell": cell.cell_id, "config": spec.config, "series": spec.series,
                              "budget": spec.budget,
                              "workload": spec.workload, "context": spec.context,
                              "concurrency": spec.concurrency,
                              "output_tokens": getattr(spec, "output_tokens", None),
                              "load": getattr(spec, "load", ""), "verdict": cell.status,
                              "reasons": [str(r) for r in cell.verdict.reasons],
                              "first_reason": (cell.verdict.reasons[0].code
                                               if cell.verdict.reasons else "")})
        return found

    def failures(self) -> Any:
        """Every crashed, skipped or invalid cell of the compared runs, with its reasons."""
        import pandas as pd

        cols = ["phase", "run_id", "cell", "config", "workload", "context", "output_tokens",
                "concurrency", "load", "verdict", "reasons"]
        rows = [{**f, "reasons": "; ".join(f["reasons"])} for f in self.failed_cells()]
        return pd.DataFrame(rows, columns=cols)

    def names(self) -> str:
        """The runs compared, each with where its configs ran (a placed run's engine and mode:
        ``packed`` servers shared their nodes, ``exclusive`` ones did not)."""
        return ", ".join(f"{r.manifest.get('phase')}: {r.run_id}{_placement(r.manifest)}"
                         for r in self.runs)

    def text(self) -> str:
        warnings = "".join(f"\nwarning: {note}" for note in self.skipped)
        return f"comparing {self.names()}{warnings}\n{self.best_budgets().to_string(index=False)}"

    def html(self) -> str:
        warnings = "".join(html_text(f"warning: {note}") for note in self.skipped)
        crossing = self.crossovers()
        where = (html_text("Where speculation stops paying (speedup vs load)", bold=True)
                 + "<ul>" + "".join(f"<li>{html.escape(str(s))}</li>" for s in crossing["statement"])
                 + "</ul>") if len(crossing) else ""
        return (html_text("comparing", bold=True, detail=self.names()) + warnings
                + frame_table(self.best_budgets()) + where)

    def __repr__(self) -> str:
        return f"Comparison({[r.run_id for r in self.runs]!r})"


def _placement(manifest: dict[str, Any]) -> str:
    placed = (manifest.get("params") or {}).get("placement") or {}
    if placed.get("engine", "local") == "local":
        return " (sequential, one config at a time)"
    return f" (placed on {placed['engine']}, {placed.get('mode', 'packed')})"


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
    ``longtable`` per phase × workload × context, :mod:`.latex`), ``comparison.json``, the
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
    :mod:`.plots`)."""
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
    from .answer import answers_html  # a time-budgeted run's answer leads the page

    body = (answers_html(comparison.runs) + comparison.html()
            + html_text("Failed and skipped cells", bold=True,
                        detail=f"{len(failures)} (never a value in a table or figure)")
            + frame_table(failures)
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
    from .answer import answers_json

    path.write_text(json.dumps({"runs": [r.run_id for r in comparison.runs],
                                "answers": answers_json(comparison.runs),
                                "best": best.to_dict("records"),
                                "crossovers": crossing.to_dict("records"), "failures": failures},
                               indent=2, default=str, allow_nan=False))
    return path


def compare(runs: str | list[str] | None = None, *, root: Path | None = None,
            notebook: str | Path | None = None, merge: bool = False,
            merge_hint: str = "merge=True") -> Comparison:
    """A :class:`Comparison` of run ids (comma-separated or a list), or the latest complete
    full-plan run of each phase. Two runs of one phase are refused unless ``merge``; the
    refusal names ``merge_hint`` as the way to average them (the CLI's is ``--merge``).

    A run that cannot be read is skipped with a warning naming it (``Comparison.skipped``).
    ``notebook``: papermill's ``PAPERMILL_OUTPUT_PATH``, to refuse a notebook parameter the
    report notebook does not declare (see :func:`~.params.check_notebook_parameters`).
    """
    check_notebook_parameters(notebook)
    skipped: list[str] = []
    if runs is None or runs == "":
        return Comparison(latest_runs(root, skipped=skipped), skipped=skipped, merge=merge,
                          merge_hint=merge_hint)
    ids = [r.strip() for r in runs.split(",")] if isinstance(runs, str) else list(runs)
    found = [RunDir.at(run_id, root=root) for run_id in ids if run_id]
    missing = [run.run_id for run in found if not run.manifest_path.is_file()]
    if missing:
        raise StoreError(f"no such runs: {', '.join(missing)}; see 'specbench runs'",
                         path=runs_root(root))
    results = [_read(run.path, skipped) for run in found]
    return Comparison([r for r in results if r is not None], skipped=skipped, merge=merge,
                      merge_hint=merge_hint)
