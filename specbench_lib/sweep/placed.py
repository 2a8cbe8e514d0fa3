"""A placed config's Ray task, on its worker: lease a port of its node, start the server there,
measure its cells with the sweep's own code and yield each event to the driver
(:mod:`~specbench_lib.sweep.placement`, whose docstring tells the whole story).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import queue
import signal
import tempfile
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..core.errors import PreflightError
from ..host.sources import PLACED_MARK, placed_marker
from ..model.cellspec import CellSpec
from ..model.plan import Plan
from ..model.records import CellRecord, Provenance
from ..prompts.promptbook import Lifetimes, PromptBook
from ..runs.manifest import ServerRecord
from ..runs.run import RunDir
from ..servers.engines import Launch, get_adapter
from ..servers.ports import check_port_free
from ..servers.process import port_lease
from .progress import Progress
from .serversweep import ServerSweep

# in a placed server's environment: its run and config (for reap_marked; the host check's co-tenants)
_MARK = PLACED_MARK.decode().rstrip("=")
_LOG_CHUNK = 4 * 2**20  # log bytes sent with one event at most (the rest follow with the next)


@dataclass(frozen=True)
class PlacementEvent:
    """One event of a placed task, as the driver reads it (it crosses Ray as a dict): ``started``
    (node, its IP, the task's pid, port and GPUs), ``server`` (the manifest entry ``record`` of
    config ``key``), ``cell`` (an analysed ``record``), ``done`` or ``log``; each with the bytes its
    server's log grew by and the worker's time."""

    kind: str
    at: str | None = None
    log: bytes = b""
    node: str | None = None
    node_ip: str = ""
    pid: int | None = None
    port: int | None = None
    gpus: tuple[str, ...] = ()
    key: str | None = None
    record: dict[str, Any] | None = None

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PlacementEvent:
        gpus = data.get("gpus") or ""
        return cls(kind=str(data["kind"]), at=data.get("at"), log=data.get("log") or b"",
                   node=data.get("node"), node_ip=str(data.get("node_ip") or ""),
                   pid=data.get("pid"), port=data.get("port"),
                   gpus=tuple(g for g in str(gpus).split(",") if g), key=data.get("key"),
                   record=data.get("record"))


@dataclass(frozen=True)
class Payload:
    """What a task needs: the plan, its config and cells, and the run's identity."""

    plan: Plan
    label: str  # the server config's label
    key: str  # its key in the manifest and logs (``<label>.r<n>`` for a later round)
    round_number: int
    cells: tuple[CellSpec, ...]
    fingerprints: dict[str, str]
    run_id: str
    provenance: Provenance
    launch: Launch  # the driver's launch, on engine.port (the task moves it to its own port)
    lifetimes: Lifetimes  # the driver's plan of server lifetimes: its prompt book's scheme

    @property
    def marker(self) -> str:
        return f"{self.run_id}/{self.key}"


class WorkerRun:
    """What ``ServerSweep`` writes to, on a worker: a private folder for the server's log, and
    a queue of events for the driver in place of the run directory's files."""

    def __init__(self, path: Path, fingerprints: dict[str, str], provenance: Provenance,
                 events: queue.Queue[dict[str, Any] | BaseException | None]) -> None:
        self.dir = RunDir(path)  # named as the run: records carry its id, logs its layout
        self.fingerprints = fingerprints
        self._provenance = provenance
        self._events = events

    def provenance(self) -> Provenance:
        return self._provenance

    def write_cell(self, record: CellRecord) -> None:
        self._events.put({"kind": "cell", "record": record.to_dict(), "at": now_iso()})

    def store_server(self, label: str, record: ServerRecord) -> None:
        # a copy now: the sweep keeps adding to its record (timing) after storing it
        self._events.put({"kind": "server", "key": label,
                          "record": json.loads(json.dumps(record.to_dict(), default=str))})


def _moved_launch(launch: Launch, port: int, to: int) -> Launch:
    """The launch on port ``to`` instead of ``port`` (the argument the fingerprint normalises)."""
    argv = [str(to) if a == str(port) else a for a in launch.argv]
    base = launch.base_url
    if base.endswith(f":{port}"):
        base = f"{base[:-len(str(port))]}{to}"
    return replace(launch, argv=argv, base_url=base)


