"""Sharing: cross-run tables, and the files written from them and from runs.

``compare`` reads any set of runs (default: the latest complete run of each phase) into a
:class:`Comparison`, a value that answers the questions a paper asks: the best budget per phase ×
workload × context × concurrency, the speedups, TP1 → TP4 → TP8 scaling, acceptance length by
budget, and every cell that failed. The writers are functions apart from it: :func:`write`
(``results.tex``, ``comparison.json`` and the index), :func:`build_index` (``outputs/index.html``)
and :func:`render_html` (an executed notebook as HTML).
"""

from __future__ import annotations

import datetime as dt
import json
import sys
from functools import cached_property
from pathlib import Path
from typing import Any

from .display import Rendered, frame_table, html_page, html_table, html_text, join, link
from .errors import StoreError, ValidationFailed
from .params import check_notebook_parameters
from .paths import outputs_dir
from .results import SweepResult
from .runs import RunDir, list_runs, runs_root

HIDE_INPUT_TAG = "hide-input"
_KEYS = ["phase", "workload", "context", "concurrency"]


def render_html(notebook: Path) -> Path:
    """Render an executed notebook to HTML beside it (inputs of ``hide-input`` cells hidden)."""
    import nbformat
    from nbconvert import HTMLExporter
    from nbconvert.preprocessors import TagRemovePreprocessor

    exporter = HTMLExporter()
    exporter.register_preprocessor(TagRemovePreprocessor(remove_input_tags={HIDE_INPUT_TAG}),
                                   enabled=True)
    body, _ = exporter.from_notebook_node(nbformat.read(notebook, as_version=4))
    target = notebook.with_suffix(".html")
    target.write_text(body)
    return target


def build_index(root: Path | None = None) -> Path:
    """Write ``outputs/index.html``: every run with its status, counts, commit and links, then
    the report's files and the ``specbench compare`` pages."""
    out = root or outputs_dir()
    rows = []
    for run in reversed(list_runs(out)):
        files = RunDir(Path(run["path"])).shared_files()
        counts = run["counts"] or {}
        commit = f"{run['commit']}{' (dirty)' if run['dirty'] else ''}"
        rows.append([run["run_id"], run["phase"], run["started"], run["status"],
                     *(counts.get(k, "") for k in ("ok", "invalid", "crashed", "skipped")), commit,
                     join(link(str(p.relative_to(out)), p.name) for p in files)])
    stamp = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    table = html_table(["run", "phase", "started", "status", "ok", "invalid", "crashed", "skipped",
                        "commit", "files"], rows)
    shared = [("report", sorted((out / "report").glob("*"))),
              ("comparisons", sorted((out / "compare").glob("*.html")))]
    extra = "".join(html_text(title, bold=True) + html_table(
        ["file"], [[link(str(p.relative_to(out)), p.name)] for p in files])
        for title, files in shared if files)
    page = html_page("specbench runs", html_text(f"{len(rows)} runs · written {stamp}") + table
                     + extra)
    out.mkdir(parents=True, exist_ok=True)
    index = out / "index.html"
    index.write_text(page)
    return index


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
                 merge: bool = False) -> None:
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
                                   f"to put two side by side, or pass merge=True",
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
        """Per run's phase × workload × context × concurrency: the best config with its speedup
        interval and the configs indistinguishable from it (:meth:`SweepResult.best`); when
        ``auto`` is fastest the row says no config beats it, never ranks it as a budget."""
        import pandas as pd

        frames = [r.best().assign(phase=r.manifest.get("phase"), run_id=r.run_id)
                  for r in self.runs]
        table = pd.concat(frames, ignore_index=True)
        return table[["phase", "run_id", "workload", "context", "concurrency", "best", "speedup",
                      "speedup_lo", "speedup_hi", "indistinguishable", "unstable", "statement"]]

    def speedups(self) -> Any:
        """Speedup vs ``auto``: a row per phase × workload × context × concurrency, a column per config."""
        return self._table.pivot_table(index=_KEYS, columns="config", values="speedup")

    def scaling(self) -> Any:
        """Output tok/s per config across phases (TP1 → TP4 → TP8) at equal workload/context/concurrency."""
        return self._table.pivot_table(index=["workload", "context", "concurrency", "config"],
                                       columns="phase", values="output_tok_s")

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
                if cell.status == "ok":
                    continue
                spec = cell.spec
                found.append({"phase": run.manifest.get("phase"), "run_id": run.run_id,
                              "cell": cell.cell_id, "config": spec.config, "budget": spec.budget,
                              "workload": spec.workload, "context": spec.context,
                              "concurrency": spec.concurrency, "verdict": cell.status,
                              "reasons": [str(r) for r in cell.verdict.reasons],
                              "first_reason": (cell.verdict.reasons[0].code
                                               if cell.verdict.reasons else "")})
        return found

    def failures(self) -> Any:
        """Every crashed, skipped or invalid cell of the compared runs, with its reasons."""
        import pandas as pd

        cols = ["phase", "run_id", "cell", "config", "workload", "context", "concurrency",
                "verdict", "reasons"]
        rows = [{**f, "reasons": "; ".join(f["reasons"])} for f in self.failed_cells()]
        return pd.DataFrame(rows, columns=cols)

    def names(self) -> str:
        return ", ".join(f"{r.manifest.get('phase')}: {r.run_id}" for r in self.runs)

    def text(self) -> str:
        warnings = "".join(f"\nwarning: {note}" for note in self.skipped)
        return f"comparing {self.names()}{warnings}\n{self.best_budgets().to_string(index=False)}"

    def html(self) -> str:
        warnings = "".join(html_text(f"warning: {note}") for note in self.skipped)
        return (html_text("comparing", bold=True, detail=self.names()) + warnings
                + frame_table(self.best_budgets()))

    def __repr__(self) -> str:
        return f"Comparison({[r.run_id for r in self.runs]!r})"


