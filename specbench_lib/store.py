"""Run directories: one per execution, a manifest, one atomic JSON file per cell, a lock."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import platform
import re
import secrets
import subprocess
from pathlib import Path
from typing import Any

from .errors import StoreError
from .paths import outputs_dir, project_root

SCHEMA_VERSION = 1
SPECBENCH_VERSION = "0.1.0"


def utc_now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def new_run_id(phase: str) -> str:
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    return f"{stamp}_{phase}_{secrets.token_hex(3)}"


def write_json_atomic(path: Path, data: Any) -> None:
    """Write JSON to a temp file beside ``path``, fsync it, then rename it over ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w") as fh:
        json.dump(data, fh, indent=2, default=str)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


_SECRET = re.compile(r"(api[_-]?key|token|secret|password|passwd|authorization|credential)", re.I)
REDACTED = "***redacted***"


def redact(value: Any) -> Any:
    """A copy of params/argv with secret values replaced: mapping keys and ``--flag value`` pairs
    whose name looks like a secret (api_key, token, password…), and ``--flag=value`` forms."""
    if isinstance(value, dict):
        return {k: REDACTED if _SECRET.search(str(k)) and v else redact(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        out: list[Any] = []
        hide_next = False
        for item in value:
            if hide_next:
                out.append(REDACTED)
                hide_next = False
            elif isinstance(item, str) and item.startswith("-") and _SECRET.search(item):
                name, eq, _ = item.partition("=")
                out.append(f"{name}={REDACTED}" if eq else item)
                hide_next = not eq
            else:
                out.append(redact(item))
        return out
    return value


def fingerprint(*parts: Any) -> str:
    blob = json.dumps(parts, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:20]


class RunDir:
    """A run directory under ``outputs/runs``; holds the lock while the run is open."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.cells_dir = path / "cells"
        self.logs_dir = path / "logs"
        self.plots_dir = path / "plots"
        self.manifest_path = path / "manifest.json"
        self._lock = path / ".lock"

    @property
    def run_id(self) -> str:
        return self.path.name

    @classmethod
    def create(cls, run_id: str, *, root: Path | None = None) -> RunDir:
        runs = (root or outputs_dir()) / "runs"
        path = runs / run_id
        run = cls(path)
        if run.manifest_path.exists() or run.cells_dir.exists():
            raise StoreError("run directory holds a run already; choose another run_id",
                             path=path)
        for folder in (run.cells_dir, run.logs_dir, run.plots_dir):
            folder.mkdir(parents=True, exist_ok=True)
        run.acquire()
        return run

    @classmethod
    def open(cls, run_id: str, *, root: Path | None = None) -> RunDir:
        """An existing run directory, locked for this process (to resume it)."""
        path = (root or outputs_dir()) / "runs" / run_id
        run = cls(path)
        if not run.manifest_path.is_file():
            raise StoreError("no run to resume here (no manifest.json); give the id of a run "
                             "under outputs/runs", path=path)
        run.acquire()
        return run

    def acquire(self) -> None:
        """Take the run's lock; a lock left by a process that no longer exists is taken over."""
        for _ in range(2):
            try:
                fd = os.open(self._lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                owner = self._lock.read_text().strip()
                if owner.isdigit() and not _pid_alive(int(owner)):
                    self._lock.unlink(missing_ok=True)
                    continue
                raise StoreError(f"run is being written by process {owner or '?'}; wait for it to "
                                 f"finish or stop it, then resume", path=self._lock) from None
            with os.fdopen(fd, "w") as fh:
                fh.write(str(os.getpid()))
            return
        raise StoreError("could not take the run's lock", path=self._lock)

    def release(self) -> None:
        self._lock.unlink(missing_ok=True)

    def manifest(self) -> dict[str, Any]:
        return json.loads(self.manifest_path.read_text()) if self.manifest_path.exists() else {}

    def update_manifest(self, **fields: Any) -> dict[str, Any]:
        data = self.manifest()
        data.update(fields)
        write_json_atomic(self.manifest_path, data)
        return data

    def write_cell(self, cell_id: str, data: dict[str, Any]) -> Path:
        path = self.cells_dir / f"{cell_id}.json"
        try:
            write_json_atomic(path, data)
        except OSError as exc:
            raise StoreError(f"cannot write cell {cell_id} ({exc.strerror or exc}); the cells "
                             f"written before are intact: free disk space or fix permissions, "
                             f"then resume this run", path=path) from exc
        return path

    def read_cells(self) -> list[dict[str, Any]]:
        return [json.loads(p.read_text()) for p in sorted(self.cells_dir.glob("*.json"))]

    def archive_cell(self, cell_id: str) -> Path | None:
        """Move a cell file into ``cells/history/`` before it is measured again (nothing is lost)."""
        path = self.cells_dir / f"{cell_id}.json"
        if not path.exists():
            return None
        history = self.cells_dir / "history"
        history.mkdir(exist_ok=True)
        n = len(list(history.glob(f"{cell_id}.*.json"))) + 1
        target = history / f"{cell_id}.{n}.json"
        os.replace(path, target)
        return target


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def list_runs(root: Path | None = None) -> list[dict[str, Any]]:
    """One summary per run directory under ``outputs/runs``, oldest first."""
    runs = []
    for manifest_path in sorted(((root or outputs_dir()) / "runs").glob("*/manifest.json")):
        try:
            data = json.loads(manifest_path.read_text())
        except (OSError, json.JSONDecodeError):
            data = {"status": "unreadable"}
        git = (data.get("environment") or {}).get("git") or {}
        runs.append({"run_id": manifest_path.parent.name, "phase": data.get("phase"),
                     "started": data.get("started"), "status": data.get("status"),
                     "counts": data.get("verdict_counts"), "commit": (git.get("commit") or "")[:10],
                     "dirty": git.get("dirty"), "path": str(manifest_path.parent)})
    return runs


def environment_info() -> dict[str, Any]:
    """Host, CPU, GPUs, git state and package versions for a manifest."""
    from importlib.metadata import PackageNotFoundError, version

    versions = {}
    for pkg in ("specbench", "httpx", "pandas", "matplotlib", "papermill", "pydantic"):
        try:
            versions[pkg] = version(pkg)
        except PackageNotFoundError:
            versions[pkg] = None
    return {
        "host": platform.node(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpu": _cpu_name(),
        "cpu_count": os.cpu_count(),
        "gpus": _gpus(),
        "git": git_state(),
        "versions": versions,
    }


def git_state() -> dict[str, Any]:
    root = project_root()

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True,
                                  timeout=10, check=False)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    status = git("status", "--porcelain", "--untracked-files=no")
    return {"commit": commit, "dirty": bool(status) if status is not None else None}


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def _gpus() -> list[str]:
    try:
        done = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total",
                               "--format=csv,noheader"], capture_output=True, text=True,
                              timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [line.strip() for line in done.stdout.splitlines() if line.strip()]


IDENTITY_METHOD = "names+sizes+first/last MiB, v1"


def file_identity(path: Path, *, full_hash: bool = False) -> dict[str, Any]:
    """Path, size, mtime and a cheap fingerprint of a model file or folder.

    The fingerprint hashes the file list with sizes (and, for a single file, its first and last
    MiB); ``full_hash`` adds a SHA-256 of every byte, which can take minutes for a 50 GB model.
    """
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    digest = hashlib.sha256()
    total, newest = 0, 0.0
    for file in files:
        stat = file.stat()
        total += stat.st_size
        newest = max(newest, stat.st_mtime)
        digest.update(f"{file.relative_to(path) if path.is_dir() else file.name}:{stat.st_size}\n".encode())
    if not path.is_dir():
        with open(path, "rb") as fh:
            digest.update(fh.read(1 << 20))
            fh.seek(max(0, total - (1 << 20)))
            digest.update(fh.read(1 << 20))
    identity: dict[str, Any] = {
        "path": str(path), "size": total, "files": len(files), "method": IDENTITY_METHOD,
        "mtime": dt.datetime.fromtimestamp(newest, dt.UTC).isoformat(),
        "fingerprint": digest.hexdigest()[:20]}
    if full_hash:
        full = hashlib.sha256()
        for file in files:
            with open(file, "rb") as fh:
                for block in iter(lambda fh=fh: fh.read(1 << 24), b""):
                    full.update(block)
        identity["sha256"] = full.hexdigest()
    return identity
