"""A run open for writing: create, open, resume, reuse, record each attempt and its cells.

The run directory's layout and files are :mod:`~.rundir`'s (re-exported here); this module is
what writes a run: :class:`Run` starts or resumes one (keeping its ok cells whose fingerprint
matches, reusing other runs' on request), records each attempt and closes it. The manifest's
read model is :mod:`~specbench_lib.runs.manifest`'s.
"""

from __future__ import annotations

import datetime as dt
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from ..analysis.analyse import verdict_of
from ..core.errors import SchemaError, StoreError
from ..core.store import read_json, redact, utc_now, write_json_atomic
from ..model.plan import Plan
from ..model.records import SCHEMA_VERSION, CellRecord, Provenance
from .manifest import ServerRecord
from .provenance import environment_info
from .rundir import (
    RUN_ID,
    RunDir,
    check_run_id,
    iter_runs,
    list_runs,
    make_folder,
    new_run_id,
    pid_alive,
    runs_root,
)
from .session import session_notebook

__all__ = ["RUN_ID", "Run", "RunDir", "RunWriter", "check_run_id", "is_old_schema", "iter_runs", "list_runs",
           "make_folder", "new_run_id", "pid_alive", "resumable_manifest", "runs_root"]


HEARTBEAT = "heartbeat.json"  # a budgeted attempt's last sign of life (spent_before)


