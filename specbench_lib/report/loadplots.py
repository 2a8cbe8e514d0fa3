"""The load figures: per workload × context, each config's load curve (total output tok/s
against per-user speed and against TTFT), and where speculation stops paying as the load grows
(speedup against concurrency with the crossover, E2E latency and goodput against open-loop
rates). A load point that is not ok is listed or marked on the axis, never drawn as a value."""

from __future__ import annotations

import itertools
from typing import Any

from ..runs.results import RunResult
from .figurekit import TAIL, legend, mark_failure, title, with_tails


def latency_throughput(result: RunResult) -> Any:
    """Per workload × context, the load curve of each config: total output tok/s against
    per-user tok/s (left) and against TTFT p99 (right; the maximum where fewer than 100
    requests are behind it), one point per concurrency (closed loop), labelled with it;
    ``auto`` drawn thick and black. A load point that is not ok is marked × on the x axis with
    its verdict, never drawn as a value."""
    import matplotlib.pyplot as plt

    verdicts, table = result.verdicts(), with_tails(result.table())
    verdicts, table = verdicts[verdicts["load"] == ""], table[table["load"] == ""]  # closed loop
    panels = sorted({(w, c, t) for w, c, t in zip(verdicts["workload"], verdicts["context"],
                                                  verdicts["temperature"], strict=True)})
    fig, axes = plt.subplots(len(panels), 2, squeeze=False,
                             figsize=(9.5, 3.6 * max(1, len(panels))))
    for r, (workload, ctx, temp) in enumerate(panels):
        rows = table[(table["workload"] == workload) & (table["context"] == ctx)
                     & (table["temperature"] == temp)]
        failed = verdicts[(verdicts["workload"] == workload) & (verdicts["context"] == ctx)
                          & (verdicts["temperature"] == temp) & verdicts["failed"]]
        for ax, x, xlabel in ((axes[r][0], "request_decode_tok_s", "per-user tok/s"),
                              (axes[r][1], "ttft_tail_s", f"TTFT {TAIL} (s)")):
            for i, (config, group) in enumerate(rows.groupby("config", sort=False)):
                group = group.sort_values("concurrency")
                auto = bool((group["method"] == "auto").all())
                ax.plot(group[x], group["output_tok_s"], marker="o",
                        color="black" if auto else f"C{i}", linewidth=2.5 if auto else 1.2,
                        label=config)
                for _, row in group.iterrows():
                    ax.annotate(f"c{int(row['concurrency'])}", (row[x], row["output_tok_s"]),
                                fontsize=7, textcoords="offset points", xytext=(3, 3))
            for slot, (_, row) in enumerate(failed.iterrows()):
                mark_failure(ax, None, f"{row['config']} c{row['concurrency']} {row['verdict']}",
                             slot)
            ax.set_title(f"{workload} · context {ctx}" + (f" · T {temp:g}" if temp else ""),
                         fontsize=10)
            ax.set_xlabel(xlabel)
            ax.set_ylabel("output tok/s (all requests)")
            ax.set_xlim(left=0)
            ax.set_ylim(bottom=0)
            ax.grid(alpha=0.3)
    bottom = legend(fig, axes)
    fig.suptitle(title(result, "load curves: throughput vs per-user speed and TTFT"), fontsize=10)
    fig.tight_layout(rect=(0, bottom, 1, 1))
    return fig


def speedup_vs_load(result: RunResult) -> Any:
    """Where speculation stops paying: per workload × context × output length, each speculative
    config's speedup vs ``auto`` (95 % intervals) against concurrency (closed loop), a dotted
    line where it starts to lose (its interval below 1: the crossover), and, for
    open-loop rates, E2E latency p50 against the rate asked for (``auto`` thick and black); with
    an SLO, goodput (requests a second that met it) against the rate. A load point that is not
    ok is marked × on the x axis with its verdict, never drawn as a value."""
    from ..analysis.metrics import load_points

    table = load_points(result.table())
    verdicts = result.verdicts()
    columns = [("concurrency", "speedup", "speedup vs auto", "concurrency")]
    if (table["load_axis"] == "rate").any():
        columns.append(("rate", "e2e_p50_s", "E2E p50 (s)", "requests/s asked"))
        if "goodput_rps" in table.columns:
            columns.append(("rate", "goodput_rps", "goodput (req/s meeting the SLO)",
                            "requests/s asked"))
    return _load_figure(result, table, verdicts, columns, "load: where speculation stops paying")


