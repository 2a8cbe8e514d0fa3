"""JupyterLab on a copy of a phase notebook (``specbench lab``): saving a run never writes
outputs into the committed ``notebooks/``.

The copy lives in ``outputs/lab/`` (git-ignored); a run from it records it as its notebook as a
run from any JupyterLab notebook does (:mod:`~specbench_lib.notebook_link`)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from .core.paths import outputs_dir

Launcher = Callable[[Sequence[str]], int]


def lab_folder() -> Path:
    return outputs_dir() / "lab"


def lab_copy(notebook: Path, *, fresh: bool = False) -> tuple[Path, str]:
    """The copy of ``notebook`` in ``outputs/lab/`` and what was done: ``copied`` (a new copy),
    ``kept`` (the copy there, with the researcher's edits and outputs, is opened as it is) or,
    with ``fresh``, ``renewed`` (the old copy moved aside to ``<stem>.<n>.ipynb`` first: nothing
    is lost)."""
    folder = lab_folder()
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / notebook.name
    done = "copied"
    if target.exists() and not fresh:
        return target, "kept"
    if target.exists():
        n = 1
        while (folder / f"{notebook.stem}.{n}{notebook.suffix}").exists():
            n += 1
        os.replace(target, folder / f"{notebook.stem}.{n}{notebook.suffix}")
        done = "renewed"
    tmp = folder / f".{notebook.name}.{os.getpid()}.tmp"
    shutil.copyfile(notebook, tmp)
    os.replace(tmp, target)
    return target, done


def lab_argv(copy: Path, extra: Sequence[str] = ()) -> list[str]:
    """JupyterLab of this Python, opening ``copy``, rooted at the outputs folder (the lab copies
    and the runs beside them; the kernel starts in the copy's folder, inside the project);
    ``extra``: JupyterLab's own options (``--no-browser``, ``--port 8888``)."""
    return [sys.executable, "-m", "jupyterlab", f"--ServerApp.root_dir={copy.parent.parent}",
            *extra, str(copy)]


def run_jupyter(argv: Sequence[str]) -> int:
    """Run JupyterLab in the foreground until it exits (Ctrl-C stops it)."""
    return subprocess.call(list(argv))


def open_lab(notebook: Path, *, fresh: bool = False, extra: Sequence[str] = (),
             launch: Launcher | None = None) -> int:
    """Copy ``notebook`` into ``outputs/lab/`` (:func:`lab_copy`) and start JupyterLab on the
    copy with ``launch`` (by default :func:`run_jupyter`); its exit status."""
    copy, done = lab_copy(notebook, fresh=fresh)
    if done == "kept":
        print(f"specbench: opening your copy {copy} as it is (--fresh for a new copy of "
              f"{notebook.name})", flush=True)
    else:
        print(f"specbench: {done} {notebook.name} into {copy}; saving there leaves "
              f"notebooks/ clean", flush=True)
    return (launch or run_jupyter)(lab_argv(copy, extra))
