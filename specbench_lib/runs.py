"""The run directory, end to end: create, open, resume, reuse, manifest, attempts, cells.

Nothing else in specbench spells the layout::

    outputs/runs/<run id>/
        manifest.json        params, plan fingerprints, engine, model, servers, attempts, counts
        params.yaml          the resolved params (secrets redacted)
        cells/<cell id>.json one CellRecord per cell, written atomically
        cells/history/       earlier files of cells measured again
        cells/damaged/       cell files that could not be read, set aside by a resume (kept)
        logs/<config>.log    each server's log
        plots/               figures (PNG and SVG)
        results.csv, results.parquet, <notebook>.ipynb, <notebook>.html
                             (papermill's executed notebook, or JupyterLab's as last saved)
        .lock                the pid of the process writing the run, flock-ed while it writes
"""

from __future__ import annotations

import datetime as dt
import os
import re
import secrets
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from .analysis import judge
from .errors import ParamsError, SchemaError, StoreError
from .notebook_link import SAVED_STATE, keep_session, session_notebook
from .paths import folder_problem, outputs_dir
from .plan import Plan
from .provenance import environment_info
from .records import SCHEMA_VERSION, CellRecord, Provenance
from .runlock import RunLock
from .store import read_json, redact, utc_now, write_json_atomic

# the manifest's sections that readers index, and their JSON types
MANIFEST_SECTIONS: dict[str, type] = {
    "params": dict, "plan_fingerprints": dict, "environment": dict, "servers": dict,
    "verdict_counts": dict, "engine": dict, "model": dict, "fingerprint_components": dict,
    "attempts": list}
# a run id is a folder name under outputs/runs: no separator, no absolute path, no '.' or '..'
RUN_ID = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")


def check_run_id(run_id: object, *, key: str = "run_id") -> str:
    """``run_id`` as a run directory's name; a :class:`ParamsError` naming ``key`` and the value
    when it is not one (a path that would write outside ``outputs/runs``)."""
    text = str(run_id)
    if not RUN_ID.match(text):
        raise ParamsError(f"{key} {text!r} is not a run id: use letters, digits, '_', '-' and '.' "
                          f"(at most 128, not starting with '.'), with no '/' and no absolute "
                          f"path; see 'specbench runs' for the ids of existing runs", key=key,
                          value=text)
    return text


def new_run_id(phase: str) -> str:
    """``<UTC time>_<phase>_<6 hex>``: the one way a run id is made."""
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    return f"{stamp}_{phase}_{secrets.token_hex(3)}"


def runs_root(root: Path | None = None) -> Path:
    return (root or outputs_dir()) / "runs"


