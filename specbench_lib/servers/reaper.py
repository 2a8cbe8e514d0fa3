"""What a server leaves behind: every process it started carries the server's mark in its
environment, so one that left the process group (``setsid``) or outlived its parent is still
found, by its mark, and ended when the server stops.

A process group is not a fence: a launcher or a server may call ``setsid()`` and take its
children out of the group the sweep kills. The environment is inherited through ``fork`` and
``exec`` whatever the session, so the mark follows every descendant that does not wipe its
environment on purpose. Only processes of this user can be read (``/proc/<pid>/environ``), and
only those are ours to end.
"""

from __future__ import annotations

import os
import secrets
import signal
import time
from dataclasses import dataclass
from pathlib import Path

MARK = "SPECBENCH_SERVER_MARK"
PROC = Path("/proc")


@dataclass(frozen=True)
class Ended:
    """A process found running after its server's group was killed, and ended."""

    pid: int
    argv: str  # its command line, spaces between the arguments, at most 200 characters
    signal: str  # the signal that ended it: SIGTERM, or SIGKILL when TERM was not enough


def new_mark() -> str:
    """A mark for one server start: unique in the host's process table."""
    return secrets.token_hex(8)


def marked_env(mark: str, env: dict[str, str] | None = None) -> dict[str, str]:
    """The environment a server starts with: ``env`` (this process's by default) plus its mark."""
    return {**(os.environ if env is None else env), MARK: mark}


def marked(mark: str) -> list[int]:
    """The pids of the live processes that carry ``mark`` (none where /proc cannot be read)."""
    needle = f"{MARK}={mark}".encode()
    found = []
    try:
        entries = list(PROC.iterdir())
    except OSError:
        return []
    for entry in entries:
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue  # gone, or another user's
        if needle in environ.split(b"\0") and not _zombie(entry):
            found.append(int(entry.name))
    return sorted(found)


def end_marked(mark: str, *, grace_s: float = 2.0) -> list[Ended]:
    """End every live process that carries ``mark``: TERM, then KILL after ``grace_s``.
    Returns what had to be ended (empty when the server's group held everything)."""
    found = {pid: _argv(pid) for pid in marked(mark)}
    ended: dict[int, Ended] = {}
    for pid, argv in found.items():
        if _signal(pid, signal.SIGTERM):
            ended[pid] = Ended(pid, argv, "SIGTERM")
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and set(marked(mark)) & set(ended):
        time.sleep(0.05)
    for pid in set(marked(mark)) & set(ended):
        if _signal(pid, signal.SIGKILL):
            ended[pid] = Ended(pid, ended[pid].argv, "SIGKILL")
    return [ended[pid] for pid in sorted(ended)]


def _signal(pid: int, sig: signal.Signals) -> bool:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def _zombie(entry: Path) -> bool:
    try:
        stat = (entry / "stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[-1].split()[:1] == ["Z"]


def _argv(pid: int) -> str:
    try:
        raw = (PROC / str(pid) / "cmdline").read_bytes()
    except OSError:
        return "?"
    return " ".join(part.decode(errors="replace") for part in raw.split(b"\0") if part)[:200]


__all__ = ["MARK", "Ended", "end_marked", "marked", "marked_env", "new_mark"]
