"""What ``specbench compare A B`` shows: its page laid out to fit 1280 px and its forest plot.

The page leads with the headline (B slower / faster / not shown to differ in how many matched
rows, and the geometric mean of B / A with its interval), then how the plans differ (the cells
planned, a one-budget filter, a time budget, and each config only one run has as one line, never
a row per cell), the forest plot (B / A per matched config × panel with its 95 % interval, a line
at 1, the geometric mean last), the verdict changes of cells both runs have, the matched rows
(key columns first, the full table collapsed) and the setup differences. It reads a
:class:`~.diff.RunDiff` through its methods (this module does not import it).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from ..core.display import Html, html_table, html_text
from ..core.durations import span
from ..core.tables import (
    ROW_KEYS,
    Column,
    bullets,
    count,
    details,
    headline,
    missing,
    plan_names,
    plan_sorted,
    readable,
)
from ..model.tablekeys import PANEL
from ..runs.manifest import Manifest

_MATCHED = (*ROW_KEYS, Column("tok_a", "A output tok/s [95 %]", "{:.1f}", interval=True),
            Column("tok_b", "B output tok/s [95 %]", "{:.1f}", interval=True),
            Column("b_over_a", "B / A [95 %]", "{:.2f}", interval=True),
            Column("change", "change"),
            Column("ttft_p50_s_ratio", "TTFT p50 B / A", "{:.2f}"),
            Column("itl_p50_s_ratio", "ITL p50 B / A", "{:.2f}"),
            Column("acceptance", "acceptance A → B"))
_CHANGED = (*ROW_KEYS, Column("verdict_a", "verdict in A"), Column("verdict_b", "verdict in B"),
            Column("reasons_a", "reasons in A"), Column("reasons_b", "reasons in B"))
_SLOWER, _FASTER, _SAME = "#c0392b", "#1e8449", "#7f8c8d"


def plan_lines(a: Any, b: Any, changes: Any) -> list[str]:
    """How run ``b``'s plan differs from run ``a``'s, a line each; ``changes``: the verdict
    changes (:meth:`~.diff.RunDiff.verdict_changes`), whose cells one run lacks are
    summed up per config and run."""
    first, second = Manifest.from_dict(a.manifest), Manifest.from_dict(b.manifest)
    lines = []
    planned = [len(m.plan_fingerprints or {}) or None for m in (first, second)]
    if planned[0] != planned[1]:
        lines.append(f"cells planned: A {planned[0] or '?'}, B {planned[1] or '?'}")
    if first.budget != second.budget:
        lines.append("budget filter: " + ", ".join(
            f"{side} {'every budget' if m.budget is None else f'budget {m.budget} only'}"
            for side, m in (("A", first), ("B", second))))
    budgets = [m.params.get("time_budget_s") for m in (first, second)]
    if budgets[0] != budgets[1]:
        lines.append("time budget: " + ", ".join(
            f"{side} {span(float(t)) if t else 'none (the fixed plan)'}"
            for side, t in zip("AB", budgets, strict=True)))
    lines += _absent_lines(changes)
    if not lines:
        same = f"{planned[0]} cells" if planned[0] else "the same cells"
        lines.append(f"the same plan in both runs: {same}")
    return lines


def _absent_lines(changes: Any) -> list[str]:
    """One line per config and run for the cells only that run has: "ngram-b4: only in A
    (8 cells: ok 8)", or "ngram-b8: 4 cells only in A (ok 4)" when B has others of it."""
    lines = []
    records = changes.to_dict("records")
    for side, other in (("a", "b"), ("b", "a")):
        alone = [r for r in records if r[f"verdict_{other}"] == "absent"]
        in_other = {r["config"] for r in records if r[f"verdict_{other}"] != "absent"}
        for config in dict.fromkeys(r["config"] for r in alone):
            mine = [r for r in alone if r["config"] == config]
            counts = ", ".join(f"{v} {n}" for v, n in Counter(r[f"verdict_{side}"]
                                                            for r in mine).items())
            name = side.upper()
            lines.append(f"{config}: {count(len(mine), 'cell')} only in {name} ({counts})"
                         if config in in_other else
                         f"{config}: only in {name} ({count(len(mine), 'cell')}: {counts})")
    return lines


