"""The emulator's truth: named profiles of acceptance and cost, and each config's expected decode
rate per panel in closed form, so the best config of every panel is known (tests and benchmarks).

A profile is a set of knobs (``Truth.knobs``): per task the chain acceptance ``alpha.<task>``
and the tree's share ``share.<task>`` (gpu_accept.py), the drafter's fixed cost ``drafter_s``,
``tree_step_s`` (a tree's own cost a step), ``spread`` (the per-request Beta concentration of α),
``sampled_alpha`` (α's factor at temperature > 0), ``node_scale`` (a tree node's verify
cost, against the derived one) and the answer lengths ``answer.<task>``.
``published`` derives them from the figures (gpu_figures.py); the others change what the
figures would make true, so a design is not tuned to one truth. ``--emu-set key=value`` (or
:func:`truth` overrides) changes any knob.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache

from gpu_accept import chain_paths, expected_tau, tree_paths
from gpu_model import Hardware, drafter_share

ANCHOR_CONTEXT = 1024  # assumed: the KV a request of the DFlash/DDTree benchmarks holds
ANCHOR_BLOCK = 16  # DFlash's b16 drafters: the table's block
TRAINED_BLOCK = 16  # the block z-lab's Qwen3 drafters were trained at (Qwen3-8B-DFlash-b16)
DDTREE_BUDGETS = (16, 32, 64, 128, 256, 512, 1024)  # the DDTree table's search
QUANTILES = 16  # α's per-request distribution, integrated at 16 quantiles


@dataclass(frozen=True)
class Config:
    """One server config as the adapter's budgets mean it: ``linear`` budget = the drafter's block
    (tokens verified a step); ``tree`` budget = the tree's nodes, the drafter's block kept."""

    name: str
    method: str  # auto | linear | tree
    budget: int = 0
    block: int = ANCHOR_BLOCK

    @property
    def verified(self) -> int:
        """Tokens the target computes a request a step."""
        return {"auto": 1, "linear": self.budget, "tree": self.budget + 1}[self.method]


@dataclass(frozen=True)
class Panel:
    """One question's cell conditions: a task (code, chat, math), a prompt length, the requests
    in flight, the output cap, whether answers end at EOS, and the temperature."""

    task: str
    context: int
    concurrency: int
    output_tokens: int = 256
    eos: bool = True
    temperature: float = 0.0


@dataclass(frozen=True)
class Truth:
    name: str
    knobs: dict[str, float] = field(default_factory=dict)

    def get(self, key: str) -> float:
        return self.knobs[key]


def paths(config: Config, alpha: float, share: float) -> tuple[tuple[int, ...], ...]:
    """The draft a config verifies: a chain of its block, or the tree of its budget, neither
    deeper than the drafter was trained to draft (block 16: a position past it is never right;
    the fork's template runs the b16 drafter at block budget + 1)."""
    depth = min(config.block, TRAINED_BLOCK) - 1
    if config.method == "linear":
        return chain_paths(min(config.budget, TRAINED_BLOCK))
    if config.method == "tree":
        return tree_paths(config.budget, depth, round(alpha, 6), round(share, 6))
    return ()


def step_time(hw: Hardware, truth: Truth, config: Config, batch: float, kv: float) -> float:
    """One decode step of ``batch`` requests under ``config`` (the drafter's forward included:
    its fixed cost and its layers' share of the target's roofline)."""
    tokens = batch * config.verified
    target = hw.forward(batch, tokens, kv)
    if config.method == "auto":
        return target
    share = drafter_share(hw.model)
    draft_tokens = batch * config.block
    memory = (hw.weights + batch * kv * hw.kv_per_token) * share
    draft = truth.get("drafter_s") + max(memory, draft_tokens * hw.c_tok * share)
    if config.method == "tree":
        target += truth.get("tree_step_s") + batch * config.budget * hw.c_node * truth.get("node_scale")
    return target + draft


def _beta_quantiles(mean: float, concentration: float) -> list[float]:
    from scipy import stats

    a, b = mean * concentration, (1 - mean) * concentration
    return [float(stats.beta.ppf((i + 0.5) / QUANTILES, a, b)) for i in range(QUANTILES)]


def task_alpha(truth: Truth, panel: Panel) -> float:
    alpha = truth.get(f"alpha.{panel.task}")
    return alpha * truth.get("sampled_alpha") if panel.temperature > 0 else alpha


def mean_tau(truth: Truth, config: Config, panel: Panel, *, harmonic: bool = False) -> float:
    """τ averaged over requests: each request's α drawn from a Beta around the task's, the
    tree built on the task's α (the drafter's belief), walked with the request's. ``harmonic``:
    the mean that tokens over summed time weigh requests by (a slow request's time counts
    more), as the decode rate's claim does."""
    if config.method == "auto":
        return 1.0
    alpha, share = task_alpha(truth, panel), truth.get(f"share.{panel.task}")
    kept = paths(config, alpha, share)
    return _mean_tau(kept, alpha, share, truth.get("spread"), harmonic)


@lru_cache(maxsize=8192)
def _mean_tau(kept: tuple[tuple[int, ...], ...], alpha: float, share: float, spread: float,
              harmonic: bool = False) -> float:
    draws = _beta_quantiles(alpha, spread) if spread > 0 else [alpha]
    taus = [expected_tau(kept, a, share) for a in draws]
    if harmonic:
        return len(taus) / sum(1 / t for t in taus)
    return sum(taus) / len(taus)


def mean_chain_tau(block: int, alpha: float, spread: float) -> float:
    """A chain's τ averaged over requests' α."""
    return _mean_tau(chain_paths(block), alpha, 0.0, spread)


def answer_length(truth: Truth, panel: Panel) -> float:
    """Tokens a request produces on average: the cap without EOS, else a log-normal answer
    (median ``answer.<task>``, σ 0.6) cut at the cap."""
    if not panel.eos:
        return float(panel.output_tokens)
    median, sigma = truth.get(f"answer.{panel.task}"), 0.6
    from scipy import stats

    dist = stats.lognorm(sigma, scale=median)
    cap = panel.output_tokens
    # E[min(L, cap)] = ∫0^cap P(L > x) dx
    grid = [cap * (i + 0.5) / 64 for i in range(64)]
    return max(1.0, sum(float(dist.sf(x)) for x in grid) * cap / 64)


def in_flight(hw: Hardware, config: Config, panel: Panel, mem_fraction: float, out: float) -> int:
    """Requests that run at once: the concurrency, capped by SGLang's max running requests and
    by the KV pool (each request ends holding its prompt and its answer)."""
    spec = config.method != "auto"
    pool = hw.pool_tokens(mem_fraction, drafter_share(hw.model) if spec else 0.0)
    fit = max(1, int(pool // (panel.context + out + config.verified)))
    cap = 48 if spec else 1024
    return max(1, min(panel.concurrency, fit, cap))


@dataclass(frozen=True)
class Expected:
    """A config's expected figures in one panel (per request, GPU seconds, unscaled)."""

    config: str
    decode_rate: float  # tokens after the first / time after the first token
    e2e_rate: float  # tokens / (queue + prefill + decode)
    tau: float
    step_s: float
    in_flight: int


def expected(config: Config, panel: Panel, truth: Truth, hw: Hardware,
             mem_fraction: float = 0.85) -> Expected:
    """A config's expected decode rate in a closed loop of ``panel.concurrency`` requests: steps
    of τ tokens at :func:`step_time`, stalled by the other in-flight requests' prefills (SGLang
    runs a prefill batch before the next decode step), the clients' cycles spread out (as real
    clients drift apart; gpu_sched.simulated_rate staggers them so). Exact at concurrency 1;
    within about 25 % of the emulator's own schedule above it, where gpu_sched.simulated_best
    gives the schedule's own best (benchmarks/emulator_truth.py --simulate prints both)."""
    out = answer_length(truth, panel)
    batch = in_flight(hw, config, panel, mem_fraction, out)
    tau = mean_tau(truth, config, panel, harmonic=True)
    prefill = hw.prefill_total(panel.context)
    if config.method != "auto":
        prefill *= 1 + drafter_share(hw.model)
    decoding = float(batch)  # requests in a decode step: those not waiting for their prefill
    for _ in range(8):
        step = step_time(hw, truth, config, decoding, panel.context + out / 2)
        busy = max(out - 1, 1.0) / tau * step
        decode = _with_stalls(busy, prefill, batch)
        decoding = max(1.0, batch * decode / (decode + prefill))
    queued = max(0, panel.concurrency - batch) / batch * (prefill + decode)
    return Expected(config.name, max(out - 1, 1.0) / decode, out / (queued + prefill + decode),
                    tau, step, batch)


def _with_stalls(busy: float, prefill: float, batch: int) -> float:
    """A request's decode time D when the other ``batch`` − 1 requests, each cycling through a
    prefill P and a decode D, stall it by their prefills: with the prefills' share of the GPU,
    s = B·P/(B·P + busy), the others are queued behind its own prefill and all stall it once its
    first token is out; otherwise one falls in its window with the odds D/(P + D) of cycles whose
    phases spread out (D = busy + (B − 1)·P·D/(P + D), a quadratic)."""
    b = prefill * (2 - batch) - busy
    spread = (-b + math.sqrt(b * b + 4 * busy * prefill)) / 2
    share = batch * prefill / (batch * prefill + busy)
    odds = spread / (prefill + spread)
    return busy + (batch - 1) * prefill * (share + (1 - share) * odds)


def best(configs: list[Config], panel: Panel, truth: Truth, hw: Hardware,
         mem_fraction: float = 0.85) -> tuple[str, dict[str, Expected]]:
    """The true best config of a panel by decode rate, and every config's figures."""
    rates = {c.name: expected(c, panel, truth, hw, mem_fraction) for c in configs}
    return max(rates, key=lambda n: rates[n].decode_rate), rates
