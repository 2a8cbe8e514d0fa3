"""What the host says about itself, read where it is kept: ``/proc`` (a process's stat, the
CPU table, listening sockets, a placed server's environment marker) and ``nvidia-smi``.

The readers :mod:`~.load`'s sampler and :mod:`~specbench_lib.servers.process`'s owner check share; each
returns None (or nothing) when its source is missing or unreadable, never an error.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path

from .cpuset import host_cpus

_GPU_TIMEOUT_S = 5.0


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


def usable_cpus() -> int:
    """The number of CPUs this process may run on (its affinity: a cpuset or ``taskset``, not
    the measuring thread's while it is pinned: :mod:`~specbench_lib.host.cpuset`), else all."""
    return len(host_cpus())


def listener_pids(port: int) -> set[int] | None:
    """The pids holding a listening TCP socket on ``port`` (Linux ``/proc``); None if unknowable."""
    inodes: set[str] = set()
    try:
        for table in ("/proc/net/tcp", "/proc/net/tcp6"):
            with contextlib.suppress(FileNotFoundError):
                for row in Path(table).read_text().splitlines()[1:]:
                    cols = row.split()
                    if len(cols) > 9 and cols[3] == "0A" and int(cols[1].rsplit(":", 1)[1], 16) == port:
                        inodes.add(cols[9])
    except OSError:
        return None
    if not inodes:
        return None
    wanted = {f"socket:[{inode}]" for inode in inodes}
    pids: set[int] = set()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            for fd in (proc / "fd").iterdir():
                if os.readlink(fd) in wanted:
                    pids.add(int(proc.name))
                    break
    return pids or None


# in the environment of a server placed by :mod:`~specbench_lib.sweep.placement`
PLACED_MARK = b"SPECBENCH_PLACED="


def placed_marker(environ: Path) -> bytes | None:
    """The ``SPECBENCH_PLACED`` value in a process's ``/proc/[pid]/environ`` (its run and config,
    set by :mod:`~specbench_lib.sweep.placement`), or None when the process was not placed, is gone or is
    another user's."""
    try:
        entries = environ.read_bytes().split(b"\0")
    except OSError:
        return None
    return next((v[len(PLACED_MARK):] for v in entries if v.startswith(PLACED_MARK)), None)


def nvidia_smi_csv(argv: list[str]) -> tuple[list[list[str]] | None, float]:
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


def csv_number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return 0.0  # "[N/A]", "[Not Supported]"
