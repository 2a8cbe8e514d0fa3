"""The emulator's named truths (tests and benchmarks only): ``published`` derives every knob from
the published figures; the others move the answer on purpose.

- ``published``: α per task from DFlash's τ at block 16 (averaged over requests); the drafter's
  fixed cost from DFlash's speedup at batch 1; the tree's share per task from DDTree's τ at the
  budget this model finds fastest at batch 1.
- ``budget_shift``: a drafter whose misses sit on its next choices (share 0.8) and a node a fifth
  as costly (``node_scale`` 0.2), so the best tree budget moves with concurrency (64 at 1, 8-16
  at 16).
- ``tree_never``: the tree gains nothing over its chain (share 0) and costs 30 % of a decode
  step more: DDTree never pays, DFlash or auto is best.
- ``no_spec``: acceptance a fifth of ``published``'s (α × 0.2) and no tree gain: no draft pays
  for its step (where a drafter's larger pool share leaves fewer requests in flight, a long
  context's decode rate can still favour it: fewer prefills stall each request).
"""

from __future__ import annotations

from functools import lru_cache

from gpu_accept import expected_tau, tree_paths
from gpu_figures import CALIBRATION, TASKS
from gpu_model import Hardware, hardware
from gpu_truth import (
    ANCHOR_BLOCK,
    ANCHOR_CONTEXT,
    DDTREE_BUDGETS,
    Config,
    Truth,
    mean_chain_tau,
    step_time,
)

PROFILE_NAMES = ("published", "budget_shift", "tree_never", "no_spec")
BASE_KNOBS = {
    "tree_step_s": 0.0,
    "node_scale": 1.0,
    "spread": 40.0,  # per-request α ~ Beta(α·40, (1 − α)·40): τ's p10-p90 about ±20 % (specbench)
    "sampled_alpha": 0.9,  # assumed: temperature 1 accepts 10 % fewer drafts a position
    "answer.code": 200.0,  # assumed: median answer lengths (tokens) when answers end at EOS
    "answer.chat": 350.0,
    "answer.math": 400.0,
}


def _anchor_hw() -> Hardware:
    return hardware(CALIBRATION.gpu, CALIBRATION.model)


@lru_cache(maxsize=1)
def drafter_seconds() -> float:
    """DFlash's step at batch 1 costs τ / speedup autoregressive steps: 7.79 / 5.56 = 1.40
    (MATH-500) and 3.12 / 2.07 = 1.51 (Alpaca) on Qwen3-8B, 1.454 on average; less the target's
    verify of 16 tokens and the drafter's roofline share, the rest is the drafter's fixed cost."""
    hw = _anchor_hw()
    rows = [t for t in TASKS.values() if "Qwen3-8B" in t.note]
    ratio = sum(t.dflash_tau / t.dflash_speedup for t in rows) / len(rows)
    bare = Truth("bare", {**BASE_KNOBS, "drafter_s": 0.0})
    auto = step_time(hw, bare, Config("auto", "auto"), 1, ANCHOR_CONTEXT)
    linear = step_time(hw, bare, Config("dflash", "linear", ANCHOR_BLOCK), 1, ANCHOR_CONTEXT)
    return max(0.0, ratio * auto - linear)


def best_tree_tau(alpha: float, share: float, knobs: dict[str, float]) -> tuple[int, float]:
    """The DDTree table's choice under this model: the budget of {16, ..., 1024} fastest at
    batch 1, and its τ."""
    hw, truth = _anchor_hw(), Truth("fit", knobs)
    found: list[tuple[float, int, float]] = []
    for n in DDTREE_BUDGETS:
        tau = expected_tau(tree_paths(n, ANCHOR_BLOCK - 1, round(alpha, 6), round(share, 6)),
                           alpha, share)
        found.append((tau / step_time(hw, truth, Config("t", "tree", n), 1, ANCHOR_CONTEXT), n, tau))
    _, budget, tau = max(found)
    return budget, tau


def solve_share(alpha: float, tau: float, knobs: dict[str, float]) -> float:
    """The share whose tree, at the budget this model finds fastest at batch 1, reaches DDTree's
    published ``tau`` (bisection; 0.95 when even that falls short)."""
    lo, hi = 0.0, 0.95
    if best_tree_tau(alpha, hi, knobs)[1] <= tau:
        return hi
    for _ in range(30):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if best_tree_tau(alpha, mid, knobs)[1] < tau else (lo, mid)
    return (lo + hi) / 2


def solve_mean_alpha(tau: float, spread: float) -> float:
    """The task's α whose chain of DFlash's block gives DFlash's published ``tau`` on average
    over requests (each request's α drawn from the Beta of concentration ``spread``)."""
    lo, hi = 0.0, 0.9999
    for _ in range(40):
        mid = (lo + hi) / 2
        got = mean_chain_tau(ANCHOR_BLOCK, mid, spread)
        lo, hi = (mid, hi) if got < tau else (lo, mid)
    return (lo + hi) / 2


@lru_cache(maxsize=1)
def published_knobs() -> tuple[tuple[str, float], ...]:
    """Every knob of ``published``, derived (cached: the fits take a second)."""
    knobs = {**BASE_KNOBS, "drafter_s": drafter_seconds()}
    for name, task in TASKS.items():
        alpha = solve_mean_alpha(task.dflash_tau, knobs["spread"])
        knobs[f"alpha.{name}"] = alpha
        knobs[f"share.{name}"] = solve_share(alpha, task.ddtree_tau, knobs)
    return tuple(sorted(knobs.items()))


def _profile(name: str) -> dict[str, float]:
    knobs = dict(published_knobs())
    tasks = list(TASKS)
    if name == "budget_shift":
        knobs.update({f"share.{t}": 0.8 for t in tasks})
        knobs["node_scale"] = 0.2
    elif name == "tree_never":
        knobs.update({f"share.{t}": 0.0 for t in tasks})
        knobs["tree_step_s"] = 0.3 / CALIBRATION.decode_tok_s
    elif name == "no_spec":
        knobs.update({f"alpha.{t}": knobs[f"alpha.{t}"] * 0.2 for t in tasks})
        knobs.update({f"share.{t}": 0.0 for t in tasks})
    elif name != "published":
        raise ValueError(f"no truth profile {name!r}: one of {', '.join(PROFILE_NAMES)}")
    return knobs


def truth(name: str = "published", overrides: dict[str, float] | None = None) -> Truth:
    """A named truth with ``overrides`` (``{"alpha.code": 0.8}``) applied; an unknown knob is
    refused with the known ones named."""
    knobs = _profile(name)
    for key, value in (overrides or {}).items():
        if key not in knobs:
            raise ValueError(f"truth knob {key!r} unknown: one of {', '.join(sorted(knobs))}")
        knobs[key] = float(value)
    return Truth(name, knobs)


def parse_overrides(items: list[str]) -> dict[str, float]:
    """``key=value`` strings (``--emu-set alpha.code=0.8``) as a dict."""
    out: dict[str, float] = {}
    for item in items:
        key, eq, value = item.partition("=")
        if not eq:
            raise ValueError(f"--emu-set {item!r}: write key=value, e.g. alpha.code=0.8")
        out[key.strip()] = float(value)
    return out
