"""The spread across prompts: each config's per-prompt speedups against its panel's baseline.

The claim (:mod:`.claim`) states one number per config, the paired mean log ratio over the
prompts both configs measured (:mod:`.units`). Behind it is one ratio per prompt: some prompts
gain from a drafter and some lose. This module keeps them.

**Per prompt.** For every panel with a baseline (its first ``auto`` config, as the claim takes
it) and every other config, :func:`prompt_table` has one row per unit both measured (a prompt at
concurrency 1; at concurrency c a block of c requests sent together, :mod:`.units`): its block
(repeat or round), its request index (the block's number at c > 1), its **category**, its
**answer length** (the baseline's completion tokens: the prompt's answer, not the config's), the
documents it was cut from, the per-prompt log ratio (:func:`~.units.log_ratios`, any quantity the
units carry) and its speedup exp(log ratio). A prompt's category is its cell's workload (a
workload with ``categories`` is one workload per category); in a ``groups`` panel
(:func:`~.bycategory.pooled`) the member workload it came from. Its **length** bin is the
panel's terciles of those answer lengths (``short``/``medium``/``long``; one bin where every
answer has the same length, as with ``stop: length``).

**The distribution** (:class:`Spread`, :func:`spreads`): the speedups' p10, p50 and p90, the sd
of the log ratio across prompts (``sd_prompt``) and across the blocks' means (``sd_block``: the
sd whose √B-th part is the claim's standard error, so the one that decides how many requests a
panel needs), the prompts that gain (> 1) and lose (< 1), and the paired speedup (the claim's
point estimate). :func:`spreads` gives it per config, per config × category and per config ×
length bin.

**In the answer** (:func:`panel_spread`): the leader's spread against the baseline (where the
baseline leads, the fastest other config's), one phrase for the panel's line ("per prompt
0.82-1.31× (p10-p90), 11 of 18 prompts faster") and its numbers for ``answer.json``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from ..core.display import Rendered, frame_table, html_text
from ..core.tables import details
from ..model.records import CellRecord
from ..model.tablekeys import PANEL
from .best import where
from .claim import Claim, Panel, panel_of_cell
from .units import UnitId, Units, log_ratios, paired_logs, unit_requests, units_of

UnitsOf = Callable[[Sequence[CellRecord]], Units]
PROMPT_COLUMNS = [*PANEL, "config", "baseline", "block", "request", "category", "answer_tokens",
                  "length", "sources", "log_ratio", "speedup"]
SPREAD_FIELDS = ["prompts", "blocks", "speedup", "p10", "p50", "p90", "sd_prompt", "sd_block",
                 "faster", "slower"]


@dataclass(frozen=True)
class Spread:
    """Per-prompt speedups as a distribution (see the module)."""

    prompts: int
    blocks: int
    speedup: float  # exp of the paired mean (block means): the claim's point estimate
    p10: float
    p50: float
    p90: float
    sd_prompt: float  # of the per-prompt log ratio
    sd_block: float  # of the blocks' mean log ratios (NaN with one block)
    faster: int  # prompts whose speedup is above 1
    slower: int  # below 1

    def entry(self) -> dict[str, Any]:
        """The numbers for ``answer.json`` (as computed, rounded only when shown; None for NaN)."""
        return {k: (None if v != v else v) if isinstance(v, float) else v
                for k, v in asdict(self).items()}


def spread_of(logs: Any, blocks: Sequence[int]) -> Spread:
    """The distribution of per-prompt log ratios ``logs`` (numpy) with each one's block."""
    import numpy as np

    logs = np.asarray(logs, dtype=float)
    if logs.size == 0:
        nan = math.nan
        return Spread(0, 0, nan, nan, nan, nan, nan, nan, 0, 0)
    pair = paired_logs(logs, blocks)
    speedups = np.exp(logs)
    p10, p50, p90 = (float(q) for q in np.quantile(speedups, [0.1, 0.5, 0.9]))
    sd_prompt = float(np.std(logs, ddof=1)) if logs.size >= 2 else math.nan
    # the claim's SE is sd(block means)/√B: its sd is the SE back (NaN with one block)
    sd_block = pair.se * math.sqrt(pair.n) if pair.blocks >= 2 else math.nan
    return Spread(int(logs.size), pair.blocks, math.exp(pair.diff), p10, p50, p90, sd_prompt,
                  sd_block, int((speedups > 1).sum()), int((speedups < 1).sum()))