def compare_html(comparison: Any, figure: str = "") -> str:
    """The compare page's body (see the module)."""
    a, b = comparison.a, comparison.b
    names = [*plan_names(a.info.params), *plan_names(b.info.params)]
    changed = plan_sorted(comparison.changed(), names, PANEL)
    setup = comparison.setup()
    lead = headline(f"<b>{_escape(comparison.headline())}</b><br>A is run {_escape(a.run_id)}, "
                    f"B is run {_escape(b.run_id)}", is_html=True)
    setup_table = html_table(["what", "A", "B"], [
        [what, *("(none)" if missing(v) else v for v in values)]
        for what, *values in setup.itertuples(index=False, name=None)])
    return "".join([
        lead,
        html_text("Each run's claim", bold=True), bullets(comparison.claims()),
        html_text("How the plans differ", bold=True), bullets(comparison.plan_difference()),
        figure,
        html_text("Verdict changes", bold=True,
                  detail=f"{len(changed)} of the cells both runs have"),
        readable(changed, _CHANGED, what="cells") if len(changed) else "",
        html_text("Matched rows", bold=True, detail="ok in both runs; B / A of output tok/s "
                  "with its 95 % interval, a change only where it excludes 1"),
        readable(matched_rows(comparison, names), _MATCHED, what="rows"),
        details(f"Setup differences ({len(setup)}): "
                + (", ".join(setup["what"].head(6)) + (" …" if len(setup) > 6 else "")
                   if len(setup) else "none"), setup_table, open_=0 < len(setup) <= 6)])


def matched_rows(comparison: Any, names: list[str]) -> Any:
    """The matched rows in plan order, with the columns the page shows (each run's tok/s with
    its interval, the change, acceptance A → B)."""
    rows = plan_sorted(comparison.metrics(), names, PANEL)
    rows = rows.assign(
        change=["B slower" if hi < 1 else "B faster" if lo > 1 else ""
                for lo, hi in zip(rows["b_over_a_lo"], rows["b_over_a_hi"], strict=True)],
        acceptance=[None if a != a or b != b else f"{a:.2f} → {b:.2f}" for a, b in
                    zip(rows["acceptance_length_a"], rows["acceptance_length_b"], strict=True)])
    for side in "ab":
        rows[f"tok_{side}"] = rows[f"output_tok_s_{side}"]
        for end in ("lo", "hi"):
            rows[f"tok_{side}_{end}"] = rows.get(f"output_tok_s_{side}_{end}")
    return rows


def row_label(row: dict[str, Any], several: dict[str, bool]) -> str:
    """A matched row's name on the forest plot: its config and the panel keys that vary."""
    parts = [str(row["config"]), str(row["workload"]), f"ctx{row['context']}"]
    if several.get("output_tokens"):
        parts.append(f"o{row['output_tokens']}")
    parts.append(f"c{row['concurrency']}")
    if row.get("load"):
        parts.append(str(row["load"]))
    return " ".join(parts)


def forest(comparison: Any) -> Any:
    """Output tok/s B / A per matched row (plan order, top to bottom) with its 95 % interval,
    coloured by what it shows (slower, faster, no difference shown), a line at 1 and the
    geometric mean last as a diamond. A cell ok in one run only has no ratio: it is not drawn
    (the figure says how many, the page lists them)."""
    import matplotlib.pyplot as plt

    a, b = comparison.a, comparison.b
    rows = matched_rows(comparison, [*plan_names(a.info.params), *plan_names(b.info.params)])
    several = {k: rows[k].nunique() > 1 for k in PANEL} if len(rows) else {}
    records = rows.to_dict("records")
    mean = comparison.geometric_mean()
    drawn = len(records) + (mean is not None)
    fig, ax = plt.subplots(figsize=(7.5, 1.4 + 0.26 * max(drawn, 1)))
    for y, row in enumerate(records):
        ratio, low, high = row["b_over_a"], row["b_over_a_lo"], row["b_over_a_hi"]
        colour = _SLOWER if high < 1 else _FASTER if low > 1 else _SAME
        if low == low and high == high:
            ax.plot([low, high], [y, y], color=colour, linewidth=1.6)
        ax.plot([ratio], [y], marker="o", color=colour, markersize=4)
    labels = [row_label(r, several) for r in records]
    if mean is not None:
        point, low, high, n = mean
        y = len(records)
        ax.plot([low, high], [y, y], color="black", linewidth=1.6)
        ax.plot([point], [y], marker="D", color="black", markersize=6)
        labels.append(f"geometric mean ({count(n, 'row')})")
    ax.axvline(1.0, color="black", linewidth=0.8, linestyle="--")
    ax.set_yticks(range(len(labels)), labels, fontsize=7)
    ax.set_ylim(max(drawn, 1) - 0.5, -0.5)
    ax.set_xscale("log")
    ax.set_xlabel("output tok/s, B / A (log scale; 95 % intervals; < 1: B slower)", fontsize=8)
    absent = int((comparison.verdict_changes()[["verdict_a", "verdict_b"]] == "ok").any(axis=1)
                 .sum())
    note = f" · {count(absent, 'cell')} ok in one run only: not drawn, see the verdict changes" \
        if absent else ""
    ax.set_title(f"B {b.run_id} / A {a.run_id}{note}", fontsize=8)
    ax.grid(axis="x", alpha=0.3, which="both")
    if not records:
        ax.text(0.5, 0.5, "no row is ok in both runs", transform=ax.transAxes, ha="center")
    fig.tight_layout()
    return fig


def _escape(text: str) -> Html:
    import html

    return Html(html.escape(text))