@contextlib.contextmanager
def _node_port(host: str, first: int, span: int) -> Iterator[int]:
    """Lease the first free port after ``first`` on this node for as long as the server runs."""
    for port in range(first + 1, min(first + span, 65535) + 1):
        with contextlib.ExitStack() as stack:
            try:
                stack.enter_context(port_lease(host, port))
                check_port_free(host, port)
            except PreflightError:
                continue
            yield port
            return
    raise PreflightError(f"no free port in {first + 1}-{first + span} on {host} of node "
                         f"{os.uname().nodename}: other servers hold them; raise "
                         f"placement.port_span or set engine.port", what="port")


def run_placed(payload: Payload) -> Iterator[dict[str, Any]]:
    """The task: one server config on this worker's GPUs; yields events (see the module)."""
    import ray

    plan, params = payload.plan, payload.plan.params
    server = next(s for s in plan.servers if s.label == payload.label)
    context = ray.get_runtime_context()
    events: queue.Queue[dict[str, Any] | BaseException | None] = queue.Queue()
    with tempfile.TemporaryDirectory(prefix="specbench-") as tmp, \
            _node_port(params.engine.host, params.engine.port,
                       params.placement.port_span) as port:
        folder = Path(tmp) / payload.run_id
        folder.mkdir()
        launch = _moved_launch(payload.launch, params.engine.port, port)
        run = WorkerRun(folder, payload.fingerprints, payload.provenance, events)
        sweeper = ServerSweep(plan, server, launch, run,
                               get_adapter(params.engine), Progress(len(payload.cells),
                                                                    enabled=False),
                               round_number=payload.round_number,
                               book=PromptBook(plan.params, plan.cells, payload.lifetimes))
        log = run.dir.log_path(sweeper.key)
        offset = 0

        def with_log(event: dict[str, Any]) -> dict[str, Any]:
            nonlocal offset
            try:
                with open(log, "rb") as fh:
                    fh.seek(offset)
                    grown = fh.read(_LOG_CHUNK)
            except OSError:
                grown = b""
            offset += len(grown)
            return {**event, "log": grown}

        yield {"kind": "started", "node": context.get_node_id(),
               "node_ip": ray.util.get_node_ip_address(), "pid": os.getpid(), "port": port,
               "gpus": os.environ.get("CUDA_VISIBLE_DEVICES", ""), "at": now_iso()}
        yield from _measured(sweeper, payload, events, with_log)
        yield with_log({"kind": "done", "at": now_iso()})
        while True:  # what the log still holds
            rest = with_log({"kind": "log"})
            if not rest["log"]:
                break
            yield rest


def _measured(sweeper: ServerSweep, payload: Payload,
              events: queue.Queue[dict[str, Any] | BaseException | None],
              with_log: Callable[[dict[str, Any]], dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """Measure the task's cells on the server's parent thread; each event as it comes."""

    def measure() -> None:  # the server's parent thread: it lives until the server stops
        try:
            sweeper.measure_all(list(payload.cells))
        except BaseException as exc:  # noqa: BLE001  (handed to the task, which raises it)
            events.put(exc)
        finally:
            events.put(None)

    thread = threading.Thread(target=measure, name=f"specbench {sweeper.key}", daemon=True)
    os.environ[_MARK] = payload.marker  # the server inherits it (a worker runs one task)
    try:
        thread.start()
        while (event := events.get()) is not None:
            if isinstance(event, BaseException):
                thread.join()
                raise event
            yield with_log(event)
        thread.join()
    finally:
        os.environ.pop(_MARK, None)


def _marked(pid: int, marker: bytes) -> bool:
    return placed_marker(Path(f"/proc/{pid}/environ")) == marker


def reap_marked(marker: str) -> int:
    """On a lost server's node: SIGKILL the process groups of the server its task started
    (every process carries the task's ``SPECBENCH_PLACED`` marker in its environment): a group
    whose leader is marked or gone. Returns the groups killed."""
    mark = marker.encode()
    groups = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid() and _marked(int(entry.name),
                                                                               mark):
            with contextlib.suppress(OSError):
                groups.add(os.getpgid(int(entry.name)))
    killed = 0
    for group in groups - {os.getpgid(0)}:
        if _marked(group, mark) or not Path(f"/proc/{group}").exists():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(group, signal.SIGKILL)
                killed += 1
    return killed


def now_iso() -> str:
    """UTC now to the microsecond: co-tenancy compares these (cell files keep seconds)."""
    return dt.datetime.now(dt.UTC).isoformat(timespec="microseconds")
