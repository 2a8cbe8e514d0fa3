"""Two runs side by side (before/after an engine upgrade, two forks, two machines): each matched
row's B / A with its own 95 % interval, a difference called only where it excludes 1.

Rows are matched by their spec (config × workload × context × concurrency). Per metric: both
values and their ratio B / A. Output tok/s's B / A (``b_over_a``) carries its own 95 %
interval (``b_over_a_lo/hi``) from both runs' bootstrap replicates
(:mod:`~specbench_lib.analysis.intervals`): the
runs are independent, so B's replicates are shuffled by a fixed permutation before they are
divided by A's (a ratio of independently drawn replicates, never paired by position), with the
smaller run's independent units as the units; a row ``differs`` only when that interval excludes 1 (two
overlapping intervals can still differ, and do not say "no difference"). The headline counts
the rows where B is slower, faster or not shown to differ, with the geometric mean of B / A over
the matched rows and its interval (from the same replicates: the mean of the rows' log ratios,
replicate by replicate; units: the matched rows' units summed). Verdict changes (ok → crashed,
…) of cells both runs have are listed cell by cell; the cells only one run has are summed up,
one line per config, with how the plans differ (cells planned, budget filter, time budget);
what differs in the setup (engine, model, measuring code, host, params, server argv) is read
from the two manifests. ``specbench compare A B`` prints it and writes an HTML page under
``outputs/compare/`` (laid out by :mod:`~specbench_lib.report.diffpage`, with its forest plot of B / A).
"""

from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import Any

from ..analysis.intervals import group_replicates, independent_units, interval, key_value, ok_groups
from ..analysis.metrics import GROUP, PANEL
from ..analysis.metricset import DIFF
from ..core.display import Rendered, html_page, image, png_data_uri
from ..runs.manifest import Manifest
from ..runs.results import RunResult
from .diffpage import compare_html, forest, plan_lines

KEYS = ["config", *PANEL]
METRICS = DIFF  # the metrics declared with a place on a diff page
RATIO = ["b_over_a", "b_over_a_lo", "b_over_a_hi", "differs"]  # output tok/s, B / A
_SHUFFLE = 20261202  # the seed of the permutation that makes B's draws independent of A's