@dataclass
class Run:
    """A run open for writing: the directory, this attempt, and the cells it keeps.

    :meth:`start` creates a run or resumes one (keeping its ok cells whose fingerprint matches,
    archiving the rest as they are measured again), optionally reusing matching ok cells of
    other runs, and writes the manifest with this attempt and its own environment.
    """

    dir: RunDir
    plan: Plan
    fingerprints: dict[str, str]
    attempt: dict[str, Any]
    kept: set[str] = field(default_factory=set)
    spent_s: float = 0.0  # wall seconds the earlier attempts took (a budget counts them)

    @property
    def number(self) -> int:
        return int(self.attempt["n"])

    @classmethod
    def start(cls, plan: Plan, fingerprints: dict[str, str], *, run_id: str | None = None,
              resume: str | None = None, reuse: bool = False, outputs: Path | None = None,
              **manifest: Any) -> Run:
        """Create (or, with ``resume``, reopen) the run directory and record this attempt.

        ``manifest`` holds plan-wide facts (engine, model, fingerprint components, warnings).
        """
        if run_id and resume:
            raise StoreError("give run_id or resume, not both", path=str(run_id))
        for key, value in (("run_id", run_id), ("resume", resume)):
            if value:
                check_run_id(value, key=key)
        if resume:
            run_dir = RunDir.open(resume, root=outputs)
        else:
            run_dir = RunDir.create(run_id or new_run_id(plan.params.phase), root=outputs)
        try:
            return cls._begin(run_dir, plan, fingerprints, resume=resume, reuse=reuse,
                              manifest=manifest)
        except BaseException:  # the lock is never left behind, nor an empty new run directory
            run_dir.release()
            if not resume:
                run_dir.discard_if_empty()
            raise

    @classmethod
    def _begin(cls, run_dir: RunDir, plan: Plan, fingerprints: dict[str, str], *,
               resume: str | None, reuse: bool, manifest: dict[str, Any]) -> Run:
        if resume:
            for stray in run_dir.remove_strays():
                print(f"resume: removed the temporary file of an interrupted write: "
                      f"{stray.relative_to(run_dir.path)}", flush=True)
            previous = resumable_manifest(run_dir)
            phase = previous.get("phase")
            if phase != plan.params.phase:
                raise StoreError(f"run {resume} is of phase {phase!r}, not "
                                 f"{plan.params.phase!r}; resume it with its own params file",
                                 path=run_dir.path)
            kept = _matching_ok(run_dir, fingerprints)
        else:
            previous, kept = {}, set()
        environment = environment_info()
        attempts = list(previous.get("attempts", []))
        source = session_notebook()  # JupyterLab's notebook running this kernel, if any
        attempt: dict[str, Any] = {"n": len(attempts) + 1, "started": utc_now(), "pid": os.getpid(),
                   "params_file": str(plan.source), "budget": plan.budget,
                   "notebook_source": str(source) if source else None,
                   "kept_cells": sorted(kept), "reused_from": {}, "environment": environment}
        run = cls(run_dir, plan, fingerprints, attempt, kept,
                  spent_s=spent_before(run_dir, attempts) if resume else 0.0)
        if reuse:
            attempt["reused_from"] = run._reuse_cells()
            run.kept |= set(attempt["reused_from"])
            attempt["kept_cells"] = sorted(run.kept)
        resolved = redact(plan.params.model_dump(mode="json"), extra=plan.params.redact)
        run_dir.write_params(resolved)
        run_dir.update_manifest(
            schema_version=SCHEMA_VERSION, run_id=run_dir.run_id, phase=plan.params.phase,
            status="running", started=previous.get("started", attempt["started"]), ended=None,
            params_file=str(plan.source), budget=plan.budget, params=resolved,
            planned_cells=len(plan.cells), plan_fingerprints=fingerprints,
            environment=previous.get("environment", environment),
            servers=previous.get("servers", {}), attempts=[*attempts, attempt],
            notebook=previous.get("notebook"),
            notebook_source=str(source) if source else previous.get("notebook_source"),
            **manifest)
        return run

    def provenance(self) -> Provenance:
        git = self.attempt["environment"].get("git") or {}
        return Provenance(attempt=self.number, commit=git.get("commit"), dirty=git.get("dirty"))

    def write_cell(self, record: CellRecord) -> Path:
        self.dir.archive_cell(record.cell_id)
        return self.dir.write_cell(record)

    def heartbeat(self) -> None:
        """Write down that this attempt is alive now (``heartbeat.json``: before each cell and
        server start of a budgeted sweep), so a killed attempt's time counts to its last beat,
        not only to its last cell (:func:`spent_before`)."""
        write_json_atomic(self.dir.path / HEARTBEAT, {"attempt": self.number, "at": utc_now()})

    def store_server(self, label: str, record: ServerRecord) -> None:
        servers = self.dir.manifest().get("servers", {})
        servers[label] = record.to_dict()
        self.dir.update_manifest(servers=servers)

    def finish(self, status: str, *, elapsed_s: float, counts: dict[str, int]) -> None:
        """Close this attempt in the manifest and release the lock (the front door,
        :func:`~specbench_lib.notebook.run_sweep`, then keeps a JupyterLab session's notebook)."""
        try:
            self.attempt.update(ended=utc_now(), status=status)
            attempts = self.dir.manifest().get("attempts", [])
            attempts[-1] = self.attempt
            self.dir.update_manifest(status=status, ended=self.attempt["ended"],
                                     attempts=attempts, elapsed_s=round(elapsed_s, 1),
                                     verdict_counts=counts)
        finally:
            self.dir.release()

    def _reuse_cells(self) -> dict[str, str]:
        """Copy ok cells whose fingerprint matches from other runs; returns {cell id: source run}."""
        wanted = {fp: cell_id for cell_id, fp in self.fingerprints.items()
                  if cell_id not in self.kept}
        reused: dict[str, str] = {}
        for other in sorted(self.dir.path.parent.iterdir(), reverse=True):
            if other == self.dir.path or not (other / "cells").is_dir():
                continue
            for cell in RunDir(other).read_cells()[0]:
                cell_id = wanted.get(cell.fingerprint)
                if cell_id and cell_id not in reused and _still_ok(cell):
                    provenance = replace(cell.provenance, reused_from=other.name)
                    self.dir.write_cell(replace(cell, run_id=self.dir.run_id,
                                                provenance=provenance))
                    reused[cell_id] = other.name
        return reused


