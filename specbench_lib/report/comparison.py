"""Run selection: which runs a report compares, read into a :class:`Comparison`.

``compare`` reads any set of runs (default: the latest complete run of each phase) into a
:class:`Comparison`, a value that answers the questions a paper asks: the best budget per phase ×
workload × context × concurrency, the speedups, TP1 → TP4 → TP8 scaling, acceptance length by
budget, and every cell that failed. Writing files from it is :mod:`~specbench_lib.report.export`'s job.
"""

from __future__ import annotations

import sys
from functools import cached_property
from pathlib import Path
from typing import Any

from ..analysis.metrics import PANEL
from ..core.display import Rendered, html_text
from ..core.errors import StoreError, ValidationFailed
from ..core.tables import ROW_KEYS, Column, bullets, count, headline, readable
from ..model.nbparams import check_notebook_parameters
from ..runs.manifest import Manifest
from ..runs.results import RunResult
from ..runs.run import RunDir, list_runs, runs_root

_KEYS = ["phase", *PANEL]
_BEST = (Column("phase", "phase"), *ROW_KEYS[1:], Column("best", "best config"),
         Column("speedup", "speedup vs auto [95 %, paired, simultaneous]", "{:.2f}",
                interval=True),
         Column("confidence_set", "could be the best"), Column("decision", "decision"),
         Column("statement", "the claim"),
         Column("requests_n", "requests", "{:g}"))
FAILURES = (Column("phase", "phase"), *ROW_KEYS, Column("verdict", "verdict"),
            Column("reasons", "reasons"))


def latest_runs(root: Path | None = None, *, skipped: list[str] | None = None) -> list[RunResult]:
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


def _read(path: str | Path, notes: list[str]) -> RunResult | None:
    """The run at ``path``, or None with a warning when its manifest cannot be read; each cell
    file that cannot be read is named in a warning (it is left out of every table)."""
    try:
        result = RunResult(path)
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

    Writing them out is :func:`~.export.write`'s job; in a notebook the comparison shows its best budgets.
    """

    def __init__(self, runs: list[RunResult], *, skipped: list[str] | None = None,
                 merge: bool = False, merge_hint: str = "merge=True") -> None:
        self.skipped = list(skipped or [])  # warnings: runs and cell files that could not be read
        if not runs:
            also = f" ({'; '.join(self.skipped)})" if self.skipped else ""
            raise ValidationFailed(f"no runs to compare: run a phase first or name run ids{also}",
                                   run_dir=str(runs_root()), counts={})
        phases: dict[str, list[str]] = {}
        for run in runs:
            phases.setdefault(str(_phase(run)), []).append(run.run_id)
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

        frames = [r.table().assign(phase=_phase(r), run_id=r.run_id) for r in self.runs]
        return pd.concat(frames, ignore_index=True)

    def table(self) -> Any:
        """The ok cells of every run, with its phase and run id."""
        return self._table.copy()

    def best_budgets(self) -> Any:
        """Per run's phase × workload × context × concurrency: the best config with its
        speedup interval (paired, simultaneous over the panel's configs), the confidence set, its
        decision and ε (the panel's claim, :mod:`~specbench_lib.analysis.claim`), and n
        (:meth:`RunResult.best`); when ``auto`` is fastest the row says no config beats it,
        never ranks it as a budget."""
        import pandas as pd

        frames = [r.best().assign(phase=_phase(r), run_id=r.run_id)
                  for r in self.runs]
        table = pd.concat(frames, ignore_index=True)
        # reindex: a run read before claim quantities (or a stand-in's table) has no quantity
        return table.reindex(columns=["phase", "run_id", *PANEL, "best", "speedup", "speedup_lo",
                                      "speedup_hi", "confidence_set", "decision", "epsilon",
                                      "alpha", "equivalence", "requests_n", "unstable",
                                      "quantity", "blocks", "reason", "statement"])

    def crossovers(self) -> Any:
        """Per run's phase: where each speculative config stops beating ``auto`` as the load
        grows (:func:`~specbench_lib.analysis.crossover.crossovers`), one statement a row."""
        import pandas as pd

        from ..analysis.crossover import crossovers

        frames = [crossovers(r.table()).assign(phase=_phase(r), run_id=r.run_id)
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
                found.append({"phase": _phase(run), "run_id": run.run_id,
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
        return ", ".join(f"{_phase(r)}: {r.run_id}{_placement(Manifest.from_dict(r.manifest))}"
                         for r in self.runs)

    def faults(self) -> list[str]:
        """The config-level failures the runs' cells do not show (a server that crashed after
        its last cell), each with the ``known_bad`` entry that would skip it."""
        return [f"run {run.run_id}: {fault}" for run in self.runs
                for fault in getattr(run, "config_faults", ())]

    def text(self) -> str:
        warnings = "".join(f"\nwarning: {note}" for note in [*self.skipped, *self.faults()])
        return f"comparing {self.names()}{warnings}\n{self.best_budgets().to_string(index=False)}"

    def html(self) -> str:
        """The best config of each panel as the headline (one statement a line), then the
        table behind it (key columns first, the full table collapsed) and the crossovers."""
        warnings = "".join(html_text(f"warning: {note}") for note in self.skipped)
        warnings += "".join(html_text(fault, bold=True) for fault in self.faults())
        best = self.best_budgets()
        crossing = self.crossovers()
        where = (html_text("Where speculation stops paying (speedup vs load)", bold=True)
                 + bullets(crossing["statement"])) if len(crossing) else ""
        lead = headline(html_text(f"The best config of {count(len(best), 'panel')} (confidence "
                                  "sets simultaneous 95 %)", bold=True)
                        + bullets(best["statement"]), is_html=True)
        return (lead + html_text("comparing", bold=True, detail=self.names()) + warnings
                + readable(best, _BEST, what="panels") + where)

    def __repr__(self) -> str:
        return f"Comparison({[r.run_id for r in self.runs]!r})"


def _phase(run: Any) -> str | None:
    """The phase of a result (or of a run-like value that holds a ``manifest`` dict)."""
    return Manifest.from_dict(run.manifest).phase


def _placement(manifest: Manifest) -> str:
    placed = manifest.params.get("placement") or {}
    if placed.get("engine", "local") == "local":
        return " (sequential, one config at a time)"
    return f" (placed on {placed['engine']}, {placed.get('mode', 'packed')})"


def compare(runs: str | list[str] | None = None, *, root: Path | None = None,
            notebook: str | Path | None = None, merge: bool = False,
            merge_hint: str = "merge=True") -> Comparison:
    """A :class:`Comparison` of run ids (comma-separated or a list), or the latest complete
    full-plan run of each phase. Two runs of one phase are refused unless ``merge``; the
    refusal names ``merge_hint`` as the way to average them (the CLI's is ``--merge``).

    A run that cannot be read is skipped with a warning naming it (``Comparison.skipped``).
    ``notebook``: papermill's ``PAPERMILL_OUTPUT_PATH``, to refuse a notebook parameter the
    report notebook does not declare (see :func:`~specbench_lib.model.nbparams.check_notebook_parameters`).
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
