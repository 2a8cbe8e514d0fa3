"""Two runs side by side (before/after an engine upgrade, two forks, two machines): each matched
row's B / A with its own 95 % interval, a difference called only where it excludes 1.

Rows are matched by their spec (config × workload × context × concurrency). Per metric: both
values and their ratio B / A. Output tok/s's B / A (``b_over_a``) carries its own 95 %
interval (``b_over_a_lo/hi``) from both runs' bootstrap replicates (:mod:`.intervals`): the
runs are independent, so B's replicates are shuffled by a fixed permutation before they are
divided by A's (a ratio of independently drawn replicates, never paired by position), with the
smaller run's independent units as the units; a row ``differs`` only when that interval excludes 1 (two
overlapping intervals can still differ, and do not say "no difference"). The headline counts
the rows where B is slower, faster or not shown to differ, with the geometric mean of B / A over
the matched rows and its interval (from the same replicates: the mean of the rows' log ratios,
replicate by replicate; units: the matched rows' units summed). Verdict changes (ok → crashed,
…) are listed cell by cell, and what differs in the setup (engine, model, measuring code, host,
params, server argv) is read from the two manifests. ``specbench compare A B`` prints it and
writes an HTML page under ``outputs/compare/``.
"""

from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import Any

from .display import Rendered, frame_table, html_page, html_text, image, png_data_uri
from .intervals import group_replicates, independent_units, interval, key_value, ok_groups
from .manifest import Manifest
from .metrics import GROUP, PANEL
from .results import RunResult

KEYS = ["config", *PANEL]
METRICS = ("output_tok_s", "speedup", "ttft_p50_s", "itl_p50_s", "acceptance_length")
RATIO = ["b_over_a", "b_over_a_lo", "b_over_a_hi", "differs"]  # output tok/s, B / A
_SHUFFLE = 20261202  # the seed of the permutation that makes B's draws independent of A's


