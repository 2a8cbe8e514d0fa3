"""A run's results as a notebook sees them: verdicts, the ok-only table, checks, figures."""

from __future__ import annotations

import html
import json
from array import array
from pathlib import Path
from typing import Any

from .errors import ValidationFailed
from .metrics import results_table
from .validate import STATUSES

_COLOURS = {"ok": "#d8f3dc", "invalid": "#ffe5b4", "crashed": "#ffccd5", "skipped": "#e9ecef"}


_PACKED = {"token_times": "d", "chunk_sizes": "q", "output_ids": "q"}


def _packed(cell: dict[str, Any]) -> dict[str, Any]:
    """A cell with its requests' per-token lists held as arrays (a quarter of the memory).

    A float or a large int in a list costs 32-36 bytes, 8 in an ``array``: 10,000 cells of 100
    requests took ~4 GB as lists. The arrays index, iterate and ``len()`` like the lists; compare
    them with ``list(...)``; the files on disk are unchanged.
    """
    for req in cell.get("requests") or ():
        for key, code in _PACKED.items():
            values = req.get(key)
            if isinstance(values, list):
                try:
                    req[key] = array(code, values)
                except (TypeError, OverflowError):
                    pass
    return cell


class SweepResult:
    """The cells of one run directory; shows itself as a verdict table in JupyterLab.

    Only cells whose fingerprint matches the run's plan are read (``cells``); any other cell file
    is ``stale`` (an earlier plan, engine, model or code version) and never reaches a table or a
    plot. ``missing`` lists planned cells that have no current file (an interrupted run).
    """

    def __init__(self, run_dir: str | Path) -> None:
        self.run_dir = Path(run_dir)
        every = [_packed(json.loads(p.read_text()))
                 for p in sorted((self.run_dir / "cells").glob("*.json"))]
        expected = self.manifest.get("plan_fingerprints")
        if expected is None:
            self.cells, self.stale = every, []
        else:
            self.cells = [c for c in every if expected.get(c["cell_id"]) == c.get("fingerprint")]
            self.stale = [c for c in every if expected.get(c["cell_id"]) != c.get("fingerprint")]
        self.missing = sorted(set(expected or ()) - {c["cell_id"] for c in self.cells})

    @property
    def run_id(self) -> str:
        return self.run_dir.name

    @property
    def manifest(self) -> dict[str, Any]:
        path = self.run_dir / "manifest.json"
        return json.loads(path.read_text()) if path.exists() else {}

    def counts(self) -> dict[str, int]:
        counts = dict.fromkeys(STATUSES, 0)
        for cell in self.cells:
            counts[cell["verdict"]["status"]] += 1
        return counts

    def verdicts(self) -> Any:
        """One row per cell: its spec, verdict, reasons and (ok cells only) throughput."""
        import pandas as pd

        rows = []
        for cell in self.cells:
            metrics = cell.get("metrics") or {}
            rows.append({**{k: cell["spec"][k] for k in ("config", "series", "budget", "workload",
                                                         "context", "concurrency")},
                         "verdict": cell["verdict"]["status"],
                         "output_tok_s": metrics.get("output_tok_s"),
                         "reasons": "; ".join(cell["verdict"]["reasons"])})
        frame = pd.DataFrame(rows)
        if not frame.empty:
            frame["budget"] = frame["budget"].astype("Int64")
        return frame

    def table(self) -> Any:
        """The metrics of ok cells only, with speedup vs ``auto`` (see metrics.results_table)."""
        unstable_cv = (self.manifest.get("params") or {}).get("unstable_cv", 0.10)
        return results_table(self.cells, unstable_cv=unstable_cv)

    def summary(self) -> Any:
        """Mean output tok/s and speedup per config, workload, context and concurrency."""
        table = self.table()
        cols = ["config", "workload", "context", "concurrency", "output_tok_s", "speedup",
                "acceptance_length", "ttft_mean_s"]
        return table[cols].sort_values(["workload", "context", "concurrency", "config"])

    def require_valid(self) -> None:
        """Raise :class:`ValidationFailed` when the run has no ok cell or no ok baseline."""
        counts = self.counts()
        if counts["ok"] == 0:
            raise ValidationFailed(f"run {self.run_id} has no ok cell: {counts}; see the verdict "
                                   f"table's reasons", run_dir=self.run_dir, counts=counts)
        if not any(c["verdict"]["status"] == "ok" and c["spec"]["method"] == "auto"
                   for c in self.cells):
            raise ValidationFailed(f"run {self.run_id} has no ok 'auto' baseline cell, so no "
                                   f"speedup can be computed: {counts}", run_dir=self.run_dir,
                                   counts=counts)

    def write_results(self) -> Path:
        """Write ``results.csv`` and ``results.parquet`` (ok, current cells only)."""
        table = self.table()
        path = self.run_dir / "results.csv"
        table.to_csv(path, index=False)
        table.to_parquet(self.run_dir / "results.parquet", index=False)
        return path

    def save_figure(self, fig: Any, name: str) -> Path:
        """Save a figure as PNG and SVG under ``plots/``; returns the PNG's path."""
        plots = self.run_dir / "plots"
        plots.mkdir(exist_ok=True)
        fig.savefig(plots / f"{name}.svg", bbox_inches="tight")
        png = plots / f"{name}.png"
        fig.savefig(png, dpi=120, bbox_inches="tight")
        return png

    def save_figures(self, figures: dict[str, Any]) -> list[Path]:
        """Save each figure of :func:`plots.standard` under ``plots/``; returns the PNG paths."""
        return [self.save_figure(fig, name) for name, fig in figures.items()]

    def _repr_html_(self) -> str:
        manifest = self.manifest
        counts = ", ".join(f"{k} {v}" for k, v in self.counts().items())
        extra = "".join(f" · {len(v)} {k}" for k, v in (("stale", self.stale), ("missing", self.missing))
                        if v)
        head = (f"<p><b>run {html.escape(self.run_id)}</b> · {html.escape(str(manifest.get('status')))}"
                f" · {counts}{extra} · {manifest.get('elapsed_s', '?')} s</p>")
        rows = []
        for _, row in self.verdicts().iterrows():
            colour = _COLOURS.get(row["verdict"], "white")
            tok_s = "" if row["output_tok_s"] is None else f"{row['output_tok_s']:.1f}"
            cells = [row["config"], row["workload"], row["context"], row["concurrency"],
                     row["verdict"], tok_s, row["reasons"]]
            rows.append(f"<tr style='background:{colour}'>" +
                        "".join(f"<td>{html.escape(str(c))}</td>" for c in cells) + "</tr>")
        header = "".join(f"<th>{h}</th>" for h in ("config", "workload", "context", "concurrency",
                                                   "verdict", "output tok/s", "reasons"))
        return f"{head}<table><tr>{header}</tr>{''.join(rows)}</table>"

    def __repr__(self) -> str:
        return f"SweepResult({self.run_id!r}, {self.counts()})"