class RunDir:
    """A run directory's files; :meth:`create` and :meth:`open` take its lock for writing."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.cells_dir = self.path / "cells"
        self.logs_dir = self.path / "logs"
        self.plots_dir = self.path / "plots"
        self.manifest_path = self.path / "manifest.json"
        self.params_path = self.path / "params.yaml"
        self.results_csv = self.path / "results.csv"
        self.results_parquet = self.path / "results.parquet"
        self._lock = RunLock(self.path / ".lock")

    @property
    def run_id(self) -> str:
        return self.path.name

    @property
    def outputs_root(self) -> Path:
        """The outputs folder this run directory lives in (``<outputs>/runs/<run id>``)."""
        return self.path.parent.parent

    @classmethod
    def at(cls, run_id: str, *, root: Path | None = None) -> RunDir:
        """The run directory of ``run_id`` (not locked: for reading); a :class:`ParamsError` for
        an id that is not a name (:func:`check_run_id`)."""
        return cls(runs_root(root) / check_run_id(run_id))

    @classmethod
    def create(cls, run_id: str, *, root: Path | None = None) -> RunDir:
        run = cls.at(run_id, root=root)
        if run.manifest_path.exists() or run.cells_dir.exists():
            raise StoreError("run directory holds a run already; choose another run_id",
                             path=run.path)
        for folder in (run.cells_dir, run.logs_dir, run.plots_dir):
            make_folder(folder)
        run.acquire()
        return run

    @classmethod
    def open(cls, run_id: str, *, root: Path | None = None) -> RunDir:
        """An existing run directory, locked for this process (to resume it)."""
        run = cls.at(run_id, root=root)
        if not run.manifest_path.is_file():
            raise StoreError("no run to resume here (no manifest.json); give the id of a run "
                             "under outputs/runs", path=run.path)
        run.acquire()
        return run

    def acquire(self) -> None:
        """Take the run's lock for this process (:class:`~.runlock.RunLock`): a second writer is
        refused, naming the first; a killed writer's lock is free."""
        self._lock.acquire()

    def release(self) -> None:
        """Drop the lock this :class:`RunDir` holds (nothing when it holds none)."""
        self._lock.release()

    def lock_held(self) -> bool:
        """Whether a living process holds the run's lock (it is writing the run)."""
        return self._lock.held()

    def lock_owner(self) -> int | None:
        """The pid in the run's lock, or None when there is no lock (or it holds no pid)."""
        return self._lock.owner()

    def set_aside(self, path: Path) -> Path:
        """Move a cell file that cannot be read into ``cells/damaged/``, keeping it (a name
        already there gets a number). Returns where it went."""
        path = Path(path)
        folder = self.cells_dir / "damaged"
        folder.mkdir(parents=True, exist_ok=True)
        target = folder / path.name
        n = 1
        while target.exists():
            target = folder / f"{path.stem}.{n}{path.suffix}"
            n += 1
        os.replace(path, target)
        return target

    def discard_if_empty(self) -> bool:
        """Remove the run directory when it holds no file at all (only empty folders), as a run
        that failed before writing anything leaves it; True when it was removed. Never deletes
        a file."""
        if not self.path.is_dir() or any(p.is_file() or p.is_symlink() for p in self.path.rglob("*")):
            return False
        for folder in sorted(self.path.rglob("*"), key=lambda p: len(p.parts), reverse=True):
            folder.rmdir()
        self.path.rmdir()
        return True

    def manifest(self) -> dict[str, Any]:
        """The manifest; a :class:`StoreError` naming it when it is not one (a JSON object whose
        sections, where present, have their types: every reader relies on them)."""
        if not self.manifest_path.exists():
            return {}
        data = read_json(self.manifest_path)
        if not isinstance(data, dict):
            raise StoreError("manifest is not a JSON object", path=self.manifest_path)
        wrong = [f"{key} is {type(data[key]).__name__}, not {kind.__name__}"
                 for key, kind in MANIFEST_SECTIONS.items()
                 if data.get(key) is not None and not isinstance(data[key], kind)]
        if wrong:
            raise StoreError(f"manifest is not of its shape ({'; '.join(wrong)}); restore it from "
                             f"a copy", path=self.manifest_path)
        return data

    def update_manifest(self, **fields: Any) -> dict[str, Any]:
        data = self.manifest()
        data.update(fields)
        write_json_atomic(self.manifest_path, data)
        return data

    def cell_path(self, cell_id: str) -> Path:
        return self.cells_dir / f"{cell_id}.json"

    def log_path(self, label: str) -> Path:
        return self.logs_dir / f"{label}.log"

    def write_cell(self, record: CellRecord) -> Path:
        path = self.cell_path(record.cell_id)
        try:
            write_json_atomic(path, record.to_dict())
        except OSError as exc:
            raise StoreError(f"cannot write cell {record.cell_id} ({exc.strerror or exc}); the "
                             f"cells written before are intact: free disk space or fix "
                             f"permissions, then resume this run", path=path) from exc
        return path

    def cell_files(self) -> list[Path]:
        return sorted(self.cells_dir.glob("*.json"))

    def read_cells(self) -> tuple[list[CellRecord], list[StoreError]]:
        """Every current cell file as a record, and a :class:`StoreError` per unreadable file."""
        cells: list[CellRecord] = []
        damaged: list[StoreError] = []
        for path in self.cell_files():
            try:
                cells.append(CellRecord.from_dict(read_json(path), path=path))
            except StoreError as exc:
                damaged.append(exc)
        return cells, damaged

    def archive_cell(self, cell_id: str) -> Path | None:
        """Move a cell file into ``cells/history/`` before it is measured again (nothing is lost)."""
        path = self.cell_path(cell_id)
        if not path.exists():
            return None
        history = self.cells_dir / "history"
        history.mkdir(exist_ok=True)
        n = len(list(history.glob(f"{cell_id}.*.json"))) + 1
        target = history / f"{cell_id}.{n}.json"
        os.replace(path, target)
        return target

    def notebooks(self) -> list[Path]:
        return sorted(self.path.glob("*.ipynb"))

    def next_notebook(self, stem: str) -> Path:
        """Where a resumed attempt's executed notebook goes (``<stem>.attempt<n>.ipynb``)."""
        n = len(list(self.path.glob(f"{stem}*.ipynb"))) + 1
        return self.path / f"{stem}.attempt{n}.ipynb"

    def notebook_target(self, name: str) -> Path:
        """Where a copy of the notebook ``name`` goes: ``<name>``, or the next
        ``<stem>.attempt<n>.ipynb`` when an earlier attempt's notebook is there."""
        target = self.path / name
        return target if not target.exists() else self.next_notebook(Path(name).stem)

    def shared_files(self) -> list[Path]:
        """What an index links to: rendered notebooks, notebooks and PNG figures."""
        return sorted([*self.path.glob("*.html"), *self.notebooks(),
                       *self.plots_dir.glob("*.png")])

    def write_params(self, resolved: dict[str, Any]) -> None:
        self.params_path.write_text(yaml.safe_dump(resolved, sort_keys=False))


