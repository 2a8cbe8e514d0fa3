"""Figures from a run's ok cells; each function returns a matplotlib Figure, never shows it.

The budget figures have one panel per context × concurrency (× open-loop load point × output
length × sampling temperature, where those are axes), budget on a log2 axis and one y scale per
row; colour is the workload (its series dodged apart in x), marker the speculative config.
``auto`` is a dashed line with its 95 % interval as a band on the throughput, TTFT and ITL
figures; the best point of each panel is ringed in black and the configs its data cannot tell
from it in grey. Budgets whose cells are not ok are marked with a red × on the bottom edge,
labelled with the workload, config and verdict, and the line breaks there: never drawn as a
value. Unstable cells (coefficient of variation over repeats above the threshold) are drawn
hollow; throughput and speedup carry their 95 % intervals as error bars. The load figures are
:mod:`~.loadplots`'.
"""

from __future__ import annotations

from typing import Any

from ..model.quantities import OUTPUT_RATE
from ..runs.manifest import Manifest
from ..runs.results import RunResult
from .categoryplots import by_category
from .figurekit import (
    TAIL,
    auto_band,
    legend,
    mark_failure,
    marker,
    palette,
    requests_note,
    title,
    turn_label,
    with_tails,
)
from .loadplots import latency_throughput, speedup_vs_load
from .promptplots import speedup_per_prompt, speedup_vs_answer_length
from .stepplots import step_cost_figure, step_points

_INTERVALS = {"claim": ("claim_lo", "claim_hi"),  # the claim's own (simultaneous, its look's α)
              "output_tok_s": ("output_tok_s_lo", "output_tok_s_hi"),
              "speedup": ("speedup_lo", "speedup_hi"),
              "gpu_j_per_token": ("gpu_j_per_token_lo", "gpu_j_per_token_hi")}  # 95 % error bars
_DODGE = 0.07  # log2 units between two workloads' points at one budget


def claim_vs_budget(result: RunResult) -> Any:
    """The answer's own quantity (the plan's ``claim_quantity``: the decode rate, end to end,
    TTFT or acceptance) relative to ``auto``'s, against the budget, with the claim's intervals
    (paired by prompt, simultaneous over the panel's configs, at the error its look spent: the
    one computation every page states, :func:`~specbench_lib.analysis.best.table_claims`); the
    claim's best ringed black, the rest of its set grey; ``auto`` is the line at 1."""
    from ..analysis.best import table_claims
    from ..analysis.claim import claim_columns
    from ..model.quantities import quantity

    table = result.table()
    claims = table_claims(result.cells, table, alphas=result.alphas,
                          equivalence=result.equivalence, quantity=result.quantity)
    table = claim_columns(table, claims, "claim")
    profile = table["load"].astype(str).str.startswith("p")  # no like-for-like baseline there
    table.loc[profile, ["claim", "claim_lo", "claim_hi"]] = float("nan")
    said = quantity(result.quantity)
    label = f"{said.short} vs auto (×{', higher: shorter' if said.lower_is_better else ''})"
    fig = _vs_budget(result, [("claim", "")], label, unit_line=1.0, ring=True, table=table,
                     ring_quantity=result.quantity, from_zero=False)
    _about_the_points(fig)
    return fig


def _about_the_points(fig: Any) -> None:
    """Each axis from its points (and 1) with a margin, not from its widest interval: an early
    look's error is tiny, its intervals reach far past any value measured (their ends are off
    the axis, cut where it ends)."""
    import math

    for ax in fig.axes:  # a row shares its y axis: its limits are over the row's points
        values = [1.0] + [float(y) for a in ax.get_shared_y_axes().get_siblings(ax)
                          for c in a.containers for y in c.lines[0].get_ydata()
                          if y == y and math.isfinite(float(y)) and float(y) > 0]
        low, high = min(values), max(values)
        ax.set_ylim(low / 1.25 if low < 1 else low * 0.8, high * 1.25)


