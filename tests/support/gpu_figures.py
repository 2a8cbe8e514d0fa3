"""The published figures the GPU emulator is built from, each with its source (tests and
benchmarks only; docs/emulator.md lists them with what is derived from them).

A figure here is someone else's measurement or a vendor's datasheet number: carried with its
source, never a law. ``SOURCES`` names every source once; the tables point at it by key.
"""

from __future__ import annotations

from dataclasses import dataclass

SOURCES = {
    "issue47": "issue 47 (specbench): about 12,000 tok/s prefill and 140 tok/s decoding a request "
               "at concurrency 1 for an 8B model on an H100, 3 % slower for each more request in flight",
    "liu2601": "Liu, Yu, Park, Stoica, Cheung, 'Speculative Decoding: Performance or Illusion?', "
               "arXiv 2601.11580 (vLLM v0.10.1 and SGLang v0.5.9, H100)",
    "ddtree": "liranringel/ddtree, src/data/results.tex (DFlash and DFlash + DDTree on Qwen3, "
              "temperature 0, best DDTree node budget of {16, ..., 1024})",
    "dspark": "DSpark speculator, 7 draft tokens, one B200, vLLM 0.30.1rc1, 1,024 tokens out, "
              "one run a point: 2.85x at N = 1, 1.16x at N = 64 on HumanEval",
    "h100": "NVIDIA H100 Tensor Core GPU datasheet (SXM5: 80 GB HBM3, 3.35 TB/s, "
            "989 TFLOPS dense BF16, NVLink 900 GB/s)",
    "h200": "NVIDIA H200 Tensor Core GPU datasheet (SXM: 141 GB HBM3e, 4.8 TB/s, "
            "989 TFLOPS dense BF16, NVLink 900 GB/s)",
    "a100": "NVIDIA A100 Tensor Core GPU datasheet (SXM 80 GB: 2,039 GB/s, 312 TFLOPS dense BF16, "
            "NVLink 600 GB/s)",
    "b200": "NVIDIA DGX B200 datasheet (1,440 GB for 8 GPUs = 180 GB each, HBM3e 8 TB/s, "
            "2.25 PFLOPS dense BF16 a GPU, NVLink 1.8 TB/s)",
    "qwen3": "Qwen3 model configs (Hugging Face Qwen/Qwen3-{4B,8B,32B} config.json: layers, "
             "attention and KV heads, head_dim 128, bf16) and the Qwen3 technical report's sizes",
    "sglang": "SGLang 0.5.23 behaviour as tests/PROTOCOLS.md and docs/engine-facts.md record it "
              "(max running requests 48 under speculation, /flush_cache refused while requests "
              "run, /server_info fields)",
    "specbench": "this project's own observation (params/tp1.yaml: an SGLang start of 3-5 minutes; "
                 "README: per-prompt speedups 0.92-1.43x, p10-p90)",
    "assumed": "an assumption: no published figure was found here; change it with --emu-set",
}


@dataclass(frozen=True)
class Gpu:
    """One GPU's datasheet figures."""

    name: str
    memory_gb: float
    hbm_bytes_s: float
    bf16_flops: float
    nvlink_bytes_s: float
    source: str


GPUS = {
    "H100": Gpu("H100", 80.0, 3.35e12, 989e12, 900e9, "h100"),
    "H200": Gpu("H200", 141.0, 4.8e12, 989e12, 900e9, "h200"),
    "A100": Gpu("A100", 80.0, 2.039e12, 312e12, 600e9, "a100"),
    "B200": Gpu("B200", 180.0, 8.0e12, 2250e12, 1800e9, "b200"),
}


@dataclass(frozen=True)
class Model:
    """One target model's shape (bf16 weights and KV cache)."""

    name: str
    params: float
    layers: int
    q_heads: int
    kv_heads: int
    hidden: int
    head_dim: int = 128
    bytes_per_value: int = 2

    @property
    def weight_bytes(self) -> float:
        return self.params * self.bytes_per_value

    @property
    def kv_bytes_per_token(self) -> int:
        """K and V of every layer: 2 x layers x KV heads x head_dim x 2 bytes (Qwen3-8B:
        147,456 B, 144 KiB)."""
        return 2 * self.layers * self.kv_heads * self.head_dim * self.bytes_per_value

    @property
    def attention_width(self) -> int:
        return self.q_heads * self.head_dim


MODELS = {
    "Qwen3-4B": Model("Qwen3-4B", 4.02e9, 36, 32, 8, 2560),
    "Qwen3-8B": Model("Qwen3-8B", 8.19e9, 36, 32, 8, 4096),
    "Qwen3-32B": Model("Qwen3-32B", 32.8e9, 64, 64, 8, 5120),
}


@dataclass(frozen=True)
class Task:
    """A workload's acceptance anchors (Qwen3, temperature 0, batch 1): DFlash's speedup and τ at
    block 16, and DDTree's at its best node budget (``ddtree``)."""

    name: str
    dflash_speedup: float
    dflash_tau: float
    ddtree_speedup: float
    ddtree_tau: float
    note: str


TASKS = {
    "math": Task("math", 5.56, 7.79, 7.52, 10.73, "MATH-500, Qwen3-8B"),
    "code": Task("code", 6.09, 8.02, 8.22, 10.72, "HumanEval, Qwen3-Coder-30B-A3B (no 8B row)"),
    "chat": Task("chat", 2.07, 3.12, 3.36, 5.09, "Alpaca, Qwen3-8B (ShareGPT's nearest row)"),
}
# which task a document is: a Python function with a docstring is code (all 164 HumanEval
# prompts; 44 of ShareGPT's first 3,000 documents, 1.9 % of its text), LaTeX is math, the rest chat
CODE_MARKERS = ("def ",)
DOCSTRING_MARKERS = ('"""', "'''")
MATH_MARKERS = ("\\frac", "\\boxed", "$$")

@dataclass(frozen=True)
class Calibration:
    """The calibration point of issue 47's figures: an 8B model on an H100, its decode rate at
    the reference context (the phase's short context)."""

    gpu: str = "H100"
    model: str = "Qwen3-8B"
    prefill_tok_s: float = 12_000.0
    decode_tok_s: float = 140.0
    per_request_slowdown: float = 0.03
    context: int = 3072


CALIBRATION = Calibration()
# Liu et al., SGLang v0.5.9, EAGLE on Qwen3-8B / GSM8K, depth 3, batch 1: chain k = 3 and tree
# k = 21 speedups and accepted lengths; at batch 64 the tree is below 1x on every workload
TREE_VS_CHAIN = {"chain_tokens": 4, "chain_speedup": 1.65, "chain_tau": 2.25,
                 "tree_tokens": 21, "tree_speedup": 1.85, "tree_tau": 2.92}
# speedup against batch: EAGLE k = 3 1.96x at batch 1 -> 1.21x at 128 (liu2601); DSpark, 7 draft
# tokens: 2.85x at N = 1 -> 1.16x at N = 64 on HumanEval, 4.03x -> 1.54x on math (dspark)
SHRINK = {"liu_b1": 1.96, "liu_b128": 1.21, "dspark_n1": 2.85, "dspark_n64": 1.16,
          "dspark_math_n1": 4.03, "dspark_math_n64": 1.54}
VERIFY_SHARE = (0.42, 0.95)  # liu2601: verification is 42-95 % of execution time
