"""Figures from a run's ok cells; each function returns a matplotlib Figure, never shows it.

The budget figures have one panel per context × concurrency (× open-loop load point × output
length, where those are axes) and budget on a log2 axis; colour is the
workload, marker the speculative config. Budgets whose cells are not ok are marked with a red ×
at the bottom of the panel, labelled with their verdict, never drawn as a value. Unstable cells
(coefficient of variation over repeats above the threshold) are drawn hollow; throughput and
speedup carry their 95 % bootstrap intervals as error bars (over requests and repeats).
"""

from __future__ import annotations

import itertools
from typing import Any

from .manifest import Manifest
from .results import RunResult

_MARKERS = "osD^v<>p*h"
_INTERVALS = {"output_tok_s": ("output_tok_s_lo", "output_tok_s_hi"),
              "speedup": ("speedup_lo", "speedup_hi")}  # drawn as 95 % error bars


def throughput_vs_budget(result: RunResult) -> Any:
    """Output tok/s vs budget, with ``auto`` (dashed) and ``linear`` (dotted) reference lines."""
    return _vs_budget(result, [("output_tok_s", "")], "output tok/s", baselines=True)


def speedup_vs_budget(result: RunResult) -> Any:
    """Output tok/s relative to ``auto`` of the same workload, context and concurrency."""
    return _vs_budget(result, [("speedup", "")], "speedup vs auto", unit_line=1.0)


def acceptance_vs_budget(result: RunResult) -> Any:
    """Mean acceptance length (tokens per verify step, weighted by tokens) vs budget."""
    return _vs_budget(result, [("acceptance_length", "")], "acceptance length (tokens/step)",
                      unit_line=1.0)


_TAIL = "p99 (max of n if n < 100)"  # a p99 needs 100 requests behind it (see .latency)


def ttft_vs_budget(result: RunResult) -> Any:
    """Time to first token, p50 (solid) and p99 (dashed; the maximum, labelled so, where fewer
    than 100 requests are behind it), vs budget."""
    return _vs_budget(result, [("ttft_p50_s", "p50"), ("ttft_tail_s", _TAIL)], "TTFT (s)")


def itl_vs_budget(result: RunResult) -> Any:
    """Inter-token latency per token, p50 (solid) and p99 (dashed; the maximum where fewer than
    100 requests are behind it), vs budget."""
    return _vs_budget(result, [("itl_p50_s", "p50"), ("itl_tail_s", _TAIL)], "ITL (s)")


def with_tails(table: Any) -> Any:
    """``table`` with ``ttft_tail_s`` and ``itl_tail_s``: the p99 where it is given, else the
    maximum of the row's requests (``*_max_s``)."""
    return table.assign(**{f"{m}_tail_s": table[f"{m}_p99_s"].fillna(table[f"{m}_max_s"])
                           for m in ("ttft", "itl")})