def throughput_vs_budget(result: RunResult) -> Any:
    """Output tok/s vs budget, with ``auto`` (dashed, its interval a band) and ``linear``
    (dotted) reference lines; the best point ringed."""
    return _vs_budget(result, [("output_tok_s", "")], "output tok/s", band="output_tok_s",
                      linear=True, ring=True)


def speedup_vs_budget(result: RunResult) -> Any:
    """Output tok/s relative to ``auto`` of the same workload, context and concurrency."""
    return _vs_budget(result, [("speedup", "")], "speedup vs auto", unit_line=1.0, ring=True,
                      from_zero=False)


def acceptance_vs_budget(result: RunResult) -> Any:
    """Mean acceptance length (tokens per verify step, weighted by tokens) vs budget."""
    return _vs_budget(result, [("acceptance_length", "")], "acceptance length (tokens/step)",
                      unit_line=1.0)


def ttft_vs_budget(result: RunResult) -> Any:
    """Time to first token, p50 (solid) and p99 (dashed; the maximum, labelled so, where fewer
    than 100 requests are behind it), vs budget; ``auto``'s p50 with its interval as a band."""
    return _vs_budget(result, [("ttft_p50_s", "p50"), ("ttft_tail_s", TAIL)], "TTFT (s)",
                      band="ttft_p50_s")


def itl_vs_budget(result: RunResult) -> Any:
    """Inter-token latency per token in ms, p50 (solid) and p99 (dashed; the maximum where
    fewer than 100 requests are behind it), vs budget; ``auto``'s p50 as a band."""
    return _vs_budget(result, [("itl_p50_s", "p50"), ("itl_tail_s", TAIL)], "ITL (ms)",
                      band="itl_p50_s", scale=1000.0)


def energy_vs_budget(result: RunResult) -> Any:
    """The cell's GPUs' energy per output token (J/token, :mod:`~specbench_lib.analysis.energy`)
    vs budget, with its interval; only for a run whose GPUs were sampled."""
    return _vs_budget(result, [("gpu_j_per_token", "")], "GPU energy (J / output token)",
                      band="gpu_j_per_token", ring=False)


def _sampled_gpus(result: RunResult) -> bool:
    return "gpu_j_per_token" in result.table().columns


def standard(result: RunResult) -> dict[str, Any]:
    """Every figure of a phase notebook by file name (the load figures when the run has several
    concurrency levels or open-loop rates)."""
    figures = {"claim_vs_budget": claim_vs_budget(result),  # the answer's quantity first
               "throughput_vs_budget": throughput_vs_budget(result),
               "speedup_vs_budget": speedup_vs_budget(result),
               "acceptance_vs_budget": acceptance_vs_budget(result),
               "ttft_vs_budget": ttft_vs_budget(result), "itl_vs_budget": itl_vs_budget(result)}
    if _sampled_gpus(result):
        figures["energy_vs_budget"] = energy_vs_budget(result)
    if len(step_points(result)):  # a drafting config's speedup split (.stepplots)
        figures["step_cost"] = step_cost_figure(result)
    verdicts = result.verdicts()
    if verdicts[verdicts["load"] == ""]["concurrency"].nunique() > 1:
        figures["latency_throughput"] = latency_throughput(result)
    if verdicts["concurrency"].nunique() > 1 or (verdicts["load"] != "").any():
        figures["speedup_vs_load"] = speedup_vs_load(result)
    params = result.info.params
    if params.get("groups") or any(w.get("category") for w in params.get("workloads", [])):
        figures["by_category"] = by_category(result)  # categories on x
    if result.cells and any(c.verdict.ok and c.spec.method != "auto" for c in result.cells):
        figures["speedup_per_prompt"] = speedup_per_prompt(result)  # the spread across prompts
        figures["speedup_vs_answer_length"] = speedup_vs_answer_length(result)
    return figures


