"""Server configs placed on Ray: each config (one server and its cells) a task on the GPUs Ray
gives it; the driver writes what the tasks return into the one run directory.

A task (:func:`_place`, a Ray streaming generator) asks for ``placement.gpus_per_server`` GPUs
and ``cpus_per_server`` CPUs; Ray sets its ``CUDA_VISIBLE_DEVICES``. On its node it leases a
free port of ``engine.port + 1 … engine.port + port_span``, starts the server with the driver's
argv on that port and measures its cells with the sweep's own code (``serversweep.ServerSweep``) into
a private folder. It yields each event as it happens: ``started`` (node, GPUs, port), ``server``
(the manifest entry), ``cell`` (an analysed record as a dict) and ``done``, each with the bytes
its server's log grew by. The driver writes every cell through :class:`~.runs.Run` (atomically,
with the plan's fingerprint), appends the log bytes to the run's log of that config, and records
in each cell who shared its node (:class:`~.records.Placement`): no shared filesystem is needed.

A task that dies (its worker killed, its node lost) leaves its unwritten cells ``crashed`` with
``worker_lost``; the others go on. Its server dies with the worker (``PR_SET_PDEATHSIG``) and the
driver kills what is left of its process group on its node. Ctrl-C cancels every task and does
the same for each server. Ray is imported only here, when ``placement.engine`` is ``ray``.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import queue
import signal
import socket
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from .catalogue import C
from .engines import Launch, get_adapter
from .errors import ParamsError, PreflightError
from .hostload import PLACED_MARK, placed_marker
from .params import CellSpec, Plan
from .preflight import check_port_free
from .progress import Progress
from .records import CellFacts, CellRecord, CoTenant, Placement, Provenance, Reason, Verdict
from .runs import Run, RunDir
from .server import port_lease
from .serversweep import ServerSweep

# in a placed server's environment: its run and config (for _reap; the host check's co-tenants)
_MARK = PLACED_MARK.decode().rstrip("=")
PROBE_TIMEOUT_S = 3.0  # a Ray address that does not accept a connection by then is not there
REAP_TIMEOUT_S = 15.0  # the longest wait for the tasks that kill a lost server's group
_LOG_CHUNK = 4 * 2**20  # log bytes sent with one event at most (the rest follow with the next)


@dataclass(frozen=True)
class _Payload:
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
        self._events.put({"kind": "cell", "record": record.to_dict(), "at": _now()})

    def store_server(self, label: str, record: dict[str, Any]) -> None:
        # a copy now: the sweep keeps adding to its record (timing) after storing it
        self._events.put({"kind": "server", "key": label,
                          "record": json.loads(json.dumps(record, default=str))})


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


def _place(payload: _Payload) -> Iterator[dict[str, Any]]:
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
                               round_number=payload.round_number)
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
               "gpus": os.environ.get("CUDA_VISIBLE_DEVICES", ""), "at": _now()}

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
        yield with_log({"kind": "done", "at": _now()})
        while True:  # what the log still holds
            rest = with_log({"kind": "log"})
            if not rest["log"]:
                break
            yield rest


def _marked(pid: int, marker: bytes) -> bool:
    return placed_marker(Path(f"/proc/{pid}/environ")) == marker


def _reap(marker: str) -> int:
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


@dataclass
class _Tenancy:
    """One placed server on a node: the co-tenancy of every cell is read from these."""

    key: str
    node: str
    gpus: tuple[str, ...]
    started: str
    ended: str | None = None


@dataclass
class _Job:
    """One config of the round, from submission to its last cell."""

    sweeper: ServerSweep
    cells: list[CellSpec]
    round_number: int = 0
    ref: Any = None  # its ObjectRefGenerator once submitted
    node: str | None = None
    node_ip: str = ""
    gpus: tuple[str, ...] = ()
    port: int | None = None
    written: set[str] = field(default_factory=set)
    log_tail: bytes = b""
    last_at: str | None = None  # the worker's time of its last event (a cell's window opens)
    submitted: str | None = None  # the driver's time it asked Ray for the task


def _probe(address: str) -> None:
    """A :class:`PreflightError` at once when nothing listens at a ``host:port`` or
    ``ray://host:port`` address (Ray itself waits minutes for a cluster that is not there)."""
    if address in ("auto", "local"):
        return
    host, _, port = address.removeprefix("ray://").rpartition(":")
    try:
        socket.create_connection((host, int(port)), timeout=PROBE_TIMEOUT_S).close()
    except (OSError, ValueError) as exc:
        raise PreflightError(f"no Ray cluster answers at placement.address {address!r} ({exc}); "
                             f"start one (ray start --head, or inside a Slurm allocation as the "
                             f"README shows) or set placement.address", what="ray") from None


