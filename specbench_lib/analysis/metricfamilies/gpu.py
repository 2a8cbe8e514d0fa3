"""GPU energy per output token, mean power and peak memory of the cell's GPUs, on read.

Derived from the telemetry a cell stores, each of the cell's GPUs' samples
(:func:`~specbench_lib.analysis.energy.gpu_series`): energy, energy per output token with its
interval, mean power, peak memory, mean utilisation. A cell without samples (no GPU, an older
cell) has none of them.

Energy: per GPU, the power samples integrated over the cell's window by the trapezoid rule,
each end held flat to the window's edge (a sample is taken at the window's start and end), then
summed over the cell's GPUs. Energy per token: that over the cell's completion tokens. Its 95 %
interval: the mean power's (each GPU's sample mean ± 1.96 standard errors, the GPUs' errors
added in quadrature) times the window over the tokens; it says how steady the power was, not
how a repeat would differ (the table's repeats do that). No interval from fewer than 3 samples.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from ...model.hostfacts import HostLoad
from ...model.records import CellRecord
from ..energy import gpu_series
from ..metric import Computed, Family, Metric

Z95 = 1.96


def _energy(rows: list[tuple[float, ...]], window: float) -> float:
    """Joules of one GPU's power samples over ``[0, window]`` (trapezoids, ends held)."""
    joules = rows[0][1] * max(0.0, rows[0][0]) + rows[-1][1] * max(0.0, window - rows[-1][0])
    for (t0, p0, *_), (t1, p1, *_) in zip(rows, rows[1:], strict=False):
        joules += (p0 + p1) / 2 * (t1 - t0)
    return joules


def gpu_metrics(host: HostLoad | None, completion_tokens: int) -> dict[str, Any]:
    """The cell's GPU metrics (this family's), or {} when nothing was sampled."""
    gpu = host.gpu if host is not None else None
    series = gpu_series(gpu or {})
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


def _stored(cell: CellRecord, metrics: Mapping[str, Any]) -> Computed:
    return gpu_metrics(cell.facts.host, int(metrics.get("completion_tokens") or 0))


FAMILY = Family(100, (
    Metric("gpu_energy_j", "J", "the cell's GPUs' power integrated over the window", "gpu"),
    Metric("gpu_j_per_token", "J/token", "GPU energy over completion tokens", "gpu",
           header="GPU J/token [95 %]", interval=True, lead=6, summary=13),
    Metric("gpu_j_per_token_lo", "J/token", "low end of its 95 % interval (the mean power's)",
           "gpu"),
    Metric("gpu_j_per_token_hi", "J/token", "high end of its 95 % interval", "gpu"),
    Metric("gpu_power_mean_w", "W", "mean power of the cell's GPUs", "gpu",
           header="GPU power (W)", form="{:.0f}", lead=7, summary=14),
    Metric("gpu_memory_peak_mib", "MiB", "peak memory of the cell's GPUs", "gpu",
           header="GPU memory peak (MiB)", form="{:.0f}", lead=8, summary=15),
    Metric("gpu_util_mean_pct", "%", "mean utilisation of the cell's GPUs", "gpu"),
    Metric("gpu_samples", "samples", "telemetry samples behind the GPU figures", "gpu"),
), stored=_stored)