def latency_throughput(result: RunResult) -> Any:
    """Per workload × context, the load curve of each config: total output tok/s against
    per-user tok/s (left) and against TTFT p99 (right; the maximum where fewer than 100
    requests are behind it), one point per concurrency (closed loop), labelled with it;
    ``auto`` drawn thick and black. A load point that is not ok is marked × on the x axis with
    its verdict, never drawn as a value."""
    import matplotlib.pyplot as plt

    verdicts, table = result.verdicts(), with_tails(result.table())
    verdicts, table = verdicts[verdicts["load"] == ""], table[table["load"] == ""]  # closed loop
    panels = sorted({(w, c) for w, c in zip(verdicts["workload"], verdicts["context"],
                                            strict=True)})
    fig, axes = plt.subplots(len(panels), 2, squeeze=False,
                             figsize=(9.5, 3.6 * max(1, len(panels))))
    for r, (workload, ctx) in enumerate(panels):
        rows = table[(table["workload"] == workload) & (table["context"] == ctx)]
        failed = verdicts[(verdicts["workload"] == workload) & (verdicts["context"] == ctx)
                          & verdicts["failed"]]
        for ax, x, xlabel in ((axes[r][0], "request_decode_tok_s", "per-user tok/s"),
                              (axes[r][1], "ttft_tail_s", f"TTFT {_TAIL} (s)")):
            for i, (config, group) in enumerate(rows.groupby("config", sort=False)):
                group = group.sort_values("concurrency")
                auto = bool((group["method"] == "auto").all())
                ax.plot(group[x], group["output_tok_s"], marker="o",
                        color="black" if auto else f"C{i}", linewidth=2.5 if auto else 1.2,
                        label=config)
                for _, row in group.iterrows():
                    ax.annotate(f"c{int(row['concurrency'])}", (row[x], row["output_tok_s"]),
                                fontsize=7, textcoords="offset points", xytext=(3, 3))
            for _, row in failed.iterrows():
                ax.plot(0, 0, marker="x", color="red", markersize=9, clip_on=False,
                        transform=ax.transAxes)
                ax.annotate(f"{row['config']} c{row['concurrency']} {row['verdict']}", (0.01, 0.04),
                            xycoords="axes fraction", color="red", fontsize=7)
            ax.set_title(f"{workload} · context {ctx}", fontsize=10)
            ax.set_xlabel(xlabel)
            ax.set_ylabel("output tok/s (all requests)")
            ax.set_xlim(left=0)
            ax.set_ylim(bottom=0)
            ax.grid(alpha=0.3)
    _legend(fig, axes)
    fig.suptitle(_title(result, "load curves: throughput vs per-user speed and TTFT"), fontsize=10)
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    return fig


def speedup_vs_load(result: RunResult) -> Any:
    """Where speculation stops paying: per workload × context × output length, each speculative
    config's speedup vs ``auto`` (95 % intervals) against concurrency (closed loop), a dotted
    line where it starts to lose (its interval below 1: the crossover), and, for
    open-loop rates, E2E latency p50 against the rate asked for (``auto`` thick and black); with
    an SLO, goodput (requests a second that met it) against the rate. A load point that is not
    ok is marked × on the x axis with its verdict, never drawn as a value."""
    from .metrics import load_points

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
                 columns: list[tuple[str, str, str, str]], title: str) -> Any:
    import matplotlib.pyplot as plt

    from .best import crossovers

    crossing = {tuple(k): v for *k, v in crossovers(table).dropna(subset=["loses_from"])[
        ["config", "workload", "context", "output_tokens", "load_axis", "loses_from"]]
        .itertuples(index=False, name=None)}  # where each config starts to lose, for good
    # a row per workload × output length; a column per context × what is drawn
    rows_of = sorted({tuple(v) for v in verdicts[["workload", "output_tokens"]]
                      .itertuples(index=False, name=None)})
    contexts = sorted(verdicts["context"].unique())
    fig, axes = plt.subplots(len(rows_of), len(contexts) * len(columns), squeeze=False,
                             figsize=(max(9.5, 4.4 * len(contexts) * len(columns)), 3.4 * len(rows_of)))
    for (r, (workload, out)), (k, ctx) in itertools.product(enumerate(rows_of),
                                                        enumerate(contexts)):
        here = ((table["workload"] == workload) & (table["context"] == ctx)
                & (table["output_tokens"] == out))
        here_v = ((verdicts["workload"] == workload) & (verdicts["context"] == ctx)
                  & (verdicts["output_tokens"] == out))
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
                first = crossing.get((config, workload, ctx, out, axis)) if speedup else None
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
            ax.set_title(f"{workload} · context {ctx} · {out} output tokens", fontsize=10)
            ax.set_xlabel(xlabel)
            ax.set_ylabel(ylabel)
            ax.set_ylim(bottom=0)
            ax.grid(alpha=0.3)
    _legend(fig, axes)
    fig.suptitle(_title(result, title), fontsize=10)
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    return fig


