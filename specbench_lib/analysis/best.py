"""The best-config statement: per panel (workload × context × output length × load point), the
panel's claim (:mod:`.claim`: the confidence set for the best by multiple comparisons with the
best, the leader's ε, the decision and the leader's speedup over ``auto`` with its interval,
paired by prompt). Where each config stops paying as the load grows (its crossover) is
:mod:`.crossover`'s.

The statement says, in words, what the claim is: "ngram-b8 best: every other config shown
slower", "ngram-b8 at most 2.1 % slower than the best" (a tie within the margin) or "undecided",
then the speedup with its interval and the requests behind it, and the flags that limit it: an
unstable row (CV across repeats, or a failed repeat), greedy outputs that differ from
``auto``'s (``lossless``: the fraction identical), and no ok baseline.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..core.display import Rendered, html_text
from ..core.tables import bullets, readable
from ..model.quantities import OUTPUT_RATE, QUANTITIES
from ..model.records import CellRecord
from ..model.verdict import Reason
from .claim import ALPHA, EQUIVALENCE, Claim, Panel, behind_text, panel_claims, panel_of_cell
from .drift import panel_drift
from .intervals import key_value
from .metrics import PANEL
from .metricset import RESULTS
from .pairing import pairing_note
from .stepcost import panel_split_doc, split_words

LEVEL = f"{100 * (1 - ALPHA):g} %"
BEST_COLUMNS = [*PANEL, "best", "speedup", "speedup_lo", "speedup_hi", "half_width_pct",
                "confidence_set", "decision", "epsilon", "alpha", "equivalence", "unstable", "lossless",
                "repeats_n", "requests_n", "blocks", "drift_prefill", "drift", "pairing", "split",
                "quantity", "reason",
                "statement"]


def best_configs(cells: Sequence[CellRecord], table: Any, group: list[str], *,
                 equivalence: float = EQUIVALENCE,
                 alphas: Mapping[Panel, float] | None = None,
                 quantity: str = OUTPUT_RATE.name, explain: bool = True) -> Any:
    """One row per panel of ``table`` (:func:`~.metrics.results_table` of ``cells``): the
    panel's claim on ``quantity`` (:mod:`.claim`, :mod:`~specbench_lib.model.quantities`): its
    leader, confidence set (``confidence_set``: labels in the table's order), ``decision``,
    ``epsilon`` and the leader's speedup with its interval; with ``explain`` (the run's own
    claim; the others are stated beside it without repeating it) the speedup's split too."""
    import pandas as pd

    claims = table_claims(cells, table, alphas=alphas, equivalence=equivalence,
                          quantity=quantity)
    by_panel: dict[Panel, list[CellRecord]] = {}
    for cell in cells:
        by_panel.setdefault(panel_of_cell(cell), []).append(cell)
    rows = []
    several = table["output_tokens"].nunique() > 1
    for panel, rows_of in table.groupby(PANEL, sort=False, dropna=False):
        if str(panel[PANEL.index("load")]).endswith("/s"):  # a fixed offered rate
            rows.append(_at_rate(panel, rows_of))
            continue
        found = claims.get(tuple(key_value(v) for v in panel))
        if found is None or found.leader is None:
            continue
        best = rows_of.set_index("config").loc[found.leader]
        mine = by_panel.get(tuple(key_value(v) for v in panel), [])
        rows.append(claim_row(dict(zip(PANEL, panel, strict=True)), found, best,
                              outputs=several, drift=panel_drift(mine, found),
                              pairing=pairing_note(mine), split=panel_split_doc(
                                  mine, found.baseline, alpha=found.alpha,
                                  configs=len(found.rows)) if explain else None))
    return pd.DataFrame(rows, columns=BEST_COLUMNS)


def table_claims(cells: Sequence[CellRecord], table: Any, *,
                 equivalence: float = EQUIVALENCE, alphas: Mapping[Panel, float] | None = None,
                 quantity: str = OUTPUT_RATE.name) -> dict[Panel, Claim]:
    """Every panel's claim on ``quantity``, its configs in ``table``'s order: what
    :func:`best_configs` states and the claim's figure draws (one computation)."""
    order = {tuple(key_value(v) for v in p): list(map(str, r["config"]))
             for p, r in table.groupby(PANEL, sort=False, dropna=False)}
    return panel_claims(cells, alphas=alphas, equivalence=equivalence, configs=order,
                        quantity=quantity)