def _still_ok(cell: CellRecord) -> bool:
    """Whether the analysis of this specbench finds the cell ok (not only when it was written)."""
    return verdict_of(cell).ok


def resumable_manifest(run_dir: RunDir) -> dict[str, Any]:
    """The manifest of the run being resumed; a :class:`StoreError` naming it and the way out
    when it cannot be read (the file is left as it is, for restoring)."""
    try:
        return run_dir.manifest()
    except StoreError as exc:
        raise StoreError(
            f"cannot resume run {run_dir.run_id}: its manifest cannot be read ({exc}). Its cell "
            f"files are intact: start a new run that copies their ok cells (specbench run "
            f"<phase> -p reuse true, or run_sweep(plan, reuse=True)), or restore manifest.json "
            f"from a copy", path=run_dir.manifest_path) from None


def spent_before(run_dir: RunDir, attempts: list[dict[str, Any]]) -> float:
    """Wall seconds the earlier attempts of a run took: each from its start to its end or, for
    one that was killed (no end), to the end of the last cell it wrote or its last heartbeat
    (:meth:`Run.heartbeat`), whichever is later (what it did after that left no trace: at most
    the cell or server start it had begun)."""
    last: dict[int, dt.datetime] = {}
    beats = [(c.provenance.attempt, _when(c.provenance.ended)) for c in run_dir.read_cells()[0]]
    try:
        beat = read_json(run_dir.path / HEARTBEAT)
        beats.append((int(beat["attempt"]), _when(beat["at"])))
    except (StoreError, KeyError, TypeError, ValueError):
        pass  # none (a fixed plan, an attempt before heartbeats) or damaged: the cells' ends
    for n, ended in beats:
        if ended is not None and (n not in last or ended > last[n]):
            last[n] = ended
    total = 0.0
    for i, attempt in enumerate(attempts):
        n = attempt.get("n", i + 1)
        start = _when(attempt.get("started"))
        end = _when(attempt.get("ended")) or last.get(n if isinstance(n, int) else i + 1)
        if start is not None and end is not None:
            total += max(0.0, (end - start).total_seconds())
    return total


def _when(stamp: Any) -> dt.datetime | None:
    try:
        return dt.datetime.fromisoformat(stamp) if isinstance(stamp, str) else None
    except ValueError:
        return None


def is_old_schema(error: StoreError) -> bool:
    """A cell file written in an earlier schema (readable, not damaged)."""
    return (isinstance(error, SchemaError) and isinstance(error.version, int)
            and error.version != SCHEMA_VERSION)


def _matching_ok(run_dir: RunDir, fingerprints: dict[str, str]) -> set[str]:
    """Ok cells whose fingerprint matches the plan. A damaged cell file is named, set aside into
    ``cells/damaged/`` and measured again; an old-schema file is measured again (it moves to
    history when its cell is written)."""
    cells, damaged = run_dir.read_cells()
    for error in damaged:
        if is_old_schema(error):
            print(f"resume: cell file in an old schema, measuring it again: {error}", flush=True)
            continue
        moved = run_dir.set_aside(Path(error.path))
        print(f"resume: cell file damaged, moved to {moved.relative_to(run_dir.path)} and "
              f"measuring it again: {error}", flush=True)
    return {c.cell_id for c in cells
            if fingerprints.get(c.cell_id) == c.fingerprint and _still_ok(c)}


class RunWriter(Protocol):
    """Where a :class:`~specbench_lib.sweep.serversweep.ServerSweep` writes: :class:`Run` here,
    a Ray worker's queue (:class:`~specbench_lib.sweep.placed.WorkerRun`) on a node."""

    dir: RunDir
    fingerprints: dict[str, str]

    def provenance(self) -> Provenance: ...

    def write_cell(self, record: CellRecord) -> object: ...

    def store_server(self, label: str, record: ServerRecord) -> None: ...
