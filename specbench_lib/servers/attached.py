"""A server that is already running (e.g. a systemd unit), behind the interface the sweep uses on
a launched :class:`~.process.ServerProcess`: it is watched and measured, never started or stopped.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path
from types import TracebackType

from ..core.errors import ServerError
from ..model.sections import AttachParams
from .health import HEALTH_LIMIT_S, auth_headers, http_status
from .log import GENERIC_SIGNATURES, LogScan, bounded_log
from .reaper import Ended


class AttachedServer(LogScan):
    """A server that is already running, behind the interface the sweep uses on
    :class:`~.process.ServerProcess`.

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
        try:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            self.log_path.write_text(self._header)
        except OSError as exc:
            raise self._log_failed(exc) from None
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

    def exit_status(self, wait_s: float = 0.0) -> int | None:
        return None

    @property
    def pid(self) -> int | None:
        return None

    @property
    def ended(self) -> list[Ended]:
        """Nothing: an attached server's processes are not ours to end."""
        return []

    def stop(self, grace_s: float = 3.0) -> None:
        """Copy the journal one last time; the server keeps running (it is not ours)."""
        self._refresh_log()

    def _health_ok(self) -> bool:
        return http_status(self.base_url, self.health_path, headers=self.headers,
                           limit_s=HEALTH_LIMIT_S) == 200

    def _refresh_log(self) -> None:
        if self.unit is None or self._since is None:
            return
        argv = ["journalctl", "-u", self.unit, "--since", self._since, "--no-pager", "-o", "short-iso"]
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
        except (OSError, subprocess.TimeoutExpired):
            return
        if done.returncode != 0:
            return
        token = os.environ.get(self.attach.api_key_env or "", "")
        text = bounded_log((self._header + done.stdout).encode(errors="replace"),
                           secrets=(token,), signatures=self.signatures)
        try:
            self.log_path.write_bytes(text)
        except OSError as exc:
            self._log_error = exc

    def __enter__(self) -> AttachedServer:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
