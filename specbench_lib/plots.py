"""Figures from a run's ok cells; each function returns a matplotlib Figure, never shows it."""

from __future__ import annotations

import math
from typing import Any

from .results import SweepResult

_MARK = {"crashed": "x", "invalid": "x", "skipped": "s"}


def throughput_vs_budget(result: SweepResult, *, config: str | None = None) -> Any:
    """Output tok/s vs budget (log2 axis), a panel per context × concurrency, a line per workload.

    The ``auto`` baseline is a horizontal dashed line per workload. Budgets whose cells are not
    ok are marked with × at the bottom of the panel and labelled with their verdict, never drawn
    as a value. ``config`` picks one speculative config (default: every config with budgets).
    """
    import matplotlib.pyplot as plt

    verdicts = result.verdicts()
    table = result.table()
    contexts = sorted(verdicts["context"].unique())
    levels = sorted(verdicts["concurrency"].unique())
    fig, axes = plt.subplots(len(contexts), len(levels), squeeze=False,
                             figsize=(4.2 * len(levels), 3.4 * len(contexts)), sharex=True)
    spec = verdicts[verdicts["budget"].notna()]
    if config is not None:
        spec = spec[spec["config"] == config]
    budgets = sorted(int(b) for b in spec["budget"].unique())
    workloads = sorted(verdicts["workload"].unique())
    colours = {w: f"C{i}" for i, w in enumerate(workloads)}
    for r, ctx in enumerate(contexts):
        for c, conc in enumerate(levels):
            ax = axes[r][c]
            here = (table["context"] == ctx) & (table["concurrency"] == conc)
            for workload in workloads:
                rows = table[here & (table["workload"] == workload)]
                for cfg, group in rows[rows["budget"].notna()].groupby("config"):
                    if config is not None and cfg != config:
                        continue
                    group = group.sort_values("budget")
                    ax.plot(group["budget"], group["output_tok_s"], marker="o",
                            color=colours[workload], label=f"{workload} · {cfg}",
                            linestyle="-" if cfg == spec["config"].iloc[0] else ":")
                base = rows[rows["method"] == "auto"]["output_tok_s"]
                if not base.empty:
                    ax.axhline(float(base.mean()), color=colours[workload], linestyle="--",
                               linewidth=1, label=f"{workload} · auto")
            bad = spec[(spec["context"] == ctx) & (spec["concurrency"] == conc)
                       & (spec["verdict"] != "ok")]
            for _, row in bad.iterrows():
                ax.plot(row["budget"], 0, marker=_MARK.get(row["verdict"], "x"), color="red",
                        markersize=9, clip_on=False, transform=ax.get_xaxis_transform())
                ax.annotate(row["verdict"], (row["budget"], 0.03), color="red", fontsize=7,
                            xycoords=("data", "axes fraction"), ha="center")
            ax.set_xscale("log", base=2)
            if budgets:
                ax.set_xticks(budgets, [str(b) for b in budgets])
            ax.set_title(f"context {ctx} · concurrency {conc}", fontsize=10)
            ax.set_ylim(bottom=0)
            ax.grid(alpha=0.3)
            if c == 0:
                ax.set_ylabel("output tok/s")
            if r == len(contexts) - 1:
                ax.set_xlabel("budget (max drafted tokens per step)")
    handles, labels = axes[0][0].get_legend_handles_labels()
    if handles:
        fig.legend(handles, labels, loc="lower center", ncol=min(4, len(labels)), fontsize=8,
                   bbox_to_anchor=(0.5, -0.02 - 0.03 * math.ceil(len(labels) / 4)))
    manifest = result.manifest
    model = (manifest.get("model") or {}).get("path", "?").rsplit("/", 1)[-1]
    engine = manifest.get("engine") or {}
    fig.suptitle(f"{manifest.get('phase', '?')} · {model} · {engine.get('kind', '?')} "
                 f"{engine.get('version', '')}\nrun {result.run_id}", fontsize=10)
    fig.tight_layout()
    return fig

