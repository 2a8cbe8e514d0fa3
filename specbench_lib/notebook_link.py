"""Keep the executed notebook in its run directory, whichever way papermill was started.

``specbench run`` writes papermill's output straight into the run directory and names it in
``$SPECBENCH_NOTEBOOK_OUTPUT``, which the kernel inherits. When a user runs
``papermill tp1.ipynb out.ipynb`` by hand, the kernel finds papermill's output path in its parent
process and starts a small detached watcher that copies the finished notebook into the run
directory once papermill exits (papermill writes the final notebook before it exits).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

NOTEBOOK_ENV = "SPECBENCH_NOTEBOOK_OUTPUT"


def papermill_output(pid: int | None = None) -> Path | None:
    """The output notebook path of the papermill process that started this kernel, if any."""
    pid = pid or os.getppid()
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
        cwd = Path(os.readlink(f"/proc/{pid}/cwd"))
    except OSError:
        return None
    idx = next((i for i, a in enumerate(argv) if Path(a).name == "papermill" or a == "papermill"),
               None)
    if idx is None:
        return None
    notebooks = [a for a in argv[idx + 1:] if a.endswith(".ipynb")]
    if len(notebooks) < 2:
        return None
    out = Path(notebooks[1]).expanduser()
    return out if out.is_absolute() else cwd / out


def adopt(run_dir: Path) -> str | None:
    """Arrange for the executed notebook to land in ``run_dir``; returns its final path."""
    named = os.environ.get(NOTEBOOK_ENV)
    out = Path(named) if named else papermill_output()
    if out is None:
        return None
    out = out.resolve()
    if out.parent == run_dir.resolve():
        return out.name
    target = run_dir / out.name
    subprocess.Popen([sys.executable, "-m", "specbench_lib.notebook_link", str(os.getppid()),
                      str(out), str(target)], start_new_session=True, stdin=subprocess.DEVNULL,
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return target.name


def _wait_and_copy(pid: int, source: Path, target: Path, limit_s: float = 7 * 24 * 3600) -> None:
    start = time.monotonic()
    while Path(f"/proc/{pid}").exists() and time.monotonic() - start < limit_s:
        time.sleep(0.5)
    if source.is_file() and not target.exists():
        shutil.copyfile(source, target)
        from .report import build_index, render_html

        render_html(target)
        build_index(target.parent.parent.parent)


if __name__ == "__main__":
    _wait_and_copy(int(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]))