def claim_row(panel: dict[str, Any], found: Claim, best: Any, *, outputs: bool,
              drift: tuple[float, Reason | None] = (float("nan"), None),
              pairing: str | None = None, split: dict[str, Any] | None = None
              ) -> dict[str, Any]:
    """A panel's row of :func:`best_configs` from its claim, its leader's table row and its
    drift (:func:`~.drift.panel_drift`)."""
    speedup = found.speedup
    profile = str(panel.get("load") or "").startswith("p")
    low, high = (found.speedup_lo, found.speedup_hi) if not profile else (float("nan"),) * 2
    speedup = float("nan") if profile else speedup
    half = (100 * (high - low) / 2 / speedup if best["method"] != "auto" and speedup == speedup
            and speedup else float("nan"))  # auto against itself has no interval to speak of
    lossless = best.get("lossless_identical")
    assert found.leader is not None, "a claim's row is of a panel with a leader"
    top = found.rows[found.leader]
    row = {**panel, "best": found.leader, "speedup": speedup, "speedup_lo": low,
           "speedup_hi": high, "half_width_pct": half,
           "confidence_set": ", ".join(found.members), "decision": found.decision,
           "epsilon": found.epsilon, "alpha": found.alpha, "equivalence": found.equivalence,
           "unstable": bool(best["unstable"]),
           "lossless": None if lossless is None or lossless != lossless else float(lossless),
           "repeats_n": int(best["repeats_n"]), "requests_n": top.requests_n,
           "blocks": found.blocks, "drift_prefill": drift[0],
           "drift": None if drift[1] is None else str(drift[1]), "pairing": pairing,
           "split": split or None,  # the speedup split (.stepcost), per drafting config
           "quantity": found.quantity, "reason": found.reason}
    return {**row, "statement": statement(row, str(best["method"]), found.equivalence,
                                          outputs=outputs)}


def _at_rate(panel: tuple[Any, ...], rows_of: Any) -> dict[str, Any]:
    """A fixed offered rate's panel: every config's throughput is the rate asked for, so the
    configs are compared by E2E p50 at that load (the lowest leads); a point estimate, said so,
    and never a decision."""
    best = rows_of.sort_values("e2e_p50_s").iloc[0]
    row = {**dict(zip(PANEL, panel, strict=True)), "best": str(best["config"]),
           "speedup": float("nan"), "speedup_lo": float("nan"), "speedup_hi": float("nan"),
           "half_width_pct": float("nan"), "confidence_set": ", ".join(map(str, rows_of["config"])),
           "decision": "undecided", "epsilon": float("nan"), "alpha": ALPHA,
           "equivalence": float("nan"), "unstable": bool(best["unstable"]), "lossless": None,
           "repeats_n": int(best["repeats_n"]), "requests_n": int(best["requests_n"]),
           "blocks": None, "drift_prefill": float("nan"), "drift": None, "pairing": None,
           "split": None, "quantity": "e2e_p50_s", "reason": None}
    statement = (f"{where(row)}: lowest E2E p50 {row['best']} ({1000 * best['e2e_p50_s']:.0f} ms) "
                 f"at this offered rate, where every config's throughput is the rate (point "
                 f"estimates, not a decision)")
    return {**row, "statement": statement}


def where(row: Any, *, outputs: bool = False) -> str:
    """A panel as text: ``code/ctx256/c2``, with its output length (``outputs``: an axis) and
    its open-loop load point (``code/ctx256/o64/c4/2.5/s``)."""
    out = f"/o{int(row['output_tokens'])}" if outputs else ""
    load = f"/{row['load']}" if row.get("load") else ""
    turn = f"/turn{int(row['turn'])}" if row.get("turn", 1) not in (1, None) else ""
    return f"{row['workload']}{turn}/ctx{row['context']}{out}/c{row['concurrency']}{load}"