def _vs_budget(result: RunResult, metrics: list[tuple[str, str]], ylabel: str, *,
               band: str | None = None, linear: bool = False, unit_line: float | None = None,
               scale: float = 1.0, ring: bool = False, table: Any = None,
               ring_quantity: str = OUTPUT_RATE.name, from_zero: bool = True) -> Any:
    import matplotlib.pyplot as plt

    verdicts = result.verdicts()
    table = with_tails(result.table() if table is None else table)
    contexts = sorted(verdicts["context"].unique())
    levels = sorted({tuple(v) for v in verdicts[_LEVEL].itertuples(index=False, name=None)},
                    key=lambda v: (v[3], v[0], v[1] != "", v[1], v[2]))
    spec = verdicts[verdicts["budget"].notna()]
    workloads = sorted(verdicts["workload"].unique())
    style = _Style(dict(zip(workloads, palette(len(workloads)), strict=True)),
                   {s: marker(i) for i, s in enumerate(sorted(spec["series"].unique()))},
                   {w: 2 ** (_DODGE * (i - (len(workloads) - 1) / 2)) for i, w in enumerate(workloads)})
    # a figure rings the set of the claim on the quantity it plots (end to end by default)
    best = result.best(ring_quantity) if ring else None
    fig, axes = plt.subplots(len(contexts), len(levels), squeeze=False, sharex=True, sharey="row",
                             figsize=(4.2 * len(levels), 3.4 * len(contexts)))
    for (r, ctx), (c, level) in ((rc, cl) for rc in enumerate(contexts) for cl in enumerate(levels)):
        ax = axes[r][c]
        panel = table[(table["context"] == ctx) & _at(table, level)]
        failed = spec[(spec["context"] == ctx) & _at(spec, level) & spec["failed"]]
        for column, label in metrics:
            _draw_series(ax, panel, failed, column, label, style, scale)
        for workload, rows in panel[panel["method"] == "auto"].groupby("workload"):
            if band is not None:
                auto_band(ax, rows, band, style.colours[workload], f"{workload} · auto", scale)
        if linear:
            for workload, rows in panel[panel["method"] == "linear"].groupby("workload"):
                ax.axhline(float(rows["output_tok_s"].max()), color=style.colours[workload],
                           linestyle=":", linewidth=1, label=f"{workload} · linear")
        if unit_line is not None:
            ax.axhline(unit_line, color="grey", linewidth=0.8)
        if best is not None:
            _ring_best(ax, panel, best, metrics[0][0], style, scale)
        _mark_failures(ax, failed, style)
        _axes(ax, spec, verdicts, ctx, level, panel, ylabel if c == 0 else None,
              r == len(contexts) - 1, from_zero)
    bottom = legend(fig, axes)
    fig.suptitle(title(result, ylabel), fontsize=10)
    fig.tight_layout(rect=(0, bottom, 1, 1))
    return fig


class _Style:
    """Colours by workload, markers by series, and each workload's dodge factor in x."""

    def __init__(self, colours: dict[str, str], markers: dict[str, str],
                 dodge: dict[str, float]) -> None:
        self.colours, self.markers, self.dodge = colours, markers, dodge


def _axes(ax: Any, spec: Any, verdicts: Any, ctx: Any, level: tuple[Any, ...], panel: Any,
          ylabel: str | None, bottom: bool, from_zero: bool = True) -> None:
    budgets = sorted(int(b) for b in spec["budget"].unique())
    ax.set_xscale("log", base=2)
    if budgets:
        ax.set_xticks(budgets, [str(b) for b in budgets])
        ax.set_xlim(budgets[0] / 1.4, budgets[-1] * 1.4)
    several = verdicts["output_tokens"].nunique() > 1
    sampled = verdicts["temperature"].nunique() > 1 or level[3] != 0
    note = requests_note(panel)
    ax.set_title(" · ".join([f"context {ctx}", f"concurrency {level[0]}",
                             *([level[1]] if level[1] else []),
                             *([f"{level[2]} output tokens"] if several else []),
                             *([f"T {level[3]:g}"] if sampled else []),
                             *([note] if note else [])]), fontsize=10)
    if from_zero:  # a ratio's axis is about 1, where its intervals are told apart
        ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    if ylabel:
        ax.set_ylabel(ylabel)
    if bottom:
        ax.set_xlabel("budget (max drafted tokens per step)")


# a panel's column of the budget figures (the sampling temperature a facet of its own)
_LEVEL = ["concurrency", "load", "output_tokens", "temperature"]


