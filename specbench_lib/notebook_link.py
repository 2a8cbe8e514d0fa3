"""Keep the notebook that ran a sweep in its run directory: papermill's output, or JupyterLab's.

**papermill.** The notebook passes papermill's own ``PAPERMILL_OUTPUT_PATH`` parameter
(``papermill --inject-paths``; ``specbench run`` always sets it) to :func:`keep`. When that path
already lies in the run directory (``specbench run`` writes there) nothing else is needed.
Otherwise a small detached watcher copies the finished notebook into the run directory once the
papermill process that started this kernel exits (papermill writes the final notebook before it
exits), renders it to HTML and refreshes the index.

**JupyterLab.** A kernel that jupyter-server starts for a notebook has the notebook's path in
``JPY_SESSION_NAME`` (``SessionManager.get_kernel_env``; ipykernel shows it as ``__session__``):
:func:`session_notebook` reads it, and the run records it when it starts. A kernel cannot make the
frontend save, so when the sweep ends :func:`keep_session` copies the notebook *as last saved*,
then a detached watcher follows the saved file while the kernel lives: each time it is saved
again (JupyterLab autosaves every 120 s; Ctrl-S saves at once) and still shows this run, the copy
is refreshed and rendered to HTML. The sweep itself never knows how it was started.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from .runs.session import SESSION_ENV, session_notebook

if TYPE_CHECKING:
    from .runs.run import RunDir

__all__ = ["SAVED_STATE", "SESSION_ENV", "keep", "keep_session", "keep_session_notebook",
           "session_notebook"]

SAVED_STATE = ("the notebook as JupyterLab last saved it (a kernel cannot make the frontend save): "
               "copied when the sweep ended, refreshed while its kernel lives each time the saved "
               "notebook shows this run (JupyterLab autosaves every 120 s; Ctrl-S saves at once)")


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
    _detach("wait", str(os.getppid()), str(out), str(target))
    return target.name


def keep_session(run_dir: RunDir, source: Path, marker: str, *,
                 kernel_pid: int | None = None) -> str:
    """Copy the session's notebook ``source`` (as last saved) into ``run_dir`` and start the
    watcher that refreshes the copy while the kernel (``kernel_pid``, by default this process)
    lives, each time the saved notebook holds ``marker`` (the run id, which the sweep prints).

    Returns the copy's file name in ``run_dir``. OSError when the notebook cannot be copied.
    """
    target = run_dir.notebook_target(source.name)
    _copy(source, target)
    _detach("follow", str(kernel_pid or os.getpid()), str(source), str(target), marker)
    return target.name


def keep_session_notebook(run_dir: RunDir) -> str | None:
    """Copy the JupyterLab notebook that ran the run's last attempt into the run directory (as
    last saved; see :func:`keep_session`) and name it in the manifest; the copy's name, or None.
    A notebook that cannot be copied is reported, never a reason to lose the run."""
    attempts = run_dir.manifest().get("attempts", [])
    source = attempts[-1].get("notebook_source") if attempts else None
    if not source:
        return None
    try:
        name = keep_session(run_dir, Path(source), run_dir.run_id)
    except OSError as exc:
        print(f"run {run_dir.run_id}: could not copy the notebook {source} into the run "
              f"directory ({exc}); it is named in the manifest (notebook_source)", flush=True)
        return None
    attempts[-1]["notebook"] = name
    run_dir.update_manifest(notebook=name, notebook_state=SAVED_STATE, attempts=attempts)
    return name


def _detach(*argv: str) -> None:
    subprocess.Popen([sys.executable, "-m", "specbench_lib.notebook_link", *argv],
                     start_new_session=True, stdin=subprocess.DEVNULL,
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _copy(source: Path, target: Path) -> None:
    """Copy ``source`` over ``target`` atomically (a reader never sees half a notebook)."""
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    shutil.copyfile(source, tmp)
    os.replace(tmp, target)


def _publish(target: Path) -> None:
    from .report.pages import build_index, render_html
    from .runs.run import RunDir

    render_html(target)
    build_index(RunDir(target.parent).outputs_root)


def _wait_and_copy(pid: int, source: Path, target: Path, limit_s: float = 7 * 24 * 3600) -> None:
    from .runs.run import pid_alive

    start = time.monotonic()
    while pid_alive(pid) and time.monotonic() - start < limit_s:
        time.sleep(0.5)
    if source.is_file() and not target.exists():
        shutil.copyfile(source, target)
        _publish(target)


def _follow(pid: int, source: Path, target: Path, marker: str, *, poll_s: float = 1.0,
            limit_s: float = 7 * 24 * 3600) -> None:
    """Refresh ``target`` from ``source`` while process ``pid`` lives (and once after): when the
    saved notebook changed and holds ``marker``; the first pass renders the copy as it is."""
    from .runs.run import pid_alive

    start = time.monotonic()
    seen: float | None = None
    published = False
    while True:
        alive = pid_alive(pid) and time.monotonic() - start < limit_s
        try:
            mtime = source.stat().st_mtime
            if mtime != seen:
                seen = mtime
                text = source.read_text()
                if marker in text and text != target.read_text():
                    _copy(source, target)
                    published = False
        except (OSError, UnicodeDecodeError):
            pass  # moved, deleted or half written: the next save is read again
        if not published and target.is_file():
            published = True
            try:
                _publish(target)
            except Exception:  # noqa: BLE001 - a detached watcher has no one to tell; the copy stays
                pass
        if not alive:
            return
        time.sleep(poll_s)


if __name__ == "__main__":
    if sys.argv[1] == "follow":
        _follow(int(sys.argv[2]), Path(sys.argv[3]), Path(sys.argv[4]), sys.argv[5])
    else:
        _wait_and_copy(int(sys.argv[2]), Path(sys.argv[3]), Path(sys.argv[4]))