class RunComparison(Rendered):
    """Run ``a`` (the reference) against run ``b``."""

    def __init__(self, a: RunResult, b: RunResult) -> None:
        self.a, self.b = a, b

    @cached_property
    def _matched(self) -> tuple[Any, list[Any], list[int]]:
        """The rows both runs have ok, and per row the replicates of B / A and their units."""
        import numpy as np

        merged = self.a.table().merge(self.b.table(), on=KEYS, suffixes=("_a", "_b"))
        mine, theirs = _row_replicates(self.a), _row_replicates(self.b)
        ratios, units = [], []
        for row in merged[KEYS].itertuples(index=False, name=None):
            key = tuple(key_value(v) for v in row)
            (a, n_a), (b, n_b) = mine.get(key, (None, 0)), theirs.get(key, (None, 0))
            if a is None or b is None:
                ratios.append(None)
            else:
                shuffle = np.random.default_rng(_SHUFFLE).permutation(len(b))
                ratios.append(b[shuffle] / a)
            units.append(min(n_a, n_b))
        return merged, ratios, units

    def metrics(self) -> Any:
        """One row per spec both runs have ok: each metric's A and B values and B / A
        (``*_ratio``); for output tok/s, B / A with its 95 % interval (``b_over_a``,
        ``b_over_a_lo/hi``) and ``differs``: the interval excludes 1 (see the module)."""
        merged, ratios, units = self._matched
        out = merged[KEYS].copy()
        for metric in METRICS:
            out[f"{metric}_a"], out[f"{metric}_b"] = merged[f"{metric}_a"], merged[f"{metric}_b"]
            if metric != "output_tok_s":
                out[f"{metric}_ratio"] = merged[f"{metric}_b"] / merged[f"{metric}_a"]
        bounds = [interval(r, n) for r, n in zip(ratios, units, strict=True)]
        out["b_over_a"] = merged["output_tok_s_b"] / merged["output_tok_s_a"]
        out["b_over_a_lo"] = [low for low, _ in bounds]
        out["b_over_a_hi"] = [high for _, high in bounds]
        out["differs"] = (out["b_over_a_lo"] > 1) | (out["b_over_a_hi"] < 1)
        return out

    def headline(self) -> str:
        """The rows whose B / A interval is below 1, above 1, or holds it, and the geometric
        mean of B / A with its interval: "output tok/s, B / A: B slower in 24/24 matched rows,
        …; geometric mean 0.84 [0.80, 0.88] over 24 rows"."""
        import numpy as np

        rows = self.metrics()
        if not len(rows):
            return "output tok/s, B / A: no row is ok in both runs"
        total = len(rows)
        slower = int((rows["b_over_a_hi"] < 1).sum())
        faster = int((rows["b_over_a_lo"] > 1).sum())
        text = (f"output tok/s, B / A: B slower in {slower}/{total} matched rows, faster in "
                f"{faster}/{total}, no difference shown in {total - slower - faster}/{total} "
                f"(95 % intervals)")
        _, ratios, units = self._matched
        usable = [i for i, r in enumerate(ratios) if r is not None and bool((r > 0).all())
                  and rows["b_over_a"].iloc[i] > 0]
        if not usable:
            return text
        logs = np.vstack([np.log(ratios[i]) for i in usable]).mean(axis=0)
        point = float(np.exp(np.log(rows["b_over_a"].iloc[usable]).mean()))
        low, high = interval(np.exp(logs), sum(units[i] for i in usable))
        return text + (f"; geometric mean {point:.2f} [{low:.2f}, {high:.2f}] over "
                       f"{len(usable)} rows")

    def verdict_changes(self) -> Any:
        """Every cell whose verdict differs between the runs (or that only one run has)."""
        left, right = self.a.verdicts(), self.b.verdicts()
        cols = [*KEYS, "verdict", "reasons"]
        merged = left[cols].merge(right[cols], on=KEYS, how="outer", suffixes=("_a", "_b"))
        changed = merged[merged["verdict_a"].fillna("absent") != merged["verdict_b"].fillna("absent")]
        return changed.fillna({"verdict_a": "absent", "verdict_b": "absent"})

    def setup(self) -> Any:
        """What differs in the two manifests: engine, model, code, host, params, server argv."""
        import pandas as pd

        a, b = _setup(self.a.manifest), _setup(self.b.manifest)
        rows = [{"what": k, "a": a.get(k), "b": b.get(k)} for k in sorted(a.keys() | b.keys())
                if a.get(k) != b.get(k)]
        return pd.DataFrame(rows, columns=["what", "a", "b"])

    def text(self) -> str:
        shown = self.metrics()[[*KEYS, "output_tok_s_a", "output_tok_s_b", *RATIO]].round(3)
        return "\n\n".join([
            f"run A {self.a.run_id} vs run B {self.b.run_id}", self.headline(),
            "setup differences:\n" + _or_none(self.setup()),
            "verdict changes:\n" + _or_none(self.verdict_changes()),
            "output tok/s (B / A with its 95 % interval; differs: the interval excludes 1):\n"
            + _or_none(shown)])

    def html(self) -> str:
        return "".join([
            html_text(f"run A {self.a.run_id} vs run B {self.b.run_id}", bold=True),
            html_text(self.headline()),
            html_text("Setup differences", bold=True), frame_table(self.setup()),
            html_text("Verdict changes", bold=True), frame_table(self.verdict_changes()),
            html_text("Metrics (B / A; b_over_a: output tok/s with its 95 % interval; differs: "
                      "the interval excludes 1)", bold=True),
            frame_table(self.metrics())])

    def figure(self) -> Any:
        """Output tok/s of B against A per matched row, the diagonal drawn; intervals as bars.

        A spec ok in one run only is a red × on the other run's axis (at its one value),
        labelled with the other run's verdict: a failure is marked, never drawn as zero."""
        import matplotlib.pyplot as plt

        left, right = self.a.table(), self.b.table()
        rows = left.merge(right, on=KEYS, suffixes=("_a", "_b"))
        fig, ax = plt.subplots(figsize=(5.5, 5))
        for i, (config, group) in enumerate(rows.groupby("config", sort=False)):
            xerr = [(group["output_tok_s_a"] - group["output_tok_s_lo_a"]).clip(lower=0),
                    (group["output_tok_s_hi_a"] - group["output_tok_s_a"]).clip(lower=0)]
            yerr = [(group["output_tok_s_b"] - group["output_tok_s_lo_b"]).clip(lower=0),
                    (group["output_tok_s_hi_b"] - group["output_tok_s_b"]).clip(lower=0)]
            ax.errorbar(group["output_tok_s_a"], group["output_tok_s_b"], xerr=xerr, yerr=yerr,
                        marker="o", linestyle="none", color=f"C{i}", capsize=2, label=config)
        values = [{tuple(r[k] for k in KEYS): float(r["output_tok_s"])
                   for r in t.to_dict("records")} for t in (left, right)]
        for change in self.verdict_changes().to_dict("records"):
            ok_in_a = change["verdict_a"] == "ok"
            if not ok_in_a and change["verdict_b"] != "ok":
                continue  # failed in both: no value to place it at (listed in the table)
            value = values[0 if ok_in_a else 1][tuple(change[k] for k in KEYS)]
            verdict = change["verdict_b"] if ok_in_a else change["verdict_a"]
            point, transform = ((value, 0), ax.get_xaxis_transform()) if ok_in_a else \
                ((0, value), ax.get_yaxis_transform())
            ax.plot(*point, marker="x", color="red", markersize=9, clip_on=False,
                    transform=transform)
            ax.annotate(f"{change['config']}: {verdict} in {'B' if ok_in_a else 'A'}", point,
                        xycoords=transform, color="red", fontsize=7, textcoords="offset points",
                        xytext=(-4, 6) if ok_in_a else (4, 4), ha="right" if ok_in_a else "left")
        highs = [float(v) for v in (rows["output_tok_s_hi_a"].max(), rows["output_tok_s_hi_b"].max(),
                                    left["output_tok_s"].max(), right["output_tok_s"].max())
                 if v == v]  # NaN (no ok cell) is not a limit
        top = max([*highs, 1.0])
        ax.plot([0, top], [0, top], color="grey", linewidth=0.8)
        ax.set_xlabel(f"output tok/s, A {self.a.run_id}", fontsize=8)
        ax.set_ylabel(f"output tok/s, B {self.b.run_id}", fontsize=8)
        ax.set_xlim(0, top * 1.05)
        ax.set_ylim(0, top * 1.05)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
        fig.tight_layout()
        return fig


