"""Results by category: a category × config table, and groups that pool categories.

A workload with ``categories`` is one workload per category, so every panel, claim and table
row is already per category. :func:`pooled` makes the ``groups`` of the params (Spec-Bench's
``mt_bench`` = its eight MT-Bench categories) workloads of their own: each member cell is
relabelled as the group, its repeat numbered apart per member (member i's repeat r is
``i × repeats + r``), so a group's panel holds every member's prompts as units, paired by
prompt across configs as before, and its claim is :mod:`.claim`'s, over the pooled prompts: no
second speedup, no second analysis. A group's ``output_tok_s_cv`` and ``unstable`` are across its
members, not repeats, and are left out of :func:`category_table`.

:func:`category_table` reads the results table (its ``speedup`` columns are the panel's claim)
and the best-config rows (:mod:`.best`: the panel's decision) and gives one row per category (or
group) × config: tokens per step, the speedup with its interval, the answers' and prompts'
mean length (the target tokenizer's count; beside it a SPEED-Bench throughput bucket's nominal
size in ``o200k_base`` tokens, ``bucket_o200k``), and the panel's decision with this config's
place in it.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from ..core.display import Rendered, frame_table, html_text
from ..core.tables import bullets
from ..model.records import CellRecord
from ..model.sources import bucket_tokens
from ..model.tablekeys import PANEL

CATEGORY_COLUMNS = ["workload", "kind", "turn", "config", "tokens_per_step", "speedup",
                    "speedup_lo", "speedup_hi", "answer_tokens", "prompt_tokens",
                    "bucket_o200k", "decision",
                    "place", "requests_n", "context", "output_tokens", "concurrency", "load",
                    "temperature"]


def pooled(cells: Sequence[CellRecord], groups: Mapping[str, Sequence[str]]) -> list[CellRecord]:
    """The cells of every group's members relabelled as the group (see the module); cells of
    no group are left out."""
    member = {m: (g, i) for g, members in groups.items() for i, m in enumerate(members)}
    found = []
    for cell in cells:
        where = member.get(cell.spec.workload)
        if where is None:
            continue
        group, i = where
        each = max(1, cell.spec.repeats)
        spec = dataclasses.replace(cell.spec, workload=group, repeat=i * each + cell.spec.repeat,
                                   repeats=each * len(groups[group]))
        found.append(dataclasses.replace(cell, spec=spec))
    return found


def answer_lengths(cells: Sequence[CellRecord]) -> dict[tuple[Any, ...], tuple[float, float]]:
    """Per config × panel, the mean answer and prompt length over its ok cells' metrics."""
    by: dict[tuple[Any, ...], list[tuple[float, float]]] = {}
    for cell in cells:
        metrics = cell.metrics or {}
        if not cell.verdict.ok or metrics.get("output_tokens_mean") is None:
            continue
        row = cell.spec.row()
        key = (cell.spec.config, *(row[k] for k in PANEL))
        by.setdefault(key, []).append((float(metrics["output_tokens_mean"]),
                                       float(metrics.get("prompt_tokens_mean") or "nan")))
    return {k: (statistics.fmean(a for a, _ in v), statistics.fmean(p for _, p in v))
            for k, v in by.items()}


def category_table(table: Any, best: Any, lengths: Mapping[tuple[Any, ...], tuple[float, float]],
                   groups: Mapping[str, Sequence[str]] | None = None) -> Any:
    """One row per workload (category or group) × config of ``table`` (a results table, the
    pooled one's rows included), with ``best``'s decision for its panel (see the module)."""
    import pandas as pd

    groups = groups or {}
    decisions = {tuple(r[k] for k in PANEL): r for r in best.to_dict("records")}
    rows = []
    for row in table.to_dict("records"):
        panel = tuple(row[k] for k in PANEL)
        claim = decisions.get(panel)
        members = {m.strip() for m in str(claim["confidence_set"]).split(",")} if claim else set()
        place = ("" if claim is None else "best" if claim["best"] == row["config"] and
                 claim["decision"] == "decided" else "leader" if claim["best"] == row["config"]
                 else "could be the best" if row["config"] in members else "shown slower")
        answer, prompt = lengths.get((row["config"], *panel), (float("nan"), float("nan")))
        kind = (f"group of {len(groups[row['workload']])}" if row["workload"] in groups
                else "category")
        rows.append({**{k: row.get(k) for k in CATEGORY_COLUMNS}, "kind": kind,
                     "tokens_per_step": row.get("acceptance_length"),
                     "answer_tokens": answer, "prompt_tokens": prompt,
                     "bucket_o200k": bucket_tokens(str(row["workload"])),
                     "decision": "" if claim is None else claim["decision"], "place": place})
    return pd.DataFrame(rows, columns=CATEGORY_COLUMNS)


