"""The host as evidence: what else used the CPUs (and GPUs) while a cell's requests ran.

A :class:`HostSampler` reads ``/proc`` when it starts, every ``interval_s`` from a background
thread, and when it stops: per process, the CPU time it used (``utime + stime`` of
``/proc/[pid]/stat``, all its threads) over the wall time, in cores. Each process is counted as
this sweep's own (its process, its threads and its child processes), the server's (its process
group or session, led by the server's pid), a co-tenant's (the group of another config's server
placed on this node, marked ``SPECBENCH_PLACED`` in its environment) or another's; other
processes are what makes a host busy (:class:`HostLoad`, stored in a cell's facts; the
``busy_host`` rule in :mod:`.validate`).
Also read: the load average, the host's busy and steal time (``/proc/stat``) and, where
``nvidia-smi`` exists, the GPUs' utilisation and compute processes. Without ``/proc`` (macOS)
the load says it was not sampled; sampling never fails a sweep.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Collection, Iterable
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

MIN_JUDGED_WINDOW_S = 0.5  # shorter windows: a 10 ms clock tick is too coarse to judge them
GPU_INTERVAL_S = 5.0  # nvidia-smi costs tens of ms of CPU: queried this often at most
TOP = 5  # other processes named in a load
_GPU_TIMEOUT_S = 5.0
_LOOPBACK = ("localhost", "::1", "0.0.0.0")  # and 127.*


@dataclass(frozen=True)
class ProcStat:
    """The fields of one ``/proc/[pid]/stat`` a sample needs."""

    pid: int
    comm: str
    ppid: int
    pgrp: int
    session: int
    ticks: int  # utime + stime, clock ticks, all threads
    start: int  # starttime: clock ticks after boot


def parse_stat(text: str) -> ProcStat:
    """One ``/proc/[pid]/stat`` line; ``comm`` may hold spaces and parentheses (it ends at the
    last ``)``). ValueError or IndexError for anything else."""
    head, _, rest = text.partition(" (")
    comm, _, tail = rest.rpartition(") ")
    f = tail.split()
    return ProcStat(int(head), comm, int(f[1]), int(f[2]), int(f[3]), int(f[11]) + int(f[12]),
                    int(f[19]))


@dataclass(frozen=True)
class CpuTimes:
    """The ``cpu`` line of ``/proc/stat`` (clock ticks over all CPUs)."""

    busy: int  # user + nice + system + irq + softirq (guest time is inside user)
    steal: int
    total: int  # every state up to steal

    @classmethod
    def parse(cls, text: str) -> CpuTimes | None:
        for line in text.splitlines():
            if line.startswith("cpu "):
                v = [int(x) for x in line.split()[1:9]]
                v += [0] * (8 - len(v))
                user, nice, system, _idle, _iowait, irq, softirq, steal = v
                return cls(user + nice + system + irq + softirq, steal, sum(v))
        return None


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
    # other configs' servers placed on this node (:mod:`.placement`): named in the cell's
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

    def busy(self, max_other_cpu_cores: float | None) -> bool:
        return (max_other_cpu_cores is not None and self.unjudged() is None
                and self.other_cpu_cores > max_other_cpu_cores)

    def top_text(self) -> str:
        return ", ".join(map(str, self.top)) or "no single process stands out"

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


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity: a cpuset or ``taskset``), else all."""
    with contextlib.suppress(AttributeError, OSError):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def server_pids(pid: int | None, base_url: str) -> tuple[int, ...] | None:
    """The pids whose process groups are the server's: the launched server's own pid; for an
    attached server on this host, the processes listening on its port (None when they cannot be
    seen); for one on another host, none."""
    if pid is not None:
        return (pid,)
    url = urlsplit(base_url)
    host = url.hostname or ""
    if not (host in _LOOPBACK or host.startswith("127.")):
        return ()
    from .server import listener_pids

    port = url.port or (443 if url.scheme == "https" else 80)
    found = listener_pids(port)
    return tuple(sorted(found)) if found else None