def write(comparison: Comparison, folder: Path | None = None) -> list[Path]:
    """Write ``results.tex`` (a LaTeX table per phase), ``comparison.json`` and the index."""
    target = folder or outputs_dir() / "report"
    target.mkdir(parents=True, exist_ok=True)
    return [write_latex(comparison, target / "results.tex"),
            write_summary(comparison, target / "comparison.json"), build_index()]


_LATEX_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#",
                  "_": r"\_", "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}",
                  "^": r"\textasciicircum{}"}


def _latex_text(text: str) -> str:
    return "".join(_LATEX_SPECIAL.get(ch, ch) for ch in text)


def write_latex(comparison: Comparison, path: Path) -> Path:
    """A LaTeX table per phase: output tokens/s, speedup and acceptance length per config.

    A failed cell (crashed, invalid, skipped) of a compared run is a row of its own, marked with
    its verdict and first reason (``invalid: http_500``) and ``--`` for every value: a failure is
    never a number, and never silently missing either.
    """
    import pandas as pd

    keys = ["workload", "context", "concurrency", "config"]
    values = ["output_tok_s", "speedup", "acceptance_length"]
    cols = [*keys, *values, "verdict"]
    ok = comparison.table().assign(verdict="ok")
    failed = pd.DataFrame(
        [{**{k: f[k] for k in ("phase", *keys)},
          "verdict": f"{f['verdict']}: {f['first_reason']}" if f["first_reason"] else f["verdict"]}
         for f in comparison.failed_cells()], columns=["phase", *keys, "verdict"])
    parts = []
    for phase in sorted({*ok["phase"].dropna().astype(str), *failed["phase"].dropna().astype(str)}):
        rows = pd.concat([ok[ok["phase"].astype(str) == phase].reindex(columns=cols),
                          failed[failed["phase"].astype(str) == phase].reindex(columns=cols)],
                         ignore_index=True).drop_duplicates()
        for name in values:
            rows[name] = pd.to_numeric(rows[name], errors="coerce")
        styler = rows.sort_values([*keys, "verdict"]).style.hide(axis="index").format(
            {"output_tok_s": "{:.1f}", "speedup": "{:.2f}", "acceptance_length": "{:.2f}"},
            na_rep="--", escape="latex").format_index(escape="latex", axis=1)
        parts.append(styler.to_latex(
            caption=f"{_latex_text(phase)}: output tokens/s, speedup vs autoregressive, mean "
                    f"acceptance length; a failed cell shows its verdict and first reason, -- for "
                    f"its values", hrules=True, label=f"tab:specbench-{phase}"))
    path.write_text("\n".join(parts))
    return path


def write_summary(comparison: Comparison, path: Path) -> Path:
    """``comparison.json``: the runs compared, the best budget of each group (ok cells only) and
    every failed cell of the compared runs (``failures``: phase, run id, cell, config, verdict
    and reasons), so a failure is listed, never left out or ranked."""
    failures = [{k: f[k] for k in ("phase", "run_id", "cell", "config", "verdict", "reasons")}
                for f in comparison.failed_cells()]
    best = comparison.best_budgets().astype(object)
    best = best.where(best.notna(), None)  # NaN is not JSON: a missing value is null
    path.write_text(json.dumps({"runs": [r.run_id for r in comparison.runs],
                                "best": best.to_dict("records"), "failures": failures},
                               indent=2, default=str, allow_nan=False))
    return path


def compare(runs: str | list[str] | None = None, *, root: Path | None = None,
            notebook: str | Path | None = None, merge: bool = False) -> Comparison:
    """A :class:`Comparison` of run ids (comma-separated or a list), or the latest complete
    full-plan run of each phase. Two runs of one phase are refused unless ``merge``.

    A run that cannot be read is skipped with a warning naming it (``Comparison.skipped``).
    ``notebook``: papermill's ``PAPERMILL_OUTPUT_PATH``, to refuse a notebook parameter the
    report notebook does not declare (see :func:`~.params.check_notebook_parameters`).
    """
    check_notebook_parameters(notebook)
    skipped: list[str] = []
    if runs is None or runs == "":
        return Comparison(latest_runs(root, skipped=skipped), skipped=skipped, merge=merge)
    ids = [r.strip() for r in runs.split(",")] if isinstance(runs, str) else list(runs)
    found = [RunDir.at(run_id, root=root) for run_id in ids if run_id]
    missing = [run.run_id for run in found if not run.manifest_path.is_file()]
    if missing:
        raise StoreError(f"no such runs: {', '.join(missing)}; see 'specbench runs'",
                         path=runs_root(root))
    results = [_read(run.path, skipped) for run in found]
    return Comparison([r for r in results if r is not None], skipped=skipped, merge=merge)
