"""A launched server's log as it is written: secrets redacted, its size capped, a failed write
kept as a fact.

The server's stdout and stderr are a pipe that a :class:`LogPump` thread drains into
``logs/<config>.log`` a block of whole lines at a time. Each block has the secret values of the
server's argv (``--api-key X``: ``X``) and any ``Bearer`` credential replaced. Past
``cap_bytes`` only lines matching a crash signature are written (at most
:data:`CRASH_LINES_PAST_CAP`), so the crash scan still sees a fatal line, and at the end the
log's last lines and the bytes left out are noted. A write that fails (a full disk) stops the
writing, never the draining: the server is never blocked by its log, and the error is kept for
the sweep to end the config with.
"""

from __future__ import annotations

import collections
import fcntl
import os
import re
import termios
import threading
import time
from pathlib import Path

from .store import REDACTED, redact

LOG_CAP_BYTES = 64 << 20  # a server's log past this keeps only crash lines and its last lines
CRASH_LINES_PAST_CAP = 1000
TAIL_LINES = 40
MAX_LINE_BYTES = 64 << 10  # a "line" with no newline is cut here
_BEARER = re.compile(rb"(?i)\b(bearer)\s+[A-Za-z0-9._~+/=-]{8,}")


def argv_secrets(argv: list[str], extra: tuple[str, ...] = ()) -> tuple[str, ...]:
    """The values :func:`~.store.redact` hides in ``argv`` (``--api-key X``, ``--token=Y``)."""
    found = []
    for given, shown in zip(argv, redact(argv, extra), strict=True):
        if given != shown:
            found.append(given.partition("=")[2] if shown.endswith(f"={REDACTED}") else given)
    return tuple(s for s in found if s)


class LogPump:
    """Drains a server's output pipe ``fd`` into ``path`` (opened for appending)."""

    def __init__(self, path: Path, fd: int, *, secrets: tuple[str, ...] = (),
                 signatures: tuple[re.Pattern[str], ...] = (),
                 cap_bytes: int | None = None) -> None:
        self.path, self._fd = path, fd
        self.cap_bytes = LOG_CAP_BYTES if cap_bytes is None else cap_bytes
        self._secrets = tuple(sorted({s.encode() for s in secrets}, key=len, reverse=True))
        self._signatures = signatures
        self.error: OSError | None = None  # the write that failed (the log stops there)
        self.written = 0  # bytes this pump wrote
        self.dropped = 0  # bytes left out past the cap
        self._crash_lines = 0
        self._tail: collections.deque[bytes] = collections.deque(maxlen=TAIL_LINES)
        self._busy = False
        self._out = open(path, "ab", buffering=0)  # noqa: SIM115  (closed when the pipe ends)
        self._thread = threading.Thread(target=self._run, name=f"log {path.name}", daemon=True)
        self._thread.start()

    def settle(self, timeout_s: float = 0.05) -> None:
        """Wait (briefly) until what the server wrote so far is in the file."""
        deadline = time.monotonic() + timeout_s
        while self._thread.is_alive() and (self._busy or _pending(self._fd) > 0):
            if time.monotonic() > deadline:
                return
            time.sleep(0.001)

    def join(self, timeout_s: float = 2.0) -> None:
        """Wait for the pipe's end (the server and its children gone) and the last write."""
        self._thread.join(timeout_s)

    def _run(self) -> None:
        partial = b""
        try:
            while True:
                chunk = os.read(self._fd, 1 << 16)
                self._busy = True
                if not chunk:
                    break
                block, _, partial = (partial + chunk).rpartition(b"\n")
                if len(partial) > MAX_LINE_BYTES:
                    block, partial = (block + b"\n" + partial if block else partial), b""
                if block:
                    self._write_lines(block + b"\n")
                self._busy = False
            if partial:
                self._write_lines(partial + b"\n")
            self._close()
        finally:
            self._busy = False
            os.close(self._fd)

    def _write_lines(self, block: bytes) -> None:
        for secret in self._secrets:
            block = block.replace(secret, REDACTED.encode())
        block = _BEARER.sub(rb"\1 " + REDACTED.encode(), block)
        if self.written + len(block) <= self.cap_bytes:
            self._write(block)
            return
        lines = block.splitlines(keepends=True)
        if self.dropped == 0 and self.written < self.cap_bytes:  # the first block past the cap
            self._write(f"# specbench: log capped at {self.cap_bytes} bytes: past here only "
                        f"crash-signature lines, and the last lines at the end\n".encode())
        self.dropped += len(block)
        self._tail.extend(lines)
        kept = [ln for ln in lines if self._crash_lines < CRASH_LINES_PAST_CAP
                and any(s.search(ln.decode(errors="replace")) for s in self._signatures)]
        self._crash_lines += len(kept)
        if kept:
            self._write(b"".join(ln[:300].rstrip(b"\n") + b"\n" for ln in kept))

    def _write(self, data: bytes) -> None:
        if self.error is not None:
            return
        try:
            self._out.write(data)
            self.written += len(data)
        except OSError as exc:
            self.error = exc

    def _close(self) -> None:
        if self.dropped:
            self._write(f"# specbench: {self.dropped} bytes left out past the cap; the last "
                        f"{len(self._tail)} lines:\n".encode() + b"".join(self._tail))
        try:
            self._out.close()
        except OSError as exc:
            self.error = self.error or exc


def _pending(fd: int) -> int:
    """Bytes waiting in pipe ``fd`` (0 when it cannot be asked)."""
    try:
        return int.from_bytes(fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"), "little")
    except OSError:
        return 0
