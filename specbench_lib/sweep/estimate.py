"""How long a plan will take, before any server starts (the dry run, ``specbench doctor``), and
each cell's predicted cost, which the live estimate (:mod:`.progress`) scales by what it
measures.

A cell's time is its requests' prefill (prompt tokens over the engine's prefill rate) and
decoding (output tokens over its decoding rate, one wave of ``concurrency`` requests at a
time), plus its server's warmup; each server start adds the start time. The prompt lengths
are the plan's: the context for exact prompts, else the workload's documents at
:data:`~.lifetimes.BYTES_PER_TOKEN` bytes a token, capped at the context (a conversation's
turn 2 adds the cap of its turn-1 answer and the second question). Answers are
``output_tokens`` long (with ``stop: eos`` a cap: the estimate is then an upper bound).

The engine's speed is measured in earlier runs on this machine where there are any (the
newest run of the same engine kind and model with an ok ``auto`` cell at concurrency 1:
its decoding rate per request, its prompt tokens over its TTFT, its servers' start time),
else :data:`DEFAULT`, said so. Speculative configs are priced at ``auto``'s speed: the
estimate assumes no gain.
"""

from __future__ import annotations

import dataclasses
import json
import math
import statistics
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.display import Rendered, html_table, html_text
from ..core.errors import SpecbenchError
from ..model.plan import Plan
from ..runs.rundir import iter_runs
from ..servers.engines import get_adapter
from .lifetimes import BYTES_PER_TOKEN

GPU_START_S = 120.0  # the default start of a GPU engine (loading, compiling: minutes)
_CELLS_READ = 12  # auto cells read from an earlier run (the first at concurrency 1 suffice)


@dataclass(frozen=True)
class Speed:
    """An engine's speed: prefill and decoding rates (tokens a second) and a start's seconds."""

    prefill_tok_s: float
    decode_tok_s: float
    start_s: float
    source: str


DEFAULT = Speed(400.0, 30.0, 10.0, "a stated default, no earlier run of this engine and model "
                "here: prefill 400 tok/s, decoding 30 tok/s a request, 10 s a server start")


def measured_speed(plan: Plan, root: Path | None = None) -> Speed:
    """The newest earlier run's speed of this engine kind and model (see the module)."""
    engine = plan.params.engine
    model = Path(str(engine.model or "")).name
    for run in reversed(list(iter_runs(root))):
        try:
            info = run.read_manifest()
        except SpecbenchError:
            continue
        if info.engine.get("kind") != engine.kind or (
                model and Path(str(info.model.get("path", ""))).name != model):
            continue
        found = _auto_speed(run.cells_dir)
        if found is None:
            continue
        starts = [float(e.raw["ready_s"]) for e in info.servers.values()
                  if isinstance(e.raw.get("ready_s"), (int, float)) and e.raw["ready_s"] > 0]
        start = statistics.fmean(starts) if starts else DEFAULT.start_s
        return Speed(found[0], found[1], start,
                     f"measured in run {run.run_id} (auto at concurrency 1): prefill "
                     f"{found[0]:.0f} tok/s, decoding {found[1]:.1f} tok/s a request, "
                     f"{start:.1f} s a server start")
    if get_adapter(engine).needs_gpu:  # a GPU engine's start: loading and compiling
        return dataclasses.replace(DEFAULT, start_s=GPU_START_S, source=DEFAULT.source.replace(
            "10 s a server start", f"{GPU_START_S:.0f} s a server start (a GPU engine)"))
    return DEFAULT


def _auto_speed(cells: Path) -> tuple[float, float] | None:
    """Prefill and decoding rates of a run's ok auto cells at concurrency 1 (None: none)."""
    prefill, decode = [], []
    for path in sorted(cells.glob("auto__*__c1*.json"))[:_CELLS_READ]:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        metrics = data.get("metrics") or {}
        if (data.get("verdict") or {}).get("status") != "ok":
            continue
        rate, ttft = metrics.get("request_decode_tok_s"), metrics.get("ttft_mean_s")
        prompt = metrics.get("prompt_tokens_mean")
        if rate and ttft and prompt:
            decode.append(float(rate))
            prefill.append(float(prompt) / float(ttft))
    return (statistics.fmean(prefill), statistics.fmean(decode)) if decode else None


