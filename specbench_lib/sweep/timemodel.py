"""The one time model: how long a cell, a server start and a plan take, before any server
starts (the dry run, ``specbench doctor``: :mod:`.estimate`) and while a sweep runs (the live
estimate, :mod:`.progress`, and the budget's scheduler, :mod:`.budget`).

**A cell's time** is its requests' prefill (prompt tokens over the prefill rate) and decoding
(``output_tokens`` over a request's decoding rate at the cell's concurrency, one wave of
``concurrency`` requests at a time), doubled for a conversation's turn 2 (turn 1 is sent first).
A request's decoding rate at concurrency c is the rate at c = 1 over 1 + s (c − 1): s is the
slowdown per extra request in flight. A server start adds the start time and its warmup.

**The speeds** (:class:`~.speeds.Speed`, each with its source) are :mod:`.speeds`': measured
here (an earlier run, or this run's first server's warmup: :meth:`TimeModel.calibrate`), else
stated defaults by GPU class and model size.

While a sweep runs, :class:`TimeModel` learns each config's measured over predicted seconds
from the cells it finishes, each config's measured start, and (a budgeted sweep) each config's
slice as its wall clock timed it, and prices what is left with them. One function prices every
figure of time, :meth:`TimeModel.slice_s`: the dry run's (:mod:`.estimate`), the live estimate's
(:mod:`.progress`) and the budget's (:mod:`.budget`).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence

from ..core.errors import SpecbenchError
from ..model.cellspec import CellSpec
from ..model.plan import Plan
from ..model.records import CellRecord, RequestRecord
from .lifetimes import BYTES_PER_TOKEN
from .speeds import Speed


def prompt_lengths(plan: Plan) -> dict[tuple[str, int], float]:
    """Each workload × context's mean prompt length in tokens: the context for exact prompts,
    else the workload's documents at :data:`~.lifetimes.BYTES_PER_TOKEN` bytes a token, capped
    at the context (a conversation's turn 2 adds its turn-1 answer's cap and the question)."""
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
    """Each cell's predicted seconds (see the module), its server's start and warmup left out."""
    lengths = prompt_lengths(plan) if lengths is None else lengths
    found = {}
    top = max(plan.params.concurrency)
    for cell in plan.cells:
        n = plan.params.requests_for(cell)
        prompt = lengths.get((cell.workload, cell.context), float(cell.context))
        one = prompt / speed.prefill_tok_s + cell.output_tokens / speed.decode_tok_s
        rate = _open_rate(cell, speed, one, top)
        if rate is not None:  # open loop: the arrivals' span, then the last request
            seconds = n / rate + one
        else:
            waves = math.ceil(n / max(1, cell.concurrency))
            seconds = (n * prompt / speed.prefill_tok_s
                       + waves * cell.output_tokens / speed.decode_at(cell.concurrency))
        if cell.turn == 2:  # turn 1 sent first, untimed but waited for
            seconds *= 2
        found[cell.cell_id] = seconds
    return found


def _open_rate(cell: CellSpec, speed: Speed, one: float, top: int) -> float | None:
    """An open-loop cell's requests a second (None: closed loop): its fixed rate, or its rate
    profile's point between the synchronous (one request at a time) and saturated (``top`` in
    flight) rates, as :mod:`.loadprofile` sets it."""
    if cell.rate is not None:
        return float(cell.rate)
    if cell.profile_point is None:
        return None
    sync = 1 / one if one > 0 else 1.0
    saturated = top / (one * (1 + speed.slowdown * (top - 1))) if one > 0 else 1.0
    return sync + cell.profile_point / (cell.profile_points + 1) * max(0.0, saturated - sync)


def warmup_seconds(plan: Plan, speed: Speed) -> float:
    """A server's warmup: ``warmup_requests`` at the shortest context, one after another."""
    params = plan.params
    out = params.warmup_output_tokens or params.output_lengths[0]
    return params.warmup_requests * (min(params.contexts) / speed.prefill_tok_s
                                     + out / speed.decode_tok_s)


