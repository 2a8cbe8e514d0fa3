"""The cell's GPUs in its telemetry, and the other processes on them (which
``rules/busy_gpu.py`` judges), on read.

The telemetry a cell stores (``facts.host.gpu``, :mod:`~specbench_lib.host.gpus`), read as
each of the cell's GPUs' samples (:func:`gpu_series`; the energy, power and memory figures of
them: the ``gpu`` metric family, :mod:`~specbench_lib.analysis.metricfamilies.gpu`), and which
other processes used the cell's GPUs (:func:`foreign_processes`). The cell's GPUs: those its
server's processes were on (nvidia-smi's process list), else those its
``CUDA_VISIBLE_DEVICES`` named; with neither (a CPU engine on a GPU host), none.
"""

from __future__ import annotations

from typing import Any

from ..model.hostfacts import HostLoad


def _theirs(gpu: dict[str, Any]) -> set[int] | None:
    """The GPUs that are the cell's: those its server's processes were on; else, when the
    server's ``CUDA_VISIBLE_DEVICES`` named them, every one sampled (None); else none (every
    GPU was sampled and the server was on none of them: a CPU engine on a GPU host)."""
    used = {int(p["gpu"]) for p in gpu.get("processes") or () if p.get("kind") == "server"}
    if used:
        return used
    return None if gpu.get("scope", "CUDA_VISIBLE_DEVICES") != "all" else set()


def gpu_series(gpu: dict[str, Any]) -> dict[int, list[tuple[float, ...]]]:
    """Each of the cell's GPUs' samples in time order: (t_s, power_w, memory_mib, util_pct)."""
    fields = list(gpu.get("fields") or ())
    if not fields or "power_w" not in fields:
        return {}
    theirs = _theirs(gpu)
    at = {name: fields.index(name) for name in fields}
    by_gpu: dict[int, list[tuple[float, ...]]] = {}
    for row in gpu.get("samples") or ():
        by_gpu.setdefault(int(row[at["index"]]), []).append(
            (float(row[at["t_s"]]), float(row[at["power_w"]]), float(row[at["memory_mib"]]),
             float(row[at["util_pct"]])))
    return {k: sorted(v) for k, v in by_gpu.items() if theirs is None or k in theirs}


def foreign_processes(host: HostLoad | None, max_other_gpu_mib: float) -> list[dict[str, Any]]:
    """The compute processes on the cell's GPUs that are neither this sweep's, its server's nor
    a placed co-tenant's, holding more than ``max_other_gpu_mib`` MiB."""
    gpu = (host.gpu if host is not None else None) or {}
    procs = gpu.get("processes")
    if procs is None:  # older cells: only the other processes, on any GPU
        return []
    theirs = _theirs(gpu)
    return [p for p in procs if p.get("kind") == "other"
            and (theirs is None or int(p.get("gpu") or -1) in theirs)
            and float(p.get("used_mib") or 0) > max_other_gpu_mib]


__all__ = ["foreign_processes", "gpu_series"]
