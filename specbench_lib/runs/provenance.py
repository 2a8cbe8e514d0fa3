"""Where a measurement came from: host, git state, file identities, the measuring code's hash."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import platform
import subprocess
from functools import partial
from pathlib import Path
from typing import Any

from ..core.paths import project_root
from .codehash import measurement_code_hash


def environment_info() -> dict[str, Any]:
    """Host, CPU, GPUs, git state and package versions: one attempt's environment."""
    from importlib.metadata import PackageNotFoundError, version

    versions: dict[str, str | None] = {}
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
        "load_avg": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        "gpus": visible_gpus(),
        "git": git_state(),
        "measurement_code": measurement_code_hash(),
        "versions": versions,
    }


def git_state(root: Path | None = None) -> dict[str, Any]:
    """The checkout's commit and whether it is ``dirty``: a tracked file differs from the commit.

    A notebook that differs only in what running and saving it writes (outputs, execution
    counts, metadata other than cell tags) is not a change: saving a run in JupyterLab does not
    make the next run's checkout dirty. A changed code or markdown cell, or its tags, is."""
    root = root or project_root()

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True,
                                  timeout=10, check=False)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return done.stdout if done.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    status = git("status", "--porcelain", "-z", "--untracked-files=no")
    if status is None:
        return {"commit": commit and commit.strip(), "dirty": None}
    top = Path((git("rev-parse", "--show-toplevel") or str(root)).strip())  # status's paths
    changed = []
    entries = iter(status.split("\0"))
    for entry in entries:
        if not entry:
            continue
        code, path = entry[:2], entry[3:]
        if "R" in code or "C" in code:  # a rename or copy: the next entry is where it came from
            next(entries, None)
            changed.append(path)
        elif not (path.endswith(".ipynb") and set(code) <= {"M", " "}
                  and _same_code(top / path, git("show", f"HEAD:{path}"))):
            changed.append(path)
    return {"commit": commit and commit.strip(), "dirty": bool(changed)}


def _same_code(notebook: Path, committed: str | None) -> bool:
    """Whether the notebook file holds the cells (type, source, tags) of ``committed``."""
    def cells(text: str | None) -> list[tuple[str, str, list[str]]] | None:
        try:
            found: Any = json.loads(text) if text is not None else None
            return [(c["cell_type"], "".join(c["source"]) if isinstance(c["source"], list)
                     else c["source"], sorted((c.get("metadata") or {}).get("tags") or []))
                    for c in found["cells"]]
        except (ValueError, TypeError, KeyError, AttributeError):
            return None

    try:
        current = cells(notebook.read_text())
    except (OSError, UnicodeDecodeError):
        return False
    return current is not None and current == cells(committed)


def visible_gpus() -> list[str]:
    """``name, driver, memory, compute capability`` of each GPU nvidia-smi lists (empty without
    one; without the capability where the driver is too old to report it)."""
    for fields in ("name,driver_version,memory.total,compute_cap", "name,driver_version,memory.total"):
        try:
            done = subprocess.run(["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader"],
                                  capture_output=True, text=True, timeout=20, check=False)
        except (OSError, subprocess.TimeoutExpired):
            return []
        if done.returncode == 0:
            return [line.strip() for line in done.stdout.splitlines() if line.strip()]
    return []


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


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
                for block in iter(partial(fh.read, 1 << 24), b""):
                    full.update(block)
        identity["sha256"] = full.hexdigest()
    return identity
