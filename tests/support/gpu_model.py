"""The GPU performance model the emulator times itself by (tests and benchmarks only).

A forward pass costs a fixed overhead, then the larger of its memory time (the weights once, and
the KV cache of every request in the batch) and its compute time (every token of the batch), then
a cost a request (sampling, scheduling); a tree's verify adds a cost a node (masks, tree
attention). Prefill adds attention's quadratic part. Every constant is a published figure
(gpu_figures.py) or derived from them as each docstring says; docs/emulator.md has the table.

    t_forward(B, N, L) = t_overhead + max(W/tp/BW + B·L·kv/tp/BW, N·c_tok) + B·c_req + t_allreduce(N)
    t_prefill(a..b)    = t_overhead + max(W/tp/BW, (b−a)·c_tok) + (b² − a²)·c_pair + t_allreduce

with B requests in the batch, N tokens computed (B for a plain decode step, B × tokens verified
under speculation), L their mean KV length.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpu_figures import CALIBRATION, GPUS, MODELS, TREE_VS_CHAIN, Gpu, Model

from specbench_lib.sweep.kvpool import DRAFTER_LAYERS, KvModel
from specbench_lib.sweep.kvpool import pool_tokens as kv_pool_tokens

ALLREDUCE_LATENCY_S = 8e-6  # assumed: one small NCCL all-reduce on NVLink
CHUNKED_PREFILL = 8192  # assumed: SGLang's chunked prefill size on an 80 GB GPU
SPEC_MAX_RUNNING = 48  # sglang: speculation caps max running requests at 48
AUTO_MAX_RUNNING = 1024  # assumed: without speculation the pool bounds it first


def compute_efficiency() -> float:
    """The share of the H100's dense BF16 peak that issue 47's 12,000 tok/s prefill of an 8B
    model reaches (2 FLOPs a parameter a token): 2 × 8.19e9 × 12,000 / 989e12 = 0.199 (derived)."""
    model, gpu = MODELS[CALIBRATION.model], GPUS[CALIBRATION.gpu]
    return 2 * model.params * CALIBRATION.prefill_tok_s / gpu.bf16_flops


@dataclass(frozen=True)
class Hardware:
    """The cost constants of one model on ``tp`` GPUs of one class (all in seconds)."""

    gpu: Gpu
    model: Model
    tp: int
    overhead: float
    weights: float
    kv_per_token: float
    c_tok: float
    c_pair: float
    c_req: float
    c_node: float
    allreduce_per_token: float

    def forward(self, batch: float, tokens: float, kv_tokens: float) -> float:
        """One decode or verify forward: ``batch`` requests holding ``kv_tokens`` each on
        average, ``tokens`` tokens computed."""
        memory = self.weights + batch * kv_tokens * self.kv_per_token
        compute = tokens * self.c_tok
        return self.overhead + max(memory, compute) + batch * self.c_req + self._allreduce(tokens)

    def prefill(self, start: int, end: int) -> float:
        """A prefill chunk of positions ``start`` .. ``end`` − 1 of one request (the cached
        prefix before ``start`` attended to, causally)."""
        tokens = end - start
        linear = max(self.weights, tokens * self.c_tok)
        return self.overhead + linear + (end * end - start * start) * self.c_pair + self._allreduce(tokens)

    def prefill_total(self, length: int, chunk: int = CHUNKED_PREFILL) -> float:
        """A whole prompt's prefill, in chunks of ``chunk`` tokens."""
        return sum(self.prefill(a, min(a + chunk, length)) for a in range(0, length, chunk))

    def _allreduce(self, tokens: float) -> float:
        if self.tp <= 1:
            return 0.0
        return 2 * self.model.layers * ALLREDUCE_LATENCY_S + tokens * self.allreduce_per_token

    def pool_tokens(self, mem_fraction: float, drafter_share: float = 0.0) -> int:
        """SGLang's KV pool (``max_total_num_tokens``) as the doctor estimates it, by the one
        computation (:func:`specbench_lib.sweep.kvpool.pool_tokens`): the static share of one
        GPU's memory less its shard of the weights (and a drafter's of ``drafter_share`` of the
        target's layers), over the KV bytes a token a GPU."""
        m = self.model
        target = KvModel(m.name, m.weight_bytes, m.layers, m.kv_heads, m.head_dim, m.bytes_per_value)
        drafter = None if not drafter_share else KvModel(
            "drafter", m.weight_bytes * drafter_share, round(m.layers * drafter_share), m.kv_heads,
            m.head_dim, m.bytes_per_value)
        return kv_pool_tokens(self.gpu.memory_gb * 1e9, mem_fraction, self.tp, target, drafter)


