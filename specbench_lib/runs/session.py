"""The notebook a kernel runs for: JupyterLab's session, read from the kernel's environment.

A kernel that jupyter-server starts for a notebook has the notebook's path in
``JPY_SESSION_NAME`` (``SessionManager.get_kernel_env``; ipykernel shows it as ``__session__``):
:func:`session_notebook` reads it, and a run records it when it starts (keeping the notebook is
:mod:`~specbench_lib.notebook_link`'s job, done by the front door).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

SESSION_ENV = "JPY_SESSION_NAME"


def session_notebook(environ: Mapping[str, str] | None = None) -> Path | None:
    """The notebook jupyter-server started this kernel for, or None outside such a kernel.

    None too when the path is not an existing ``.ipynb`` file, or when the process that launched
    this kernel has the same ``JPY_SESSION_NAME`` (it was inherited, not set for this kernel: a
    papermill started from a notebook's cell).
    """
    environ = os.environ if environ is None else environ
    found = environ.get(SESSION_ENV)
    if not found or not found.endswith(".ipynb"):
        return None
    path = Path(found).expanduser()
    if not path.is_file() or _inherited(found, environ.get("JPY_PARENT_PID")):
        return None
    return path.resolve()


def _inherited(value: str, parent_pid: str | None) -> bool:
    if not parent_pid or not parent_pid.isdigit():
        return False
    try:
        parent_env = Path(f"/proc/{parent_pid}/environ").read_bytes().split(b"\0")
    except OSError:  # not Linux, or the launcher is gone: nothing says it was inherited
        return False
    return f"{SESSION_ENV}={value}".encode() in parent_env
