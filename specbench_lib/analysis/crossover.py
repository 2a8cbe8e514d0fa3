"""Where each speculative config stops paying as the load grows (its crossover): per config ×
workload × context × output length measured at several load points of one axis, the loads where
it beats ``auto`` and those where it loses, as a row and a statement (:func:`crossovers`).
"""

from __future__ import annotations

from typing import Any

from .metrics import PANEL, load_points


def crossovers(table: Any) -> Any:
    """Per speculative config × workload × context × output length measured at several load
    points of one axis: where it beats ``auto`` and where it loses, as a statement such as
    "ngram-b8 code/ctx256: beats auto up to concurrency 2; loses from concurrency 4".

    Closed loop (concurrency): by the speedup's interval (above 1 beats, below 1 loses). Open
    loop at fixed rates: every config is sent the same requests a second, so throughput is the
    rate; it pays where its E2E latency p50 is below ``auto``'s at that rate (point estimates,
    said so). A rate profile's points (each config at its own rates) are curves, not compared."""
    import pandas as pd

    keys = ["config", "workload", "context", "output_tokens", "temperature", "load_axis"]
    points = load_points(table)
    auto = points[points["method"] == "auto"].set_index(PANEL)["e2e_p50_s"]
    spec = points[(points["method"] != "auto") & ~points["load"].astype(str).str.startswith("p")]
    several = table["output_tokens"].nunique() > 1
    rows = []
    for key, group in spec.groupby(keys, sort=False):
        if group["load_value"].nunique() < 2:
            continue
        group = group.sort_values("load_value")
        axis = str(key[-1])
        if axis == "concurrency":
            beats = list(group.loc[group["speedup_lo"] > 1, "load_value"])
            loses = list(group.loc[group["speedup_hi"] < 1, "load_value"])
        else:
            base = group.set_index(PANEL).index.map(auto.to_dict().get)
            ratio = pd.Series(list(base), index=group.index, dtype=float) / group["e2e_p50_s"]
            beats = list(group.loc[ratio > 1, "load_value"])
            loses = list(group.loc[ratio < 1, "load_value"])
        levels = list(group["load_value"])
        # the crossover: the loads where it pays are the lowest ones, those where it loses the
        # highest (None where they are not: no single point where it stops paying)
        rows.append({**dict(zip(keys, key, strict=True)),
                     "beats_up_to": max(beats) if beats and beats == levels[:len(beats)] else None,
                     "loses_from": min(loses) if loses and loses == levels[-len(loses):] else None,
                     "statement": _crossing(key, several, axis, levels, beats, loses)})
    return pd.DataFrame(rows, columns=[*keys, "beats_up_to", "loses_from", "statement"])


def _crossing(key: tuple[Any, ...], several: bool, axis: str, levels: list[Any],
              beats: list[Any], loses: list[Any]) -> str:
    def at(value: Any) -> str:
        return f"concurrency {int(value)}" if axis == "concurrency" else f"{value:.3g} req/s"

    out = f"/o{int(key[3])}" if several else ""
    out += f"/T{key[4]:g}" if key[4] else ""  # sampled (greedy keeps its old statement)
    where_ = f"{key[0]} {key[1]}/ctx{key[2]}{out}"
    if axis == "concurrency":
        span, how = f"concurrency measured ({int(levels[0])}-{int(levels[-1])})", ""
    else:
        span = f"rate measured ({levels[0]:.3g}-{levels[-1]:.3g} req/s)"
        how = " (E2E p50 vs auto's at the same rate, point estimates)"
    if beats and len(beats) == len(levels):
        return f"{where_}: beats auto at every {span}{how}"
    if loses and len(loses) == len(levels):
        return f"{where_}: loses to auto at every {span}{how}"
    if not beats and not loses:
        return f"{where_}: indistinguishable from auto at every {span}{how}"
    parts = []  # "up to" and "from" only where they hold for every load below / above
    if beats:
        parts.append(f"beats auto up to {at(max(beats))}" if beats == levels[:len(beats)]
                     else f"beats auto at {', '.join(at(v) for v in beats)}")
    if loses:
        parts.append(f"loses from {at(min(loses))}" if loses == levels[-len(loses):]
                     else f"loses at {', '.join(at(v) for v in loses)}")
    rest = [at(v) for v in levels if v not in beats and v not in loses]
    if rest:
        parts.append(f"indistinguishable from auto at {', '.join(rest)}")
    return f"{where_}: {'; '.join(parts)}{how}"