class TimeModel:
    """A plan's cells priced at ``speed``, corrected by what the sweep measures (see the
    module): a config's cell costs its prediction times its measured / predicted ratio (every
    config's, before its own is seen; 1 before any), a server start its config's measured
    start (any config's, else the speed's start and warmup)."""

    def __init__(self, plan: Plan, speed: Speed,
                 lengths: Mapping[tuple[str, int], float] | None = None) -> None:
        self.plan, self.lengths = plan, prompt_lengths(plan) if lengths is None else lengths
        self.config_of = {c.cell_id: c.config for c in plan.cells}
        self.requests = {c.cell_id: plan.params.requests_for(c) for c in plan.cells}
        self.seen: dict[str, list[tuple[float, float]]] = {}  # config: (measured, predicted)
        self.starts: dict[str, list[float]] = {}
        self.slices: dict[str, tuple[float, float]] = {}  # config: (fixed s, s per cell)
        self._price(speed)

    def _price(self, speed: Speed) -> None:
        self.speed = speed
        self.predicted = cell_seconds(self.plan, speed, self.lengths)
        self.start_default = speed.start_s + warmup_seconds(self.plan, speed)

    @property
    def calibrated(self) -> bool:
        """Whether its speeds were measured (here, or in an earlier run), not stated defaults."""
        return self.speed.calibrated

    def calibrate(self, warmup: Sequence[RequestRecord], start_s: float) -> None:
        """The run's first server started in ``start_s`` (its warmup included) and warmed up
        with ``warmup``: at stated speeds, the prefill rate (prompt tokens over TTFT) and a
        request's decoding rate are taken from its last warmup request that streamed."""
        if self.calibrated or self.seen:
            return
        timed = [r for r in warmup if r.error is None and len(r.token_times) >= 3
                 and r.ttft and r.token_times[-1] > r.token_times[0]]
        if not timed:
            return
        last = timed[-1]
        prefill = last.prompt_tokens_planned / float(last.ttft or 1)
        decode = (len(last.token_times) - 1) / (last.token_times[-1] - last.token_times[0])
        self._price(Speed(prefill, decode, start_s, f"calibrated on the first server's warmup "
                          f"(its start and warmup {start_s:.1f} s; the slowdown per request in "
                          f"flight the default's, {100 * self.speed.slowdown:.0f} %)",
                          self.speed.slowdown, calibrated=True))
        self.start_default = start_s

    def learn_record(self, record: CellRecord) -> None:
        """A measured cell: its seconds (preparing its prompts, a first turn, its requests) over
        its prediction (a partial round's share of its requests)."""
        timing = record.timing or {}
        seconds = sum(float(timing.get(k) or 0.0) for k in ("prompts_s", "first_turn_s",
                                                             "dispatch_s"))
        planned = self.requests.get(record.cell_id) or 1
        self.learn_cell(record.cell_id, seconds, min(1.0, record.judge.planned / planned))

    def learn_cell(self, cell_id: str, seconds: float, share: float = 1.0) -> None:
        """A cell (``share`` of its requests) took ``seconds``."""
        predicted = self.predicted.get(cell_id, 0.0) * share
        if predicted > 0 and seconds > 0:
            self.seen.setdefault(self.config_of[cell_id], []).append((seconds, predicted))

    def per_cell(self, config: str) -> float:
        """A cell of ``config``'s mean price."""
        mine = [self.cell_s(k) for k, c in self.config_of.items() if c == config]
        return statistics.fmean(mine) if mine else 0.0

    def learn_start(self, config: str, seconds: float) -> None:
        """A server of ``config`` took ``seconds`` to start, warm up and stop."""
        if seconds > 0:
            self.starts.setdefault(config, []).append(seconds)

    def learn_slice(self, config: str, seconds: float, cells: float, fixed: float) -> None:
        """A slice of ``config`` took ``seconds`` on the wall clock for ``cells`` cells (a
        fraction of one per cell of a partial round), ``fixed`` of them server start, warmup
        and stop: the budget's rounds price its next slice so (:meth:`slice_s`)."""
        fixed = min(max(0.0, fixed), seconds)
        self.slices[config] = (fixed, (seconds - fixed) / (cells if cells > 0 else 1))

    def slice_s(self, config: str, cells: Sequence[CellSpec] | float, *, share: float = 1.0,
                starts: int = 1, timed: bool = True) -> float:
        """The price of ``config``'s server ``starts`` and ``cells`` (the cells, at ``share`` of
        their requests; or a number of its mean cell): each cell as :meth:`cell_s`, each start
        as :meth:`start_s`. ``timed``: once a slice of ``config`` was timed whole
        (:meth:`learn_slice`), as it was timed (its start, warmup and stop, then its seconds a
        cell), the budget's price of a round; a cell let in one at a time is the model's."""
        count = float(cells) if isinstance(cells, int | float) else len(cells) * share
        known = self.slices.get(config) if timed else None
        if known is not None:
            return known[0] * starts + known[1] * count
        work = (count * self.per_cell(config) if isinstance(cells, int | float)
                else sum(self.cell_s(c.cell_id, share) for c in cells))
        return starts * self.start_s(config) + work

    def ratio(self, config: str | None = None) -> float:
        pairs = self.seen.get(config or "") or [p for v in self.seen.values() for p in v]
        predicted = sum(p for _, p in pairs)
        return sum(m for m, _ in pairs) / predicted if predicted > 0 else 1.0

    def cell_s(self, cell_id: str, share: float = 1.0) -> float:
        return self.predicted.get(cell_id, 0.0) * share * self.ratio(self.config_of.get(cell_id))

    def start_s(self, config: str) -> float:
        mine = self.starts.get(config) or [s for v in self.starts.values() for s in v]
        return statistics.fmean(mine) if mine else self.start_default

    def left(self, cells: Iterable[CellSpec], running: str | None = None) -> float:
        """Seconds for ``cells`` and a server start for each config among them (but
        ``running``'s, whose server is up)."""
        by_config: dict[str, list[CellSpec]] = {}
        for cell in cells:
            by_config.setdefault(cell.config, []).append(cell)
        return sum(self.slice_s(config, todo, starts=int(config != running), timed=False)
                   for config, todo in by_config.items())

    @property
    def cells_seen(self) -> int:
        return sum(len(v) for v in self.seen.values())

    def words(self) -> str:
        """Which speed prices what is left: the stated speed, or as corrected by the cells seen."""
        if not self.cells_seen:
            return f"engine speed {self.speed.words()}"
        return (f"calibrated on {self.cells_seen} cells of this run (measured / predicted "
                f"{self.ratio():.2f} at prefill {self.speed.prefill_tok_s:.0f} tok/s, decoding "
                f"{self.speed.decode_tok_s:.1f} tok/s a request: {self.speed.source})")


__all__ = ["TimeModel", "cell_seconds", "prompt_lengths", "warmup_seconds"]