def first_turns(cells: Sequence[CellRecord]) -> Any:
    """The turn-1 requests a turn-2 run sent before each timed turn 2 (untimed, outside every
    claim), reported as such: per workload × config, tokens per step from the server's own
    per-request draft counts (where the engine gives them: llama.cpp), and the answers' mean
    length; ``kind`` "turn 1 of a turn-2 run", no speedup and no decision."""
    import pandas as pd

    from .specmetrics import spec_metrics

    by: dict[tuple[str, str], list[Any]] = {}
    for cell in cells:
        if cell.verdict.ok and cell.spec.turn == 2:
            by.setdefault((cell.spec.workload, cell.spec.config), []).extend(
                r for r in cell.requests if r.turn == 1 and r.warmup and r.final is not None)
    rows = []
    for (workload, config), recs in by.items():
        tokens = sum(r.final.completion_tokens or 0 for r in recs)
        counted = recs and all(r.final.accepted_tokens is not None for r in recs)
        spec = (spec_metrics(tokens, len(recs), accepted=sum(r.final.accepted_tokens or 0
                                                             for r in recs),
                             drafted_tokens=sum(r.final.draft_tokens or 0 for r in recs))
                if counted and tokens else {})
        rows.append({"workload": workload, "kind": "turn 1 of a turn-2 run", "turn": 1,
                     "config": config, "tokens_per_step": spec.get("tokens_per_step"),
                     "answer_tokens": tokens / len(recs) if recs else float("nan"),
                     "decision": "", "place": "", "requests_n": len(recs)})
    return pd.DataFrame(rows, columns=CATEGORY_COLUMNS)


def wide(frame: Any, value: str = "speedup") -> Any:
    """``frame`` (a :func:`category_table`) as categories × configs of one ``value``, the
    paper's layout (a turn-2 workload's row says so)."""
    label = frame["workload"] + frame["turn"].map(lambda t: "" if t in (1, None) else f" (turn {t})")
    return frame.assign(category=label).pivot_table(index="category", columns="config",
                                                    values=value, sort=False)


class ByCategory(Rendered):
    """What a notebook shows by category: the category × config table (speedup with its
    interval, the claim's), then a few answers per category
    (:meth:`~specbench_lib.runs.results.RunResult.answer_samples`)."""

    def __init__(self, frame: Any, samples: Mapping[str, Sequence[str]] | None = None) -> None:
        self.frame, self.samples = frame, dict(samples or {})

    def _shown(self) -> Any:
        frame = self.frame
        span = [f"{s:.2f} [{lo:.2f}, {hi:.2f}]" if s == s and lo == lo and hi == hi
                else f"{s:.2f}" if s == s else "" for s, lo, hi in
                zip(frame["speedup"], frame["speedup_lo"], frame["speedup_hi"], strict=True)]
        buckets = ["bucket_o200k"] if frame["bucket_o200k"].notna().any() else []
        thinking = [c for c in ("reasoning_tokens_per_delivery", "answer_tokens_per_delivery",
                                "reasoning_tok_s", "answer_tok_s") if c in frame]
        return frame.assign(speedup=span)[["workload", "kind", "turn", "config", "tokens_per_step",
                                           "speedup", "answer_tokens", "prompt_tokens", *buckets,
                                           *thinking, "decision", "place", "requests_n"]]

    def text(self) -> str:
        lines = ["results by category (speedup vs auto with its simultaneous 95 % interval, "
                 "the panel's claim)", self._shown().to_string(index=False, float_format="%.2f")]
        for workload, texts in self.samples.items():
            lines.append(f"answers of {workload}:")
            lines += [f"  - {t!r}" for t in texts]
        return "\n".join(lines)

    def html(self) -> str:
        parts = [html_text("Results by category", bold=True,
                           detail="speedup vs auto with its simultaneous 95 % interval (the "
                                  "panel's claim); place: this config in the panel's claim"),
                 frame_table(self._shown())]
        for workload, texts in self.samples.items():
            parts.append(html_text(f"answers of {workload}", bold=True) + bullets(texts))
        return "".join(parts)
