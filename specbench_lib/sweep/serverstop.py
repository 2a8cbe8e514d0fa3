"""A server config's last phase: its live server stopped, and what it left behind said in
the manifest: processes out of its group that had to be ended, a crash logged after its last
cell (idle, or at shutdown)."""

from __future__ import annotations

import time
from dataclasses import asdict

from ..servers.facts import after_cells
from ..servers.process import Server
from .serverstate import ServerState


def stop_server(sweep: ServerState) -> None:
    """Stop ``sweep``'s live server (if any), and say what it left behind."""
    live, sweep.live = sweep.live, None
    if live is None:
        return
    if live.client is not None:
        live.client.close()
    began = time.perf_counter()
    live.proc.stop()
    sweep.timing["stop_s"] = round(time.perf_counter() - began, 4)
    sweep.slice_fixed += sweep.timing["stop_s"]
    _ended(sweep, live.proc)
    _late_crash(sweep, live.proc)


def _late_crash(sweep: ServerState, proc: Server) -> None:
    """A crash logged after the last cell (idle, or at shutdown): the config's, in the
    manifest (``late_crash``), and said at once."""
    since, sweep.after = sweep.after, None
    late = None if since is None else after_cells(proc, since)
    if late is not None:
        if sweep.record.late_crash is None:  # the first server's (restart: one a cell)
            sweep.record.late_crash = late
        sweep.store()
        sweep.progress.server(sweep.key, f"crashed after its last cell: {late['line']}")


def _ended(sweep: ServerState, proc: Server) -> None:
    """Name in the manifest what had left the server's process group and had to be ended."""
    if proc.ended:
        sweep.record.ended_after_stop += [asdict(e) for e in proc.ended]
        sweep.store()


__all__ = ["stop_server"]
