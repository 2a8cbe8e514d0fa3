"""A results row's own figures, over its repeats and against its panel's other configs: how
many repeats and how steady, and the speedups (the panel's claim, :mod:`~specbench_lib.analysis.claim`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from ...model.quantities import DECODE_RATE
from ...model.records import CellRecord
from ...model.tablekeys import GROUP, PANEL
from ..metric import Family, Metric


def row_columns(means: Any, grouped: Any, cells: Sequence[CellRecord], unstable_cv: float,
                alphas: Mapping[Any, float] | None) -> Any:
    """``means`` (a row per :data:`GROUP`, ``grouped`` its repeats) with this family's columns
    and the intervals of the others (:func:`~specbench_lib.analysis.intervals.add_intervals`)."""
    from ..claim import claim_columns, panel_claims
    from ..intervals import add_intervals

    means = _speedups(_repeat_columns(means, grouped, cells, unstable_cv))
    means = add_intervals(means, cells, PANEL, GROUP)
    means = claim_columns(means, panel_claims(cells, alphas=alphas))
    return claim_columns(means, panel_claims(cells, alphas=alphas, quantity=DECODE_RATE.name),
                         "decode_speedup")


def _repeat_columns(means: Any, grouped: Any, cells: Sequence[CellRecord],
                    unstable_cv: float) -> Any:
    """Each row's repeats, failed repeats, CV of output tok/s, stability."""
    from ..intervals import key_value

    tok_s = grouped["output_tok_s"]
    means["repeats_n"] = grouped.size().to_numpy()
    failed = Counter(tuple(key_value(c.spec.row()[k]) for k in GROUP) for c in cells
                     if c.status in ("invalid", "crashed"))
    means["repeats_failed"] = [failed[tuple(key_value(v) for v in row)]
                               for row in means[GROUP].itertuples(index=False, name=None)]
    means["output_tok_s_cv"] = (tok_s.std(ddof=1) / tok_s.mean()).to_numpy()
    means["unstable"] = (means["output_tok_s_cv"] > unstable_cv) | (means["repeats_failed"] > 0)
    return means


def _speedups(means: Any) -> Any:
    """``speedup`` against the panel's ``auto`` row (its first, the claims' baseline, where a
    plan has two: an A/A pair), ``speedup_vs_linear`` against its best ``linear`` row (NaN where
    there is none)."""
    keys = PANEL
    base = means[means["method"] == "auto"][[*keys, "output_tok_s"]].drop_duplicates(
        subset=keys, keep="first")
    base = base.rename(columns={"output_tok_s": "auto_tok_s"})
    means = means.merge(base, on=keys, how="left")
    means["speedup"] = means["output_tok_s"] / means["auto_tok_s"]
    linear = means[means["method"] == "linear"].groupby(keys)["output_tok_s"].max()
    means = means.merge(linear.rename("linear_tok_s").reset_index(), on=keys, how="left")
    means["speedup_vs_linear"] = means["output_tok_s"] / means["linear_tok_s"]
    return means.drop(columns=["auto_tok_s", "linear_tok_s"])


FAMILY = Family(110, (
    Metric("repeats_n", "repeats", "the row's ok repeats", "row", summary=7),
    Metric("repeats_failed", "repeats", "the row's repeats that ended invalid or crashed", "row",
           summary=8),
    Metric("output_tok_s_cv", "fraction", "coefficient of variation of output tok/s over the "
           "repeats (NaN for one)", "row"),
    Metric("unstable", "bool", "a CV above `unstable_cv` or a failed repeat", "row", summary=9),
    Metric("speedup", "ratio", "output tok/s over the panel's `auto` row's: the panel's claim, "
           "paired by prompt, simultaneous over its configs", "row",
           header="speedup vs auto [95 %]", form="{:.2f}", interval=True, baseline=True,
           lead=2, diff=2, summary=2),
    Metric("decode_speedup", "ratio", "a request's decode rate (after its first token) over "
           "the panel's `auto` row's: the panel's claim on `decode_rate`, paired by prompt, "
           "simultaneous over its configs", "row", header="decode speedup vs auto [95 %]",
           form="{:.2f}", interval=True, baseline=True, summary=3),
    Metric("speedup_vs_linear", "ratio", "output tok/s over the panel's best `linear` row's",
           "row", baseline=True),
    Metric("requests_n", "requests", "the requests behind the row's interval", "row",
           header="requests", form="{:g}", lead=3, summary=4),
    Metric("units_n", "units", "the independent units behind the row's interval (repeats, "
           "requests, or blocks of requests in flight together)", "row", summary=5),
    Metric("interval_note", "text", "why the row has no interval (empty when it has one)", "row",
           summary=6),
))
