"""A server as its own process group: start, wait ready, watch, scan its log, stop.

:class:`~specbench_lib.servers.attached.AttachedServer` offers the same interface for a server that is already
running (e.g. a systemd unit): it is watched and measured, never started or stopped.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import TracebackType
from typing import IO, Any
from urllib.parse import urlsplit

from ..core.errors import PreflightError, ServerError
from ..core.paths import cache_dir
from ..core.store import redact
from ..host.cpuset import pin_child
from ..host.sources import listener_pids
from ..model.sections import AttachParams
from .attached import AttachedServer
from .health import HEALTH_LIMIT_S, http_status
from .log import GENERIC_SIGNATURES, LogPump, LogScan, argv_secrets
from .reaper import Ended, end_marked, marked, marked_env, new_mark

EXIT_WAIT_S = 5.0  # a server found dead: the longest wait for its exit status
READY_POLL_S = (0.01, 0.2)  # readiness probes: the first pause, doubling up to the longest


class ServerProcess(LogScan):
    """One engine server with its log file; a context manager that always stops it."""

    def __init__(self, *, name: str, argv: list[str], base_url: str, health_path: str,
                 log_path: Path, signatures: tuple[re.Pattern[str], ...] = (),
                 redact_names: tuple[str, ...] = (), cpus: tuple[int, ...] | None = None,
                 env: Mapping[str, str] | None = None) -> None:
        self.name = name
        self.env = dict(env or {})  # added to this process's environment (params engine.env)
        self.cpus = cpus  # pinned to these CPUs, with all it starts (:mod:`~specbench_lib.host.cpuset`)
        self.argv = argv
        self.base_url = base_url
        self.health_path = health_path
        self.log_path = log_path
        self.signatures = GENERIC_SIGNATURES + signatures
        self.redact_names = tuple(redact_names)  # params `redact:`, besides the known secrets
        self._proc: subprocess.Popen[bytes] | None = None
        self._pump: LogPump | None = None
        self._drained = False
        self._mark = new_mark()  # in every process it starts (:mod:`~specbench_lib.servers.reaper`)
        self.ended: list[Ended] = []  # what was still running after its group was killed

    def start(self) -> None:
        """Launch the server in its own process group, its output drained into its log (secrets
        redacted, size capped: :mod:`~specbench_lib.servers.log`)."""
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
                env=marked_env(self._mark, {**os.environ, **self.env}),
                preexec_fn=self._in_child if _PRCTL is not None or self.cpus else None)
        except (OSError, ValueError) as exc:  # ValueError: an environment the OS refuses
            raise ServerError(f"cannot start {self.argv[0]}: {exc}", config=self.name,
                              log_path=self.log_path) from None
        assert self._proc.stdout is not None
        self._pump = LogPump(self.log_path, os.dup(self._proc.stdout.fileno()),
                             secrets=argv_secrets(self.argv, self.redact_names),
                             signatures=self.signatures)
        self._proc.stdout.close()

    def _in_child(self) -> None:
        """Between fork and exec (syscalls only): die with the sweep, run on ``cpus``."""
        _die_with_parent()
        pin_child(self.cpus)

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
        deadline, pause = start + timeout_s, READY_POLL_S[0]
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
            time.sleep(pause)  # soon at first (a server may be up in milliseconds), then less often
            pause = min(READY_POLL_S[1], 2 * pause)
        raise ServerError(f"server {self.name} not ready within {timeout_s:.0f} s",
                          config=self.name, log_path=self.log_path, log_excerpt=self.log_tail())

    def _check_owner(self) -> None:
        """The answering socket must belong to this server's process group, or carry its mark
        (another program on the port would otherwise be measured in its place)."""
        port = urlsplit(self.base_url).port
        owners = listener_pids(port) if port is not None else None
        if not owners or self._proc is None:
            return  # not knowable here (not Linux, or no permission): trust the port check
        mine = set(marked(self._mark))  # a server that left the group is still this one's
        ours = [pid for pid in owners if _pgid(pid) == self._proc.pid or pid in mine]
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
        SIGKILLed vLLM API server leaves its engine core and worker running). What still runs
        with this server's mark after that (a process that called ``setsid()``) is ended too and
        named in :attr:`ended`."""
        if self._proc is None:
            return
        try:
            if self._proc.poll() is None:
                self._stop_leader(self._proc, grace_s)
        finally:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self._proc.pid, signal.SIGKILL)
            self.ended += end_marked(self._mark)
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


