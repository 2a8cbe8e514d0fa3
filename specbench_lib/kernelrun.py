"""Executing a phase notebook for ``specbench run``: papermill on a kernel that talks over
Unix sockets (no TCP port, no transport warning) and that Ctrl-C interrupts as a notebook's
interrupt button does, so the sweep stops cleanly and can be resumed."""

from __future__ import annotations

import asyncio
import signal
import sys
import tempfile
from pathlib import Path
from typing import Any


def execute(notebook: Path, output: Path, parameters: dict[str, Any],
             root: Path) -> BaseException | None:
    """Execute the notebook with papermill into ``output``; what stopped it, or None."""
    import papermill

    Interrupts.count = 0
    failed: BaseException | None = None
    try:
        with tempfile.TemporaryDirectory(prefix="specbench-kernel-") as sockets:
            papermill.execute_notebook(str(notebook), str(output), parameters=parameters,
                                       cwd=str(root), progress_bar=False, stdout_file=sys.stdout,
                                       stderr_file=sys.stderr,  # the sweep's lines, as they come
                                       kernel_manager_class=interrupting_kernel_manager(
                                           Path(sockets)))
    except KeyboardInterrupt as exc:  # before the kernel ran (or after): nothing to forward
        failed = exc
    except Exception as exc:  # reported below, with the notebook kept
        failed = exc
    return failed


class Interrupts:
    """Ctrl-Cs received while ``specbench run`` executes its notebook."""

    count = 0


def interrupting_kernel_manager(sockets: Path) -> type:
    """The kernel manager of ``specbench run``: Ctrl-C interrupts the kernel, as a notebook's
    interrupt button does, so the sweep cancels its cell, stops the server, marks the run
    ``interrupted`` and releases its lock (nbclient's own handler would shut the kernel down
    and kill the sweep mid-way). A second Ctrl-C shuts the kernel down at once.

    The kernel talks over Unix sockets in the private folder ``sockets`` (IPC transport), not
    TCP: nothing listens on a port, and the kernel has no reason to warn that TCP is not
    encrypted (ipykernel's "[IPKernelApp] WARNING | Kernel is running over TCP ...")."""
    from jupyter_client import AsyncKernelManager
    from traitlets import default

    class InterruptingKernelManager(AsyncKernelManager):  # type: ignore[misc]
        @default("transport")
        def _transport_default(self) -> str:
            return "ipc"

        @default("ip")
        def _ip_default(self) -> str:
            return str(sockets / "kernel")

        async def start_kernel(self, **kw: Any) -> None:
            await super().start_kernel(**kw)
            try:  # replaces nbclient's handler on the loop that runs the notebook
                asyncio.get_running_loop().add_signal_handler(signal.SIGINT, self._on_sigint)
            except (RuntimeError, NotImplementedError, ValueError):
                pass

        def _on_sigint(self) -> None:
            Interrupts.count += 1
            if Interrupts.count == 1:
                asyncio.ensure_future(self.interrupt_kernel())
            else:
                asyncio.ensure_future(self.shutdown_kernel(now=True))

    return InterruptingKernelManager