def _mark_load_failures(ax: Any, failed: Any, axis: str) -> None:
    """Each load point that is not ok: × on the x axis with its config and verdict."""
    for n, (_, row) in enumerate(failed.iterrows()):
        x = row["concurrency"] if axis == "concurrency" else row["rate_rps"]
        if x is None or x != x:  # a profile point that never got its rate
            ax.annotate(f"{row['config']} {row['load']} {row['verdict']}",
                        (0.01, 0.04 + 0.06 * n), xycoords="axes fraction", color="red",
                        fontsize=7)
            continue
        ax.plot(x, 0, marker="x", color="red", markersize=9, clip_on=False,
                transform=ax.get_xaxis_transform())
        ax.annotate(f"{row['config']} {row['verdict']}", (x, 0.04 + 0.06 * n),
                    xycoords=("data", "axes fraction"), color="red", fontsize=7)


def standard(result: RunResult) -> dict[str, Any]:
    """Every figure of a phase notebook by file name (the load figures when the run has several
    concurrency levels or open-loop rates)."""
    figures = {"throughput_vs_budget": throughput_vs_budget(result),
               "speedup_vs_budget": speedup_vs_budget(result),
               "acceptance_vs_budget": acceptance_vs_budget(result),
               "ttft_vs_budget": ttft_vs_budget(result), "itl_vs_budget": itl_vs_budget(result)}
    verdicts = result.verdicts()
    if verdicts[verdicts["load"] == ""]["concurrency"].nunique() > 1:
        figures["latency_throughput"] = latency_throughput(result)
    if verdicts["concurrency"].nunique() > 1 or (verdicts["load"] != "").any():
        figures["speedup_vs_load"] = speedup_vs_load(result)
    return figures


def _vs_budget(result: RunResult, metrics: list[tuple[str, str]], ylabel: str, *,
               baselines: bool = False, unit_line: float | None = None) -> Any:
    import matplotlib.pyplot as plt

    verdicts = result.verdicts()
    table = with_tails(result.table())
    contexts = sorted(verdicts["context"].unique())
    levels = sorted({tuple(v) for v in verdicts[_LEVEL].itertuples(index=False, name=None)},
                    key=lambda v: (v[0], v[1] != "", v[1], v[2]))
    spec = verdicts[verdicts["budget"].notna()]
    budgets = sorted(int(b) for b in spec["budget"].unique())
    colours = {w: f"C{i}" for i, w in enumerate(sorted(verdicts["workload"].unique()))}
    markers = {s: _MARKERS[i % len(_MARKERS)] for i, s in enumerate(sorted(spec["series"].unique()))}
    fig, axes = plt.subplots(len(contexts), len(levels), squeeze=False, sharex=True,
                             figsize=(4.2 * len(levels), 3.4 * len(contexts)))
    for r, ctx in enumerate(contexts):
        for c, conc in enumerate(levels):
            ax = axes[r][c]
            panel = table[(table["context"] == ctx) & _at(table, conc)]
            for column, label in metrics:
                style = "--" if label.startswith("p99") else "-"
                _draw_series(ax, panel, column, label, style, colours, markers)
            if baselines:
                _draw_baselines(ax, panel, colours)
            if unit_line is not None:
                ax.axhline(unit_line, color="grey", linewidth=0.8)
            _mark_failures(ax, spec[(spec["context"] == ctx) & _at(spec, conc)])
            ax.set_xscale("log", base=2)
            if budgets:
                ax.set_xticks(budgets, [str(b) for b in budgets])
                ax.set_xlim(budgets[0] / 1.4, budgets[-1] * 1.4)
            several = verdicts["output_tokens"].nunique() > 1
            ax.set_title(" · ".join([f"context {ctx}", f"concurrency {conc[0]}",
                                     *([conc[1]] if conc[1] else []),
                                     *([f"{conc[2]} output tokens"] if several else [])]),
                         fontsize=10)
            ax.set_ylim(bottom=0)
            ax.grid(alpha=0.3)
            if c == 0:
                ax.set_ylabel(ylabel)
            if r == len(contexts) - 1:
                ax.set_xlabel("budget (max drafted tokens per step)")
    _legend(fig, axes)
    fig.suptitle(_title(result, ylabel), fontsize=10)
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    return fig


_LEVEL = ["concurrency", "load", "output_tokens"]  # a panel's column of the budget figures


