"""The host as evidence: what else used the CPUs (and GPUs) while a cell's requests ran.

A :class:`HostSampler` reads ``/proc`` when it starts, every ``interval_s`` from a background
thread, and when it stops: per process, the CPU time it used (``utime + stime`` of
``/proc/[pid]/stat``, all its threads) over the wall time, in cores. Each process is counted as
this sweep's own (its process, its threads and its child processes), the server's (its process
group or session, led by the server's pid), a co-tenant's (the group of another config's server
placed on this node, marked ``SPECBENCH_PLACED`` in its environment) or another's; other
processes are what makes a host busy (:class:`HostLoad`, stored in a cell's facts; the
``busy_host`` rule in :mod:`~specbench_lib.analysis.validate`).
Also read: the load average, the host's busy and steal time (``/proc/stat``) and, where
``nvidia-smi`` exists, the GPUs' utilisation and compute processes. Without ``/proc`` (macOS)
the load says it was not sampled; sampling never fails a sweep.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Callable, Collection, Iterable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ..model.hostfacts import HostLoad, HostProcess
from .gpus import GpuWatch, visible_gpus
from .sources import CpuTimes, ProcStat, listener_pids, parse_stat, placed_marker, usable_cpus

MAX_SHARE = 0.01  # of a core, the most the background samples may cost (the interval grows)
TOP = 5  # other processes named in a load
_LOOPBACK = ("localhost", "::1", "0.0.0.0")  # and 127.*


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
    port = url.port or (443 if url.scheme == "https" else 80)
    found = listener_pids(port)
    return tuple(sorted(found)) if found else None


class HostSampler:
    """Samples the host from :meth:`start` to :meth:`stop` (a context manager too).

    Args:
        server: pids whose process groups (and sessions they lead) are the server's; None when
            the server is on this host but its processes are unknown.
        interval_s: seconds between background reads of ``/proc`` (longer where a read costs
            more than :data:`MAX_SHARE` of a core over it: a host of thousands of processes).
        own: this sweep's pid (default: this process); its child processes are its own too.
        watch: the pids to read at each sample, instead of every pid (tests: a controlled set).
        root: the ``/proc`` to read.
        clock: seconds, monotonic.
        gpu: query ``nvidia-smi`` when it is on the PATH (:mod:`.gpus`: the GPUs' telemetry).
        gpus: the GPUs the server sees (its ``CUDA_VISIBLE_DEVICES``; None: every GPU).
    """

    def __init__(self, *, server: Collection[int] | None = (), interval_s: float = 0.5,
                 own: int | None = None, watch: Callable[[], Iterable[int]] | None = None,
                 root: Path | str = "/proc", clock: Callable[[], float] = time.monotonic,
                 gpu: bool = True, gpus: Collection[str] | None = None) -> None:
        self.server = None if server is None else frozenset(server)
        self.interval_s, self.own, self.watch = interval_s, own or os.getpid(), watch
        self.root, self.clock = Path(root), clock
        self.hz = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
        self.available = (self.root / "self" / "stat").is_file() or (self.root / "stat").is_file()
        self.gpu = GpuWatch(gpus=None if gpus is None else tuple(gpus),
                            binary="nvidia-smi" if gpu else None, clock=clock)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._first: dict[tuple[int, int], int] = {}  # (pid, start) → ticks when first seen
        self._last: dict[tuple[int, int], tuple[ProcStat, str]] = {}  # → its last stat, class
        self._groups: set[int] = set()
        self._placed: dict[int, bool] = {}  # process group → led by another placed server
        self._sessions: set[int] = set()
        self._cost_s = 0.0
        self._samples = 0
        self._began = self._prev_at = 0.0
        self._boot0: float | None = None
        self._prev: dict[tuple[int, int], int] = {}
        self._peak = 0.0
        self._cpu0: CpuTimes | None = None
        self._cpu: CpuTimes | None = None
        self._loads: list[tuple[float, float, float]] = []
        self.load: HostLoad | None = None  # what stop() found (set on leaving a with block)

    @classmethod
    def of_server(cls, pid: int | None, base_url: str, interval_s: float) -> HostSampler:
        """The sampler of a cell of the server ``pid`` (None: attached) at ``base_url``: its
        processes (:func:`server_pids`) and the GPUs it sees (this process's
        ``CUDA_VISIBLE_DEVICES``, which it inherits; none for a server on another host)."""
        pids = server_pids(pid, base_url)
        return cls(server=pids, interval_s=interval_s, gpus=() if pids == () else visible_gpus())

    def start(self) -> HostSampler:
        self._began = self._prev_at = self.clock()
        if self.available:
            self._boot0 = self._uptime_ticks()
            self._sample(first=True)
            self.gpu.sample()
            self._thread = threading.Thread(target=self._run, name="specbench-hostload",
                                            daemon=True)
            self._thread.start()
        return self

    def stop(self) -> HostLoad:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=max(5.0, 2 * self.interval_s))
            self._sample()
            self.gpu.sample()
        return self._summary(self.clock() - self._began)

    def __enter__(self) -> HostSampler:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        if not self._stop.is_set():
            self.load = self.stop()

    def _run(self) -> None:
        began = time.thread_time()
        next_host = self.clock() + self.interval_s
        while True:
            if self.gpu.due():
                self.gpu.sample()
            until = min(next_host, self.gpu.next_at) if self.gpu.active else next_host
            if self._stop.wait(max(0.0, until - self.clock())):
                break
            if self.clock() < next_host:
                continue
            cost = time.thread_time()
            self._sample()
            # a host of many processes is sampled less often, not at more than MAX_SHARE of a core
            next_host = self.clock() + max(self.interval_s,
                                           (time.thread_time() - cost) / MAX_SHARE)
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
        """Each process's stat: one open, read and close each (no ``Path`` or buffered file,
        which tripled a sample's cost)."""
        found, root = [], f"{self.root}{os.sep}"
        for pid in self._pids():
            try:
                fd = os.open(f"{root}{pid}{os.sep}stat", os.O_RDONLY)
                try:
                    raw = os.read(fd, 4096)  # a stat line is a few hundred bytes
                finally:
                    os.close(fd)
                found.append(parse_stat(raw.decode("utf-8", "replace")))
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

    def _gpu_summary(self, window: float) -> dict[str, Any] | None:
        self._cost_s += self.gpu.cost_s  # nvidia-smi's own CPU, counted with the sampler's
        self.gpu.cost_s = 0.0
        return self.gpu.summary({stat.pid: kind for stat, kind in self._last.values()}, window)

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
            gpu=self._gpu_summary(window), sampler_cpu_s=round(self._cost_s, 4),
            note="" if self.server is not None else "the attached server's processes are not "
                 "visible here: its CPU cannot be told from others'")


def sample_host(seconds: float, *, interval_s: float = 0.25, **kwargs: Any) -> HostLoad:
    """The host's load over the next ``seconds`` (preflight: no server yet)."""
    sampler = HostSampler(interval_s=interval_s, **kwargs).start()
    time.sleep(seconds)
    return sampler.stop()