def _connect(address: str) -> None:
    """Connect this process to the Ray at ``address`` (``local``: start one here)."""
    import ray

    _probe(address)
    try:
        ray.init(address=address, include_dashboard=False, log_to_driver=False,
                 logging_level="WARNING")
    except Exception as exc:  # noqa: BLE001  (Ray raises many kinds; all mean: not there)
        auth = ("" if address in ("auto", "local") else "; a cluster started with token "
                "authentication (Ray's default) also needs RAY_AUTH_MODE=token here and its "
                "token (~/.ray/auth_token or RAY_AUTH_TOKEN) when named by address")
        raise PreflightError(f"no Ray cluster answers at placement.address {address!r} "
                             f"({type(exc).__name__}: {exc}); start one (ray start --head, or "
                             f"inside a Slurm allocation as the README shows) or set "
                             f"placement.address{auth}", what="ray") from None


def _now() -> str:
    """UTC now to the microsecond: co-tenancy compares these (cell files keep seconds)."""
    return dt.datetime.now(dt.UTC).isoformat(timespec="microseconds")


def _parse_time(text: str | None) -> dt.datetime | None:
    return dt.datetime.fromisoformat(text) if text else None


class Placer:
    """The driver: places each config of a round on Ray, writes what comes back.

    Connects to ``placement.address`` (or uses the Ray this process already has); closes only
    a connection it made (:meth:`close`).
    """

    def __init__(self, plan: Plan, run: Run, progress: Progress) -> None:
        import ray

        self.ray = ray
        self.plan, self.run, self.progress = plan, run, progress
        self.options = plan.params.placement
        self.gpus = self.options.gpus(plan.params.engine)
        self.owned = not ray.is_initialized()
        if self.owned:
            _connect(self.options.address)
        self.jobs: list[_Job] = []
        self.tenancy: dict[str, _Tenancy] = {}
        self.task = ray.remote(_place)
        self.reaper = ray.remote(num_cpus=0)(_reap)
        self.nodes = self._nodes()
        self.node_ips = {n["NodeID"]: str(n.get("NodeManagerAddress", "")) for n in ray.nodes()}

    def _nodes(self) -> list[dict[str, Any]]:
        """The alive nodes that can host one server; a :class:`PreflightError` when none can."""
        nodes = [n for n in self.ray.nodes() if n.get("Alive")]
        fit = [n for n in nodes if n["Resources"].get("GPU", 0) >= self.gpus
               and n["Resources"].get("CPU", 0) >= self.options.cpus_per_server]
        if not fit:
            offered = ", ".join(f"{n.get('NodeManagerAddress')}: {n['Resources'].get('GPU', 0):g} "
                                f"GPUs, {n['Resources'].get('CPU', 0):g} CPUs" for n in nodes)
            raise PreflightError(f"no Ray node at placement.address {self.options.address!r} "
                                 f"offers {self.gpus} GPUs and {self.options.cpus_per_server:g} "
                                 f"CPUs for one server (nodes: {offered or 'none'}); lower "
                                 f"placement.gpus_per_server / cpus_per_server or start Ray with "
                                 f"--num-gpus", what="ray")
        return fit

    def add(self, sweeper: ServerSweep, cells: list[CellSpec], round_number: int = 0) -> None:
        """A config of this round to place (an attached server is measured here, now)."""
        if sweeper.server.attach is not None:
            sweeper.measure_all(cells)
            return
        port = str(self.plan.params.engine.port)
        if port not in sweeper.launch.argv:
            raise ParamsError(f"config {sweeper.server.label!r}: its argv does not pass the port "
                              f"({port}) as an argument of its own, so a placed server cannot "
                              f"move to its node's port; use {{port}} as one argv item",
                              file=self.plan.source, key="placement.engine", value="ray")
        self.jobs.append(_Job(sweeper, cells, round_number))

    def run_round(self) -> None:
        """Place the round's configs (``packed``: all at once, Ray queues them on free GPUs;
        ``exclusive``: one per node at a time) and write every event until all have ended."""
        waiting, running = list(self.jobs), []
        self.jobs = []
        try:
            while waiting or running:
                while waiting and (slot := self._slot(running)) is not False:
                    running.append(self._submit(waiting.pop(0), slot))
                ready, _ = self.ray.wait([j.ref for j in running], num_returns=1)
                for job in [j for j in running if j.ref in ready]:
                    if not self._next(job):
                        running.remove(job)
        except BaseException:  # Ctrl-C (or a failed write): stop every placed server
            self._stop(running)
            raise

    def _slot(self, running: list[_Job]) -> str | None | bool:
        """Where the next job may go: None (anywhere: packed), a node id (exclusive), or False
        (exclusive, every node busy)."""
        if self.options.mode == "packed":
            return None
        busy = {j.node for j in running}
        free = [n["NodeID"] for n in self.nodes if n["NodeID"] not in busy]
        return free[0] if free else False

    def _submit(self, job: _Job, node: str | None) -> _Job:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        sweeper, run = job.sweeper, self.run
        payload = _Payload(
            plan=self.plan, label=sweeper.server.label, key=sweeper.key,
            round_number=job.round_number,
            cells=tuple(job.cells), fingerprints={c.cell_id: run.fingerprints[c.cell_id]
                                                  for c in job.cells},
            run_id=run.dir.run_id, provenance=run.provenance(), launch=sweeper.launch)
        strategy = (NodeAffinitySchedulingStrategy(node, soft=False) if node is not None
                    else "DEFAULT")
        job.node, job.submitted = node, _now()  # exclusive: the node is busy from now on
        job.ref = self.task.options(
            num_gpus=self.gpus, num_cpus=self.options.cpus_per_server, max_retries=0,
            scheduling_strategy=strategy, name=f"specbench {sweeper.key}").remote(payload)
        self.progress.server(sweeper.key, f"placed on Ray ({self.gpus} GPUs, "
                             f"{self.options.mode})")
        return job

    def _next(self, job: _Job) -> bool:
        """Handle the job's next event; False once it has ended (done or lost)."""
        ray = self.ray
        try:
            event = ray.get(next(job.ref))
        except StopIteration:
            self._ended(job, None)
            return False
        except ray.exceptions.RayError as exc:
            self._ended(job, exc)
            return False
        if event.get("log"):
            with open(self.run.dir.log_path(job.sweeper.key), "ab") as fh:
                fh.write(event["log"])
            job.log_tail = (job.log_tail + event["log"])[-8192:]
        kind, since = event["kind"], job.last_at
        job.last_at = event.get("at") or job.last_at
        if kind == "started":
            job.node, job.port = event["node"], event["port"]
            job.node_ip = self.node_ips.get(job.node) or event["node_ip"]
            job.gpus = tuple(g for g in event["gpus"].split(",") if g)
            self.tenancy[job.sweeper.key] = _Tenancy(job.sweeper.key, job.node, job.gpus,
                                                     event["at"])
            self.progress.server(job.sweeper.key, f"on node {job.node_ip}, GPUs "
                                 f"{','.join(job.gpus) or 'none'}, port {job.port}")
        elif kind == "server":
            record = dict(event["record"])
            record["placement"] = {"engine": "ray", "mode": self.options.mode, "node": job.node,
                                   "node_ip": job.node_ip, "gpus": list(job.gpus),
                                   "port": job.port, "submitted": job.submitted,
                                   "started": self.tenancy[job.sweeper.key].started}
            self.run.store_server(event["key"], record)
        elif kind == "cell":  # its window: from the task's previous event to this one
            self._write(job, CellRecord.from_dict(event["record"]), since, event["at"])
        elif kind == "done" and job.sweeper.key in self.tenancy:
            self.tenancy[job.sweeper.key].ended = event["at"]
        return True

    def _placement(self, job: _Job, started: str | None, ended: str | None) -> Placement:
        """Where the job ran, and the other configs on its node between ``started`` and ``ended``."""
        begin, end = _parse_time(started or ended), _parse_time(ended)
        others = []
        for key, t in self.tenancy.items():
            if key == job.sweeper.key or t.node != job.node:
                continue
            t_begin, t_end = _parse_time(t.started), _parse_time(t.ended)
            if (end is None or t_begin is None or t_begin <= end) and (
                    begin is None or t_end is None or t_end >= begin):
                others.append(CoTenant(key, t.gpus, t.started, t.ended))
        return Placement(engine="ray", mode=self.options.mode, node=job.node or "",
                         node_ip=job.node_ip, gpus=job.gpus, port=job.port,
                         co_tenants=tuple(others))

    def _write(self, job: _Job, record: CellRecord, since: str | None, at: str) -> None:
        placement = self._placement(job, since, at)
        record = replace(record, facts=replace(record.facts, placement=placement))
        self.run.write_cell(record)
        job.written.add(record.cell_id)
        job.sweeper.written.add(record.cell_id)
        self.progress.cell(record)

    def _ended(self, job: _Job, error: BaseException | None) -> None:
        """The job's task has ended: a lost or failed one leaves its unwritten cells crashed."""
        key = job.sweeper.key
        if key in self.tenancy and self.tenancy[key].ended is None:
            self.tenancy[key].ended = _now()
        left = [c for c in job.cells if c.cell_id not in job.written]
        if error is None and not left:
            return
        if error is None:
            reason = Reason(C.worker_lost, "the task ended before its cells were measured")
        elif isinstance(error, self.ray.exceptions.RayTaskError):
            cause = error.cause if error.cause is not None else error
            reason = Reason(C.worker_error, f"{type(cause).__name__}: {cause}")
        else:
            reason = Reason(C.worker_lost, f"{type(error).__name__}: the Ray worker (or its node) "
                            f"running this config died; its server was stopped")
        self._reap([job])
        excerpt = "\n".join(job.log_tail.decode(errors="replace").splitlines()[-40:])
        self.progress.server(key, f"lost ({reason})")
        for cell in left:
            facts = CellFacts(decided=Verdict("crashed", (reason,)), server_alive=False,
                              log_excerpt=excerpt,
                              placement=self._placement(job, job.last_at, _now()))
            job.sweeper.write(cell, facts)
            job.written.add(cell.cell_id)

    def _stop(self, running: list[_Job]) -> None:
        """Cancel every running task (its worker is killed) and kill what is left of its server."""
        for job in running:
            with contextlib.suppress(Exception):
                self.ray.cancel(job.ref, force=True)
        self._reap(running)

    def _reap(self, jobs: list[_Job]) -> None:
        """Kill the process group of each job's server on its node (bounded; a lost node has
        nothing left to kill)."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        refs = []
        for job in jobs:
            if job.node is None:  # not started: it has no server
                continue
            refs.append(self.reaper.options(
                scheduling_strategy=NodeAffinitySchedulingStrategy(job.node, soft=False),
                max_retries=0).remote(f"{self.run.dir.run_id}/{job.sweeper.key}"))
        if refs:
            with contextlib.suppress(Exception):
                self.ray.wait(refs, num_returns=len(refs), timeout=REAP_TIMEOUT_S)

    def close(self) -> None:
        """Disconnect from (or stop) the Ray this placer started; a given one is left as it is."""
        if self.owned:
            self.ray.shutdown()


def ray_check(plan: Plan) -> str:
    """``specbench doctor``'s check: Ray answers at ``placement.address`` and offers the GPUs the
    plan needs per server; returns what it offers, or raises :class:`PreflightError` with the fix."""
    options = plan.params.placement
    gpus = options.gpus(plan.params.engine)
    try:
        import ray
    except ImportError:
        raise PreflightError("placement.engine is ray but Ray is not installed: pip install "
                             "'specbench[ray]' (or pip install ray)", what="ray") from None
    if options.address == "local" and not ray.is_initialized():
        return (f"a local Ray instance will be started on this machine; each server asks for "
                f"{gpus} GPUs and {options.cpus_per_server:g} CPUs ({options.mode})")
    owned = not ray.is_initialized()
    if owned:
        _connect(options.address)
    try:
        nodes = [n for n in ray.nodes() if n.get("Alive")]
    finally:
        if owned:
            ray.shutdown()
    slots = [min(int(n["Resources"].get("GPU", 0) // gpus) if gpus else len(plan.servers),
                 int(n["Resources"].get("CPU", 0) // options.cpus_per_server)
                 if options.cpus_per_server else len(plan.servers)) for n in nodes]
    offered = "; ".join(f"{n.get('NodeManagerAddress')}: {n['Resources'].get('GPU', 0):g} GPUs, "
                        f"{n['Resources'].get('CPU', 0):g} CPUs" for n in nodes)
    if not any(slots):
        raise PreflightError(f"the Ray cluster at {options.address!r} has no node with {gpus} "
                             f"GPUs and {options.cpus_per_server:g} CPUs for one server (nodes: "
                             f"{offered or 'none'}); lower placement.gpus_per_server or add GPUs",
                             what="ray")
    at_once = sum(1 for s in slots if s) if options.mode == "exclusive" else sum(slots)
    return (f"{len(nodes)} node(s): {offered}; {at_once} of {len(plan.servers)} servers at once "
            f"({gpus} GPUs each, {options.mode})")


__all__ = ["Placer", "WorkerRun", "ray_check"]