def category_of(cell: CellRecord, groups: Mapping[str, Sequence[str]] | None = None) -> str:
    """A cell's category: its workload, or in a pooled group's panel the member workload it
    came from (:func:`~.bycategory.pooled` numbers member i's repeats from i × repeats)."""
    members = (groups or {}).get(cell.spec.workload)
    if not members:
        return cell.spec.workload
    each = max(1, cell.spec.repeats // len(members))
    return str(members[min(len(members) - 1, cell.spec.repeat // each)])


@dataclass(frozen=True)
class _About:
    """What a unit is, beside its ratio: category, answer length and documents."""

    category: str
    answer_tokens: float
    sources: str


def _about(cells: Sequence[CellRecord], groups: Mapping[str, Sequence[str]] | None
           ) -> dict[UnitId, _About]:
    found = {}
    for cell in cells:
        category = category_of(cell, groups)
        for unit, recs in unit_requests(cell).items():
            tokens = [float(r.final.completion_tokens or 0) for r in recs if r.final]
            docs = [s for r in recs if r.index < len(cell.prompts)
                    for s in cell.prompts[r.index].sources]
            found[unit] = _About(category, sum(tokens) / len(tokens) if tokens else math.nan,
                                 " ".join(dict.fromkeys(docs)))
    return found


def _common(a: Units, b: Units) -> tuple[Units, Units]:
    """``a`` and ``b`` on the units both measured with a positive, finite rate, in ``a``'s
    order: :func:`~.units.log_ratios` of them is one value per id, aligned with the ids."""
    import numpy as np

    where = {u: k for k, u in enumerate(b.ids)}
    keep = [(k, where[u]) for k, u in enumerate(a.ids) if u in where]
    ra = np.array([a.tokens[k] / a.seconds[k] if a.seconds[k] > 0 else math.nan for k, _ in keep])
    rb = np.array([b.tokens[j] / b.seconds[j] if b.seconds[j] > 0 else math.nan for _, j in keep])
    ok = [p for p, x, y in zip(keep, ra, rb, strict=True)
          if x > 0 and y > 0 and math.isfinite(x) and math.isfinite(y)]
    ka, kb = [k for k, _ in ok], [j for _, j in ok]
    ids = tuple(a.ids[k] for k in ka)
    return (replace(a, ids=ids, tokens=a.tokens[ka], seconds=a.seconds[ka]),
            replace(b, ids=ids, tokens=b.tokens[kb], seconds=b.seconds[kb]))


def panels(cells: Sequence[CellRecord]) -> dict[Panel, tuple[str | None, dict[str, list[CellRecord]]]]:
    """Each panel's baseline (its first ``auto`` config, as :func:`~.claim.panel_claims`) and
    its ok cells by config, in the order they come."""
    found: dict[Panel, tuple[str | None, dict[str, list[CellRecord]]]] = {}
    for cell in cells:
        panel = panel_of_cell(cell)
        base, by_config = found.setdefault(panel, (None, {}))
        if base is None and cell.spec.method == "auto":
            found[panel] = base, by_config = cell.spec.config, by_config
        if cell.verdict.ok:
            by_config.setdefault(cell.spec.config, []).append(cell)
    return found


def prompt_rows(panel: Panel, by_config: Mapping[str, Sequence[CellRecord]], baseline: str,
                config: str, *, units: UnitsOf = units_of,
                groups: Mapping[str, Sequence[str]] | None = None) -> list[dict[str, Any]]:
    """One config's rows of :func:`prompt_table` in one panel (no length bin yet)."""
    base = by_config.get(baseline, [])
    mine, theirs = _common(units(by_config.get(config, [])), units(base))
    logs, blocks = log_ratios(mine, theirs)
    about = {**_about(by_config.get(config, []), groups), **_about(base, groups)}
    rows = []
    for unit, value, block in zip(mine.ids, logs, blocks, strict=True):
        what = about.get(unit, _About("", math.nan, ""))
        rows.append({**dict(zip(PANEL, panel, strict=True)), "config": config,
                     "baseline": baseline, "block": block, "request": unit[1],
                     "category": what.category, "answer_tokens": what.answer_tokens,
                     "length": "", "sources": what.sources, "log_ratio": float(value),
                     "speedup": math.exp(float(value))})
    return rows


def prompt_table(cells: Sequence[CellRecord], *, units: UnitsOf = units_of,
                 groups: Mapping[str, Sequence[str]] | None = None) -> Any:
    """Every config's per-prompt speedups against its panel's baseline (see the module), one
    row per prompt, with its panel's length bin; ``groups``: the params' groups, where
    ``cells`` are pooled ones (their category is the member workload)."""
    import pandas as pd

    rows = []
    for panel, (baseline, by_config) in panels(cells).items():
        if baseline is None or baseline not in by_config:
            continue
        mine = [r for config in by_config if config != baseline
                for r in prompt_rows(panel, by_config, baseline, config, units=units,
                                     groups=groups)]
        rows += _with_lengths(mine)
    return pd.DataFrame(rows, columns=PROMPT_COLUMNS)


def _with_lengths(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The panel's rows with their length bin: terciles of the panel's answer lengths."""
    import numpy as np

    lengths = np.array([r["answer_tokens"] for r in rows if r["answer_tokens"] == r["answer_tokens"]])
    if not lengths.size:
        return rows
    low, high = (float(q) for q in np.quantile(lengths, [1 / 3, 2 / 3]))
    same = bool(lengths.min() == lengths.max())

    def name(tokens: float) -> str:
        return "all" if same else "short" if tokens <= low else "long" if tokens > high else "medium"

    bins = {b: (min(v), max(v)) for b in ("all", "short", "medium", "long")
            if (v := [t for t in lengths if name(t) == b])}
    labels = {b: f"{b} ({lo:.0f} tokens)" if lo == hi else f"{b} ({lo:.0f}-{hi:.0f} tokens)"
              for b, (lo, hi) in bins.items()}
    return [{**r, "length": labels[name(r["answer_tokens"])]
             if r["answer_tokens"] == r["answer_tokens"] else ""} for r in rows]


def spreads(table: Any, by: Sequence[str] = ()) -> Any:
    """:class:`Spread` per panel × config (× each column of ``by``: ``category``, ``length``)
    of a :func:`prompt_table`, one row each, in the table's order."""
    import pandas as pd

    keys = [*PANEL, "config", "baseline", *by]
    rows = []
    if len(table):
        for key, group in table.groupby(keys, sort=False, dropna=False):
            found = spread_of(group["log_ratio"].to_numpy(), list(group["block"]))
            rows.append({**dict(zip(keys, key, strict=True)), **asdict(found)})
    return pd.DataFrame(rows, columns=[*keys, *SPREAD_FIELDS])


def panel_spread(cells: Sequence[CellRecord], found: Claim | None, *, units: UnitsOf = units_of,
                 groups: Mapping[str, Sequence[str]] | None = None) -> dict[str, Any] | None:
    """The spread of one panel's leader (of the fastest other config where the baseline
    leads) against its baseline, for ``answer.json``: its :class:`Spread`, the config, the
    unit ("prompt"; at concurrency c, "batch of c requests"), its p50 per category and per
    length bin where the panel has several, and ``words`` for the panel's line; None with no
    leader, baseline or other config."""
    import pandas as pd

    if found is None or found.leader is None or found.baseline is None \
            or found.baseline not in found.rows:
        return None
    others = [c for c in found.rows if c != found.baseline]
    config = (found.leader if found.leader != found.baseline else
              max(others, key=lambda c: found.rows[c].tok_s, default=None))
    by_config: dict[str, list[CellRecord]] = {}
    for cell in cells:
        if cell.verdict.ok and cell.spec.config in (config, found.baseline):
            by_config.setdefault(cell.spec.config, []).append(cell)
    if config is None or not by_config:
        return None
    first = next(iter(by_config.values()))[0]
    rows = prompt_rows(panel_of_cell(first), by_config, found.baseline, config, units=units,
                       groups=groups)  # the claim's baseline, as the claim took it
    table = pd.DataFrame(_with_lengths(rows), columns=PROMPT_COLUMNS)
    if not len(table):
        return None
    spread = spread_of(table["log_ratio"].to_numpy(), list(table["block"]))
    slots = int(first.spec.concurrency)
    entry = {"config": config, "baseline": found.baseline, **spread.entry(),
             "unit": "prompt" if slots <= 1 else f"batch of {slots} requests"}
    for column in ("category", "length"):
        split = spreads(table, [column])
        entry[f"by_{column}"] = ({str(r[column]): float(r["p50"])
                                  for r in split.to_dict("records")} if len(split) > 1 else {})
    entry["words"] = spread_words(entry, leader=config == found.leader)
    return entry


def spread_words(entry: Mapping[str, Any], *, leader: bool = True) -> str:
    """"per prompt 0.82-1.31× (p10-p90), 11 of 18 prompts faster" (the config named where it
    is not the leader; the split by category or length where the panel has one)."""
    unit = str(entry.get("unit") or "prompt")
    plural = "prompts" if unit == "prompt" else "batches"
    who = "" if leader else f", {entry['config']} vs {entry['baseline']}"
    low, high = entry["p10"], entry["p90"]
    words = (f"per {unit}{who} {low:.2f}-{high:.2f}× (p10-p90), {entry['faster']} of "
             f"{entry['prompts']} {plural} faster")
    for column in ("by_category", "by_length"):
        split = entry.get(column) or {}
        if split:
            words += "; p50 " + ", ".join(f"{k} {v:.2f}×" for k, v in split.items())
    return words


class PromptSpread(Rendered):
    """What a notebook shows of :func:`prompt_table`: per panel × config the distribution of
    the per-prompt speedups, the same by category and by answer length where a panel has
    several, then every prompt, fastest first (collapsed)."""

    def __init__(self, table: Any) -> None:
        self.table = table

    def sections(self) -> list[tuple[str, Any]]:
        """(title, frame) per part, each frame as shown (a ``panel`` column, rounded)."""
        found = [("per-prompt speedup vs the baseline (p10/p50/p90 of the prompts; sd of the "
                  "log ratio across prompts and across the blocks' means)",
                  _shown(spreads(self.table)))]
        for column, what in (("category", "by category"), ("length", "by answer length")):
            split = spreads(self.table, [column])
            if len(split) > len(spreads(self.table)):  # some panel × config has several
                found.append((f"per-prompt speedup {what}", _shown(split)))
        prompts = self.table.sort_values([*PANEL, "config", "speedup"],
                                         ascending=[True] * (len(PANEL) + 1) + [False])
        found.append(("every prompt, fastest first", _shown(prompts.drop(columns=["log_ratio"]))))
        return found

    def text(self) -> str:
        if not len(self.table):
            return "per-prompt speedups: no panel has a baseline and another config measured ok"
        return "\n\n".join(f"{title}:\n{frame.to_string(index=False)}"
                           for title, frame in self.sections())

    def html(self) -> str:
        if not len(self.table):
            return html_text(self.text())
        *heads, (title, prompts) = self.sections()
        parts = [html_text(t[0].upper() + t[1:], bold=True) + frame_table(f) for t, f in heads]
        return "".join(parts) + details(f"{title}: {len(prompts)} rows", frame_table(prompts))


def _shown(frame: Any) -> Any:
    """``frame`` with its panel as one ``panel`` column (``chat/ctx256/c1``), rounded."""
    names = [where(row) for row in frame.to_dict("records")]
    rest = frame.drop(columns=[c for c in PANEL if c in frame]).round(3)
    return rest.assign(panel=names)[["panel", *rest.columns]]
