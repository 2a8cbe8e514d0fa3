"""Executing a phase notebook for ``specbench run``: papermill on a kernel that talks over
Unix sockets (no TCP port, no transport warning) and that Ctrl-C interrupts as a notebook's
interrupt button does, so the sweep stops cleanly and can be resumed. The sweep's progress
lines, which the notebook shows as one updating output (:mod:`~specbench_lib.livelog`), are echoed by the
kernel into a file (``SPECBENCH_ECHO``) that this process prints as it grows. What stopped
it, in one line where nothing is left to do: a Ctrl-C after the run was closed complete, an
executed notebook a full disk would not take."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any, TextIO, TypeGuard

from .core.errors import StoreError
from .livelog import ECHO_ENV
from .runs.rundir import RunDir


def failed_in_a_cell(failed: BaseException | None) -> TypeGuard[Any]:  # papermill's: untyped
    """Whether what stopped :func:`execute` was a cell that raised (papermill's error, which
    :func:`execute` has imported: papermill is imported only to run a notebook)."""
    from papermill import PapermillExecutionError

    return isinstance(failed, PapermillExecutionError)


def kernel_died(failed: BaseException | None) -> bool:
    """Whether the notebook's kernel died under it (nbclient's ``DeadKernelError``: killed, as
    the out-of-memory killer does); the run's cells written before are safe."""
    from nbclient.exceptions import DeadKernelError

    return isinstance(failed, DeadKernelError)


def execute(notebook: Path, output: Path, parameters: dict[str, Any],
             root: Path) -> BaseException | None:
    """Execute the notebook with papermill into ``output``; what stopped it, or None."""
    import papermill

    Interrupts.count = 0
    failed: BaseException | None = None
    try:
        with tempfile.TemporaryDirectory(prefix="specbench-kernel-") as sockets:
            echo = Path(sockets) / "progress.log"
            echo.touch()
            with Echo(echo, sys.stdout):  # the sweep's lines, as they come
                papermill.execute_notebook(str(notebook), str(output), parameters=parameters,
                                           cwd=str(root), progress_bar=False,
                                           stdout_file=sys.stdout, stderr_file=sys.stderr,
                                           kernel_manager_class=interrupting_kernel_manager(
                                               Path(sockets), echo))
    except KeyboardInterrupt as exc:  # before the kernel ran (or after): nothing to forward
        failed = exc
    except Exception as exc:  # reported below, with the notebook kept
        failed = exc
    return failed


class Echo:
    """Print what is appended to ``path`` to ``out`` as it comes (a thread polling it), and the
    rest when the block ends."""

    def __init__(self, path: Path, out: TextIO, poll_s: float = 0.2) -> None:
        self.path, self.out, self.poll_s = path, out, poll_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="specbench-echo", daemon=True)
        self._offset = 0

    def __enter__(self) -> Echo:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._copy()

    def _run(self) -> None:
        while not self._stop.wait(self.poll_s):
            self._copy()

    def _copy(self) -> None:
        try:
            with open(self.path, "rb") as found:
                found.seek(self._offset)
                data = found.read()
        except OSError:
            return
        whole = data[:data.rfind(b"\n") + 1]  # whole lines only; the rest at the next look
        if whole:
            self._offset += len(whole)
            self.out.write(whole.decode("utf-8", "replace"))
            self.out.flush()


class Interrupts:
    """Ctrl-Cs received while ``specbench run`` executes its notebook."""

    count = 0


def interrupting_kernel_manager(sockets: Path, echo: Path | None = None) -> type:
    """The kernel manager of ``specbench run``: Ctrl-C interrupts the kernel, as a notebook's
    interrupt button does, so the sweep cancels its cell, stops the server, marks the run
    ``interrupted`` and releases its lock (nbclient's own handler would shut the kernel down
    and kill the sweep mid-way). A second Ctrl-C shuts the kernel down at once.

    The kernel talks over Unix sockets in the private folder ``sockets`` (IPC transport), not
    TCP: nothing listens on a port, and the kernel has no reason to warn that TCP is not
    encrypted (ipykernel's "[IPKernelApp] WARNING | Kernel is running over TCP ...").
    With ``echo``, the kernel's environment names it in ``SPECBENCH_ECHO`` (:mod:`~specbench_lib.livelog`)."""
    from jupyter_client.manager import AsyncKernelManager
    from traitlets import default

    class InterruptingKernelManager(AsyncKernelManager):
        @default("transport")
        def _transport_default(self) -> str:
            return "ipc"

        @default("ip")
        def _ip_default(self) -> str:
            return str(sockets / "kernel")

        # a coroutine, as AsyncKernelManager's own is; jupyter_client types it as the sync one
        async def start_kernel(self, **kw: Any) -> None:  # type: ignore[override]
            if echo is not None:
                kw["env"] = {**(kw.get("env") or os.environ), ECHO_ENV: str(echo)}
            await super().start_kernel(**kw)
            try:  # replaces nbclient's handler on the loop that runs the notebook
                asyncio.get_running_loop().add_signal_handler(signal.SIGINT, self._on_sigint)
            except (RuntimeError, NotImplementedError, ValueError):
                pass

        async def _async_interrupt_kernel(self) -> None:
            # jupyter_client's shutdown interrupts the kernel first; with no Ctrl-C the notebook
            # has ended, and a SIGINT that lands while ipykernel handles a message prints
            # "KeyboardInterrupt caught in kernel" into an uninterrupted run's output
            if self.shutting_down and Interrupts.count == 0:
                return
            await super()._async_interrupt_kernel()

        def _on_sigint(self) -> None:
            Interrupts.count += 1
            if Interrupts.count == 1:
                asyncio.ensure_future(self.interrupt_kernel())
            else:
                asyncio.ensure_future(self.shutdown_kernel(now=True))

    return InterruptingKernelManager


def interruption(failed: BaseException | None,
                  run: RunDir | None) -> tuple[bool, BaseException | None]:
    """Whether Ctrl-C stopped the run, and what failed then. One that came after the run was
    closed ``complete`` (the notebook was being saved) stopped nothing: said in a line, no
    resume command, and not an exit status 130."""
    hit = (isinstance(failed, KeyboardInterrupt) or Interrupts.count > 0
           or getattr(failed, "ename", None) == "KeyboardInterrupt")
    if not hit or run is None or not run.manifest_path.is_file():
        return hit, failed
    try:
        status = run.read_manifest().status
    except StoreError:
        status = None
    if status != "complete":
        return hit, failed
    print(f"specbench: run {run.run_id} was complete when it was interrupted: nothing to "
          f"resume", file=sys.stderr)
    return False, None


def unsaved(run: RunDir | None, output: Path, exc: OSError) -> int:
    """The executed notebook could not be saved (a full disk: the sweep said so in its line):
    one line, with where the run's record is and how it stands; never papermill's traceback."""
    record = "no run directory"
    if run is not None and run.manifest_path.is_file():
        try:
            status = run.read_manifest().status or "running"
        except StoreError as err:
            status = f"manifest unreadable: {err}"
        record = f"the run's record is in {run.path} ({status}; 'specbench runs' lists it)"
    elif run is not None:
        record = f"no run was recorded in {run.path}"
    print(f"specbench: cannot save the executed notebook {output} "
          f"({exc.strerror or exc}): free disk space; {record}", file=sys.stderr)
    return 1