def verdict_words(row: Mapping[str, Any], equivalence: float) -> str:
    """The decision in words: "ngram-b8 best (every other config shown slower)", "ngram-b8 at
    most 2.1 % slower than the best (could be the best: …)", or "undecided: …", in the words
    of the row's quantity (:mod:`~specbench_lib.model.quantities`: "lower" acceptance), with
    the claim's ``reason`` where it is undecided whatever its data (one block:
    :data:`~.claim.ONE_BLOCK`). The level is the family's, 95 %: a budgeted run's looks share it
    (each claim at its share). The claim and the configs that could be the best
    (:func:`verdict_parts`), joined."""
    return "; ".join(filter(None, verdict_parts(row, equivalence)))


def verdict_parts(row: Mapping[str, Any], equivalence: float) -> tuple[str, str | None]:
    """:func:`verdict_words` in its two parts: the claim, and the clause naming the other
    configs that could be the best (None where every other config was shown slower)."""
    level = LEVEL
    q = QUANTITIES.get(str(row.get("quantity")), OUTPUT_RATE)
    members = [m.strip() for m in str(row["confidence_set"]).split(",") if m.strip()]
    others = ", ".join(m for m in members if m != row["best"])
    if reason_of(row):
        return (f"undecided: {row['best']} {q.better}, but {reason_of(row)}",
                f"could be the best: {', '.join(members)}")
    if row["decision"] == "decided":
        return f"{row['best']} best: every other config shown {q.worse} ({level})", None
    behind = behind_text(float(row["epsilon"]), q.worse)
    if row["decision"] == "tie":
        return (f"{row['best']} {behind} ({level}; within the {100 * equivalence:g} % margin)",
                f"could also be the best: {others}")
    return (f"undecided: {row['best']} {q.better}, {behind} ({level}; decided at "
            f"<= {100 * equivalence:g} %)", f"could be the best: {', '.join(members)}")


def reason_of(row: Mapping[str, Any]) -> str | None:
    """The claim's ``reason`` (why it is undecided whatever its data), from a row, an answer's
    panel or a table read back (None where it has none: NaN in a table without it)."""
    reason = row.get("reason")
    return reason if isinstance(reason, str) and reason else None


def time_words(row: Mapping[str, Any]) -> str:
    """What the claim says about the time its configs ran at: nothing with two blocks or more
    (the error holds the drift), a warning with one (unless its ``reason`` already says it), and
    the ``drift`` reason where it applies;
    then why the speedup is what it is (``split``: :func:`~.stepcost.split_words`), so every
    page that states the claim states its break-even too."""
    warning, drift, pairing = time_parts(row)
    return ((f" ({warning})" if warning else "") + (f" [{drift}]" if drift else "")
            + (f" [{pairing}]" if pairing else "") + split_words(row))


def time_parts(row: Mapping[str, Any]) -> tuple[str | None, str | None, str | None]:
    """:func:`time_words`'s limits on the claim as clauses: the one-block warning, the drift and
    the pairing (each None where it does not apply)."""
    blocks = row.get("blocks")
    warning = ("one block: each config measured in one stretch of time, so a change of the "
               "machine's speed between them counts as an effect"
               if blocks is not None and blocks == blocks and int(blocks) == 1
               and not reason_of(row) else None)
    return warning, (str(row["drift"]) if row.get("drift") else None), \
        (str(row["pairing"]) if row.get("pairing") else None)


def speedup_words(row: Mapping[str, Any], method: str, baseline: str = "auto") -> str:
    """"1.12× [1.05, 1.19] vs auto (simultaneous 95 %)" or why there is none."""
    level = LEVEL
    if method == "auto":
        return f"{baseline} itself is the fastest"
    if row["speedup"] != row["speedup"]:
        return f"no ok {baseline} baseline to compare with"
    low, high = row["speedup_lo"], row["speedup_hi"]
    span_ = (f"[{low:.2f}, {high:.2f}]" if low == low and high == high
             else "[no interval: too few paired requests]")
    return f"{row['speedup']:.2f}× {span_} vs {baseline} (simultaneous {level})"