def write_comparison(comparison: RunComparison, folder: Path) -> Path:
    """``<A>__vs__<B>.html`` (the tables and the figure, inlined) in ``folder``: the page
    carries its figure as a ``data:`` URI and loads nothing, so it can be mailed and read offline."""
    import io

    import matplotlib.pyplot as plt

    folder.mkdir(parents=True, exist_ok=True)
    png = io.BytesIO()
    fig = comparison.figure()
    fig.savefig(png, format="png", dpi=100)
    plt.close(fig)
    figure = image(png_data_uri(png.getvalue()), "output tok/s, B against A")
    path = folder / f"{comparison.a.run_id}__vs__{comparison.b.run_id}.html"
    path.write_text(html_page(f"specbench compare: {comparison.a.run_id} vs {comparison.b.run_id}",
                              comparison.html() + figure))
    return path


def _setup(manifest: dict[str, Any]) -> dict[str, Any]:
    run = Manifest.from_dict(manifest)
    environment = run.last_attempt.environment if run.last_attempt else {}
    found = {f"engine.{k}": v for k, v in run.engine.items()}
    found |= {f"model.{k}": v for k, v in run.model.items()}
    found |= {f"code.{k}": v for k, v in run.fingerprint_components.items() if k == "code"}
    found |= {f"host.{k}": v for k, v in environment.items()}
    found |= {f"params.{k}": v for k, v in run.params.items()}
    found |= {f"argv.{label}": " ".join(s.argv) for label, s in run.servers.items()}
    return {k: str(v) for k, v in found.items()}


def _row_replicates(result: RunResult) -> dict[tuple[Any, ...], tuple[Any, int]]:
    """Per table row (:data:`KEYS`) of ``result``: its throughput replicates and independent
    units (:func:`~.intervals.independent_units`)."""
    groups = ok_groups(result.cells, GROUP)
    replicates = group_replicates(groups)
    where = [GROUP.index(k) for k in KEYS]
    return {tuple(k[i] for i in where): (replicates[k], independent_units(cells))
            for k, cells in groups.items()}


def _or_none(frame: Any) -> str:
    return frame.to_string(index=False) if len(frame) else "  none"
