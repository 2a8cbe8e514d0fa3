"""Figures from a run's ok cells; each function returns a matplotlib Figure, never shows it."""

from __future__ import annotations

from typing import Any

from .results import SweepResult

_MARKERS = "osD^v<>p*h"


def throughput_vs_budget(result: SweepResult) -> Any:
    """Output tok/s vs budget (log2 axis), a panel per context × concurrency.

    Colour is the workload, marker and line style the speculative config (one line over its
    budgets). The ``auto`` baseline is a dashed horizontal line per workload. Budgets whose cells
    are not ok are marked with a red × at the bottom of the panel and labelled with their verdict;
    they are never drawn as a value. A dry run has nothing to draw: None.
    """
    if getattr(result, "dry_run", False):
        return None
    import matplotlib.pyplot as plt

    verdicts = result.verdicts()
    table = result.table()
    contexts = sorted(verdicts["context"].unique())
    levels = sorted(verdicts["concurrency"].unique())
    spec = verdicts[verdicts["budget"].notna()]
    budgets = sorted(int(b) for b in spec["budget"].unique())
    colours = {w: f"C{i}" for i, w in enumerate(sorted(verdicts["workload"].unique()))}
    series = sorted(spec["series"].unique())
    markers = {s: _MARKERS[i % len(_MARKERS)] for i, s in enumerate(series)}
    fig, axes = plt.subplots(len(contexts), len(levels), squeeze=False, sharex=True,
                             figsize=(4.2 * len(levels), 3.4 * len(contexts)))
    for r, ctx in enumerate(contexts):
        for c, conc in enumerate(levels):
            ax = axes[r][c]
            panel = table[(table["context"] == ctx) & (table["concurrency"] == conc)]
            for (workload, name), group in panel[panel["budget"].notna()].groupby(["workload", "series"]):
                group = group.sort_values("budget")
                ax.plot(group["budget"], group["output_tok_s"], marker=markers[name],
                        color=colours[workload], label=f"{workload} · {name}",
                        linestyle="-" if len(group) > 1 else "none")
            for workload, base in panel[panel["method"] == "auto"].groupby("workload"):
                ax.axhline(float(base["output_tok_s"].mean()), color=colours[workload],
                           linestyle="--", linewidth=1, label=f"{workload} · auto")
            failed = spec[(spec["context"] == ctx) & (spec["concurrency"] == conc)
                          & (spec["verdict"] != "ok")]
            for _, row in failed.iterrows():
                ax.plot(row["budget"], 0, marker="x", color="red", markersize=9, clip_on=False,
                        transform=ax.get_xaxis_transform())
                ax.annotate(f"{row['series']} {row['verdict']}", (row["budget"], 0.04),
                            xycoords=("data", "axes fraction"), color="red", fontsize=7,
                            ha="center")
            ax.set_xscale("log", base=2)
            if budgets:
                ax.set_xticks(budgets, [str(b) for b in budgets])
                ax.set_xlim(budgets[0] / 1.4, budgets[-1] * 1.4)
            ax.set_title(f"context {ctx} · concurrency {conc}", fontsize=10)
            ax.set_ylim(bottom=0)
            ax.grid(alpha=0.3)
            if c == 0:
                ax.set_ylabel("output tok/s")
            if r == len(contexts) - 1:
                ax.set_xlabel("budget (max drafted tokens per step)")
    _legend(fig, axes)
    manifest = result.manifest
    model = (manifest.get("model") or {}).get("path", "?").rsplit("/", 1)[-1]
    engine = manifest.get("engine") or {}
    fig.suptitle(f"{manifest.get('phase', '?')} · {model} · {engine.get('kind', '?')} "
                 f"{engine.get('version', '')}\nrun {result.run_id}", fontsize=10)
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    return fig


def _legend(fig: Any, axes: Any) -> None:
    seen: dict[str, Any] = {}
    for ax in axes.flat:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            seen.setdefault(label, handle)
    if seen:
        fig.legend(list(seen.values()), list(seen), loc="lower center", ncol=min(4, len(seen)),
                   fontsize=8, frameon=False)