Server = ServerProcess | AttachedServer

def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None


class PortLease:
    """A held port's lock file: it names the process holding it and, once known, its run."""

    def __init__(self, fh: IO[str]) -> None:
        self.fh = fh
        self.name()

    def name(self, run_id: str | None = None) -> None:
        """Say in the lock who holds it: this process and (once minted) its run."""
        self.fh.seek(0)
        self.fh.truncate()
        self.fh.write(f"{os.getpid()}" + (f" {run_id}" if run_id else ""))
        self.fh.flush()


def lease_address(host: str) -> str:
    """The address ``host`` resolves to (``localhost``: ``127.0.0.1``), the host's text where
    it does not resolve; what a refused lease names (the lease itself is the port's)."""
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return host
    v4 = [i[4][0] for i in infos if i[0] == socket.AF_INET]
    return str(v4[0] if v4 else infos[0][4][0]) if infos else host


def lease_path(port: int) -> Path:
    """The lock file of ``port``'s lease: one a port, whatever the address (:func:`port_lease`
    takes it, :func:`lease_held` looks at it)."""
    return cache_dir() / "ports" / f"port-{port}.lock"


def _holder(fh: IO[str]) -> str:
    fh.seek(0)
    pid, _, run = (fh.read().strip() or "?").partition(" ")
    return f"run {run} (process {pid})" if run else f"run (process {pid})"


@contextlib.contextmanager
def port_lease(host: str, port: int) -> Iterator[PortLease]:
    """Hold ``port`` for one sweep: a second specbench run on the same port, whatever its
    address (``0.0.0.0`` takes the port on every address, ``localhost`` is ``127.0.0.1``), is
    refused before it starts anything, naming the run that holds it, instead of failing
    half-way (an advisory lock under the cache folder, one per port)."""
    path = lease_path(port)
    path.parent.mkdir(parents=True, exist_ok=True)
    address = lease_address(host)
    with open(path, "a+") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            spelled = host if address == host else f"{host} ({address})"
            raise PreflightError(f"port {port} on {spelled} is held by another specbench "
                                 f"{_holder(fh)}; wait for it or set engine.port",
                                 what="port", path=path) from None
        try:
            yield PortLease(fh)
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def lease_held(port: int) -> str | None:
    """Who holds ``port``'s lease (:func:`port_lease`) when another process does: ``run <id>
    (process <pid>)``; None when none does, or this process (its own sweep) holds it."""
    path = lease_path(port)
    if not path.is_file():
        return None
    with open(path, "a+") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            fh.seek(0)
            return None if fh.read().split(" ")[0] == str(os.getpid()) else _holder(fh)
        fcntl.flock(fh, fcntl.LOCK_UN)
    return None


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


def open_server(name: str, attach: AttachParams | None, launch: tuple[list[str], str, str],
                log_path: Path, signatures: tuple[re.Pattern[str], ...],
                redact_names: tuple[str, ...], cpus: tuple[int, ...] | None = None,
                env: Mapping[str, str] | None = None) -> Server:
    """The process (or, with ``attach``, the running unit) of one server start from its
    ``launch`` (argv, base URL, health path); its log hides the argv's secrets (and the values
    of ``redact_names``); a started server runs on ``cpus`` (None: any) with ``env`` added to
    its environment."""
    argv, base_url, health_path = launch
    if attach is None:
        return ServerProcess(name=name, argv=argv, base_url=base_url, health_path=health_path,
                             log_path=log_path, signatures=signatures, redact_names=redact_names,
                             cpus=cpus, env=env)
    return AttachedServer(name=name, attach=attach, health_path=health_path, log_path=log_path,
                          signatures=signatures)
