"""The run directory store: its layout, ids, files, lock and manifest; the list of runs.

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
from pathlib import Path
from typing import Any

import yaml

from ..core.errors import ParamsError, StoreError
from ..core.paths import folder_problem, outputs_dir
from ..core.readback import read_doc
from ..core.store import read_json, write_json_atomic
from ..model.records import CellRecord
from .lock import RunLock
from .manifest import MANIFEST, MANIFEST_FIX, Manifest

# a run id is a folder name under outputs/runs: no separator, no absolute path, no '.' or '..'
RUN_ID = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")


STRAY = re.compile(r"\.[^/]+\.\d+\.tmp")  # an atomic write's temporary file


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
        """Take the run's lock for this process (:class:`~.lock.RunLock`): a second writer is
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

    def remove_strays(self) -> list[Path]:
        """Remove what interrupted atomic writes left (``.<name>.<pid>.tmp``, see
        :func:`~specbench_lib.core.store.write_json_atomic`); only while this process holds the lock."""
        strays = [p for p in self.path.rglob(".*.tmp") if STRAY.fullmatch(p.name) and p.is_file()]
        for stray in strays:
            stray.unlink(missing_ok=True)
        return strays

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
        return read_doc(self.manifest_path, MANIFEST, name="manifest", fix=MANIFEST_FIX)

    def read_manifest(self) -> Manifest:
        """The manifest as its read model (:class:`~.manifest.Manifest`); empty when there is
        none, a :class:`StoreError` as :meth:`manifest` raises it."""
        return Manifest.from_dict(self.manifest())

    def update_manifest(self, **fields: Any) -> dict[str, Any]:
        data = self.manifest()
        data.update(fields)
        try:
            write_json_atomic(self.manifest_path, data)
        except OSError as exc:
            raise StoreError(f"cannot write the manifest ({exc.strerror or exc}); it is as it "
                             f"was: free disk space or fix permissions, then resume this run",
                             path=self.manifest_path) from exc
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
                cell = CellRecord.from_dict(read_json(path), path=path)
            except StoreError as exc:
                damaged.append(exc)
                continue
            if path.name != f"{cell.cell_id}.json":  # a copy under another cell's name
                damaged.append(StoreError(f"the file holds cell {cell.cell_id}, not the cell of "
                                          f"its name: a copy or a rename; move it away (a "
                                          f"resume sets it aside and measures its cell again)",
                                          path=path))
                continue
            cells.append(cell)
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
    ``unreadable`` for a manifest that cannot be read (``error`` says why; nothing is changed),
    and ``unrecorded`` for a folder with no manifest whose lock no process holds (its process
    was killed before the sweep began: nothing to resume; ``starting`` while it is held).
    """
    runs = [_unrecorded(RunDir(path)) for path in sorted(runs_root(root).glob("*/"))
            if path.is_dir() and not (path / "manifest.json").exists()]
    for run in iter_runs(root):
        error = None
        try:
            data = run.read_manifest()
        except StoreError as exc:
            data, error = Manifest(status="unreadable"), str(exc)
        status = data.status
        if error is None and status in (None, "running") and not run.lock_held():
            status = "died"
        git = data.git
        runs.append({"run_id": run.run_id, "phase": data.phase,
                     "started": data.started, "status": status,
                     "counts": data.verdict_counts, "commit": (git.get("commit") or "")[:10],
                     "dirty": git.get("dirty"), "path": str(run.path), "error": error,
                     "budget": data.budget})  # a one-budget run covers part of its plan
    return sorted(runs, key=lambda r: str(r["run_id"]))


def _unrecorded(run: RunDir) -> dict[str, Any]:
    """A run folder without a manifest, as :func:`list_runs` lists it."""
    return {"run_id": run.run_id, "phase": None, "started": None,
            "status": "starting" if run.lock_held() else "unrecorded", "counts": None,
            "commit": "", "dirty": None, "path": str(run.path), "error": None, "budget": None}
