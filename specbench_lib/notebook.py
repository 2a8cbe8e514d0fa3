"""The notebook's front door: run the sweep, and keep the notebook that ran it in its run directory.

A phase notebook calls ``sb.run_sweep(plan, ...)`` then ``sb.keep_notebook(result,
PAPERMILL_OUTPUT_PATH)``. :func:`run_sweep` is :func:`~.sweep.driver.run_sweep` (same arguments) plus,
for a kernel that JupyterLab started for a notebook (the run records that notebook's path when
it starts, :mod:`~.runs.session`), keeping the notebook as last saved once the sweep has ended or was
interrupted (:func:`~specbench_lib.notebook_link.keep_session_notebook`). :func:`keep_notebook` keeps
papermill's executed notebook. The run directory itself is :mod:`~.runs`' business; copying and
rendering notebooks is :mod:`~specbench_lib.notebook_link`'s.

In a kernel the sweep's lines go to one output that updates as they come (:mod:`~specbench_lib.livelog`);
:func:`appendix`, the notebook's last output, shows that log and every cell's verdict collapsed.
"""

from __future__ import annotations

import os
import sys
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

from .core.display import Rendered
from .core.errors import SpecbenchError, StoreError
from .core.tables import details
from .livelog import log_section, start_live_log
from .model.plan import Plan
from .notebook_link import keep, keep_session_notebook
from .report.outcome import Outcome
from .runs.results import RunResult
from .runs.run import RunDir, new_run_id
from .sweep.driver import run_sweep as _run_sweep


def run_sweep(plan: Plan, *, run_id: str | None = None, resume: str | None = None,
              dry_run: bool = False, outputs: Path | None = None, **options: Any) -> Outcome:
    """Run the cells of ``plan`` in a run directory and return its result: see
    :func:`~.sweep.driver.run_sweep` for the arguments. In a JupyterLab kernel the notebook that ran
    the sweep is then copied into the run directory (as last saved), and refreshed while the
    kernel lives each time it is saved showing this run."""
    if dry_run:
        return _run_sweep(plan, run_id=run_id, resume=resume, dry_run=True, outputs=outputs,
                          **options)
    if run_id is None and resume is None:  # named here, so the run is known however it ends
        run_id = new_run_id(plan.params.phase)
    run_dir, before = _attempts_before(resume or run_id, outputs)
    live = start_live_log() if options.get("progress", True) else None
    failed: BaseException | None = None
    try:
        with redirect_stdout(live or sys.stdout):
            result = _run_sweep(plan, run_id=run_id, resume=resume, outputs=outputs, **options)
    except BaseException as exc:
        failed = exc
        raise
    finally:
        lines = live.finish(failed=failed) if live is not None else None
        if run_dir is not None:
            _keep_session(run_dir, before)
    if isinstance(result, RunResult) and run_dir is not None:
        result.manifest = run_dir.manifest()
    if lines is not None and isinstance(result, RunResult):
        vars(result)[LOG_ATTRIBUTE] = lines  # what appendix() shows
    return result


LOG_ATTRIBUTE = "progress_log"  # a kernel's sweep result keeps its progress lines here


class Appendix(Rendered):
    """The end of a phase notebook, collapsed: the sweep's progress log and every cell's
    verdict (the verdict table, in plan order, with each failure's reasons)."""

    def __init__(self, result: Any) -> None:
        self.result = result
        self.lines = vars(result).get(LOG_ATTRIBUTE)

    def text(self) -> str:
        log = "\n".join(self.lines or [])
        verdicts = self.result.text() if isinstance(self.result, RunResult) else ""
        return "\n\n".join(part for part in (log, verdicts) if part)

    def html(self) -> str:
        parts = [log_section(self.lines)]
        if isinstance(self.result, RunResult):
            counts = ", ".join(f"{k} {v}" for k, v in self.result.counts().items() if v)
            parts.append(details(f"Every cell's verdict ({len(self.result.cells)} cells: "
                                 f"{counts or 'none'})", self.result.html()))
        return "".join(parts)


def appendix(result: Any) -> Appendix:
    """The notebook's last output: the progress log and the verdict table, collapsed."""
    return Appendix(result)


def _attempts_before(run_id: str | None, outputs: Path | None) -> tuple[RunDir | None, int]:
    """The run directory a sweep will write and how many attempts its manifest holds now;
    ``(None, 0)`` for an id the sweep refuses (it says why) or a manifest it cannot read."""
    try:
        run_dir = RunDir.at(str(run_id), root=outputs)
        return run_dir, len(run_dir.read_manifest().attempts)
    except SpecbenchError:
        return None, 0


def _keep_session(run_dir: RunDir, before: int) -> None:
    """Keep the JupyterLab notebook of the attempt this process recorded, if it recorded one
    (a sweep refused before it began records none), holding the run's lock while it writes."""
    try:
        attempts = run_dir.read_manifest().attempts
    except StoreError:
        return
    if len(attempts) <= before or attempts[-1].pid != os.getpid():
        return
    if not attempts[-1].notebook_source:
        return
    try:
        run_dir.acquire()
    except StoreError as exc:
        print(f"run {run_dir.run_id}: could not keep the notebook that ran it ({exc}); it is "
              f"named in the manifest (notebook_source)", flush=True)
        return
    try:
        keep_session_notebook(run_dir)
    finally:
        run_dir.release()


def keep_notebook(result: Outcome, output_path: str | None) -> str | None:
    """Keep the executed notebook (papermill's ``PAPERMILL_OUTPUT_PATH``) in the run directory
    and name it in the manifest; returns its name there (None for a dry run or no path)."""
    if not isinstance(result, RunResult) or not output_path:
        return None
    name = keep(result.run_dir, output_path)
    if name is not None:
        result.dir.update_manifest(notebook=name)
        result.manifest["notebook"] = name
    return name