def make_folder(path: Path) -> Path:
    """Create ``path`` and its parents; a :class:`StoreError` naming it and why when it cannot be
    (a part of it is a file, a read-only disk), with the way out."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        why = folder_problem(path) or exc.strerror or str(exc)
        raise StoreError(f"cannot create a folder here ({why}); set SPECBENCH_OUTPUTS (or "
                         f"outputs=) to a folder you can write", path=path) from None
    return path


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` exists (one we may not signal counts as alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def iter_runs(root: Path | None = None) -> Iterator[RunDir]:
    """Every run directory with a manifest, oldest first."""
    for manifest in sorted(runs_root(root).glob("*/manifest.json")):
        yield RunDir(manifest.parent)


def list_runs(root: Path | None = None) -> list[dict[str, Any]]:
    """One summary per run directory under ``outputs/runs``, oldest first.

    ``status`` is the manifest's, except: ``died`` for a run the manifest says is running (or
    never said) whose lock no process holds (its writer was killed: resume it), and
    ``unreadable`` for a manifest that cannot be read (``error`` says why; nothing is changed).
    """
    runs = []
    for run in iter_runs(root):
        error = None
        try:
            data = run.manifest()
        except StoreError as exc:
            data, error = {"status": "unreadable"}, str(exc)
        status = data.get("status")
        if error is None and status in (None, "running") and not run.lock_held():
            status = "died"
        git = (data.get("environment") or {}).get("git")
        git = git if isinstance(git, dict) else {}
        runs.append({"run_id": run.run_id, "phase": data.get("phase"),
                     "started": data.get("started"), "status": status,
                     "counts": data.get("verdict_counts"), "commit": (git.get("commit") or "")[:10],
                     "dirty": git.get("dirty"), "path": str(run.path), "error": error,
                     "budget": data.get("budget")})  # a one-budget run covers part of its plan
    return runs


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
        attempt = {"n": len(attempts) + 1, "started": utc_now(), "pid": os.getpid(),
                   "params_file": str(plan.source), "budget": plan.budget,
                   "notebook_source": str(source) if source else None,
                   "kept_cells": sorted(kept), "reused_from": {}, "environment": environment}
        run = cls(run_dir, plan, fingerprints, attempt, kept)
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

    def store_server(self, label: str, record: dict[str, Any]) -> None:
        servers = self.dir.manifest().get("servers", {})
        servers[label] = record
        self.dir.update_manifest(servers=servers)

    def finish(self, status: str, *, elapsed_s: float, counts: dict[str, int]) -> None:
        """Close this attempt in the manifest (keeping a JupyterLab session's notebook) and
        release the lock."""
        try:
            self.attempt.update(ended=utc_now(), status=status)
            attempts = self.dir.manifest().get("attempts", [])
            attempts[-1] = self.attempt
            self.dir.update_manifest(status=status, ended=self.attempt["ended"],
                                     attempts=attempts, elapsed_s=round(elapsed_s, 1),
                                     verdict_counts=counts)
            self._keep_session_notebook()
        finally:
            self.dir.release()

    def _keep_session_notebook(self) -> None:
        """Copy the JupyterLab notebook that ran this attempt into the run directory (as last
        saved; see :mod:`.notebook_link`) and name it in the manifest. A notebook that cannot be
        copied is reported, never a reason to lose the run."""
        source = self.attempt.get("notebook_source")
        if not source:
            return
        try:
            name = keep_session(self.dir, Path(source), self.dir.run_id)
        except OSError as exc:
            print(f"run {self.dir.run_id}: could not copy the notebook {source} into the run "
                  f"directory ({exc}); it is named in the manifest (notebook_source)", flush=True)
            return
        self.attempt["notebook"] = name
        attempts = self.dir.manifest().get("attempts", [])
        attempts[-1] = self.attempt
        self.dir.update_manifest(notebook=name, notebook_state=SAVED_STATE, attempts=attempts)

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
    return judge(cell).ok


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
