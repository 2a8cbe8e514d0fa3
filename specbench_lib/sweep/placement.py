"""Server configs placed on Ray: each config (one server and its cells) a task on the GPUs Ray
gives it; the driver writes what the tasks return into the one run directory.

A task (:func:`~.placed.run_placed`, a Ray streaming generator) asks for ``placement.gpus_per_server`` GPUs
and ``cpus_per_server`` CPUs; Ray sets its ``CUDA_VISIBLE_DEVICES``. On its node it leases a
free port of ``engine.port + 1 … engine.port + port_span``, starts the server with the driver's
argv on that port and measures its cells with the sweep's own code (``serversweep.ServerSweep``) into
a private folder. It yields each event as it happens: ``started`` (node, GPUs, port), ``server``
(the manifest entry), ``cell`` (an analysed record as a dict) and ``done``, each with the bytes
its server's log grew by. The driver writes every cell through
:class:`~specbench_lib.runs.run.Run` (atomically, with the plan's fingerprint), appends the log
bytes to the run's log of that config, and records in each cell who shared its node
(:class:`~specbench_lib.model.hostfacts.Placement`): no shared filesystem is needed.

A task that dies (its worker killed, its node lost) leaves its unwritten cells ``crashed`` with
``worker_lost``; the others go on. Its server dies with the worker (``PR_SET_PDEATHSIG``) and the
driver kills what is left of its process group on its node. Ctrl-C cancels every task and does
the same for each server. Ray is imported only here, when ``placement.engine`` is ``ray``.
"""

from __future__ import annotations

import contextlib
import datetime as dt
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from ..core.errors import ParamsError, PreflightError
from ..model.catalogue import C
from ..model.cellspec import CellSpec
from ..model.hostfacts import CoTenant, Placement
from ..model.plan import Plan
from ..model.records import CellFacts, CellRecord
from ..model.verdict import Reason, Verdict
from ..runs.manifest import ServerRecord
from ..runs.run import Run
from .placed import Payload, PlacementEvent, now_iso, reap_marked, run_placed
from .progress import Progress
from .raycluster import connect
from .serversweep import ServerSweep

REAP_TIMEOUT_S = 15.0  # the longest wait for the tasks that kill a lost server's group


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
            connect(self.options.address)
        self.jobs: list[_Job] = []
        self.tenancy: dict[str, _Tenancy] = {}
        self.task = ray.remote(run_placed)
        self.reaper = ray.remote(num_cpus=0)(reap_marked)
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
        waiting, running = list(self.jobs), list[_Job]()
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

    def _slot(self, running: list[_Job]) -> str | Literal[False] | None:
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
        payload = Payload(
            plan=self.plan, label=sweeper.server.label, key=sweeper.key,
            round_number=job.round_number,
            cells=tuple(job.cells), fingerprints={c.cell_id: run.fingerprints[c.cell_id]
                                                  for c in job.cells},
            run_id=run.dir.run_id, provenance=run.provenance(), launch=sweeper.launch,
            lifetimes=sweeper.book.lifetimes)
        strategy = (NodeAffinitySchedulingStrategy(node, soft=False) if node is not None
                    else "DEFAULT")
        job.node, job.submitted = node, now_iso()  # exclusive: the node is busy from now on
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
            event = PlacementEvent.from_dict(ray.get(next(job.ref)))
        except StopIteration:
            self._ended(job, None)
            return False
        except ray.exceptions.RayError as exc:
            self._ended(job, exc)
            return False
        if event.log:
            with open(self.run.dir.log_path(job.sweeper.key), "ab") as fh:
                fh.write(event.log)
            job.log_tail = (job.log_tail + event.log)[-8192:]
        kind, since = event.kind, job.last_at
        job.last_at = event.at or job.last_at
        if kind == "started":
            job.node, job.port = event.node, event.port
            job.node_ip = self.node_ips.get(job.node or "") or event.node_ip
            job.gpus = event.gpus
            self.tenancy[job.sweeper.key] = _Tenancy(job.sweeper.key, job.node or "", job.gpus,
                                                     event.at or now_iso())
            self.progress.server(job.sweeper.key, f"on node {job.node_ip}, GPUs "
                                 f"{','.join(job.gpus) or 'none'}, port {job.port}")
        elif kind == "server":
            record = ServerRecord.from_dict(event.record or {})
            record.placement = {"engine": "ray", "mode": self.options.mode, "node": job.node,
                                "node_ip": job.node_ip, "gpus": list(job.gpus),
                                "port": job.port, "submitted": job.submitted,
                                "started": self.tenancy[job.sweeper.key].started}
            self.run.store_server(str(event.key), record)
        elif kind == "cell":  # its window: from the task's previous event to this one
            self._write(job, CellRecord.from_dict(event.record or {}), since, event.at or now_iso())
        elif kind == "done" and job.sweeper.key in self.tenancy:
            self.tenancy[job.sweeper.key].ended = event.at
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
            self.tenancy[key].ended = now_iso()
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
        self._reap_jobs([job])
        excerpt = "\n".join(job.log_tail.decode(errors="replace").splitlines()[-40:])
        self.progress.server(key, f"lost ({reason})")
        for cell in left:
            facts = CellFacts(decided=Verdict("crashed", (reason,)), server_alive=False,
                              log_excerpt=excerpt,
                              placement=self._placement(job, job.last_at, now_iso()))
            job.sweeper.write(cell, facts)
            job.written.add(cell.cell_id)

    def _stop(self, running: list[_Job]) -> None:
        """Cancel every running task (its worker is killed) and kill what is left of its server."""
        for job in running:
            with contextlib.suppress(Exception):
                self.ray.cancel(job.ref, force=True)
        self._reap_jobs(running)

    def _reap_jobs(self, jobs: list[_Job]) -> None:
        """Kill the process group of each job's server on its node (bounded; a lost node has
        nothing left to kill)."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        refs = []
        alive = {n["NodeID"] for n in self.ray.nodes() if n.get("Alive")}
        for job in jobs:
            if job.node is None or job.node not in alive:  # not started, or its node is gone
                continue  # (its server died with its worker: PR_SET_PDEATHSIG)
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


__all__ = ["Placer"]
