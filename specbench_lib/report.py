"""Sharing: notebooks rendered to HTML, ``outputs/index.html``, cross-run tables, LaTeX.

``compare`` reads any set of runs (default: the latest complete run of each phase) and answers
the questions a paper asks: the best budget per phase × workload × context × concurrency, the
speedups, TP1 → TP4 → TP8 scaling, acceptance length by budget, and every cell that failed.
"""

from __future__ import annotations

import datetime as dt
import html
import json
from pathlib import Path
from typing import Any

from .errors import StoreError, ValidationFailed
from .paths import outputs_dir
from .results import SweepResult
from .store import list_runs

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
    """Write ``outputs/index.html``: every run with its status, counts, commit and links."""
    out = root or outputs_dir()
    rows = []
    for run in reversed(list_runs(out)):
        path = Path(run["path"])
        links = [f'<a href="{html.escape(str(p.relative_to(out)))}">{html.escape(p.name)}</a>'
                 for p in sorted([*path.glob("*.html"), *path.glob("*.ipynb"),
                                  *(path / "plots").glob("*.png")])]
        counts = run["counts"] or {}
        commit = f"{run['commit']}{' (dirty)' if run['dirty'] else ''}"
        cells = [run["run_id"], run["phase"], run["started"], run["status"],
                 *(counts.get(k, "") for k in ("ok", "invalid", "crashed", "skipped")), commit]
        rows.append("<tr>" + "".join(f"<td>{html.escape(str(c or ''))}</td>" for c in cells)
                    + f"<td>{' · '.join(links)}</td></tr>")
    header = "".join(f"<th>{h}</th>" for h in ("run", "phase", "started", "status", "ok", "invalid",
                                               "crashed", "skipped", "commit", "files"))
    stamp = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    page = (f"<!doctype html><html><head><meta charset='utf-8'><title>specbench runs</title>"
            f"<style>body{{font-family:sans-serif}}td,th{{padding:2px 8px;border-bottom:1px solid #ddd}}"
            f"</style></head><body><h1>specbench runs</h1><p>{len(rows)} runs · written {stamp}</p>"
            f"<table><tr>{header}</tr>{''.join(rows)}</table></body></html>")
    out.mkdir(parents=True, exist_ok=True)
    index = out / "index.html"
    index.write_text(page)
    return index


def latest_runs(root: Path | None = None) -> list[SweepResult]:
    """The newest ``complete`` run of each phase."""
    newest: dict[str, str] = {}
    for run in list_runs(root):
        if run["status"] == "complete" and run["phase"]:
            newest[run["phase"]] = run["path"]
    return [SweepResult(path) for path in newest.values()]


class Comparison:
    """Tables across runs (one run per phase, typically); each method returns a DataFrame."""

    def __init__(self, runs: list[SweepResult]) -> None:
        if not runs:
            raise ValidationFailed("no runs to compare: run a phase first or name run ids",
                                   run_dir=str(outputs_dir() / "runs"), counts={})
        self.runs = runs

    def table(self) -> Any:
        import pandas as pd

        frames = [r.table().assign(phase=r.manifest.get("phase"), run_id=r.run_id) for r in self.runs]
        return pd.concat(frames, ignore_index=True)

    def best_budgets(self) -> Any:
        """The fastest ok config per phase × workload × context × concurrency, with its speedup."""
        table = self.table()
        best = table.loc[table.groupby(_KEYS)["output_tok_s"].idxmax()]
        return best[[*_KEYS, "config", "budget", "output_tok_s", "speedup", "acceptance_length"]]

    def speedups(self) -> Any:
        """Speedup vs ``auto``: a row per phase × workload × context × concurrency, a column per config."""
        return self.table().pivot_table(index=_KEYS, columns="config", values="speedup")

    def scaling(self) -> Any:
        """Output tok/s per config across phases (TP1 → TP4 → TP8) at equal workload/context/concurrency."""
        return self.table().pivot_table(index=["workload", "context", "concurrency", "config"],
                                        columns="phase", values="output_tok_s")

    def acceptance(self) -> Any:
        """Mean acceptance length by budget (columns) per phase, config series and workload."""
        table = self.table()
        spec = table[table["budget"].notna()]
        return spec.pivot_table(index=["phase", "series", "workload"], columns="budget",
                                values="acceptance_length")

    def failures(self) -> Any:
        """Every crashed, skipped or invalid cell of the compared runs, with its reasons."""
        import pandas as pd

        frames = [r.verdicts().assign(phase=r.manifest.get("phase"), run_id=r.run_id)
                  for r in self.runs]
        verdicts = pd.concat(frames, ignore_index=True)
        return verdicts[verdicts["verdict"] != "ok"][
            ["phase", "run_id", "config", "workload", "context", "concurrency", "verdict", "reasons"]]

    def write(self, folder: Path | None = None) -> list[Path]:
        """Write ``results.tex`` (a LaTeX table per phase), ``comparison.json`` and the index."""
        target = folder or outputs_dir() / "report"
        target.mkdir(parents=True, exist_ok=True)
        table = self.table()
        cols = ["workload", "context", "concurrency", "config", "output_tok_s", "speedup",
                "acceptance_length"]
        parts = []
        for phase, rows in table.groupby("phase"):
            styler = rows[cols].sort_values(cols[:4]).style.hide(axis="index").format(
                {"output_tok_s": "{:.1f}", "speedup": "{:.2f}", "acceptance_length": "{:.2f}"},
                na_rep="--")
            parts.append(styler.to_latex(caption=f"{phase}: output tokens/s, speedup vs "
                                         f"autoregressive, mean acceptance length", hrules=True,
                                         label=f"tab:specbench-{phase}"))
        tex = target / "results.tex"
        tex.write_text("\n".join(parts))
        summary = target / "comparison.json"
        summary.write_text(json.dumps({"runs": [r.run_id for r in self.runs],
                                       "best": self.best_budgets().to_dict("records")},
                                      indent=2, default=str))
        return [tex, summary, build_index()]

    def _repr_html_(self) -> str:
        names = ", ".join(f"{r.manifest.get('phase')}: {r.run_id}" for r in self.runs)
        return f"<p><b>comparing</b> {html.escape(names)}</p>{self.best_budgets().to_html(index=False)}"


def compare(runs: str | list[str] | None = None, *, root: Path | None = None) -> Comparison:
    """A :class:`Comparison` of run ids (comma-separated or a list), or the latest of each phase."""
    if runs is None or runs == "":
        return Comparison(latest_runs(root))
    ids = [r.strip() for r in runs.split(",")] if isinstance(runs, str) else list(runs)
    base = (root or outputs_dir()) / "runs"
    missing = [run_id for run_id in ids if run_id and not (base / run_id / "manifest.json").is_file()]
    if missing:
        raise StoreError(f"no such runs: {', '.join(missing)}; see 'specbench runs'", path=base)
    return Comparison([SweepResult(base / run_id) for run_id in ids if run_id])
