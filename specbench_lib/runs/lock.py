"""The run's lock: an ``flock`` on ``.lock`` held for the writer's life, naming its pid.

The kernel drops the ``flock`` of a process that dies, so a lock left by a killed writer is
simply free (no stale pid to judge), and of writers taking it at once exactly one wins. The file
names the holder's pid for the message that refuses a second writer; :meth:`RunLock.held` tells
``specbench runs`` whether the run's writer still lives.
"""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path

from ..core.errors import StoreError

LOCK_WAIT_S = 0.2  # how long a busy lock is retried (a `specbench runs` probe holds it a moment)


class RunLock:
    """The lock file at ``path``; :meth:`acquire` and :meth:`release` by the one writer."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def acquire(self) -> None:
        """Take the lock: an exclusive ``flock`` on the file (which names this pid), held
        until :meth:`release` or this process ends. The kernel drops the lock of a process that
        dies, so a lock left by a killed writer is free, and of writers taking it at once
        exactly one wins; a second writer is refused, naming the first."""
        deadline = time.monotonic() + LOCK_WAIT_S
        while True:
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_RDWR, 0o644)
            except OSError as exc:
                raise StoreError(f"cannot create the run's lock ({exc.strerror or exc}); fix the "
                                 f"outputs folder's permissions", path=self.path) from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                if time.monotonic() > deadline:
                    owner = self.owner()
                    raise StoreError(f"run is being written by process {owner or '?'}; wait for "
                                     f"it to finish or stop it, then resume", path=self.path) from None
                time.sleep(0.01)
                continue
            if _names_open_file(self.path, fd):
                break
            os.close(fd)  # its holder released it (and removed the file) meanwhile: again
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self._fd = fd

    def release(self) -> None:
        """Remove the lock this :class:`RunLock` holds and drop it (nothing when it holds none)."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        if _names_open_file(self.path, fd):
            self.path.unlink(missing_ok=True)
        os.close(fd)

    def held(self) -> bool:
        """Whether a living process holds the run's lock (it is writing the run)."""
        if self._fd is not None:
            return True
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return False
        except OSError:
            return True  # it cannot be probed: not to be called dead
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)  # closing drops the probe's shared lock
        return False

    def owner(self) -> int | None:
        """The pid in the run's lock, or None when there is no lock (or it holds no pid)."""
        try:
            owner = self.path.read_text().strip()
        except OSError:
            return None
        return int(owner) if owner.isdigit() else None


def _names_open_file(path: Path, fd: int) -> bool:
    """Whether ``path`` is still the file open as ``fd`` (not removed or replaced)."""
    try:
        return os.stat(path).st_ino == os.fstat(fd).st_ino
    except OSError:
        return False
