"""Synthetic sweeps with a known truth: cells from a model of a batching server, for coverage.

The model (every number in :class:`Truth` and :class:`ConfigTruth`):

- **Prompts.** Each request has a latent prompt effect z ~ N(0, 1), drawn fresh for every cell
  and repeat and shared by every config of a panel (the sweep sends the same prompts to every
  config), so pairing across configs matters. A config's per-prompt gain (tokens per step) is
  ``gain · exp(gain_sigma · z)``: a lognormal speculation gain, ~1 for ``auto``.
- **The server** runs in lock step: each step takes ``step_s · b ** batch_exponent`` seconds at
  batch b (throughput grows as b ** (1 − batch_exponent): sub-linearly), times a lognormal
  per-step noise (``token_sd``) and the repeat's drift; every request in flight gains its gain
  in tokens a step (a whole token is emitted when its progress passes one: bursts of several
  tokens a step, or one every few steps).
- **Closed loop**: ``concurrency`` slots; a slot whose request ended takes the next request in
  index order at the end of that step (its first token comes at the end of its first step).
- **Drift**: a machine factor ``exp(N(0, drift_sd))`` per repeat, shared by every config of
  that repeat (a round of the sweep runs them close together), and ``cell_sd`` per cell.

The truth of a design point is what its cells measure on average: :func:`true_tok_s` is the
expected output tok/s of one cell (tokens over the window) of a config at a concurrency and a
number of requests, by a large Monte Carlo over the same model (cached); :func:`true_speedup` is
the ratio of two configs' truths. A row's mean over repeats estimates the first, the ratio of
two rows' means the second.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import numpy as np

from specbench_lib.analysis.analyse import analyse
from specbench_lib.model.cellspec import CellSpec
from specbench_lib.model.records import CellRecord, FinalStats, JudgeInputs, RequestRecord
from specbench_lib.model.served import PromptRecord
from specbench_lib.model.verdict import Verdict

BURST_S = 1e-6  # tokens of one step reach the client this far apart (one delivery)


@dataclass(frozen=True)
class ConfigTruth:
    """One server config of the model."""

    name: str
    method: str = "auto"
    budget: int | None = None
    gain: float = 1.0  # median tokens per step per request
    gain_sigma: float = 0.0  # lognormal spread of the gain over prompts
    batch_exponent: float = 0.5  # a step at batch b takes step_s * b ** batch_exponent


@dataclass(frozen=True)
class Truth:
    """The model behind a simulated panel: its configs and the machine (a step at batch 1 takes
    ``step_s``; each request asks for ``tokens``; noise and drift are lognormal sds)."""

    configs: tuple[ConfigTruth, ...] = field(default_factory=lambda: (
        ConfigTruth("auto", gain_sigma=0.05),
        ConfigTruth("ngram-b8", "ngram", 8, gain=1.35, gain_sigma=0.35, batch_exponent=0.6)))
    step_s: float = 0.02
    tokens: int = 16
    token_sd: float = 0.1
    drift_sd: float = 0.03
    cell_sd: float = 0.0
    workload: str = "code"
    context: int = 256

    def config(self, name: str) -> ConfigTruth:
        return next(c for c in self.configs if c.name == name)


def true_tok_s(truth: Truth, config: str, concurrency: int, requests: int,
               draws: int = 40000) -> float:
    """The expected output tok/s of one cell of ``config`` (Monte Carlo, seeded and cached)."""
    return _true(truth, config, concurrency, requests, draws)


def true_speedup(truth: Truth, config: str, concurrency: int, requests: int,
                 baseline: str = "auto", draws: int = 40000) -> float:
    """The ratio of two configs' expected output tok/s (what a row's speedup estimates)."""
    return (true_tok_s(truth, config, concurrency, requests, draws)
            / true_tok_s(truth, baseline, concurrency, requests, draws))


@cache
def _true(truth: Truth, config: str, concurrency: int, requests: int, draws: int) -> float:
    rng = np.random.default_rng([concurrency, requests, draws, zlib.crc32(config.encode())])
    z = rng.standard_normal((draws, requests))
    machine = np.exp(rng.normal(0, truth.drift_sd, draws) + rng.normal(0, truth.cell_sd, draws))
    ends = _lockstep(truth, truth.config(config), concurrency, z, machine, rng, record=False)[0]
    return float(np.mean(requests * truth.tokens / ends))


def simulate_panel(truth: Truth, concurrency: int, requests: int, repeats: int,
                   rng: np.random.Generator) -> list[CellRecord]:
    """One sweep's cells of a panel: every config × repeat, analysed as the sweep writes them."""
    return simulate_panels(truth, concurrency, requests, repeats, rng, sweeps=1)[0]