def _per_request_s() -> float:
    """The cost a request adds to a step beyond its KV read, derived from issue 47's "3 % slower
    for each more request in flight" at the reference context: 3 % of 1/140 s = 214 µs, less
    the KV read of 3,072 tokens (453 MB at 3.35 TB/s: 135 µs) = 79 µs."""
    model, gpu = MODELS[CALIBRATION.model], GPUS[CALIBRATION.gpu]
    step = 1.0 / CALIBRATION.decode_tok_s
    kv = CALIBRATION.context * model.kv_bytes_per_token / gpu.hbm_bytes_s
    return CALIBRATION.per_request_slowdown * step - kv


def _per_node_s() -> float:
    """A tree node's verify cost, derived from Liu et al.'s tree vs chain at batch 1 (SGLang,
    Qwen3-8B): a step costs τ / speedup autoregressive steps, 2.25 / 1.65 = 1.364 for the chain
    (4 tokens) and 2.92 / 1.85 = 1.578 for the tree (21 tokens); both are under the roofline's
    ridge, so the 0.215 steps between them are 17 nodes' tree cost: 0.0126 of the calibration's
    decode step (7.14 ms) = 90 µs a node."""
    f = TREE_VS_CHAIN
    chain = f["chain_tau"] / f["chain_speedup"]
    tree = f["tree_tau"] / f["tree_speedup"]
    per_node_steps = (tree - chain) / (f["tree_tokens"] - f["chain_tokens"])
    return per_node_steps / CALIBRATION.decode_tok_s


def _overhead_s(c_req: float) -> float:
    """The fixed cost a forward, derived so that the calibration (an 8B model on an H100 at the
    reference context) decodes 140 tok/s at concurrency 1: 1/140 s less its weights' read
    (16.4 GB at 3.35 TB/s: 4.89 ms), its KV's read and its request's cost = 2.0 ms."""
    model, gpu = MODELS[CALIBRATION.model], GPUS[CALIBRATION.gpu]
    step = 1.0 / CALIBRATION.decode_tok_s
    memory = (model.weight_bytes + CALIBRATION.context * model.kv_bytes_per_token) / gpu.hbm_bytes_s
    return step - memory - c_req


def hardware(gpu: str = "H100", model: str = "Qwen3-8B", tp: int = 1) -> Hardware:
    """The cost constants of ``model`` on ``tp`` GPUs of class ``gpu``: memory times from the
    datasheet bandwidth (read at face value), compute from the peak at the calibration's
    efficiency, the overhead and the costs a request and a node from the calibration (the same on
    every GPU: host and kernel-launch work), all-reduces over NVLink."""
    g, m = GPUS[gpu], MODELS[model]
    flops = g.bf16_flops * compute_efficiency() * tp
    c_req = _per_request_s()
    # attention in prefill: QKᵀ and PV, 2 FLOPs a multiply-add, causal: 2 × layers × width a pair
    c_pair = 2 * m.layers * m.attention_width / flops
    # two ring all-reduces a layer of a token's hidden state (bf16), 2(tp − 1)/tp of it over
    # one direction of NVLink (half the datasheet's bidirectional figure)
    ring = 2 * (tp - 1) / tp
    allreduce = 2 * m.layers * m.hidden * m.bytes_per_value * ring / (g.nvlink_bytes_s / 2)
    return Hardware(gpu=g, model=m, tp=tp, overhead=_overhead_s(c_req),
                    weights=m.weight_bytes / tp / g.hbm_bytes_s,
                    kv_per_token=m.kv_bytes_per_token / tp / g.hbm_bytes_s,
                    c_tok=2 * m.params / flops, c_pair=c_pair, c_req=c_req, c_node=_per_node_s(),
                    allreduce_per_token=allreduce)


def drafter_share(model: Model) -> float:
    """The DFlash drafter's size against its target: ``DRAFTER_LAYERS`` of the target's layers."""
    return DRAFTER_LAYERS / model.layers


def per_request_slowdown(hw: Hardware, context: int) -> float:
    """How much one more request in flight slows a plain decode step at ``context`` (issue 47
    assumes 3 %, and the model is calibrated to it at 3,072 tokens)."""
    one = hw.forward(1, 1, context)
    return (hw.forward(2, 2, context) - one) / one
