"""Keep the executed notebook in its run directory, told where papermill writes it.

The notebook passes papermill's own ``PAPERMILL_OUTPUT_PATH`` parameter (``papermill
--inject-paths``; ``specbench run`` always sets it) to :func:`keep`. When that path already lies
in the run directory (``specbench run`` writes there) nothing else is needed. Otherwise a small
detached watcher copies the finished notebook into the run directory once the papermill process
that started this kernel exits (papermill writes the final notebook before it exits), renders it
to HTML and refreshes the index. The sweep itself never knows how it was started.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from .runs import RunDir, pid_alive


def keep(run_dir: Path, output_path: str | None) -> str | None:
    """Arrange for the executed notebook at ``output_path`` to be kept in ``run_dir``.

    Args:
        run_dir: the run directory of the sweep this notebook ran.
        output_path: papermill's output path (``PAPERMILL_OUTPUT_PATH``), absolute or relative to
            the kernel's directory (papermill's, unless papermill ``--cwd`` moved it). None (an
            interactive session, papermill without ``--inject-paths``), ``-`` (stdout) or a
            remote URL keep nothing.

    Returns:
        The executed notebook's file name in ``run_dir``, or None when nothing will be kept.
    """
    if not output_path or output_path == "-" or "://" in output_path:
        return None
    out = Path(output_path).expanduser().resolve()
    if out.parent == run_dir.resolve():
        return out.name
    target = run_dir / out.name
    subprocess.Popen([sys.executable, "-m", "specbench_lib.notebook_link", str(os.getppid()),
                      str(out), str(target)], start_new_session=True, stdin=subprocess.DEVNULL,
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return target.name


def _wait_and_copy(pid: int, source: Path, target: Path, limit_s: float = 7 * 24 * 3600) -> None:
    start = time.monotonic()
    while pid_alive(pid) and time.monotonic() - start < limit_s:
        time.sleep(0.5)
    if source.is_file() and not target.exists():
        shutil.copyfile(source, target)
        from .report import build_index, render_html

        render_html(target)
        build_index(RunDir(target.parent).outputs_root)


if __name__ == "__main__":
    _wait_and_copy(int(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]))