def simulate_panels(truth: Truth, concurrency: int, requests: int, repeats: int,
                    rng: np.random.Generator, *, sweeps: int) -> list[list[CellRecord]]:
    """``sweeps`` independent sweeps of one panel (simulated together, fast), as lists of cells."""
    cells: list[list[CellRecord]] = [[] for _ in range(sweeps)]
    z = rng.standard_normal((sweeps * repeats, requests))  # row s * repeats + r
    drift = np.exp(rng.normal(0, truth.drift_sd, sweeps * repeats))
    for config in truth.configs:
        machine = drift * np.exp(rng.normal(0, truth.cell_sd, sweeps * repeats))
        _, events = _lockstep(truth, config, concurrency, z, machine, rng, record=True)
        for row, requests_of in enumerate(events):
            sweep, repeat = divmod(row, repeats)
            cells[sweep].append(_cell(truth, config, concurrency, repeat, repeats, sweep,
                                      requests_of))
    return cells


def _lockstep(truth: Truth, config: ConfigTruth, slots: int, z: Any, machine: Any,
              rng: np.random.Generator, *, record: bool) -> tuple[Any, list[Any]]:
    """Each row of ``z`` a cell: its end time, and (``record``) per request its start, token
    times and steps."""
    cells, n = z.shape
    gains = config.gain * np.exp(config.gain_sigma * z)
    tokens = truth.tokens
    req = np.where(np.arange(slots) < n, np.arange(slots), -1)[None, :].repeat(cells, axis=0)
    nxt = np.full(cells, min(slots, n))
    prog = np.zeros((cells, slots))
    emitted = np.zeros((cells, slots), dtype=int)
    now, ends = np.zeros(cells), np.zeros(cells)
    starts, steps = np.zeros((cells, n)), np.zeros((cells, n), dtype=int)
    times: list[list[list[float]]] = [[[] for _ in range(n)] for _ in range(cells)] if record else []
    rows = np.arange(cells)[:, None]
    while (req >= 0).any():
        active = req >= 0
        batch = active.sum(axis=1)
        noise = np.exp(rng.normal(-truth.token_sd ** 2 / 2, truth.token_sd, cells))
        step = np.where(batch > 0, truth.step_s * np.maximum(batch, 1) ** config.batch_exponent
                        * noise * machine, 0.0)
        now = now + step
        prog = prog + np.where(active, gains[rows, np.maximum(req, 0)], 0.0)
        new = np.where(active, np.minimum(np.floor(prog).astype(int), tokens), emitted)
        if record:
            live = np.nonzero(active)
            steps[live[0], req[live]] += 1
            for c, s in zip(*np.nonzero(new > emitted), strict=True):
                times[c][req[c, s]].extend(now[c] + BURST_S * k
                                           for k in range(new[c, s] - emitted[c, s]))
        emitted = new
        done = active & (emitted >= tokens)
        ends = np.where(done.any(axis=1), now, ends)
        order = np.cumsum(done, axis=1) - 1
        take = np.where(done, nxt[:, None] + order, req)
        take = np.where(done & (take >= n), -1, take)
        for c, s in zip(*np.nonzero(done & (take >= 0)), strict=True):
            starts[c, take[c, s]] = now[c]
        req = take
        nxt = nxt + done.sum(axis=1)
        prog = np.where(done, 0.0, prog)
        emitted = np.where(done, 0, emitted)
    events = ([list(zip(starts[c], times[c], steps[c], strict=True)) for c in range(cells)]
              if record else [])
    return ends, events


def _cell(truth: Truth, config: ConfigTruth, concurrency: int, repeat: int, repeats: int,
          sweep: int, requests_of: list[tuple[float, list[float], int]]) -> CellRecord:
    spec = CellSpec(config=config.name, series=config.name.split("-")[0], method=config.method,
                    budget=config.budget, workload=truth.workload, context=truth.context,
                    concurrency=concurrency, repeat=repeat, repeats=repeats,
                    output_tokens=truth.tokens)
    requests = []
    for index, (start, times, steps) in enumerate(requests_of):
        rec = RequestRecord(index=index, warmup=False, prompt_tokens_planned=truth.context,
                            max_tokens=truth.tokens, status=200, start=float(start),
                            end=times[-1], token_times=list(times), chunk_sizes=[1] * len(times),
                            output_ids=[], text_sha="")
        rec.final = FinalStats(prompt_tokens=truth.context, completion_tokens=len(times),
                               verify_steps=min(int(steps), len(times)))  # a step a token at most
        requests.append(rec)
    prompts = tuple(PromptRecord(f"s{sweep}-r{repeat}-p{i}", truth.context)
                    for i in range(len(requests)))
    judge = JudgeInputs(planned=len(requests), speculative=config.method != "auto")
    return analyse(CellRecord("sim", spec, "fp", config.name, (), Verdict("ok"), judge,
                              requests=tuple(requests), prompts=prompts))
