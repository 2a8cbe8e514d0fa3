"""The figure by category: categories (and groups) on x, one point per speculative config.

Two panels share the x axis: the speedup over ``auto`` with its simultaneous 95 % interval (the
panel's claim, :mod:`~specbench_lib.analysis.claim`, through the category table of
:mod:`~specbench_lib.analysis.bycategory`) and tokens per step. Each config has its own colour
and marker (:func:`~.figurekit.palette`, distinct for any number of configs), dodged apart in
x; the best of a decided panel is ringed black, an undecided leader squared black. A turn-2
workload's tick says so; a group's tick is in italics after the categories.
"""

from __future__ import annotations

from typing import Any

from ..runs.results import RunResult
from .figurekit import legend, marker, palette, title

_SPREAD = 0.6  # the share of a category's slot its configs' points spread over


def by_category(result: RunResult) -> Any:
    """Speedup (with interval) and tokens per step by category, one series per config."""
    import matplotlib.pyplot as plt

    frame = result.categories(answers=0).frame
    spec = frame[frame["config"].astype(str) != "auto"]
    ticks = list(dict.fromkeys(zip(frame["workload"], frame["turn"], strict=True)))
    where = {key: i for i, key in enumerate(ticks)}
    configs = list(dict.fromkeys(spec["config"]))
    colours = palette(len(configs))
    fig, axes = plt.subplots(2, 1, squeeze=False, sharex=True,
                             figsize=(max(6.0, 0.7 * len(ticks) + 2), 6.4))
    for k, config in enumerate(configs):
        rows = spec[spec["config"] == config]
        shift = (k - (len(configs) - 1) / 2) * _SPREAD / max(len(configs), 1)
        x = [where[(w, t)] + shift for w, t in zip(rows["workload"], rows["turn"], strict=True)]
        low = (rows["speedup"] - rows["speedup_lo"]).clip(lower=0).fillna(0)
        high = (rows["speedup_hi"] - rows["speedup"]).clip(lower=0).fillna(0)
        style = {"color": colours[k], "marker": marker(k), "linestyle": "none"}
        axes[0][0].errorbar(x, rows["speedup"], yerr=[low, high], capsize=3, label=config,
                            **style)
        axes[1][0].plot(x, rows["tokens_per_step"], **style)
        for xi, (_, row) in zip(x, rows.iterrows(), strict=True):
            if row["place"] in ("best", "leader"):
                axes[0][0].plot(xi, row["speedup"], linestyle="none", markersize=14,
                                marker="o" if row["place"] == "best" else "s",
                                markerfacecolor="none", markeredgecolor="black",
                                label="best" if row["place"] == "best"
                                else "fastest, undecided (the claim's leader)")
    _axes(axes[:, 0], ticks, frame)
    bottom = legend(fig, axes)
    fig.suptitle(title(result, "by category"), fontsize=10)
    fig.tight_layout(rect=(0, bottom, 1, 1))
    return fig


def _axes(axes: Any, ticks: list[tuple[str, Any]], frame: Any) -> None:
    groups = set(frame.loc[frame["kind"].str.startswith("group"), "workload"])
    untimed = set(zip(frame.loc[frame["kind"].str.startswith("turn 1 of"), "workload"],
                      frame.loc[frame["kind"].str.startswith("turn 1 of"), "turn"], strict=True))
    labels = [w + ("\n(turn 1, untimed)" if (w, t) in untimed else
                   f"\n(turn {t})" if t not in (1, None) else "") for w, t in ticks]
    axes[0].axhline(1.0, color="grey", linewidth=0.8)
    axes[0].set_ylabel("speedup vs auto [95 %]")
    axes[1].axhline(1.0, color="grey", linewidth=0.8)
    axes[1].set_ylabel("tokens per step")
    axes[1].set_xticks(range(len(ticks)), labels, rotation=45, ha="right", fontsize=8)
    for label, (workload, _) in zip(axes[1].get_xticklabels(), ticks, strict=True):
        if workload in groups:
            label.set_fontstyle("italic")
    for ax in axes:
        ax.grid(alpha=0.3)
        ax.set_ylim(bottom=0)
