"""Files written from a result: the ok-only tables (CSV, parquet) and figures (PNG, SVG)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.store import write_atomic

if TYPE_CHECKING:
    from ..runs.results import RunResult
    from ..runs.run import RunDir


def write_tables(result: RunResult) -> Path:
    """``results.csv`` and ``results.parquet`` of the run's ok, current cells, each written
    whole or not at all (a full disk leaves the one before, or none: never an empty file);
    the CSV's path."""
    table = result.table()
    write_atomic(result.dir.results_csv, lambda tmp: table.to_csv(tmp, index=False))
    write_atomic(result.dir.results_parquet, lambda tmp: table.to_parquet(tmp, index=False))
    return result.dir.results_csv


def save_figure(run_dir: RunDir, fig: Any, name: str) -> Path:
    """A figure as SVG and PNG under the run's ``plots/``; the PNG's path."""
    run_dir.plots_dir.mkdir(parents=True, exist_ok=True)
    fig.savefig(run_dir.plots_dir / f"{name}.svg", bbox_inches="tight")
    png = run_dir.plots_dir / f"{name}.png"
    fig.savefig(png, dpi=120, bbox_inches="tight")
    return png
