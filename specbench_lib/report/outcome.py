"""What a phase notebook gets back from a sweep: the run's results, with its figures and files.

:class:`SweepResult` is the read model :class:`~specbench_lib.runs.results.RunResult` plus what draws it
(:mod:`~.plots`) and what writes its files (:mod:`~.writers`); :class:`Outcome` is what a notebook
does with it, or with a dry run's :class:`~specbench_lib.sweep.preview.PlanPreview`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from ..core.display import Rendered
from ..runs.results import RunResult


class SavedFigures(list[Path], Rendered):
    """The PNG paths :meth:`SweepResult.save_figures` wrote; a notebook shows one line naming
    them relative to the run (``plots/<name>.png``, each with its SVG), never machine paths."""

    def text(self) -> str:
        names = ", ".join(p.stem for p in self)
        return (f"{len(self)} figures saved in the run's plots/ as PNG and SVG: {names}"
                if self else "no figure saved")

    def html(self) -> str:
        import html

        return f"<p>{html.escape(self.text())}</p>"


class Outcome(Protocol):
    """What a phase notebook does with the value :func:`~specbench_lib.sweep.driver.run_sweep` returns: a
    measured :class:`SweepResult`, or a dry run's :class:`~specbench_lib.sweep.preview.PlanPreview`."""

    def require_valid(self) -> None: ...

    def figures(self) -> dict[str, Any]: ...

    def save_figures(self, figures: dict[str, Any]) -> list[Path]: ...

    def summary(self) -> Any: ...

    def categories(self) -> Any: ...

    def prompt_spread(self) -> Any: ...


class SweepResult(RunResult):
    """The cells of one run directory (:class:`~specbench_lib.runs.results.RunResult`), with its standard
    figures and the files written from it; shows itself as a verdict table in JupyterLab."""

    def figures(self) -> dict[str, Any]:
        """Every standard figure of a phase notebook by file name (see :mod:`~specbench_lib.report.plots`)."""
        from .plots import standard

        return standard(self)

    def prompt_spread(self) -> Any:
        """Per config, the per-prompt speedups vs the panel's baseline as a distribution, by
        category and answer length, and every prompt (:mod:`~specbench_lib.analysis.promptspread`;
        a ``groups`` panel's prompts by the member they came from)."""
        import pandas as pd

        from ..analysis.promptspread import PromptSpread, prompt_table

        groups = self.info.params.get("groups") or {}
        frames = [prompt_table(self.cells)]
        if groups:
            frames.append(prompt_table(self.pooled().cells, groups=groups))
        return PromptSpread(pd.concat(frames, ignore_index=True) if groups else frames[0])

    def write_results(self) -> Path:
        """Write ``results.csv`` and ``results.parquet`` (ok, current cells only)."""
        from .writers import write_tables

        return write_tables(self)

    def save_figure(self, fig: Any, name: str) -> Path:
        """Save a figure as PNG and SVG under ``plots/``; returns the PNG's path."""
        from .writers import save_figure

        return save_figure(self.dir, fig, name)

    def save_figures(self, figures: dict[str, Any]) -> list[Path]:
        """Save each figure of :meth:`figures` under ``plots/``; returns the PNG paths (a
        :class:`SavedFigures`, which a notebook shows as one line)."""
        return SavedFigures(self.save_figure(fig, name) for name, fig in figures.items())
