"""A server as its own process group: start, wait ready, watch, scan its log, stop.

:class:`AttachedServer` offers the same interface for a server that is already running (e.g. a
systemd unit): it is watched and measured, never started or stopped.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import os
import re
import signal
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

from .errors import PreflightError, ServerError
from .hostsources import listener_pids
from .paths import cache_dir
from .sections import AttachParams
from .serverlog import LogPump, LogScan, argv_secrets, bounded_log
from .store import redact

# Fatal in any engine, and the most specific: a line naming the fault ranks before an adapter's
# own, more generic signatures (SGLang's "Scheduler hit an exception" precedes the CUDA line that
# explains it). A bare Python traceback is not here: servers log handled request errors that way
# and stay up.
GENERIC_SIGNATURES = tuple(re.compile(p) for p in (
    r"CUDA error", r"illegal (instruction|memory access)", r"out of memory", r"OutOfMemory",
    r"Segmentation fault", r"[Aa]ssertion .*failed|GGML_ASSERT", r"terminate called after throwing",
))

EXIT_WAIT_S = 5.0  # a server found dead: the longest wait for its exit status


class ServerProcess(LogScan):
    """One engine server with its log file; a context manager that always stops it."""

    def __init__(self, *, name: str, argv: list[str], base_url: str, health_path: str,
                 log_path: Path, signatures: tuple[re.Pattern[str], ...] = (),
                 redact_names: tuple[str, ...] = ()) -> None:
        self.name = name
        self.argv = argv
        self.base_url = base_url
        self.health_path = health_path
        self.log_path = log_path
        self.signatures = GENERIC_SIGNATURES + signatures
        self.redact_names = tuple(redact_names)  # params `redact:`, besides the known secrets
        self._proc: subprocess.Popen[bytes] | None = None
        self._pump: LogPump | None = None
        self._drained = False

    def start(self) -> None:
        """Launch the server in its own process group, its output drained into its log (secrets
        redacted, size capped: :mod:`.serverlog`)."""
        shown = " ".join(a.replace("\n", "\\n") for a in redact(self.argv, self.redact_names))
        try:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.log_path, "ab") as log:
                log.write(f"# argv: {shown}\n".encode())  # one line, always
        except OSError as exc:
            raise self._log_failed(exc) from None
        try:
            self._proc = subprocess.Popen(
                self.argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True,
                preexec_fn=_die_with_parent if _PRCTL is not None else None)
        except OSError as exc:
            raise ServerError(f"cannot start {self.argv[0]}: {exc}", config=self.name,
                              log_path=self.log_path) from None
        assert self._proc.stdout is not None
        self._pump = LogPump(self.log_path, os.dup(self._proc.stdout.fileno()),
                             secrets=argv_secrets(self.argv, self.redact_names),
                             signatures=self.signatures)
        self._proc.stdout.close()

    def _refresh_log(self) -> None:
        """The log holds what the server wrote so far (all of it, once the server is gone)."""
        if self._pump is None:
            return
        if self._proc is not None and self._proc.poll() is not None and not self._drained:
            self._pump.join(0.5)  # once: a child that outlives the leader may hold the pipe
            self._drained = True
        else:
            self._pump.settle()
        self._log_error = self._pump.error

    def wait_ready(self, timeout_s: float) -> float:
        """Block until the health endpoint answers 200 from the process this server started;
        returns the seconds it took. Every probe ends by the deadline, however slowly the
        endpoint answers."""
        start = time.monotonic()
        deadline = start + timeout_s
        while time.monotonic() < deadline:
            if not self.alive():
                raise ServerError(
                    f"server {self.name} exited with code {self.returncode} before it was "
                    f"ready; see its log", config=self.name, log_path=self.log_path,
                    log_excerpt=self.log_tail())
            if http_status(self.base_url, self.health_path,
                           limit_s=min(HEALTH_LIMIT_S, deadline - time.monotonic())) == 200:
                self._check_owner()
                return time.monotonic() - start
            time.sleep(0.2)
        raise ServerError(f"server {self.name} not ready within {timeout_s:.0f} s",
                          config=self.name, log_path=self.log_path, log_excerpt=self.log_tail())

    def _check_owner(self) -> None:
        """The answering socket must belong to this server's process group (another program on
        the port would otherwise be measured in its place)."""
        port = urlsplit(self.base_url).port
        owners = listener_pids(port) if port is not None else None
        if not owners or self._proc is None:
            return  # not knowable here (not Linux, or no permission): trust the port check
        ours = [pid for pid in owners if _pgid(pid) == self._proc.pid]
        if not ours:
            raise ServerError(
                f"port {port} answers, but from process {', '.join(map(str, sorted(owners)))}, "
                f"not the server this run started for {self.name}; stop that process or set "
                f"engine.port", config=self.name, log_path=self.log_path,
                log_excerpt=self.log_tail())

    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def healthy(self) -> bool:
        """Process alive and health endpoint answering 200."""
        if not self.alive():
            return False
        return http_status(self.base_url, self.health_path, limit_s=HEALTH_LIMIT_S) == 200

    @property
    def returncode(self) -> int | None:
        return None if self._proc is None else self._proc.poll()

    def exit_status(self, wait_s: float = EXIT_WAIT_S) -> int | None:
        """The exit status of a server found dead, waiting up to ``wait_s`` for it: a killed
        process closes its sockets before it can be reaped (a large multi-threaded one, like a
        vLLM API server, for a while), so the health check can fail before ``poll`` knows."""
        if self._proc is None:
            return None
        try:
            return self._proc.wait(timeout=wait_s)
        except subprocess.TimeoutExpired:
            return None

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    def stop(self, grace_s: float = 3.0) -> None:
        """TERM the process group, then KILL it after ``grace_s`` (llama.cpp can hang on TERM);
        the group is KILLed at the end in any case, since children can outlive their leader (a
        SIGKILLed vLLM API server leaves its engine core and worker running)."""
        if self._proc is None:
            return
        try:
            if self._proc.poll() is None:
                self._stop_leader(self._proc, grace_s)
        finally:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self._proc.pid, signal.SIGKILL)
            if self._pump is not None:
                self._pump.join()  # the log's last lines (and a capped log's note) written

    def _stop_leader(self, proc: subprocess.Popen[bytes], grace_s: float) -> None:
        for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 10.0)):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                return
            try:
                proc.wait(timeout=wait)
                return
            except subprocess.TimeoutExpired:
                continue
        raise ServerError(f"server {self.name} (pid {proc.pid}) survived SIGKILL",
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


class AttachedServer(LogScan):
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


Server = ServerProcess | AttachedServer

HEALTH_LIMIT_S = 5.0  # one health probe, connect to status line


def http_status(base_url: str, path: str, *, headers: dict[str, str] | None = None,
                limit_s: float = HEALTH_LIMIT_S) -> int | None:
    """The status code of ``GET path`` read within ``limit_s`` in all (None when the server is
    unreachable, too slow or answers something else than HTTP): a trickling endpoint cannot
    hold the caller past the limit, as a per-read timeout would."""
    deadline = time.monotonic() + max(limit_s, 0.01)
    url = urlsplit(base_url)
    host, port = url.hostname or "127.0.0.1", url.port or (443 if url.scheme == "https" else 80)
    lines = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
    request = (f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: close\r\n"
               f"{lines}\r\n").encode()
    try:
        with socket.create_connection((host, port), timeout=limit_s) as raw:
            sock = ssl.create_default_context().wrap_socket(raw, server_hostname=host) \
                if url.scheme == "https" else raw
            sock.sendall(request)
            head = b""
            while b"\r\n" not in head and len(head) < 1024:
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                sock.settimeout(left)
                piece = sock.recv(1024)
                if not piece:
                    break
                head += piece
    except (OSError, ValueError):
        return None
    parts = head.split(b"\r\n", 1)[0].split()
    if len(parts) >= 2 and parts[0].startswith(b"HTTP/") and parts[1].isdigit():
        return int(parts[1])
    return None


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None


@contextlib.contextmanager
def port_lease(host: str, port: int) -> Iterator[None]:
    """Hold ``host:port`` for one sweep: a second specbench run on the same port is refused before
    it starts anything, instead of failing half-way (an advisory lock under the cache folder)."""
    folder = cache_dir() / "ports"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{host.replace(':', '_')}-{port}.lock"
    with open(path, "a+") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            fh.seek(0)
            owner = fh.read().strip() or "?"
            raise PreflightError(f"port {port} on {host} is held by another specbench run "
                                 f"(process {owner}); wait for it or set engine.port",
                                 what="port", path=path) from None
        fh.seek(0)
        fh.truncate()
        fh.write(str(os.getpid()))
        fh.flush()
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


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