class HostSampler:
    """Samples the host from :meth:`start` to :meth:`stop` (a context manager too).

    Args:
        server: pids whose process groups (and sessions they lead) are the server's; None when
            the server is on this host but its processes are unknown.
        interval_s: seconds between background reads of ``/proc``.
        own: this sweep's pid (default: this process); its child processes are its own too.
        watch: the pids to read at each sample, instead of every pid (tests: a controlled set).
        root: the ``/proc`` to read.
        clock: seconds, monotonic.
        gpu: query ``nvidia-smi`` when it is on the PATH.
    """

    def __init__(self, *, server: Collection[int] | None = (), interval_s: float = 0.5,
                 own: int | None = None, watch: Callable[[], Iterable[int]] | None = None,
                 root: Path | str = "/proc", clock: Callable[[], float] = time.monotonic,
                 gpu: bool = True) -> None:
        self.server = None if server is None else frozenset(server)
        self.interval_s, self.own, self.watch = interval_s, own or os.getpid(), watch
        self.root, self.clock = Path(root), clock
        self.hz = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
        self.available = (self.root / "self" / "stat").is_file() or (self.root / "stat").is_file()
        self.nvidia_smi = shutil.which("nvidia-smi") if gpu else None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._first: dict[tuple[int, int], int] = {}  # (pid, start) → ticks when first seen
        self._last: dict[tuple[int, int], tuple[ProcStat, str]] = {}  # → its last stat, class
        self._groups: set[int] = set()
        self._placed: dict[int, bool] = {}  # process group → led by another placed server
        self._sessions: set[int] = set()
        self._cost_s = 0.0
        self._gpus: dict[str, dict[str, Any]] = {}
        self._gpu_apps: dict[int, dict[str, Any]] = {}
        self._gpu_note = ""
        self._samples = 0
        self._began = self._prev_at = 0.0
        self._boot0: float | None = None
        self._prev: dict[tuple[int, int], int] = {}
        self._peak = 0.0
        self._cpu0: CpuTimes | None = None
        self._cpu: CpuTimes | None = None
        self._loads: list[tuple[float, float, float]] = []
        self.load: HostLoad | None = None  # what stop() found (set on leaving a with block)

    def start(self) -> HostSampler:
        self._began = self._prev_at = self.clock()
        if self.available:
            self._boot0 = self._uptime_ticks()
            self._sample(first=True)
            self._thread = threading.Thread(target=self._run, name="specbench-hostload",
                                            daemon=True)
            self._thread.start()
        return self

    def stop(self) -> HostLoad:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=max(5.0, 2 * self.interval_s))
            self._sample()
        return self._summary(self.clock() - self._began)

    def __enter__(self) -> HostSampler:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        if not self._stop.is_set():
            self.load = self.stop()

    def _run(self) -> None:
        began = time.thread_time()
        next_gpu = 0.0
        while True:
            if self.nvidia_smi and self.clock() >= next_gpu:
                self._query_gpu()
                next_gpu = self.clock() + GPU_INTERVAL_S
            if self._stop.wait(self.interval_s):
                break
            self._sample()
        self._cost_s += time.thread_time() - began  # its reads and queries; nvidia-smi's own apart

    def _uptime_ticks(self) -> float | None:
        try:
            return float((self.root / "uptime").read_text().split()[0]) * self.hz
        except (OSError, ValueError, IndexError):
            return None

    def _pids(self) -> Iterable[int]:
        if self.watch is not None:
            return self.watch()
        with os.scandir(self.root) as entries:
            return [int(e.name) for e in entries if e.name.isdigit()]

    def _read(self) -> list[ProcStat]:
        found = []
        for pid in self._pids():
            try:
                with open(self.root / str(pid) / "stat", "rb") as fh:
                    found.append(parse_stat(fh.read().decode("utf-8", "replace")))
            except (OSError, ValueError, IndexError):
                continue  # gone between the listing and the read
        return found

    def _sample(self, first: bool = False) -> None:
        """Read every process once and fold it in (the caller's thread or the sampler's)."""
        began = time.thread_time()
        with self._lock:
            now, procs = self.clock(), self._read()
            with contextlib.suppress(OSError):
                self._cpu = CpuTimes.parse((self.root / "stat").read_text())
            with contextlib.suppress(OSError):
                self._loads.append(os.getloadavg())
            if first:
                self._cpu0 = self._cpu
                self._learn_server(procs)
            parents = {p.pid: p.ppid for p in procs}
            other, seen = 0, {}
            for stat in procs:
                key = (stat.pid, stat.start)
                kind = self._kind(stat, parents)
                if key not in self._first:
                    born = (not first and self._boot0 is not None and stat.start >= self._boot0)
                    self._first[key] = 0 if born else stat.ticks
                if kind == "other":
                    other += stat.ticks - self._prev.get(key, self._first[key])
                self._last[key], seen[key] = (stat, kind), stat.ticks
            dt = now - self._prev_at
            if not first and dt >= 0.1:
                self._peak = max(self._peak, other / self.hz / dt)
            self._prev, self._prev_at = seen, now
            self._samples += 1
        if threading.current_thread() is not self._thread:  # the thread counts itself
            self._cost_s += time.thread_time() - began

    def _learn_server(self, procs: list[ProcStat]) -> None:
        if not self.server:
            return
        by_pid = {p.pid: p for p in procs}
        for pid in self.server:
            self._groups.add(pid)  # a launched server leads its own group and session
            if pid in by_pid:
                self._groups.add(by_pid[pid].pgrp)
                if by_pid[pid].session == pid:
                    self._sessions.add(pid)

    def _kind(self, stat: ProcStat, parents: dict[int, int]) -> str:
        if stat.pgrp in self._groups or stat.session in self._sessions:
            return "server"
        pid, hops = stat.pid, 0
        while pid > 1 and hops < 64:
            if pid == self.own:
                return "own"
            pid, hops = parents.get(pid, 0), hops + 1
        if stat.pgrp not in self._placed:
            self._placed[stat.pgrp] = placed_marker(self.root / str(stat.pgrp) / "environ") is not None
        return "co_tenant" if self._placed[stat.pgrp] else "other"

    def _query_gpu(self) -> None:
        assert self.nvidia_smi is not None
        gpus = _nvidia_smi([self.nvidia_smi, "--query-gpu=index,utilization.gpu,memory.used",
                            "--format=csv,noheader,nounits"])
        apps = _nvidia_smi([self.nvidia_smi, "--query-compute-apps=pid,process_name,used_memory",
                            "--format=csv,noheader,nounits"])
        self._cost_s += gpus[1] + apps[1]
        if gpus[0] is None or apps[0] is None:
            self._gpu_note = "nvidia-smi did not answer"
            self.nvidia_smi = None  # once is enough
            return
        for row in gpus[0]:
            if len(row) >= 3:
                stats = self._gpus.setdefault(row[0], {"index": row[0], "util": [], "mem_mib": 0})
                stats["util"].append(_number(row[1]))
                stats["mem_mib"] = max(stats["mem_mib"], _number(row[2]))
        for row in apps[0]:
            if len(row) >= 3 and row[0].isdigit():
                self._gpu_apps[int(row[0])] = {"pid": int(row[0]), "name": row[1],
                                               "used_mib": _number(row[2])}

    def _gpu_summary(self) -> dict[str, Any] | None:
        if not self._gpus and not self._gpu_note:
            return None
        kinds = {stat.pid: kind for stat, kind in self._last.values()}
        others = [{**app, "seen_here": app["pid"] in kinds}
                  for pid, app in sorted(self._gpu_apps.items()) if kinds.get(pid, "other") == "other"]
        gpus = [{"index": s["index"], "util_max": max(s["util"], default=0.0),
                 "util_mean": round(sum(s["util"]) / len(s["util"]), 1) if s["util"] else 0.0,
                 "memory_used_mib_max": s["mem_mib"]} for s in self._gpus.values()]
        return {"gpus": gpus, "other_processes": others, "note": self._gpu_note}

    def _summary(self, window: float) -> HostLoad:
        cpus = usable_cpus()
        loads = self._loads or ([os.getloadavg()] if hasattr(os, "getloadavg") else [])
        loadavg = tuple(round(x, 2) for x in loads[-1]) if loads else None
        load_max = round(max(x[0] for x in loads), 2) if loads else None
        if not self.available:
            return HostLoad(available=False, cpus=cpus, window_s=round(window, 3),
                            note=f"no {self.root} on this platform ({sys.platform}): other "
                                 f"processes' CPU use was not sampled",
                            loadavg=loadavg, loadavg_1m_max=load_max)
        span = max(window, 1e-9) * self.hz
        used: dict[str, float] = {"own": 0.0, "server": 0.0, "co_tenant": 0.0, "other": 0.0}
        others = []
        for key, (stat, kind) in self._last.items():
            ticks = stat.ticks - self._first[key]
            used[kind] += ticks
            if kind == "other" and ticks >= 0.01 * span:  # a hundredth of a core or more
                others.append(HostProcess(stat.pid, stat.comm, round(ticks / span, 3)))
        others.sort(key=lambda p: -p.cores)
        busy = steal = None
        if self._cpu0 and self._cpu and self._cpu.total > self._cpu0.total:
            busy = round((self._cpu.busy - self._cpu0.busy) / span, 3)
            steal = round((self._cpu.steal - self._cpu0.steal) / (self._cpu.total - self._cpu0.total), 4)
        return HostLoad(
            cpus=cpus, window_s=round(window, 3), interval_s=self.interval_s, samples=self._samples,
            other_cpu_cores=round(used["other"] / span, 3), other_cpu_cores_peak=round(self._peak, 3),
            own_cpu_cores=round(used["own"] / span, 3), server_cpu_cores=round(used["server"] / span, 3),
            co_tenant_cpu_cores=round(used["co_tenant"] / span, 3),
            server_separated=self.server is not None, host_busy_cores=busy, steal_fraction=steal,
            loadavg=loadavg, loadavg_1m_max=load_max, top=tuple(others[:TOP]),
            gpu=self._gpu_summary(), sampler_cpu_s=round(self._cost_s, 4),
            note="" if self.server is not None else "the attached server's processes are not "
                 "visible here: its CPU cannot be told from others'")