def prompt_lengths(plan: Plan) -> dict[tuple[str, int], float]:
    """Each workload × context's mean prompt length in tokens (see the module)."""
    from ..prompts.workload import documents

    found: dict[tuple[str, int], float] = {}
    for workload in plan.params.workloads:
        contexts = sorted({c.context for c in plan.cells if c.workload == workload.name})
        if not workload.natural:
            found.update({(workload.name, ctx): float(ctx) for ctx in contexts})
            continue
        try:
            sizes = [len(text.encode()) / BYTES_PER_TOKEN for _, text in documents(workload)]
        except SpecbenchError:
            sizes = []
        for ctx in contexts:
            mean = statistics.fmean(min(s, ctx) for s in sizes) if sizes else float(ctx)
            if workload.turn == 2:  # turn 1, its answer (at most the cap) and the second question
                mean = min(ctx, 2 * mean + plan.params.output_lengths[0])
            found[(workload.name, ctx)] = mean
    return found


def cell_seconds(plan: Plan, speed: Speed,
                 lengths: Mapping[tuple[str, int], float] | None = None) -> dict[str, float]:
    """Each cell's predicted seconds, its server's start and warmup left out."""
    lengths = prompt_lengths(plan) if lengths is None else lengths
    found = {}
    for cell in plan.cells:
        n = plan.params.requests_for(cell)
        prompt = lengths.get((cell.workload, cell.context), float(cell.context))
        waves = math.ceil(n / max(1, cell.concurrency))
        seconds = n * prompt / speed.prefill_tok_s + waves * cell.output_tokens / speed.decode_tok_s
        if cell.turn == 2:  # turn 1 sent first, untimed but waited for
            seconds *= 2
        found[cell.cell_id] = seconds
    return found


def starts_of(plan: Plan, restarts: Mapping[str, bool]) -> dict[str, int]:
    """Server starts per config: one a round of repeats (each round on a fresh server), or one
    a cell where it is restarted before each."""
    rounds = plan.params.repeats if plan.params.repeat_order == "rounds" else 1
    return {s.label: len(plan.cells_for(s)) if restarts.get(s.label) else rounds
            for s in plan.servers}


class Estimate(Rendered):
    """Minutes by config × workload (and in all), with the prompt lengths and the speed used."""

    def __init__(self, plan: Plan, speed: Speed, restarts: Mapping[str, bool] | None = None
                 ) -> None:
        self.speed, self.lengths = speed, prompt_lengths(plan)
        seconds = cell_seconds(plan, speed, self.lengths)
        warm_out = plan.params.warmup_output_tokens or plan.params.output_lengths[0]
        warm = plan.params.warmup_requests * (
            min(plan.params.contexts) / speed.prefill_tok_s + warm_out / speed.decode_tok_s)
        starts = starts_of(plan, restarts or {})
        self.rows: dict[tuple[str, str], float] = {}
        for cell in plan.cells:
            key = (cell.config, cell.workload)
            self.rows[key] = self.rows.get(key, 0.0) + seconds[cell.cell_id]
        self.starts_s = sum(n * (speed.start_s + warm) for n in starts.values())
        self.total_s = sum(self.rows.values()) + self.starts_s

    def minutes(self) -> dict[tuple[str, str], float]:
        return {k: v / 60 for k, v in self.rows.items()}

    def text(self) -> str:
        lines = [f"time estimate: about {self.total_s / 60:.1f} min ({self.starts_s / 60:.1f} "
                 f"of them server starts and warmups); engine speed {self.speed.source}",
                 "  prompt tokens (mean): " + ", ".join(
                     f"{w}/ctx{c} {v:.0f}" for (w, c), v in self.lengths.items())]
        lines += [f"  {config} {workload}: {s / 60:.1f} min" for (config, workload), s
                  in self.rows.items()]
        return "\n".join(lines)

    def html(self) -> str:
        rows = [[config, workload, f"{s / 60:.1f}"] for (config, workload), s in self.rows.items()]
        head = self.text().splitlines()
        return (html_text(head[0], bold=True) + html_text(head[1].strip())
                + html_table(["config", "workload", "minutes"], rows))


def estimate(plan: Plan, restarts: Mapping[str, bool] | None = None,
             root: Path | None = None) -> Estimate:
    """The plan's time estimate at this machine's measured speed (else the default)."""
    return Estimate(plan, measured_speed(plan, root), restarts)


def restarts_of(lifetimes: Any) -> dict[str, bool]:
    """Which configs are started again before each cell (isolation ``restart``)."""
    return {label: i.mode == "restart" for label, i in lifetimes.isolations.items()}


__all__ = ["DEFAULT", "Estimate", "Speed", "cell_seconds", "estimate",
           "measured_speed", "prompt_lengths", "restarts_of"]
