"""GPU energy per output token, mean power and peak memory, and the other processes on the
cell's GPUs (which ``rules/busy_gpu.py`` judges), on read.

Derived from the telemetry a cell stores (``facts.host.gpu``, :mod:`~specbench_lib.host.gpus`):
energy, energy per output token with its interval, mean power, peak memory, mean utilisation;
and which other processes used the cell's GPUs (:func:`foreign_processes`). A cell without samples (no
GPU, an older cell) has none of them.

The cell's GPUs: those its server's processes were on (nvidia-smi's process list), else those
its ``CUDA_VISIBLE_DEVICES`` named; with neither (a CPU engine on a GPU host), none.
Energy: per GPU, the power samples integrated over the cell's window by the trapezoid rule,
each end held flat to the window's edge (a sample is taken at the window's start and end), then
summed over the cell's GPUs. Energy per token: that over the cell's completion tokens. Its 95 %
interval: the mean power's (each GPU's sample mean ± 1.96 standard errors, the GPUs' errors
added in quadrature) times the window over the tokens; it says how steady the power was, not
how a repeat would differ (the table's repeats do that). No interval from fewer than 3 samples.
"""

from __future__ import annotations

import math
from typing import Any

from ..model.hostfacts import HostLoad
from ..model.metricdefs import columns

ENERGY_COLUMNS = columns("gpu")  # declared in model/metricdefs.py
Z95 = 1.96


def _theirs(gpu: dict[str, Any]) -> set[int] | None:
    """The GPUs that are the cell's: those its server's processes were on; else, when the
    server's ``CUDA_VISIBLE_DEVICES`` named them, every one sampled (None); else none (every
    GPU was sampled and the server was on none of them: a CPU engine on a GPU host)."""
    used = {int(p["gpu"]) for p in gpu.get("processes") or () if p.get("kind") == "server"}
    if used:
        return used
    return None if gpu.get("scope", "CUDA_VISIBLE_DEVICES") != "all" else set()


def _series(gpu: dict[str, Any]) -> dict[int, list[tuple[float, ...]]]:
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


def _energy(rows: list[tuple[float, ...]], window: float) -> float:
    """Joules of one GPU's power samples over ``[0, window]`` (trapezoids, ends held)."""
    joules = rows[0][1] * max(0.0, rows[0][0]) + rows[-1][1] * max(0.0, window - rows[-1][0])
    for (t0, p0, *_), (t1, p1, *_) in zip(rows, rows[1:], strict=False):
        joules += (p0 + p1) / 2 * (t1 - t0)
    return joules


def gpu_metrics(host: HostLoad | None, completion_tokens: int) -> dict[str, Any]:
    """The cell's GPU metrics (:data:`ENERGY_COLUMNS`), or {} when nothing was sampled."""
    gpu = host.gpu if host is not None else None
    series = _series(gpu or {})
    if not series or gpu is None:
        return {}
    window = float(gpu.get("window_s") or (host.window_s if host is not None else 0)
                   or max(r[0] for rows in series.values() for r in rows))
    energy = sum(_energy(rows, window) for rows in series.values())
    power = energy / window if window > 0 else sum(
        sum(r[1] for r in rows) / len(rows) for rows in series.values())
    out: dict[str, Any] = {
        "gpu_energy_j": round(energy, 3), "gpu_power_mean_w": round(power, 2),
        "gpu_memory_peak_mib": max(r[2] for rows in series.values() for r in rows),
        "gpu_util_mean_pct": round(sum(r[3] for rows in series.values() for r in rows)
                                   / sum(len(rows) for rows in series.values()), 1),
        "gpu_samples": sum(len(rows) for rows in series.values()),
        "gpu_j_per_token": round(energy / completion_tokens, 4) if completion_tokens else None,
        "gpu_j_per_token_lo": None, "gpu_j_per_token_hi": None}
    if completion_tokens and window > 0 and all(len(rows) >= 3 for rows in series.values()):
        se = math.sqrt(sum(_variance([r[1] for r in rows]) / len(rows) for rows in series.values()))
        half = Z95 * se * window / completion_tokens
        out["gpu_j_per_token_lo"] = round(max(0.0, energy / completion_tokens - half), 4)
        out["gpu_j_per_token_hi"] = round(energy / completion_tokens + half, 4)
    return out


def _variance(values: list[float]) -> float:
    mean = sum(values) / len(values)
    return sum((v - mean) ** 2 for v in values) / (len(values) - 1)


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


__all__ = ["ENERGY_COLUMNS", "foreign_processes", "gpu_metrics"]