PLACED_MARK = b"SPECBENCH_PLACED="  # in the environment of a server placed by :mod:`.placement`


def placed_marker(environ: Path) -> bytes | None:
    """The ``SPECBENCH_PLACED`` value in a process's ``/proc/[pid]/environ`` (its run and config,
    set by :mod:`.placement`), or None when the process was not placed, is gone or is another
    user's."""
    try:
        entries = environ.read_bytes().split(b"\0")
    except OSError:
        return None
    return next((v[len(PLACED_MARK):] for v in entries if v.startswith(PLACED_MARK)), None)


def sample_host(seconds: float, *, interval_s: float = 0.25, **kwargs: Any) -> HostLoad:
    """The host's load over the next ``seconds`` (preflight: no server yet)."""
    sampler = HostSampler(interval_s=interval_s, **kwargs).start()
    time.sleep(seconds)
    return sampler.stop()


def _nvidia_smi(argv: list[str]) -> tuple[list[list[str]] | None, float]:
    """nvidia-smi's CSV rows (None when it fails) and the CPU seconds it used (its rusage)."""
    try:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                stdin=subprocess.DEVNULL)
    except OSError:
        return None, 0.0
    timer = threading.Timer(_GPU_TIMEOUT_S, proc.kill)
    timer.start()
    assert proc.stdout is not None
    with proc.stdout:
        out = proc.stdout.read().decode("utf-8", "replace")
    timer.cancel()
    try:
        _, status, usage = os.wait4(proc.pid, 0)
    except ChildProcessError:
        proc.wait()
        return None, 0.0
    proc.returncode = os.waitstatus_to_exitcode(status)
    cost = usage.ru_utime + usage.ru_stime
    if proc.returncode != 0:
        return None, cost
    return [[c.strip() for c in line.split(",")] for line in out.splitlines() if line.strip()], cost


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return 0.0  # "[N/A]", "[Not Supported]"
