"""A server as its own process group: start, wait ready, watch, scan its log, stop.

:class:`AttachedServer` offers the same interface for a server that is already running (e.g. a
systemd unit): it is watched and measured, never started or stopped.
"""

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
from typing import Any

import httpx

from .errors import PreflightError, ServerError
from .params import AttachParams

# Fatal in any engine. A bare Python traceback is not here: servers log handled request errors
# that way and stay up; each adapter names its own fatal lines (e.g. SGLang's scheduler exception).
GENERIC_SIGNATURES = tuple(re.compile(p) for p in (
    r"CUDA error", r"illegal (instruction|memory access)", r"out of memory",
    r"Segmentation fault", r"terminate called after throwing",
))


class _LogScan:
    """Reading a server's log file: its tail, its size, crash signatures after an offset."""

    log_path: Path
    signatures: tuple[re.Pattern[str], ...]

    def _refresh_log(self) -> None:
        """Bring the log file up to date (a process writes its own; a journal is copied)."""

    def log_tail(self, lines: int = 30) -> str:
        self._refresh_log()
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def log_size(self) -> int:
        self._refresh_log()
        try:
            return self.log_path.stat().st_size
        except OSError:
            return 0

    def crash_signature(self, since: int = 0) -> str | None:
        """The first log line after byte ``since`` that matches a crash signature, if any."""
        self._refresh_log()
        try:
            with open(self.log_path, "rb") as fh:
                fh.seek(since)
                text = fh.read().decode(errors="replace")
        except OSError:
            return None
        for line in text.splitlines():
            if line.startswith(("# argv:", "# attached:")):
                continue
            if any(sig.search(line) for sig in self.signatures):
                return line.strip()[:300]
        return None


class ServerProcess(_LogScan):
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
                    preexec_fn=_die_with_parent if _PRCTL is not None else None)
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

    @property
    def headers(self) -> dict[str, str]:
        """Headers every request to this server carries (none for a launched server)."""
        return {}

    def __enter__(self) -> ServerProcess:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


class AttachedServer(_LogScan):
    """A server that is already running, behind the interface the sweep uses on :class:`ServerProcess`.

    Alive means its health endpoint answers 200 and, with a systemd unit, ``systemctl is-active``
    says ``active``. Its log is the unit's journal since :meth:`start`, copied into ``log_path``
    (``journalctl -u UNIT --since ...``) whenever the log is read and at :meth:`stop`, so crash
    signatures are found there. :meth:`stop` never stops the server.
    """

    def __init__(self, *, name: str, attach: AttachParams, health_path: str, log_path: Path,
                 signatures: tuple[re.Pattern[str], ...] = ()) -> None:
        self.name = name
        self.attach = attach
        self.unit = attach.unit
        self.base_url = attach.url
        self.health_path = health_path
        self.log_path = log_path
        self.signatures = GENERIC_SIGNATURES + signatures
        self._since: str | None = None
        self._header = ""

    def start(self) -> None:
        """Open the journal window (a second back) and write the log's header; starts nothing."""
        self._since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(time.time() - 1))
        unit = f" unit {self.unit}, journal since {self._since}" if self.unit else " (no unit: no log)"
        self._header = f"# attached: {self.base_url}{unit}\n"
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self.log_path.write_text(self._header)
        self._refresh_log()

    def wait_ready(self, timeout_s: float) -> float:
        """Block until the health endpoint answers 200; returns the seconds it took."""
        start = time.monotonic()
        while time.monotonic() - start < timeout_s:
            state = self.unit_state()
            if state not in (None, "active", "activating", "reloading"):
                raise ServerError(f"unit {self.unit} of attached server {self.name} is {state}; "
                                  f"see its journal", config=self.name, log_path=self.log_path,
                                  log_excerpt=self.log_tail())
            if self._health_ok():
                return time.monotonic() - start
            time.sleep(0.2)
        raise ServerError(f"attached server {self.name} at {self.base_url} not ready within "
                          f"{timeout_s:.0f} s", config=self.name, log_path=self.log_path,
                          log_excerpt=self.log_tail())

    def unit_state(self) -> str | None:
        """``systemctl is-active UNIT`` (``active``, ``failed``…); None without a unit."""
        if self.unit is None:
            return None
        try:
            done = subprocess.run(["systemctl", "is-active", self.unit], capture_output=True,
                                  text=True, timeout=10, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"unknown (systemctl: {exc})"
        return done.stdout.strip() or "unknown"

    def alive(self) -> bool:
        return self._health_ok() and self.unit_state() in (None, "active")

    def healthy(self) -> bool:
        """Health endpoint answering 200 and, with a unit, the unit active."""
        return self.alive()

    @property
    def headers(self) -> dict[str, str]:
        """The bearer token header, read from ``attach.api_key_env`` at each use (never stored)."""
        return auth_headers(self.attach, config=self.name)

    @property
    def returncode(self) -> int | None:
        return None

    @property
    def pid(self) -> int | None:
        return None

    def stop(self, grace_s: float = 3.0) -> None:
        """Copy the journal one last time; the server keeps running (it is not ours)."""
        self._refresh_log()

    def _health_ok(self) -> bool:
        try:
            resp = httpx.get(self.base_url + self.health_path, headers=self.headers, timeout=5.0)
        except httpx.TransportError:
            return False
        return resp.status_code == 200

    def _refresh_log(self) -> None:
        if self.unit is None or self._since is None:
            return
        argv = ["journalctl", "-u", self.unit, "--since", self._since, "--no-pager", "-o", "short-iso"]
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
        except (OSError, subprocess.TimeoutExpired):
            return
        if done.returncode == 0:
            self.log_path.write_text(self._header + done.stdout)

    def __enter__(self) -> AttachedServer:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


Server = ServerProcess | AttachedServer


def auth_headers(attach: AttachParams | None, *, config: str) -> dict[str, str]:
    """The ``Authorization`` header of an attached server, read from its environment variable now."""
    if attach is None or attach.api_key_env is None:
        return {}
    token = os.environ.get(attach.api_key_env, "")
    if not token:
        raise PreflightError(f"config {config!r}: environment variable {attach.api_key_env} "
                             f"(attach.api_key_env) is empty or not set; export the server's API "
                             f"key there", what="api_key")
    return {"Authorization": f"Bearer {token}"}


def _load_prctl() -> Any:
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


_PRCTL = _load_prctl() if sys.platform == "linux" else None  # resolved here, never after fork


def _die_with_parent() -> None:
    """In the child: ask Linux to SIGKILL this server if the Python process that started it dies
    (a killed kernel must not leave a server holding the port).

    It runs between fork and exec, so it only calls the function resolved at import: loading a
    library there could wait forever on a loader lock another thread held at the fork.
    """
    if _PRCTL is not None:
        _PRCTL(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