class RunDiff(Rendered):
    """Run ``a`` (the reference) against run ``b``."""

    def __init__(self, a: RunResult, b: RunResult) -> None:
        self.a, self.b = a, b

    @cached_property
    def _matched(self) -> tuple[Any, list[Any], list[int]]:
        """The rows both runs have ok, and per row the replicates of B / A and their units."""
        import numpy as np

        merged = self.a.table().merge(self.b.table(), on=KEYS, suffixes=("_a", "_b"))
        mine, theirs = _row_replicates(self.a), _row_replicates(self.b)
        ratios: list[Any] = []
        units: list[int] = []
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
        for side in "ab":  # each run's own interval of output tok/s
            for end in ("lo", "hi"):
                found = merged.get(f"output_tok_s_{end}_{side}")
                out[f"output_tok_s_{side}_{end}"] = float("nan") if found is None else found
        bounds = [interval(r, n) for r, n in zip(ratios, units, strict=True)]
        out["b_over_a"] = merged["output_tok_s_b"] / merged["output_tok_s_a"]
        out["b_over_a_lo"] = [low for low, _ in bounds]
        out["b_over_a_hi"] = [high for _, high in bounds]
        out["differs"] = (out["b_over_a_lo"] > 1) | (out["b_over_a_hi"] < 1)
        return out

    def geometric_mean(self) -> tuple[float, float, float, int] | None:
        """The geometric mean of B / A over the matched rows with replicates: (point, low,
        high, rows), its interval from the rows' replicates, replicate by replicate."""
        import numpy as np

        rows = self.metrics()
        _, ratios, units = self._matched
        usable = [i for i, r in enumerate(ratios) if r is not None and bool((r > 0).all())
                  and rows["b_over_a"].iloc[i] > 0]
        if not usable:
            return None
        logs = np.vstack([np.log(ratios[i]) for i in usable]).mean(axis=0)
        point = float(np.exp(np.log(rows["b_over_a"].iloc[usable]).mean()))
        low, high = interval(np.exp(logs), sum(units[i] for i in usable))
        return point, low, high, len(usable)

    def headline(self) -> str:
        """The rows whose B / A interval is below 1, above 1, or holds it, and the geometric
        mean of B / A with its interval: "output tok/s, B / A: B slower in 24/24 matched rows,
        …; geometric mean 0.84 [0.80, 0.88] over 24 rows"."""
        rows = self.metrics()
        if not len(rows):
            return "output tok/s, B / A: no row is ok in both runs"
        total = len(rows)
        slower = int((rows["b_over_a_hi"] < 1).sum())
        faster = int((rows["b_over_a_lo"] > 1).sum())
        text = (f"output tok/s, B / A: B slower in {slower}/{total} matched rows, faster in "
                f"{faster}/{total}, no difference shown in {total - slower - faster}/{total} "
                f"(95 % intervals)")
        mean = self.geometric_mean()
        if mean is None:
            return text
        point, low, high, n = mean
        return text + f"; geometric mean {point:.2f} [{low:.2f}, {high:.2f}] over {n} rows"

    def plan_difference(self) -> list[str]:
        """How the two plans differ, a line each: the cells planned, a one-budget filter, a
        time budget, and each config (or cells of it) only one run has, with their verdicts."""
        return plan_lines(self.a, self.b, self.verdict_changes())

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

    def changed(self) -> Any:
        """The verdict changes of cells both runs have (a cell only one run has is a line of
        :meth:`plan_difference`)."""
        changes = self.verdict_changes()
        return changes[(changes["verdict_a"] != "absent") & (changes["verdict_b"] != "absent")]

    def claims(self) -> list[str]:
        """Each run's claim per panel, as its summary states it (:mod:`~specbench_lib.analysis.claim`)."""
        return [f"{name}: {line}" for name, run in (("A", self.a), ("B", self.b))
                for line in run.best()["statement"]]

    def text(self) -> str:
        shown = self.metrics()[[*KEYS, "output_tok_s_a", "output_tok_s_b", *RATIO]].round(3)
        return "\n\n".join([
            f"run A {self.a.run_id} vs run B {self.b.run_id}", self.headline(),
            "each run's claim:\n" + "\n".join(f"  {line}" for line in self.claims()),
            "plan:\n" + "\n".join(f"  {line}" for line in self.plan_difference()),
            "setup differences:\n" + _or_none(self.setup()),
            "verdict changes:\n" + _or_none(self.changed()),
            "output tok/s (B / A with its 95 % interval; differs: the interval excludes 1):\n"
            + _or_none(shown)])

    def html(self, figure: str = "") -> str:
        """The page's body: the headline, the plan difference, ``figure`` (an ``<img>``), the
        verdict changes, the matched rows (the full table collapsed) and the setup."""
        return compare_html(self, figure)

    def figure(self) -> Any:
        """A forest plot of output tok/s B / A: one row per matched config × panel with its 95 %
        interval, a line at 1, the geometric mean last (:func:`~specbench_lib.report.diffpage.forest`)."""
        return forest(self)


def write_diff(comparison: RunDiff, folder: Path) -> Path:
    """``<A>__vs__<B>.html`` (the tables and the figure, inlined) in ``folder``: the page
    carries its figure as a ``data:`` URI and loads nothing, so it can be mailed and read offline."""
    import io

    import matplotlib.pyplot as plt

    folder.mkdir(parents=True, exist_ok=True)
    png = io.BytesIO()
    fig = comparison.figure()
    fig.savefig(png, format="png", dpi=100)
    plt.close(fig)
    figure = image(png_data_uri(png.getvalue()), "output tok/s, B / A per matched row")
    path = folder / f"{comparison.a.run_id}__vs__{comparison.b.run_id}.html"
    path.write_text(html_page(f"specbench compare: {comparison.a.run_id} vs {comparison.b.run_id}",
                              comparison.html(figure)))
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
    units (:func:`~specbench_lib.analysis.intervals.independent_units`)."""
    groups = ok_groups(result.cells, GROUP)
    replicates = group_replicates(groups)
    where = [GROUP.index(k) for k in KEYS]
    return {tuple(k[i] for i in where): (replicates[k], independent_units(cells))
            for k, cells in groups.items()}


def _or_none(frame: Any) -> str:
    return frame.to_string(index=False) if len(frame) else "  none"
