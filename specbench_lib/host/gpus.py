"""What the GPUs did while a cell was measured: ``nvidia-smi`` samples of the cell's GPUs.

A :class:`GpuWatch` belongs to a :class:`~.load.HostSampler`, whose thread calls
:meth:`GpuWatch.sample` at the window's start, every ``interval_s`` and at its end. Each sample
reads ``nvidia-smi --query-gpu=index,uuid,utilization.gpu,memory.used,power.draw,
temperature.gpu,clocks.sm --format=csv,noheader,nounits`` (one row a GPU; only the cell's GPUs
are kept: its server's ``CUDA_VISIBLE_DEVICES``; every GPU when unset, ``scope`` ``all``, and
the reading keeps those the server's processes are on) and the compute
processes (``--query-compute-apps=pid,gpu_uuid,process_name,used_memory``). Its cost is bounded
as the host sampler's is: the interval grows so that nvidia-smi's own CPU time stays under
:data:`MAX_SHARE` of a core. Without ``nvidia-smi`` (no GPU) nothing is sampled and the summary
is None: nothing is claimed. What is derived from the samples (energy per token, mean power,
peak memory, ``busy_gpu``) is computed on read (:mod:`~specbench_lib.analysis.energy`).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Sequence
from typing import Any

from .sources import csv_number, nvidia_smi_csv

FIELDS = ("index", "uuid", "utilization.gpu", "memory.used", "power.draw", "temperature.gpu",
          "clocks.sm")
SAMPLE_FIELDS = ("t_s", "index", "util_pct", "memory_mib", "power_w", "temp_c", "sm_mhz")
APP_FIELDS = ("pid", "gpu_uuid", "process_name", "used_memory")
INTERVAL_S = 1.0  # the shortest interval between samples
MAX_SHARE = 0.05  # of a core, the most nvidia-smi may cost over an interval (it then grows)
MAX_SAMPLES = 3600  # per cell: an hour at 1 s (a longer cell is sampled at the same pace)


def visible_gpus(environ: dict[str, str] | None = None) -> tuple[str, ...] | None:
    """The GPUs a server started from this process sees: ``CUDA_VISIBLE_DEVICES`` (indices or
    UUIDs; a placed task's is Ray's), None when unset (every GPU)."""
    value = (os.environ if environ is None else environ).get("CUDA_VISIBLE_DEVICES")
    if value is None:
        return None
    return tuple(v.strip() for v in value.split(",") if v.strip())


class GpuWatch:
    """Samples of the cell's GPUs and the compute processes on them (see the module)."""

    def __init__(self, *, gpus: Sequence[str] | None = None, binary: str | None = "nvidia-smi",
                 clock: Callable[[], float]) -> None:
        self.binary = shutil.which(binary) if binary else None
        self.gpus = None if gpus is None else tuple(gpus)
        if self.gpus == ():  # a server that sees no GPU: nothing of it is on one
            self.binary = None
        self.clock = clock
        self.interval_s = INTERVAL_S
        self.cost_s = 0.0
        self.note = ""
        self._began: float | None = None
        self.next_at = 0.0
        self.samples: list[list[float]] = []
        self._uuids: dict[str, str] = {}  # uuid → index, of the cell's GPUs
        self.apps: dict[int, dict[str, Any]] = {}

    @property
    def active(self) -> bool:
        return self.binary is not None

    def due(self) -> bool:
        return self.active and self.clock() >= self.next_at

    def sample(self) -> None:
        """One read of every GPU and compute process (a failed one stops sampling: noted)."""
        if self.binary is None:
            return
        now = self.clock()
        if self._began is None:
            self._began = now
        rows, cost = nvidia_smi_csv([self.binary, f"--query-gpu={','.join(FIELDS)}",
                                     "--format=csv,noheader,nounits"])
        apps, app_cost = nvidia_smi_csv([self.binary, f"--query-compute-apps={','.join(APP_FIELDS)}",
                                         "--format=csv,noheader,nounits"])
        self.cost_s += cost + app_cost
        if rows is None or apps is None:
            self.note, self.binary = "nvidia-smi did not answer", None
            return
        for row in rows:
            if len(row) >= len(FIELDS) and self._mine(row[0], row[1]):
                self._uuids[row[1]] = row[0]
                if len(self.samples) < MAX_SAMPLES:
                    self.samples.append([round(now - self._began, 3), int(csv_number(row[0])),
                                         *(csv_number(v) for v in row[2:7])])
        for app in apps:
            if len(app) >= len(APP_FIELDS) and app[0].isdigit() and app[1] in self._uuids:
                pid = int(app[0])
                seen = self.apps.get(pid, {}).get("used_mib", 0.0)
                self.apps[pid] = {"pid": pid, "gpu": self._uuids[app[1]], "name": app[2],
                                  "used_mib": max(seen, csv_number(app[3]))}
        # bounded: nvidia-smi's CPU over the interval under MAX_SHARE of a core
        self.interval_s = max(INTERVAL_S, (cost + app_cost) / MAX_SHARE)
        self.next_at = self.clock() + self.interval_s

    def _mine(self, index: str, uuid: str) -> bool:
        return self.gpus is None or index in self.gpus or uuid in self.gpus

    def summary(self, kinds: dict[int, str], window_s: float) -> dict[str, Any] | None:
        """The stored telemetry: the samples (``SAMPLE_FIELDS``), the cell's GPUs, each compute
        process on them with its kind (``kinds``: pid → own / server / co_tenant / other, from
        the host sampler's process table), and the per-GPU figures older readers show."""
        if not self.samples and not self.note:
            return None
        by_gpu: dict[int, list[list[float]]] = {}
        for s in self.samples:
            by_gpu.setdefault(int(s[1]), []).append(s)
        gpus = [{"index": str(i), "util_max": max(r[2] for r in rows),
                 "util_mean": round(sum(r[2] for r in rows) / len(rows), 1),
                 "memory_used_mib_max": max(r[3] for r in rows)} for i, rows in by_gpu.items()]
        procs = [{**app, "kind": kinds.get(pid, "other"), "seen_here": pid in kinds}
                 for pid, app in sorted(self.apps.items())]
        return {"gpus": gpus, "other_processes": [p for p in procs if p["kind"] == "other"],
                     "processes": procs, "note": self.note, "fields": list(SAMPLE_FIELDS),
                     "samples": self.samples, "visible": sorted(self._uuids.values()),
                     "scope": "all" if self.gpus is None else "CUDA_VISIBLE_DEVICES",
                     "window_s": round(window_s, 3), "interval_s": round(self.interval_s, 3),
                     "cost_s": round(self.cost_s, 4)}


__all__ = ["APP_FIELDS", "FIELDS", "SAMPLE_FIELDS", "GpuWatch", "visible_gpus"]
