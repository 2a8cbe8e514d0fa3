"""A server as its own process group: start, wait ready, watch, scan its log, stop."""

from __future__ import annotations

import ctypes
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType

import httpx

from .errors import ServerError

GENERIC_SIGNATURES = tuple(re.compile(p) for p in (
    r"CUDA error", r"illegal (instruction|memory access)", r"out of memory",
    r"Segmentation fault", r"terminate called after throwing", r"Traceback \(most recent call last\)",
))


class ServerProcess:
    """One engine server with its log file; a context manager that always stops it."""

    def __init__(self, *, name: str, argv: list[str], base_url: str, health_path: str,
                 log_path: Path, signatures: tuple[re.Pattern[str], ...] = ()) -> None:
        self.name = name
        self.argv = argv
        self.base_url = base_url
        self.health_path = health_path
        self.log_path = log_path
        self.signatures = GENERIC_SIGNATURES + signatures
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            log.write(f"# argv: {' '.join(self.argv)}\n".encode())
            log.flush()
            try:
                self._proc = subprocess.Popen(
                    self.argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                    start_new_session=True,
                    preexec_fn=_die_with_parent if sys.platform == "linux" else None)
            except OSError as exc:
                raise ServerError(f"cannot start {self.argv[0]}: {exc}", config=self.name,
                                  log_path=self.log_path) from None

    def wait_ready(self, timeout_s: float) -> float:
        """Block until the health endpoint answers 200; returns the seconds it took."""
        start = time.monotonic()
        with httpx.Client(base_url=self.base_url, timeout=5.0) as client:
            while time.monotonic() - start < timeout_s:
                if not self.alive():
                    raise ServerError(
                        f"server {self.name} exited with code {self.returncode} before it was "
                        f"ready; see its log", config=self.name, log_path=self.log_path,
                        log_excerpt=self.log_tail())
                try:
                    if client.get(self.health_path).status_code == 200:
                        return time.monotonic() - start
                except httpx.TransportError:
                    pass
                time.sleep(0.2)
        raise ServerError(f"server {self.name} not ready within {timeout_s:.0f} s",
                          config=self.name, log_path=self.log_path, log_excerpt=self.log_tail())

    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def healthy(self) -> bool:
        """Process alive and health endpoint answering 200."""
        if not self.alive():
            return False
        try:
            return httpx.get(self.base_url + self.health_path, timeout=5.0).status_code == 200
        except httpx.TransportError:
            return False

    @property
    def returncode(self) -> int | None:
        return None if self._proc is None else self._proc.poll()

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    def stop(self, grace_s: float = 3.0) -> None:
        """TERM the process group, then KILL it after ``grace_s`` (llama.cpp can hang on TERM)."""
        if self._proc is None or self._proc.poll() is not None:
            return
        for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 10.0)):
            try:
                os.killpg(self._proc.pid, sig)
            except ProcessLookupError:
                return
            try:
                self._proc.wait(timeout=wait)
                return
            except subprocess.TimeoutExpired:
                continue
        raise ServerError(f"server {self.name} (pid {self._proc.pid}) survived SIGKILL",
                          config=self.name, log_path=self.log_path)

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def log_size(self) -> int:
        try:
            return self.log_path.stat().st_size
        except OSError:
            return 0

    def crash_signature(self, since: int = 0) -> str | None:
        """The first log line after byte ``since`` that matches a crash signature, if any."""
        try:
            with open(self.log_path, "rb") as fh:
                fh.seek(since)
                text = fh.read().decode(errors="replace")
        except OSError:
            return None
        for line in text.splitlines():
            if line.startswith("# argv:"):
                continue
            if any(sig.search(line) for sig in self.signatures):
                return line.strip()[:300]
        return None

    def __enter__(self) -> ServerProcess:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


def _die_with_parent() -> None:
    """In the child: ask Linux to SIGKILL this server if the Python process that started it dies
    (a killed kernel must not leave a server holding the port)."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
