"""Latencies of a cell's requests, each with its mean and percentiles: TTFT, TPOT, ITL (per
token: a delivery's gap shared by its k tokens), E2E and the gap between deliveries."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import replace

from ..latency import quantile, token_itls
from ..metric import Computed, Family, Metric, Requests

STATS = {"mean": "mean", "p50": "median", "p90": "90th percentile", "p99": "99th percentile"}
_LATENCY = {"ttft": "TTFT: request sent → first token received",
            "tpot": "TPOT: a request's (last token − first token) / (tokens − 1)",
            "itl": "ITL: per token, a delivery's gap shared by its k tokens",
            "e2e": "E2E: request sent → last token received",
            "delivery_gap": "delivery gap: the time between a request's consecutive deliveries"}


def declared(names: Mapping[str, str], infix: str, kind: str,
             marks: Mapping[str, Mapping[str, int]] | None = None) -> tuple[Metric, ...]:
    """A latency's statistics, shown in milliseconds (``TTFT mean (ms)``); ``marks`` a
    metric's ``lead`` / ``diff`` / ``summary`` place by name."""
    found = [Metric(f"{m}{infix}_{s}_s", "s", f"{what}; {STATS[s]} over the cell's requests",
                    kind, header=f"{what.split(':')[0]}{infix.replace('_', ' ')} {s} (ms)",
                    form="{:.0f}", scale=1000.0)
             for m, what in names.items() for s in STATS]
    marks = marks or {}
    return tuple(replace(m, **{k: marks.get(m.name, {}).get(k, 0)  # type: ignore[arg-type]
                               for k in ("lead", "diff", "summary")}) for m in found)


def statistics_of(name: str, values: Sequence[float]) -> Computed:
    """``values``' mean and percentiles as ``<name>_mean_s``, ``<name>_p50_s``, …"""
    found: Computed = {f"{name}_mean_s": statistics.fmean(values) if values else None}
    for q in (50, 90, 99):
        found[f"{name}_p{q}_s"] = quantile(values, q / 100)
    return found


def _latencies(cell: Requests) -> Computed:
    series: dict[str, list[float]] = {name: [] for name in _LATENCY}
    for r, found in zip(cell.measured, cell.deliveries, strict=True):
        times = r.token_times
        if r.ttft is not None:
            series["ttft"].append(r.ttft)
        series["e2e"].append(r.e2e)
        if len(times) >= 2 and times[-1] > times[0]:
            series["tpot"].append((times[-1] - times[0]) / (len(times) - 1))
        series["delivery_gap"].extend(b - a for (a, _), (b, _) in zip(found, found[1:],
                                                                        strict=False))
        series["itl"].extend(token_itls(found))
    return {k: v for name, values in series.items() for k, v in statistics_of(name, values).items()}


FAMILY = Family(20, declared(_LATENCY, "", "cell", {"ttft_mean_s": {"lead": 5, "summary": 12},
                                                    "ttft_p50_s": {"diff": 3},
                                                    "itl_p50_s": {"diff": 4}}),
                requests=_latencies)
