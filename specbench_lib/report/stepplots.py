"""The speedup split as a figure: acceptance (tokens per step) against step cost relative to
``auto``, with curves of equal decoding speedup, one point per drafting config and load level
(:mod:`~specbench_lib.analysis.stepcost`, read from the panel claims' rows, ``result.best()``,
the numbers every page states)."""

from __future__ import annotations

from typing import Any

from ..runs.results import RunResult
from .figurekit import legend, palette, title

SPEEDUPS = (0.75, 1.0, 1.25, 1.5, 2.0)  # the curves y = x / S
_FACET = ["workload", "context", "output_tokens", "temperature"]


def step_points(result: RunResult) -> Any:
    """One row per drafting config × panel with a split: the panel's keys, the config, τ, the
    step cost and the decoding speedup with their intervals, and the counters behind them."""
    import pandas as pd

    rows = []
    for row in result.best().to_dict("records"):
        docs = row.get("split")
        if not isinstance(docs, dict):
            continue
        for config, entry in docs.items():
            rows.append({**{k: row[k] for k in (*_FACET, "concurrency", "load")},
                         "config": config, **entry})
    return pd.DataFrame(rows)


def _auto_speed(result: RunResult, facet: tuple[Any, ...]) -> str:
    """"auto decodes a request at 63.9 tok/s (c1)": the machine's speed in the facet."""
    table = result.table()
    mine = table[(table["method"] == "auto") & (table["load"] == "")]
    for key, value in zip(_FACET, facet, strict=True):
        mine = mine[mine[key] == value]
    parts = [f"{row['request_decode_tok_s']:.1f} tok/s (c{int(row['concurrency'])})"
             for _, row in mine.sort_values("concurrency").iterrows()
             if row.get("request_decode_tok_s") == row.get("request_decode_tok_s")]
    return f"auto decodes a request at {', '.join(parts)}" if parts else ""


def step_cost_figure(result: RunResult) -> Any:
    """Per workload × context (× output length × temperature): each drafting config's tokens per
    step (x) against its step cost relative to ``auto`` (y), at each concurrency (labelled, a
    config's points joined in order of load), with the intervals as error bars; grey curves of
    equal decoding speedup y = x / S, so a point above the 1× curve decodes slower than
    ``auto``, and the budget and load at which a drafter stops paying read off."""
    import matplotlib.pyplot as plt

    points = step_points(result)
    points = points[points["load"] == ""] if len(points) else points  # closed loop
    facets = sorted({tuple(v) for v in points[_FACET].itertuples(index=False, name=None)}
                    ) if len(points) else [("", 0, 0, 0.0)]
    fig, axes = plt.subplots(1, len(facets), squeeze=False, figsize=(5.2 * len(facets), 4.6))
    configs = list(dict.fromkeys(points["config"])) if len(points) else []
    colours = dict(zip(configs, palette(len(configs)), strict=True))
    for ax, facet in zip(axes[0], facets, strict=True):
        mine = points
        for key, value in zip(_FACET, facet, strict=True):
            mine = mine[mine[key] == value] if len(mine) else mine
        _draw(ax, mine, colours)
        speed = _auto_speed(result, facet) if len(mine) else "no split: no drafting config ok"
        ax.set_title(f"{facet[0]} · context {facet[1]} · {facet[2]} output tokens"
                     + (f" · T {facet[3]:g}" if facet[3] else "") + (f"\n{speed}" if speed else ""),
                     fontsize=9)
    bottom = legend(fig, axes)
    fig.suptitle(title(result, "decoding speedup = tokens per step / step cost"), fontsize=10)
    fig.tight_layout(rect=(0, bottom, 1, 1))
    return fig


def _draw(ax: Any, points: Any, colours: dict[str, Any]) -> None:
    import numpy as np

    taus = [v for c in ("tokens_per_step_lo", "tokens_per_step_hi", "tokens_per_step")
            for v in (points[c] if len(points) else []) if v == v and v is not None]
    costs = [v for c in ("step_cost_lo", "step_cost_hi", "step_cost")
             for v in (points[c] if len(points) else []) if v == v and v is not None]
    x_hi = max([1.6, *taus]) * 1.1
    y_hi = max([1.6, *costs]) * 1.1
    x = np.linspace(0.9, x_hi, 50)
    for s in SPEEDUPS:
        ax.plot(x, x / s, color="0.55" if s != 1 else "0.25", linewidth=0.8 if s != 1 else 1.4,
                linestyle="--" if s != 1 else "-",
                label="equal decoding speedup y = x / S" if s != 1 else "break-even: 1× (y = x)")
        y_end = x_hi / s
        at = (x_hi, y_end) if y_end <= y_hi else (y_hi * s, y_hi)
        ax.annotate(f"{s:g}×", at, fontsize=7, color="0.35", ha="right", va="bottom")
    ax.fill_between(x, x, y_hi, color="red", alpha=0.05, linewidth=0,
                    label="decodes slower than auto (above 1×)")
    for config, group in points.groupby("config", sort=False) if len(points) else ():
        group = group.sort_values("concurrency")
        tau, cost = group["tokens_per_step"].astype(float), group["step_cost"].astype(float)
        xerr = _errors(group, "tokens_per_step")
        yerr = _errors(group, "step_cost")
        cell = (group["counters"] == "cell").any()
        ax.errorbar(tau, cost, xerr=xerr, yerr=yerr, marker="o", capsize=3,
                    color=colours[config], linestyle="-" if len(group) > 1 else "none",
                    markerfacecolor="white" if cell else colours[config],
                    label=config + (" (cell counters)" if cell else ""))
        for _, row in group.iterrows():
            ax.annotate(f"c{int(row['concurrency'])}", (row["tokens_per_step"], row["step_cost"]),
                        fontsize=7, textcoords="offset points", xytext=(4, 4))
    ax.set_xlim(0.9, x_hi)
    ax.set_ylim(0.5, y_hi)
    ax.grid(alpha=0.3)
    ax.set_xlabel("tokens per step τ (decode phase; auto: 1)")
    ax.set_ylabel("step cost relative to auto (s / s_auto)")


def _errors(group: Any, name: str) -> Any:
    """The 95 % (simultaneous) interval of ``name`` as error bar lengths (0 where none)."""
    value = group[name].astype(float)
    low = group[f"{name}_lo"].astype(float).fillna(value)
    high = group[f"{name}_hi"].astype(float).fillna(value)
    return [(value - low).clip(lower=0), (high - value).clip(lower=0)]
