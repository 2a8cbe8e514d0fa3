"""The emulator's shape against the figures it was built from (tests and benchmarks only).

Each check gives the model's figure beside the published one: the slowdown a request in flight
adds, DFlash's speedup at batch 1 per task, how much of it is left at batch 64, and Liu et al.'s
tree-vs-chain crossing (a chain of k = 3 against a tree of 21 tokens, depth 3: the tree ahead at
batch 1, below 1x at batch 64). Speedups here are a decode step's (τ over the step's cost against
an autoregressive step at the same batch), as the papers measure them: no prefill in them.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpu_accept import expected_tau, solve_alpha, tree_paths
from gpu_figures import CALIBRATION, SHRINK, TASKS, TREE_VS_CHAIN, VERIFY_SHARE
from gpu_model import Hardware, hardware, per_request_slowdown
from gpu_profiles import truth
from gpu_truth import ANCHOR_BLOCK, ANCHOR_CONTEXT, Config, Panel, Truth, mean_tau, step_time

LIU_CONTEXT = 512  # assumed: GSM8K's prompt and answer, about 500 tokens of KV


@dataclass(frozen=True)
class Check:
    name: str
    model: float
    published: float
    source: str


def step_speedup(hw: Hardware, tr: Truth, config: Config, task: str, batch: int, context: int) -> float:
    """A config's decode-step speedup over autoregressive decoding at ``batch`` requests."""
    tau = mean_tau(tr, config, Panel(task, context, batch))
    auto = step_time(hw, tr, Config("auto", "auto"), batch, context)
    return tau * auto / step_time(hw, tr, config, batch, context)


def liu_truth(base: Truth) -> tuple[Truth, Config, Config]:
    """Liu et al.'s EAGLE pair as this model's configs: α from the chain's accepted length
    (2.25 with k = 3: block 4), the share from the tree's (2.92 with 20 nodes, depth 3)."""
    f = TREE_VS_CHAIN
    block = int(f["chain_tokens"])
    alpha = solve_alpha(block, f["chain_tau"])
    nodes = int(f["tree_tokens"]) - 1
    lo, hi = 0.0, 0.999
    for _ in range(40):
        mid = (lo + hi) / 2
        got = expected_tau(tree_paths(nodes, block - 1, round(alpha, 6), round(mid, 6)), alpha, mid)
        lo, hi = (mid, hi) if got < f["tree_tau"] else (lo, mid)
    knobs = {**base.knobs, "alpha.gsm8k": alpha, "share.gsm8k": (lo + hi) / 2, "spread": 0.0}
    return (Truth("liu", knobs), Config("chain-k3", "linear", block, block),
            Config("tree-k21", "tree", nodes, block))


def checks() -> list[Check]:
    """Every shape check of the H100 / Qwen3-8B model under the ``published`` truth."""
    hw = hardware(CALIBRATION.gpu, CALIBRATION.model)
    tr = truth("published")
    out = [Check("slowdown a request in flight, 3k context", per_request_slowdown(hw, 3072),
                 CALIBRATION.per_request_slowdown, "issue47")]
    dflash = Config("dflash", "linear", ANCHOR_BLOCK)
    for name, task in TASKS.items():
        out.append(Check(f"DFlash b16 speedup at batch 1, {name}",
                         step_speedup(hw, tr, dflash, name, 1, ANCHOR_CONTEXT),
                         task.dflash_speedup, f"ddtree ({task.note})"))
    b1 = step_speedup(hw, tr, dflash, "code", 1, ANCHOR_CONTEXT)
    b64 = step_speedup(hw, tr, dflash, "code", 64, ANCHOR_CONTEXT)
    out.append(Check("DFlash b16, code: speedup at batch 64 / batch 1", b64 / b1,
                     SHRINK["dspark_n64"] / SHRINK["dspark_n1"], "dspark (7 draft tokens, HumanEval)"))
    out.append(Check("DFlash b16, code: speedup at batch 64", b64, SHRINK["dspark_n64"],
                     "dspark (7 draft tokens, HumanEval)"))
    for batch in (1, 64):
        target = verify_time(hw, dflash, batch)
        out.append(Check(f"DFlash b16: verification's share of a step at batch {batch}",
                         target / step_time(hw, tr, dflash, batch, ANCHOR_CONTEXT), VERIFY_SHARE[1],
                         "liu2601 (verification 42-95 % of the time)"))
    liu, chain, tree = liu_truth(tr)
    for batch in (1, 64):
        for config, key in ((chain, "chain_speedup"), (tree, "tree_speedup")):
            published = TREE_VS_CHAIN[key] if batch == 1 else (1.0 if config is tree else float("nan"))
            out.append(Check(f"Liu {config.name} speedup at batch {batch}",
                             step_speedup(hw, liu, config, "gsm8k", batch, LIU_CONTEXT), published,
                             "liu2601" + (" (batch 64: the tree below 1x)" if batch == 64 else "")))
    out.append(Check("Liu tree/chain crossing batch", crossing(hw, liu, chain, tree), float("nan"),
                     "liu2601 (tree ahead at 1, behind by 64)"))
    return out


def verify_time(hw: Hardware, config: Config, batch: int) -> float:
    """The target's verify forward alone (the step less the drafter's)."""
    return hw.forward(batch, batch * config.verified, ANCHOR_CONTEXT)


def crossing(hw: Hardware, tr: Truth, chain: Config, tree: Config) -> float:
    """The smallest batch at which the tree's step speedup falls below the chain's."""
    for batch in range(1, 129):
        if step_speedup(hw, tr, tree, "gsm8k", batch, LIU_CONTEXT) < step_speedup(
                hw, tr, chain, "gsm8k", batch, LIU_CONTEXT):
            return float(batch)
    return float("inf")