def _load_figure(result: RunResult, table: Any, verdicts: Any,
                 columns: list[tuple[str, str, str, str]], what: str) -> Any:
    import matplotlib.pyplot as plt

    from ..analysis.crossover import crossovers

    crossing = {tuple(k): v for *k, v in crossovers(table).dropna(subset=["loses_from"])[
        ["config", "workload", "context", "output_tokens", "temperature", "load_axis",
         "loses_from"]]
        .itertuples(index=False, name=None)}  # where each config starts to lose, for good
    # a row per workload × output length × temperature; a column per context × what is drawn
    rows_of = sorted({tuple(v) for v in verdicts[["workload", "output_tokens", "temperature"]]
                      .itertuples(index=False, name=None)})
    contexts = sorted(verdicts["context"].unique())
    fig, axes = plt.subplots(len(rows_of), len(contexts) * len(columns), squeeze=False,
                             figsize=(max(9.5, 4.4 * len(contexts) * len(columns)), 3.4 * len(rows_of)))
    for (r, (workload, out, temp)), (k, ctx) in itertools.product(enumerate(rows_of),
                                                              enumerate(contexts)):
        here = ((table["workload"] == workload) & (table["context"] == ctx)
                & (table["output_tokens"] == out) & (table["temperature"] == temp))
        here_v = ((verdicts["workload"] == workload) & (verdicts["context"] == ctx)
                  & (verdicts["output_tokens"] == out) & (verdicts["temperature"] == temp))
        where = here_v & verdicts["failed"]
        for c, (axis, column, ylabel, xlabel) in enumerate(columns):
            ax = axes[r][k * len(columns) + c]
            rows = table[here & (table["load_axis"] == axis) & table[column].notna()]
            speedup = column == "speedup"
            for i, (config, group) in enumerate(rows.groupby("config", sort=False)):
                auto = bool((group["method"] == "auto").all())
                if speedup and auto:
                    continue
                group = group.sort_values("load_value")
                errors = ([(group[column] - group["speedup_lo"]).clip(lower=0).fillna(0),
                           (group["speedup_hi"] - group[column]).clip(lower=0).fillna(0)]
                          if speedup else None)
                ax.errorbar(group["load_value"], group[column], yerr=errors, marker="o",
                            capsize=3, color="black" if auto else f"C{i}",
                            linewidth=2.5 if auto else 1.2, label=config)
                first = crossing.get((config, workload, ctx, out, temp, axis)) if speedup else None
                if first is not None and first > group["load_value"].min():  # the crossover
                    ax.axvline(first, color=f"C{i}", linestyle=":", linewidth=1)
                    ax.annotate(f"{config} loses from {first:g}", (first, 0.95),
                                xycoords=("data", "axes fraction"), color=f"C{i}", fontsize=7,
                                rotation=90, ha="right", va="top")
            if speedup:
                ax.axhline(1.0, color="grey", linewidth=0.8)
            if axis == "concurrency":  # the levels measured, not fractions of a request
                levels = sorted({int(c) for c in verdicts.loc[here_v, "concurrency"]})
                ax.set_xticks(levels, [str(c) for c in levels])
            failed = verdicts[where & ((verdicts["load"].astype(str) != "") == (axis == "rate"))]
            _mark_load_failures(ax, failed, axis)
            ax.set_title(_where(workload, ctx, out, temp), fontsize=10)
            ax.set_xlabel(xlabel)
            ax.set_ylabel(ylabel)
            ax.set_ylim(bottom=0)
            ax.grid(alpha=0.3)
    bottom = legend(fig, axes)
    fig.suptitle(title(result, what), fontsize=10)
    fig.tight_layout(rect=(0, bottom, 1, 1))
    return fig


def _where(workload: str, ctx: int, out: int, temp: float) -> str:
    return f"{workload} · context {ctx} · {out} output tokens" + (f" · T {temp:g}" if temp else "")


def _mark_load_failures(ax: Any, failed: Any, axis: str) -> None:
    """Each load point that is not ok: × on the x axis with its config and verdict."""
    for slot, (_, row) in enumerate(failed.iterrows()):
        x = row["concurrency"] if axis == "concurrency" else row["rate_rps"]
        where = None if x is None or x != x else x  # a profile point that never got its rate
        load = f" {row['load']}" if where is None else ""
        mark_failure(ax, where, f"{row['config']}{load} {row['verdict']}", slot)
