"""Files written from a result: the ok-only tables (CSV, parquet) and figures (PNG, SVG)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..runs.results import RunResult
    from ..runs.run import RunDir


def write_tables(result: RunResult) -> Path:
    """``results.csv`` and ``results.parquet`` of the run's ok, current cells; the CSV's path."""
    table = result.table()
    table.to_csv(result.dir.results_csv, index=False)
    table.to_parquet(result.dir.results_parquet, index=False)
    return result.dir.results_csv


def save_figure(run_dir: RunDir, fig: Any, name: str) -> Path:
    """A figure as SVG and PNG under the run's ``plots/``; the PNG's path."""
    run_dir.plots_dir.mkdir(parents=True, exist_ok=True)
    fig.savefig(run_dir.plots_dir / f"{name}.svg", bbox_inches="tight")
    png = run_dir.plots_dir / f"{name}.png"
    fig.savefig(png, dpi=120, bbox_inches="tight")
    return png
