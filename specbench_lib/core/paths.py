"""Where things live: the project root, the outputs folder, the engine cache."""

from __future__ import annotations

import os
from pathlib import Path


def project_root(start: Path | None = None) -> Path:
    """The folder holding ``pyproject.toml`` and ``params/``, searched upward from ``start``."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / "pyproject.toml").is_file() and (folder / "params").is_dir():
            return folder
    package_parent = Path(__file__).resolve().parent.parent
    return package_parent


def resolve_project_path(path: str | Path) -> Path:
    """A path as given if it exists from the working directory, else from the project root."""
    given = Path(path).expanduser()
    if given.is_absolute() or given.exists():
        return given.resolve()
    return (project_root() / given).resolve()


def outputs_dir() -> Path:
    env = os.environ.get("SPECBENCH_OUTPUTS")
    return Path(env).expanduser().resolve() if env else project_root() / "outputs"


def folder_problem(path: Path) -> str | None:
    """Why a folder cannot be made (or written) at ``path``: the nearest existing part of it is a
    file, or not writable; None when it can."""
    existing = Path(path)
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        return f"{existing} is a file, not a folder"
    if not os.access(existing, os.W_OK | os.X_OK):
        return f"{existing} is not writable"
    return None


def cache_dir() -> Path:
    env = os.environ.get("SPECBENCH_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "specbench"