def statement(row: dict[str, Any], method: str, equivalence: float, *, outputs: bool) -> str:
    """A panel's line: where, the decision in words, the speedup, the requests, the flags."""
    n = f"n={row['requests_n']} requests of {row['best']}, {row['repeats_n']} repeat(s)"
    q = QUANTITIES.get(str(row.get("quantity")))
    on = f" ({q.short})" if q is not None and q is not OUTPUT_RATE else ""
    text = (f"{where(row, outputs=outputs)}{on}: {verdict_words(row, equivalence)}; "
            f"{speedup_words(row, method)}, {n}{time_words(row)}")
    same = row["lossless"]
    flags = [f for f, on in (("UNSTABLE", row["unstable"]),
                             (f"{100 * (1 - (same or 0)):.0f} % of outputs differ from auto's",
                              same is not None and same < 1)) if on]
    return text + (f" [{', '.join(flags)}]" if flags else "")


def capacity_statements(capacity: Any) -> list[str]:
    """One line per row of :func:`~.slo.capacity`: "ngram-b8 code/ctx256: meets the SLO (p90)
    up to concurrency 2 (goodput 1.3 req/s)", or "at no concurrency measured"."""
    several = capacity["output_tokens"].nunique() > 1
    lines = []
    for _, row in capacity.iterrows():
        out = f"/o{int(row['output_tokens'])}" if several else ""
        closed = row["load_axis"] == "concurrency"
        top = row["max_concurrency_meeting_slo" if closed else "max_rate_meeting_slo"]
        what = "concurrency" if closed else "rate"
        p = f"p{100 * row['percentile']:g}"
        where_ = f"{row['config']} {row['workload']}/ctx{row['context']}{out}"
        if top is None or top != top:
            lines.append(f"{where_}: meets the SLO ({p}) at no {what} measured")
            continue
        at = f"concurrency {int(top)}" if closed else f"{top:.3g} req/s"
        lines.append(f"{where_}: meets the SLO ({p}) up to {at} "
                     f"(goodput {row['goodput_rps']:.3g} req/s)")
    return lines


class Summary(Rendered):
    """What a phase notebook ends with: the best-config statements on the run's claim quantity,
    the same claims on the other quantities (``others``: a heading → :func:`best_configs`'s
    rows), where each speculative config stops beating ``auto`` as the load grows, then the
    table behind them (per config: throughput and speedup with their intervals, n, flags)."""

    def __init__(self, best: Any, table: Any, crossing: Any = None, capacity: Any = None, *,
                 others: Mapping[str, Any] | None = None,
                 quantity: str = OUTPUT_RATE.label) -> None:
        self.best, self.table, self.crossing, self.capacity = best, table, crossing, capacity
        self.others, self.quantity = dict(others or {}), quantity

    def _sections(self) -> list[tuple[str, list[str]]]:
        found = [(f"best config per workload / context / concurrency, on {self.quantity} "
                  "(the run's claim; multiple comparisons with the best, paired by prompt)",
                  list(self.best["statement"]) or ["no ok cell"])]
        found += [(f"the same claims on {label} (beside the run's claim, not its stopping rule)",
                   list(rows["statement"])) for label, rows in self.others.items() if len(rows)]
        if self.crossing is not None and len(self.crossing):
            found.append(("speedup vs load (95 % intervals)", list(self.crossing["statement"])))
        if self.capacity is not None and len(self.capacity):
            found.append(("the highest load that meets the SLO", capacity_statements(self.capacity)))
        return found

    def text(self) -> str:
        lines = [line for title, items in self._sections()
                 for line in (f"{title}:", *(f"  {s}" for s in items))]
        return "\n".join(lines) + "\n\n" + str(self.table.to_string(index=False))

    def html(self) -> str:
        parts = [html_text(title[0].upper() + title[1:], bold=True) + bullets(items)
                 for title, items in self._sections()]
        return "".join(parts) + readable(_with_notes(self.table), RESULTS, what="rows")


def _with_notes(table: Any) -> Any:
    """The table with ``notes``: why a row has no interval, and its flags (unstable, greedy
    outputs that differ from ``auto``'s), in one cell."""
    notes = []
    for row in table.to_dict("records"):
        found = [str(row.get("interval_note") or "")]
        if row.get("unstable") is True:
            found.append("unstable")
        identical = row.get("lossless_identical")
        if isinstance(identical, float) and identical == identical and identical < 1:
            found.append(f"{100 * identical:.0f} % of outputs identical to auto's")
        notes.append("; ".join(n for n in found if n and n != "nan"))
    return table.assign(notes=notes)