def _at(frame: Any, level: tuple[Any, ...]) -> Any:
    """The rows of ``frame`` at one concurrency × load point × output length × temperature."""
    return ((frame["concurrency"] == level[0]) & (frame["load"].astype(str) == level[1])
            & (frame["output_tokens"] == level[2]) & (frame["temperature"] == level[3]))


def _draw_series(ax: Any, panel: Any, failed: Any, column: str, label: str, style: _Style,
                 scale: float) -> None:
    """One line per workload × series; a failed budget of the series is a gap in it (NaN)."""
    import pandas as pd

    spec = panel[panel["budget"].notna() & panel[column].notna()]
    for (workload, name), group in spec.groupby(["workload", "series"]):
        gaps = failed[(failed["workload"] == workload) & (failed["series"] == name)]
        holes = pd.DataFrame({"budget": sorted(set(gaps["budget"]) - set(group["budget"]))})
        group = pd.concat([group, holes], ignore_index=True).sort_values("budget")
        x, y = group["budget"] * style.dodge[workload], group[column] * scale
        errors = None
        if column in _INTERVALS:
            low, high = (group[c] * scale for c in _INTERVALS[column])
            errors = [(y - low).clip(lower=0).fillna(0), (high - y).clip(lower=0).fillna(0)]
        colour, marker = style.colours[workload], style.markers[name]
        ax.errorbar(x, y, yerr=errors, marker=marker, color=colour, capsize=3,
                    linestyle=("--" if label.startswith("p99") else "-") if y.notna().sum() > 1
                    else "none", label=" · ".join(p for p in (turn_label(workload, group), name,
                                                               label) if p))
        unstable = group["unstable"].fillna(False).astype(bool)
        if unstable.any():
            ax.plot(x[unstable], y[unstable], linestyle="none", marker=marker, markersize=9,
                    markerfacecolor="white", markeredgecolor=colour,
                    label="unstable (CV over threshold)")


def _ring_best(ax: Any, panel: Any, best: Any, column: str, style: _Style, scale: float) -> None:
    """The panel's claim (:mod:`~specbench_lib.analysis.claim`, through ``result.best()``): its leader ringed
    black, the other configs of its confidence set ringed grey, and no other. ``auto`` as the leader is
    its band, not a point."""
    for workload, rows in panel[panel["budget"].notna()].groupby("workload"):
        first = rows.iloc[0]
        here = best[(best["workload"] == workload) & (best["context"] == first["context"])
                    & (best["concurrency"] == first["concurrency"])
                    & (best["load"].astype(str) == str(first["load"]))
                    & (best["output_tokens"] == first["output_tokens"])]
        if here.empty:
            continue
        leader, decided = str(here.iloc[0]["best"]), here.iloc[0]["decision"] == "decided"
        members = {m.strip() for m in str(here.iloc[0]["confidence_set"]).split(",") if m.strip()}
        for _, row in rows[rows["config"].isin(members)].iterrows():
            lead = row["config"] == leader
            # the best (decided) a black ring, the undecided leader a black square, the set grey
            ax.plot(row["budget"] * style.dodge[workload], row[column] * scale, linestyle="none",
                    marker="o" if decided or not lead else "s", markersize=15,
                    markerfacecolor="none", markeredgecolor="black" if lead else "0.6",
                    markeredgewidth=1.5,
                    label=("best" if decided else "fastest, undecided (the claim's leader)")
                    if lead else "could be the best (the claim's set)")


def _mark_failures(ax: Any, failed: Any, style: _Style) -> None:
    """Each failed budget of a series: × on the bottom edge, its workload, series and verdict."""
    groups = failed.groupby(["budget", "workload", "series"])
    for slot, ((budget, workload, series), group) in enumerate(groups):
        verdicts = "/".join(sorted(group["verdict"].unique()))
        mark_failure(ax, budget * style.dodge[workload], f"{workload} {series} {verdicts}", slot)


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
        if _sampled_gpus(result):
            figures[f"energy_vs_budget_{stem}"] = energy_vs_budget(result)
    return figures
