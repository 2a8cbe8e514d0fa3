"""Where a cell ran and what else used its host meanwhile: the host's load (:class:`HostLoad`,
measured by :mod:`~specbench_lib.host.load`) and a placed cell's node and co-tenants (:class:`Placement`, by
:mod:`~specbench_lib.sweep.placement`), as stored in a cell's facts (:class:`~.records.CellFacts`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

from ..core.shapes import known_fields as _known

MIN_JUDGED_WINDOW_S = 0.5  # shorter windows: a 10 ms clock tick is too coarse to judge them


@dataclass(frozen=True)
class HostProcess:
    """Another process and the CPU it used during the window."""

    pid: int
    comm: str
    cores: float

    def __str__(self) -> str:
        return f"{self.comm} (pid {self.pid}) {self.cores:.2f}"


@dataclass(frozen=True)
class HostLoad:
    """What the host did besides the measurement, over one window (a cell's requests).

    ``other_cpu_cores`` is the CPU time of every process that is neither this sweep's nor the
    server's, over the window's wall time (1.0 = one core kept busy); ``top`` names the largest.
    ``server_separated`` is False when the server's processes could not be told apart (an
    attached server on this host whose listening process is not visible): then nothing is judged.
    """

    available: bool = True
    note: str = ""  # why it was not sampled, or what is missing
    cpus: int = 0  # CPUs this process may run on
    window_s: float = 0.0
    interval_s: float = 0.0
    samples: int = 0  # reads of /proc, the two at the window's ends included
    other_cpu_cores: float = 0.0
    other_cpu_cores_peak: float = 0.0  # the most over one sampling interval
    own_cpu_cores: float = 0.0  # this sweep's process and its child processes
    server_cpu_cores: float = 0.0  # the server's process group
    # other configs' servers placed on this node (:mod:`~specbench_lib.sweep.placement`): named in the cell's
    # placement facts as co-tenants, so not counted as other load
    co_tenant_cpu_cores: float = 0.0
    server_separated: bool = True
    host_busy_cores: float | None = None  # every CPU's busy time (/proc/stat), all processes
    steal_fraction: float | None = None  # of all CPU time: taken by the hypervisor
    loadavg: tuple[float, ...] | None = None  # at the end
    loadavg_1m_max: float | None = None
    top: tuple[HostProcess, ...] = ()
    gpu: dict[str, Any] | None = None  # nvidia-smi: per GPU utilisation, other compute processes
    sampler_cpu_s: float = 0.0  # what sampling itself cost (its thread, its reads, nvidia-smi)

    def unjudged(self) -> str | None:
        """Why the load cannot say whether the host was busy, or None when it can."""
        if not self.available:
            return self.note or "the host was not sampled"
        if not self.server_separated:
            return "the server's processes could not be told apart from others"
        if self.window_s < MIN_JUDGED_WINDOW_S:
            return f"a window of {self.window_s:.2f} s is too short to judge"
        return None

    @property
    def stolen_cores(self) -> float:
        """The CPU the hypervisor took (steal), in cores of this process's CPUs: time the server
        and the client were ready to run and could not, as if another process had it."""
        return (self.steal_fraction or 0.0) * self.cpus

    @property
    def contention_cores(self) -> float:
        """What competed with the measurement: other processes' CPU and the stolen CPU."""
        return self.other_cpu_cores + self.stolen_cores

    def busy(self, max_other_cpu_cores: float | None) -> bool:
        return (max_other_cpu_cores is not None and self.unjudged() is None
                and self.contention_cores > max_other_cpu_cores)

    def top_text(self) -> str:
        return ", ".join(map(str, self.top)) or "no single process stands out"

    def client_core_taken(self) -> str | None:
        """When the server and this sweep together kept more than this process's CPUs busy
        (within a tenth of a core), the server ran on the measuring client's core too: the
        cause a stalled read has then (None when they fit, or nothing was sampled)."""
        if not self.available or not self.server_separated or not self.cpus:
            return None
        if self.server_cpu_cores + self.own_cpu_cores <= self.cpus - 0.1:
            return None
        return (f"the server used {self.server_cpu_cores:.2f} of the {self.cpus} CPUs and this "
                f"sweep {self.own_cpu_cores:.2f}: the server ran on the client's core "
                f"(engine.cpus keeps them apart)")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> HostLoad:
        names = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in names}
        values["top"] = tuple(HostProcess(int(p["pid"]), str(p["comm"]), float(p["cores"]))
                              for p in values.get("top") or ())
        if values.get("loadavg") is not None:
            values["loadavg"] = tuple(values["loadavg"])
        return cls(**values)


@dataclass(frozen=True)
class CoTenant:
    """Another config's server that ran on the same node while a cell's requests ran."""

    config: str  # its server key (label, with ``.r<n>`` for a later round)
    gpus: tuple[str, ...] = ()  # its CUDA_VISIBLE_DEVICES
    started: str | None = None  # when it was placed (UTC)
    ended: str | None = None  # when it ended (None: still running when the cell was written)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CoTenant:
        values = _known(cls, data)
        values["gpus"] = tuple(str(g) for g in values.get("gpus") or ())
        return cls(**values)


@dataclass(frozen=True)
class Placement:
    """Where a placed cell ran (:mod:`~specbench_lib.sweep.placement`): the node, its GPUs, and
    who shared them.

    ``co_tenants`` are the other configs whose placement on the same node overlapped the cell's
    time window (known to the driver when it wrote the cell: a config placed within Ray's message
    latency of the cell's end may be missing).
    """

    engine: str = "ray"
    mode: str = "packed"  # exclusive | packed
    node: str = ""  # the node's id
    node_ip: str = ""
    gpus: tuple[str, ...] = ()  # CUDA_VISIBLE_DEVICES of the cell's server
    port: int | None = None
    co_tenants: tuple[CoTenant, ...] = ()

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Placement:
        values = _known(cls, data)
        values["gpus"] = tuple(str(g) for g in values.get("gpus") or ())
        values["co_tenants"] = tuple(CoTenant.from_dict(c) for c in values.get("co_tenants") or ())
        return cls(**values)
