"""A server's log: written as the server writes (secrets redacted, size capped, a failed write
kept as a fact), and read (its tail, its size, crash signatures after an offset).

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
import select
import termios
import threading
import time
from pathlib import Path

from ..core.errors import ServerError
from ..core.store import REDACTED, redact

LOG_CAP_BYTES = 64 << 20  # a server's log past this keeps only crash lines and its last lines
CRASH_LINES_PAST_CAP = 1000
# Fatal in any engine, and the most specific: a line naming the fault ranks before an adapter's
# own, more generic signatures (SGLang's "Scheduler hit an exception" precedes the CUDA line that
# explains it). A bare Python traceback is not here: servers log handled request errors that way
# and stay up.
GENERIC_SIGNATURES = tuple(re.compile(p) for p in (
    r"CUDA error", r"illegal (instruction|memory access)", r"out of memory", r"OutOfMemory",
    r"Segmentation fault", r"[Aa]ssertion .*failed|GGML_ASSERT", r"terminate called after throwing",
))
TAIL_LINES = 40
MAX_LINE_BYTES = 64 << 10  # a "line" with no newline is cut here
_BEARER = re.compile(rb"(?i)\b(bearer)\s+[A-Za-z0-9._~+/=-]{8,}")


def argv_secrets(argv: list[str], extra: tuple[str, ...] = ()) -> tuple[str, ...]:
    """The values :func:`~specbench_lib.core.store.redact` hides in ``argv`` (``--api-key X``,
    ``--token=Y``)."""
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
        self._secrets = _encoded(secrets)
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
        # pending first: bytes not yet read, or read and not yet written (busy from before the
        # read, see _run) are all the pump has left to do
        while self._thread.is_alive() and (_pending(self._fd) > 0 or self._busy):
            if time.monotonic() > deadline:
                return
            time.sleep(0.001)

    def join(self, timeout_s: float = 2.0) -> None:
        """Wait for the pipe's end (the server and its children gone) and the last write."""
        self._thread.join(timeout_s)

    def _run(self) -> None:
        partial = b""
        ready = select.poll()
        ready.register(self._fd, select.POLLIN)
        try:
            while True:
                ready.poll()  # then busy, before the read takes the bytes out of the pipe
                self._busy = True
                chunk = os.read(self._fd, 1 << 16)
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
        block = redact_lines(block, self._secrets)
        if not self.dropped and self.written + len(block) <= self.cap_bytes:  # not capped yet
            self._write(block)
            return
        lines = block.splitlines(keepends=True)
        if not self.dropped:  # the first block past the cap
            self._write(_cap_note(self.cap_bytes))
        self.dropped += len(block)
        self._tail.extend(lines)
        kept = crash_lines(lines, self._signatures)[:CRASH_LINES_PAST_CAP - self._crash_lines]
        self._crash_lines += len(kept)
        if kept:
            self._write(_shortened(kept))

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
            self._write(_tail_note(self.dropped, list(self._tail)))
        try:
            self._out.close()
        except OSError as exc:
            self.error = self.error or exc


class LogScan:
    """Reading a server's log file: its tail, its size, crash signatures after an offset."""

    name: str
    log_path: Path
    signatures: tuple[re.Pattern[str], ...]
    _log_error: OSError | None = None  # a write to the log failed: it stopped there

    def _refresh_log(self) -> None:
        """Bring the log file up to date (a process writes its own; a journal is copied)."""

    def _log_failed(self, exc: OSError) -> ServerError:
        return ServerError(f"cannot write the server's log ({exc.strerror or exc}); the config "
                           f"ends here: free disk space, then resume the run", config=self.name,
                           log_path=self.log_path)

    def log_tail(self, lines: int = 30) -> str:
        self._refresh_log()
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def log_size(self) -> int:
        """The log's size; a :class:`ServerError` once a write to it failed (the sweep ends the
        config with a verdict: its cells from here cannot be checked for crash lines)."""
        self._refresh_log()
        if self._log_error is not None:
            raise self._log_failed(self._log_error)
        try:
            return self.log_path.stat().st_size
        except OSError:
            return 0

    def crash_signature(self, since: int = 0, until: int | None = None) -> str | None:
        """The most specific log line between bytes ``since`` and ``until`` that matches a crash
        signature: a line naming the fault (CUDA error, out of memory, assertion…) over a generic
        one (``Scheduler hit an exception``), the first of its kind."""
        self._refresh_log()
        try:
            with open(self.log_path, "rb") as fh:
                fh.seek(since)
                data = fh.read() if until is None else fh.read(max(until - since, 0))
        except OSError:
            return None
        best: tuple[int, str] | None = None
        for line in data.decode(errors="replace").splitlines():
            if line.startswith(("# argv:", "# attached:")):
                continue
            rank = next((i for i, sig in enumerate(self.signatures) if sig.search(line)), None)
            if rank is not None and (best is None or rank < best[0]):
                best = (rank, line.strip()[:300])
        return best[1] if best else None


def bounded_log(data: bytes, *, secrets: tuple[str, ...] = (),
                signatures: tuple[re.Pattern[str], ...] = (), cap_bytes: int | None = None) -> bytes:
    """A whole log (an attached server's journal) as :class:`LogPump` would have written it."""
    cap = LOG_CAP_BYTES if cap_bytes is None else cap_bytes
    data = redact_lines(data, _encoded(secrets))
    if len(data) <= cap:
        return data
    head = data[:cap].rpartition(b"\n")[0] + b"\n"
    rest = data[len(head):].splitlines(keepends=True)
    kept = crash_lines(rest, signatures)[:CRASH_LINES_PAST_CAP]
    return (head + _cap_note(cap) + _shortened(kept)
            + _tail_note(len(data) - len(head), rest[-TAIL_LINES:]))


def redact_lines(block: bytes, secrets: tuple[bytes, ...]) -> bytes:
    """``block`` with each of ``secrets`` and every ``Bearer`` credential replaced."""
    for secret in secrets:
        block = block.replace(secret, REDACTED.encode())
    return _BEARER.sub(rb"\1 " + REDACTED.encode(), block)


def crash_lines(lines: list[bytes], signatures: tuple[re.Pattern[str], ...]) -> list[bytes]:
    return [ln for ln in lines if any(s.search(ln.decode(errors="replace")) for s in signatures)]


def _encoded(secrets: tuple[str, ...]) -> tuple[bytes, ...]:
    return tuple(sorted({s.encode() for s in secrets if s}, key=len, reverse=True))


def _shortened(lines: list[bytes]) -> bytes:
    return b"".join(ln[:300].rstrip(b"\n") + b"\n" for ln in lines)


def _cap_note(cap: int) -> bytes:
    return (f"# specbench: log capped at {cap} bytes: past here only crash-signature lines, "
            f"and the last lines at the end\n").encode()


def _tail_note(dropped: int, tail: list[bytes]) -> bytes:
    return (f"# specbench: {dropped} bytes left out past the cap; the last {len(tail)} "
            f"lines:\n").encode() + b"".join(tail)


def _pending(fd: int) -> int:
    """Bytes waiting in pipe ``fd`` (0 when it cannot be asked)."""
    try:
        return int.from_bytes(fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"), "little")
    except OSError:
        return 0
