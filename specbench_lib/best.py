"""The best-config statement: per workload × context × concurrency, the fastest ok config, its
speedup over ``auto`` with its interval, and the configs the data cannot tell from it.

A config is *indistinguishable* from the best when the 95 % bootstrap interval of the ratio
best / config holds 1 (the replicates are the table's, see :mod:`.intervals`). The statement
carries the flags that limit it: an unstable row (CV across repeats, or a failed repeat), greedy
outputs that differ from ``auto``'s (``lossless``: the fraction identical), and no ok baseline.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

from .display import Rendered, frame_table, html_text
from .intervals import group_replicates, interval, key_value, ok_groups, requests_n
from .records import CellRecord

PANEL = ["workload", "context", "concurrency"]
BEST_COLUMNS = [*PANEL, "best", "speedup", "speedup_lo", "speedup_hi", "half_width_pct",
                "indistinguishable", "unstable", "lossless", "repeats_n", "requests_n",
                "statement"]


def best_configs(cells: Sequence[CellRecord], table: Any, group: list[str]) -> Any:
    """One row per panel of ``table`` (:func:`~.metrics.results_table` of ``cells``)."""
    import pandas as pd

    groups = ok_groups(cells, group)
    replicates = group_replicates(groups)
    rows = []
    for panel, rows_of in table.groupby(PANEL, sort=False):
        ranked = rows_of.sort_values("output_tok_s", ascending=False)
        best = ranked.iloc[0]
        key = tuple(key_value(best[g]) for g in group)
        mine = replicates.get(key)
        tied = []
        for _, other in ranked.iloc[1:].iterrows():
            them = tuple(key_value(other[g]) for g in group)
            theirs = replicates.get(them)
            low, _ = interval(mine / theirs if mine is not None and theirs is not None else None,
                              min(requests_n(groups.get(key, ())), requests_n(groups.get(them, ()))))
            if not low > 1:  # NaN (no spread to tell them apart) counts as indistinguishable
                tied.append(str(other["config"]))
        speedup, low, high = (float(best[k]) for k in ("speedup", "speedup_lo", "speedup_hi"))
        half = (100 * (high - low) / 2 / speedup if best["method"] != "auto" and speedup == speedup
                and speedup else float("nan"))  # auto against itself has no interval to speak of
        lossless = best.get("lossless_identical")
        row = {**dict(zip(PANEL, panel, strict=True)), "best": str(best["config"]),
               "speedup": speedup, "speedup_lo": low, "speedup_hi": high,
               "half_width_pct": half, "indistinguishable": ", ".join(tied),
               "unstable": bool(best["unstable"]),
               "lossless": None if lossless is None or lossless != lossless else float(lossless),
               "repeats_n": int(best["repeats_n"]), "requests_n": int(best["requests_n"])}
        rows.append({**row, "statement": _statement(row, str(best["method"]))})
    return pd.DataFrame(rows, columns=BEST_COLUMNS)


def _statement(row: dict[str, Any], method: str) -> str:
    where = f"{row['workload']}/ctx{row['context']}/c{row['concurrency']}"
    n = f"n={row['requests_n']} requests, {row['repeats_n']} repeat(s)"
    tied = f"; indistinguishable from it: {row['indistinguishable']}" if row["indistinguishable"] \
        else "; every other config is slower beyond its interval"
    if method == "auto":
        text = f"{where}: no config beats auto ({n}){tied}"
    elif row["speedup"] != row["speedup"]:
        text = f"{where}: fastest {row['best']}, no ok auto baseline to compare with ({n}){tied}"
    else:
        text = (f"{where}: best {row['best']}, {row['speedup']:.2f}x "
                f"[{row['speedup_lo']:.2f}, {row['speedup_hi']:.2f}] vs auto "
                f"(±{row['half_width_pct']:.1f} %, {n}){tied}")
    same = row["lossless"]
    flags = [f for f, on in (("UNSTABLE", row["unstable"]),
                             (f"{100 * (1 - (same or 0)):.0f} % of outputs differ from auto's",
                              same is not None and same < 1)) if on]
    return text + (f" [{', '.join(flags)}]" if flags else "")


def crossovers(table: Any) -> Any:
    """Per speculative config × workload × context measured at several concurrencies: where it
    beats ``auto`` (speedup interval above 1) and where it loses (below 1), as a statement such
    as "ngram-b8 code/ctx256: beats auto up to concurrency 2; loses from concurrency 4"."""
    import pandas as pd

    keys = ["config", "workload", "context"]
    rows = []
    spec = table[table["method"] != "auto"]
    for key, group in spec.groupby(keys, sort=False):
        if group["concurrency"].nunique() < 2:
            continue
        group = group.sort_values("concurrency")
        levels = [int(c) for c in group["concurrency"]]
        beats = [int(c) for c, low in zip(group["concurrency"], group["speedup_lo"], strict=True)
                 if low > 1]
        loses = [int(c) for c, high in zip(group["concurrency"], group["speedup_hi"], strict=True)
                 if high < 1]
        where = f"{key[0]} {key[1]}/ctx{key[2]}"
        if beats and len(beats) == len(levels):
            text = f"{where}: beats auto at every concurrency measured ({levels[0]}-{levels[-1]})"
        elif loses and len(loses) == len(levels):
            text = f"{where}: loses to auto at every concurrency measured ({levels[0]}-{levels[-1]})"
        elif beats or loses:
            parts = ([f"beats auto up to concurrency {max(beats)}"] if beats else []) + (
                [f"loses from concurrency {min(loses)}"] if loses else [])
            rest = [c for c in levels if c not in beats and c not in loses]
            if rest:
                parts.append(f"indistinguishable from auto at {', '.join(map(str, rest))}")
            text = f"{where}: {'; '.join(parts)}"
        else:
            text = (f"{where}: indistinguishable from auto at every concurrency measured "
                    f"({levels[0]}-{levels[-1]})")
        rows.append({**dict(zip(keys, key, strict=True)), "beats_up_to": max(beats, default=None),
                     "loses_from": min(loses, default=None), "statement": text})
    return pd.DataFrame(rows, columns=[*keys, "beats_up_to", "loses_from", "statement"])


class Summary(Rendered):
    """What a phase notebook ends with: the best-config statements, where each speculative
    config stops beating ``auto`` as the load grows, then the table behind them (per config:
    throughput and speedup with their intervals, n, flags)."""

    def __init__(self, best: Any, table: Any, crossing: Any = None) -> None:
        self.best, self.table, self.crossing = best, table, crossing

    def _sections(self) -> list[tuple[str, list[str]]]:
        found = [("best config per workload / context / concurrency (95 % intervals)",
                  list(self.best["statement"]) or ["no ok cell"])]
        if self.crossing is not None and len(self.crossing):
            found.append(("speedup vs load (95 % intervals)", list(self.crossing["statement"])))
        return found

    def text(self) -> str:
        lines = [line for title, items in self._sections()
                 for line in (f"{title}:", *(f"  {s}" for s in items))]
        return "\n".join(lines) + "\n\n" + self.table.to_string(index=False)

    def html(self) -> str:
        parts = [html_text(title[0].upper() + title[1:], bold=True)
                 + "<ul>" + "".join(f"<li>{html.escape(s)}</li>" for s in items) + "</ul>"
                 for title, items in self._sections()]
        return "".join(parts) + frame_table(self.table)
