"""The figures of the spread across prompts (:mod:`~specbench_lib.analysis.promptspread`).

:func:`speedup_per_prompt`: one panel per workload × context × concurrency (× load point,
output length, temperature, turn), each config against the panel's baseline as a box of its
per-prompt speedups (the box its quartiles, the whiskers p10-p90: the answer's phrase) with
every prompt a point, coloured by category, on a log axis with a line at 1×.
:func:`speedup_vs_answer_length`: the same speedups against the prompt's answer length (the
baseline's completion tokens), one colour and marker per config. Each panel's title states the
machine's speed (the baseline's output tok/s) and its other load (the cells' ``other_cpu_cores``,
median and peak), as the reader needs to judge a per-prompt ratio.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any

from ..analysis.best import where
from ..analysis.promptspread import prompt_table
from ..analysis.units import units_of
from ..model.records import CellRecord
from ..model.tablekeys import PANEL
from ..runs.results import RunResult
from .figurekit import legend, marker, palette, title

_WIDTH = 0.5  # of a config's slot: its box and its points' jitter
_TICKS = (0.25, 0.33, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.25, 1.5, 2.0, 3.0, 4.0)
_DODGE = 0.015  # a config's points apart in x on the length figure (a fraction of the length)


def speedup_per_prompt(result: RunResult) -> Any:
    """Per panel, each config's per-prompt speedups vs the baseline: a box (whiskers p10-p90)
    and the prompts as points coloured by category, log y, a line at 1×."""
    table = _table(result)
    categories = list(dict.fromkeys(table["category"]))
    colours = dict(zip(categories, palette(len(categories)), strict=True))
    fig, axes, groups = _grid(table)
    for ax, (panel, rows) in zip(axes.flat, groups, strict=False):
        configs = list(dict.fromkeys(rows["config"]))
        for k, config in enumerate(configs):
            mine = rows[rows["config"] == config].sort_values("speedup")
            ax.boxplot([list(mine["speedup"])], positions=[k], widths=_WIDTH, whis=(10, 90),
                       showfliers=False, medianprops={"color": "black"})
            mine = mine.assign(x=[k + _WIDTH * 0.8 * ((i + 0.5) / len(mine) - 0.5)
                                  for i in range(len(mine))])  # spread in x by rank
            for category, part in mine.groupby("category", sort=False):
                ax.plot(part["x"], part["speedup"], linestyle="none", marker="o", markersize=4,
                        alpha=0.8, color=colours[category], label=f"category {category}")
        ax.set_xticks(range(len(configs)), [f"{c}\n{_faster(rows, c)}" for c in configs],
                      fontsize=8)
        _axis(ax, panel, rows, result.cells, f"speedup per prompt vs {rows['baseline'].iloc[0]}"
              "\n(box: quartiles; whiskers: p10-p90)")
    return _finish(fig, axes, result, "speedup per prompt")


def speedup_vs_answer_length(result: RunResult) -> Any:
    """Per panel, each prompt's speedup vs its answer length, one colour and marker per
    config, log y, a line at 1×."""
    table = _table(result)
    configs = list(dict.fromkeys(table["config"]))
    colours = dict(zip(configs, palette(len(configs)), strict=True))
    fig, axes, groups = _grid(table)
    for ax, (panel, rows) in zip(axes.flat, groups, strict=False):
        for k, config in enumerate(configs):
            mine = rows[rows["config"] == config]
            if len(mine):
                shift = 1 + _DODGE * (k - (len(configs) - 1) / 2)
                ax.plot(mine["answer_tokens"] * shift, mine["speedup"], linestyle="none", marker=marker(k),
                        markersize=5, alpha=0.75, color=colours[config], label=config)
        lengths = rows["answer_tokens"].dropna()
        if len(lengths) and lengths.min() == lengths.max():
            ax.annotate(f"every answer {lengths.min():.0f} tokens: no length to compare",
                        (0.02, 0.95), xycoords="axes fraction", fontsize=7, va="top")
        ax.set_xlabel("answer tokens (the baseline's)")
        _axis(ax, panel, rows, result.cells, f"speedup per prompt vs {rows['baseline'].iloc[0]}")
    return _finish(fig, axes, result, "speedup vs answer length")


def _table(result: RunResult) -> Any:
    return prompt_table(result.cells).dropna(subset=["speedup"])


def _grid(table: Any) -> tuple[Any, Any, list[tuple[Any, Any]]]:
    import matplotlib.pyplot as plt

    groups = list(table.groupby(PANEL, sort=False, dropna=False)) if len(table) else []
    cols = max(1, min(3, len(groups)))
    rows = max(1, math.ceil(len(groups) / cols))
    fig, axes = plt.subplots(rows, cols, squeeze=False,
                             figsize=(max(10.0, 4.6 * cols), 3.8 * rows + 0.6))
    if not groups:
        axes[0][0].annotate("no panel has a baseline and another config measured ok",
                            (0.5, 0.5), xycoords="axes fraction", ha="center")
    for ax in list(axes.flat)[len(groups):] if groups else []:
        ax.set_visible(False)
    return fig, axes, groups


def _axis(ax: Any, panel: Any, rows: Any, cells: Sequence[CellRecord], ylabel: str) -> None:
    from matplotlib.ticker import FixedLocator, NullFormatter

    ax.set_yscale("log")
    low, high = float(rows["speedup"].min()), float(rows["speedup"].max())
    wide = high / low > 1.8 if low > 0 else True  # 0.9× and 1.1× would crowd 1×
    ticks = [t for t in _TICKS if low / 1.1 <= t <= high * 1.1
             and not (wide and t in (0.9, 1.1))] or [1.0]
    ax.yaxis.set_major_locator(FixedLocator(ticks))
    ax.set_yticks(ticks, [f"{t:g}×" for t in ticks])
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.axhline(1.0, color="grey", linewidth=0.8)
    ax.grid(alpha=0.3)
    ax.set_ylabel(ylabel, fontsize=8)
    key = dict(zip(PANEL, panel, strict=True))
    ax.set_title(f"{where(key)}\n{machine_words(cells, key, str(rows['baseline'].iloc[0]))}",
                 fontsize=9)


def _faster(rows: Any, config: str) -> str:
    mine = rows[rows["config"] == config]
    return f"{int((mine['speedup'] > 1).sum())}/{len(mine)} faster"


def machine_words(cells: Sequence[CellRecord], panel: dict[str, Any], baseline: str) -> str:
    """"auto 63.9 tok/s · other load 0.01 cores (peak 0.04)": the panel's machine speed (its
    baseline's output tok/s over its ok cells) and the other processes' CPU load while its
    cells ran (the median of the cells' ``other_cpu_cores``, the largest peak)."""
    mine = [c for c in cells if c.verdict.ok and all(
        c.spec.row()[k] == v for k, v in panel.items())]
    rate = units_of([c for c in mine if c.spec.config == baseline]).rate()
    hosts = [c.facts.host for c in mine if c.facts.host is not None and c.facts.host.available]
    load = (f"other load {statistics.median(h.other_cpu_cores for h in hosts):.2f} cores "
            f"(peak {max(h.other_cpu_cores_peak for h in hosts):.2f})" if hosts
            else "other load not sampled")
    return f"{baseline} {rate:.1f} tok/s · {load}" if rate == rate else load


def _finish(fig: Any, axes: Any, result: RunResult, what: str) -> Any:
    bottom = legend(fig, axes)
    fig.suptitle(title(result, what), fontsize=10)
    fig.tight_layout(rect=(0, bottom, 1, 1))
    return fig