def _at(frame: Any, level: tuple[Any, ...]) -> Any:
    """The rows of ``frame`` at one concurrency × load point × output length."""
    return ((frame["concurrency"] == level[0]) & (frame["load"].astype(str) == level[1])
            & (frame["output_tokens"] == level[2]))


def _draw_series(ax: Any, panel: Any, column: str, label: str, style: str,
                 colours: dict[str, str], markers: dict[str, str]) -> None:
    spec = panel[panel["budget"].notna() & panel[column].notna()]
    for (workload, name), group in spec.groupby(["workload", "series"]):
        group = group.sort_values("budget")
        colour = colours[workload]
        errors = None
        if column in _INTERVALS:
            low, high = (group[c] for c in _INTERVALS[column])
            errors = [(group[column] - low).clip(lower=0).fillna(0),
                      (high - group[column]).clip(lower=0).fillna(0)]
        ax.errorbar(group["budget"], group[column], yerr=errors, marker=markers[name], color=colour,
                    linestyle=style if len(group) > 1 else "none", capsize=3,
                    label=" · ".join(p for p in (workload, name, label) if p))
        unstable = group[group["unstable"].fillna(False).astype(bool)]
        if not unstable.empty:
            ax.plot(unstable["budget"], unstable[column], linestyle="none", marker=markers[name],
                    markersize=9, markerfacecolor="white", markeredgecolor=colour,
                    label="unstable (CV over threshold)")


def _draw_baselines(ax: Any, panel: Any, colours: dict[str, str]) -> None:
    for method, style in (("auto", "--"), ("linear", ":")):
        for workload, base in panel[panel["method"] == method].groupby("workload"):
            ax.axhline(float(base["output_tok_s"].max()), color=colours[workload], linestyle=style,
                       linewidth=1, label=f"{workload} · {method}")


def _mark_failures(ax: Any, cells: Any) -> None:
    for (budget, series), group in cells[cells["failed"]].groupby(["budget", "series"]):
        ax.plot(budget, 0, marker="x", color="red", markersize=9, clip_on=False,
                transform=ax.get_xaxis_transform())
        verdicts = "/".join(sorted(group["verdict"].unique()))
        ax.annotate(f"{series} {verdicts}", (budget, 0.04), xycoords=("data", "axes fraction"),
                    color="red", fontsize=7, ha="center")


def _title(result: RunResult, what: str) -> str:
    manifest = Manifest.from_dict(result.manifest)
    model = manifest.model.get("path", "?").rstrip("/").rsplit("/", 1)[-1]
    engine = manifest.engine
    name = "" if engine.get("package") else f"{engine.get('kind', '?')} "  # a package names it
    return (f"{what} · {manifest.phase or '?'} · {model} · {name}"
            f"{engine.get('version', '')}\nrun {result.run_id}")


def _legend(fig: Any, axes: Any) -> None:
    seen: dict[str, Any] = {}
    for ax in axes.flat:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            seen.setdefault(label, handle)
    if seen:
        fig.legend(list(seen.values()), list(seen), loc="lower center", ncol=min(4, len(seen)),
                   fontsize=8, frameon=False)


# --- the report's figures (specbench report, notebooks/report.ipynb) --------------------------

def report_figures(results: list[RunResult]) -> dict[str, Any]:
    """The report's figures by file stem: per compared run, speedup vs ``auto`` and output tok/s
    against budget (``speedup_vs_budget_<phase>``, ``throughput_vs_budget_<phase>``); the run id
    joins the stem when two runs of one phase are merged. As in every figure here, a budget whose
    cells are not ok is a red × labelled with its verdict, never a value."""
    import re

    phases = [str(Manifest.from_dict(r.manifest).phase or "run") for r in results]
    figures: dict[str, Any] = {}
    for result, phase in zip(results, phases, strict=True):
        label = phase if phases.count(phase) == 1 else f"{phase}_{result.run_id}"
        stem = re.sub(r"[^A-Za-z0-9._-]+", "-", label)  # a file name on any system
        figures[f"speedup_vs_budget_{stem}"] = speedup_vs_budget(result)
        figures[f"throughput_vs_budget_{stem}"] = throughput_vs_budget(result)
    return figures
