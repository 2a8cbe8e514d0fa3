"""The KV pool a GPU server will hold, estimated before it starts, and the panels it cannot hold.

SGLang sizes its pool once the target's and the drafter's weights are loaded
(``mem_cache/kv_cache_configurator.py``, ``_profile_available_bytes``): the free memory less
the share ``1 − --mem-fraction-static`` of the memory before loading, over the KV bytes a token
of the target's layers and the drafter's (``model_executor/pool_configurator.py``). On one GPU
of ``M`` bytes that is

    max_total_num_tokens ≈ (M × mem_fraction − (W_target + W_drafter) / tp) / (kv_target + kv_drafter)

with the KV bytes a token a GPU ``2 × layers × max(1, kv_heads // tp) × head_dim × bytes``.
Speculation caps the requests running at once at 48 unless ``--max-running-requests`` says
otherwise (``Adapter.running_cap``). tests/PROTOCOLS.md says what was read in SGLang's source
and what is assumed; the GPU emulator (tests/support/gpu_model.py) sizes its pool with
:func:`pool_tokens`. :func:`unfit_panels` names each panel (context × concurrency × output
tokens, per config, since a drafter shrinks the pool) whose tokens in flight exceed the
estimate, with the concurrency that fits; the doctor and the dry run say it
(:func:`kv_check`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..core.errors import PreflightError
from ..model.cellspec import ServerConfig
from ..model.params import SweepParams
from ..model.plan import Plan
from .speeds import gpu_class, size_of_name

if TYPE_CHECKING:
    from ..servers.engines import Adapter

# the memory one GPU of a class holds, bytes: NVIDIA's datasheets (H100 SXM5 80 GB, H200 141 GB,
# A100 80 GB, B200 180 GB; the emulator's gpu_figures.py too), read as 10^9 bytes: below the
# free memory nvidia-smi reports (about 79.6 GiB on an H100), so the estimate errs small
GPU_MEMORY = {"H100": 80e9, "H200": 141e9, "A100": 80e9, "B200": 180e9}
DRAFTER_LAYERS = 5  # assumed: a DFlash drafter without a config.json here: 5 layers of the target's
BYTES_BY_DTYPE = {"bfloat16": 2, "float16": 2, "float32": 4, "float8_e4m3fn": 1}


@dataclass(frozen=True)
class KvModel:
    """What the pool needs of a model: its weights' bytes and its KV's shape, and whence."""

    name: str
    weight_bytes: float
    layers: int
    kv_heads: int
    head_dim: int
    bytes_per_value: int = 2
    source: str = ""

    def kv_bytes_per_token(self, tp: int = 1) -> int:
        """K and V of every layer on one of ``tp`` GPUs (SGLang's ``get_num_kv_heads``: heads
        split over the GPUs, at least one each)."""
        heads = max(1, self.kv_heads // max(1, tp))
        return 2 * self.layers * heads * self.head_dim * self.bytes_per_value


# Hugging Face Qwen/Qwen3-{4B,8B,32B} config.json (layers, KV heads, head_dim 128, bf16) and the
# Qwen3 technical report's parameter counts (the emulator's gpu_figures.py MODELS)
_QWEN3 = "Hugging Face Qwen/{name} config.json and the Qwen3 technical report's size"
KNOWN_MODELS = {m.name: m for m in (
    KvModel("Qwen3-4B", 4.02e9 * 2, 36, 8, 128, 2, _QWEN3.format(name="Qwen3-4B")),
    KvModel("Qwen3-8B", 8.19e9 * 2, 36, 8, 128, 2, _QWEN3.format(name="Qwen3-8B")),
    KvModel("Qwen3-32B", 32.8e9 * 2, 64, 8, 128, 2, _QWEN3.format(name="Qwen3-32B")),
)}


def pool_tokens(memory_bytes: float, mem_fraction: float, tp: int, target: KvModel,
                drafter: KvModel | None = None) -> int:
    """SGLang's ``max_total_num_tokens`` for ``target`` (and ``drafter``) on ``tp`` GPUs of
    ``memory_bytes`` each at ``--mem-fraction-static`` ``mem_fraction`` (see the module)."""
    models = [target] if drafter is None else [target, drafter]
    free = memory_bytes * mem_fraction - sum(m.weight_bytes for m in models) / max(1, tp)
    cell = sum(m.kv_bytes_per_token(tp) for m in models)
    return max(0, int(free // cell))


def read_model(path: str | Path | None, *, params_b: float | None = None) -> KvModel | None:
    """The model at ``path``: its KV shape from its ``config.json`` (else the known table by the
    folder's name), its weights from ``params_b`` (billions, 2 bytes each), else its
    ``*.safetensors`` files' bytes, else the table, else its name's size; None: unknown."""
    folder = Path(str(path or "")).expanduser()
    known = KNOWN_MODELS.get(folder.name)
    shape = _config_shape(folder)
    weights, said = _weights(folder, params_b, known)
    if shape is None:
        if known is None:
            return None
        shape = (known.layers, known.kv_heads, known.head_dim, known.bytes_per_value, known.source)
    if weights is None:
        return None
    layers, heads, head_dim, width, whence = shape
    return KvModel(folder.name, weights, layers, heads, head_dim, width, f"{whence}; {said}")


def read_drafter(path: str | Path | None, target: KvModel) -> KvModel:
    """A drafter: its config.json and weights' files where present, else ``DRAFTER_LAYERS`` of
    the target's layers (weights and KV in proportion: an assumption, said in its source)."""
    folder = Path(str(path or "")).expanduser()
    shape = _config_shape(folder)
    files = _files_bytes(folder)
    layers = shape[0] if shape is not None else DRAFTER_LAYERS
    share = layers / target.layers
    weights = files if files is not None else target.weight_bytes * share
    said = ("its weights' files" if files is not None
            else f"weights {layers}/{target.layers} of the target's (assumed)")
    if shape is None:
        return KvModel(folder.name, weights, layers, target.kv_heads, target.head_dim,
                       target.bytes_per_value, f"no config.json: {DRAFTER_LAYERS} layers of the "
                       f"target's shape (assumed); {said}")
    return KvModel(folder.name, weights, shape[0], shape[1], shape[2], shape[3],
                   f"{shape[4]}; {said}")


def _config_shape(folder: Path) -> tuple[int, int, int, int, str] | None:
    """Layers, KV heads, head_dim, bytes a value and the source, from ``folder/config.json``."""
    path = folder / "config.json"
    try:
        raw = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    config = raw.get("text_config", raw) if isinstance(raw, dict) else {}
    try:
        layers = int(config["num_hidden_layers"])
        heads = int(config.get("num_key_value_heads") or config["num_attention_heads"])
        head_dim = int(config.get("head_dim")
                       or int(config["hidden_size"]) // int(config["num_attention_heads"]))
    except (KeyError, TypeError, ValueError):
        return None
    width = BYTES_BY_DTYPE.get(str(config.get("torch_dtype") or config.get("dtype") or ""), 2)
    return layers, heads, head_dim, width, f"{path}"


def _weights(folder: Path, params_b: float | None,
             known: KvModel | None) -> tuple[float | None, str]:
    if params_b is not None:
        return params_b * 1e9 * 2, f"weights {params_b:g}B × 2 bytes (engine.model_params_b)"
    files = _files_bytes(folder)
    if files is not None:
        return files, "weights: its *.safetensors files' bytes"
    if known is not None:
        return known.weight_bytes, f"weights {known.weight_bytes / 2e9:g}B × 2 bytes ({known.name})"
    size = size_of_name(folder.name, active=False)
    return (None, "") if size is None else (size * 2e9, f"weights {size:g}B × 2 bytes (its name)")


@dataclass(frozen=True)
class PoolEstimate:
    """A config's estimated pool: tokens, the requests that may run at once (None: no cap
    but the pool's), and how it was derived."""

    tokens: int
    running_cap: int | None
    words: str

    def holds(self, per_request: int) -> int:
        """The requests of ``per_request`` tokens it holds at once."""
        held = self.tokens // max(1, per_request)
        return held if self.running_cap is None else min(held, self.running_cap)


@dataclass(frozen=True)
class Unfit:
    """A panel whose tokens in flight exceed the estimated pool of some of its configs."""

    stage: str | None
    context: int
    concurrency: int
    output_tokens: int
    pools: tuple[tuple[PoolEstimate, tuple[str, ...]], ...]  # each pool too small, its configs

    @property
    def needed(self) -> int:
        return self.concurrency * (self.context + self.output_tokens)

    @property
    def fits(self) -> int:
        """The most requests every config's pool holds at this context."""
        return min(p.holds(self.context + self.output_tokens) for p, _ in self.pools)

    def text(self) -> str:
        per = self.context + self.output_tokens
        pools = "; ".join(f"~{p.tokens:,} for {_names(labels)}: {p.holds(per)} fit"
                          + (f" (at most {p.running_cap} running)"
                             if p.running_cap is not None and p.running_cap < self.concurrency
                             else "") for p, labels in self.pools)
        return (f"{f'stage {self.stage}: ' if self.stage else ''}context {self.context} + "
                f"{self.output_tokens} out × concurrency {self.concurrency} = {self.needed:,} "
                f"tokens in flight, more than the KV pool estimated ({pools}); give this context "
                f"a lower concurrency (concurrency_cap: {{{self.context}: {self.fits}}}), or "
                f"lower the context, or raise engine.mem_fraction")


def _names(labels: Sequence[str]) -> str:
    return ", ".join(labels[:3]) + (f" and {len(labels) - 3} more" if len(labels) > 3 else "")


def estimate_pool(params: SweepParams, server: ServerConfig, argv: Sequence[str],
                  adapter: Adapter) -> PoolEstimate | str:
    """``server``'s pool before it starts (see the module), or why it is not estimated."""
    engine = params.engine
    gpu, _ = gpu_class(engine)
    if not adapter.kv_pool_estimated or gpu not in GPU_MEMORY:
        return f"not estimated: {adapter.name} on {gpu} (SGLang on a GPU class only)"
    if engine.mem_fraction is None:
        return "not estimated: engine.mem_fraction not set (SGLang picks its own)"
    target = read_model(engine.model, params_b=engine.model_params_b)
    if target is None:
        return (f"not estimated: {engine.model} has no config.json with its layers and KV heads "
                f"and is not a known model ({', '.join(KNOWN_MODELS)}); set engine.model_params_b "
                f"and stage its config.json")
    draft = server.draft_model or engine.draft_model
    drafter = (read_drafter(draft, target)
               if server.method != "auto" and draft and str(draft) in argv else None)
    tokens = pool_tokens(GPU_MEMORY[gpu], engine.mem_fraction, engine.tp, target, drafter)
    words = (f"{gpu} {GPU_MEMORY[gpu] / 1e9:g} GB × mem_fraction {engine.mem_fraction:g} less "
             f"the weights over tp {engine.tp}, over {target.kv_bytes_per_token(engine.tp):,} KV "
             f"bytes a token a GPU ({target.name}: {target.source})")
    if drafter is not None:
        words += (f", + the drafter's {drafter.weight_bytes / 1e9:.2f} GB and "
                  f"{drafter.kv_bytes_per_token(engine.tp):,} B a token ({drafter.source})")
    return PoolEstimate(tokens, adapter.running_cap(server, argv), words)


def plan_pools(plan: Plan) -> dict[PoolEstimate | str, list[str]]:
    """Each distinct estimated pool of ``plan``'s launched configs (or why there is none) and
    the configs it is theirs."""
    from ..servers.engines import get_adapter
    from .lifetimes import launch_argvs

    adapter = get_adapter(plan.params.engine)
    argvs = launch_argvs(plan, adapter, lenient=True)
    pools: dict[PoolEstimate | str, list[str]] = {}
    for server in plan.servers:
        if server.attach is None:
            found = estimate_pool(plan.params, server, argvs[server.label], adapter)
            pools.setdefault(found, []).append(server.label)
    return pools


def unfit_panels(plan: Plan, stage: str | None = None) -> list[Unfit]:
    """The closed-loop panels (context × concurrency × output tokens) of ``plan`` that some of
    its configs' estimated pools cannot hold (an open loop's server queues what it cannot hold)."""
    pools = plan_pools(plan)
    closed = [c for c in plan.cells if c.closed_loop]
    keys = sorted({(c.context, c.concurrency, c.output_tokens) for c in closed})
    found: list[Unfit] = []
    for ctx, conc, out in keys:
        short = tuple((pool, tuple(labels)) for pool, labels in pools.items()
                      if isinstance(pool, PoolEstimate) and pool.holds(ctx + out) < conc
                      and any(c.config in labels and (c.context, c.concurrency, c.output_tokens)
                              == (ctx, conc, out) for c in closed))
        if short:
            found.append(Unfit(stage, ctx, conc, out, short))
    return found


def kv_check(plan: Plan) -> str:
    """Every panel of the plan (of every stage of its phase) against its configs' estimated KV
    pools: a :class:`PreflightError` naming each panel that does not fit, its numbers and the
    fix; else what the pools hold."""
    unfit: list[Unfit] = []
    seen: dict[PoolEstimate | str, list[str]] = {}
    for stage, staged in _stage_plans(plan):
        unfit += unfit_panels(staged, stage)
        for pool, labels in plan_pools(staged).items():
            seen.setdefault(pool, []).extend(x for x in labels if x not in seen.get(pool, []))
    if unfit:
        many = len(unfit) > 1
        raise PreflightError(f"{len(unfit)} panel{'s' * many} cannot run at {'their' if many else 'its'}"
                             " concurrency (SGLang would admit fewer and queue the rest: "
                             "concurrency_not_held): " + "; ".join(u.text() for u in unfit),
                             what="kv pool")
    lines = [pool if isinstance(pool, str) else f"~{pool.tokens:,} tokens for {_names(labels)}"
             + (f" (at most {pool.running_cap} running)" if pool.running_cap else "")
             for pool, labels in seen.items()]
    how = max((p for p in seen if isinstance(p, PoolEstimate)), key=lambda p: len(p.words),
              default=None)
    return ("every panel fits the KV pool estimated: " + "; ".join(lines or ["no GPU server"])
            + (f" (from {how.words})" if how is not None else ""))


def _stage_plans(plan: Plan) -> list[tuple[str | None, Plan]]:
    """The plan, or every stage's plan of its phase (contenders priced as the dry run does)."""
    from ..model.plan import build_plan
    from ..model.staging import apply_stage

    phase = plan.phase_params
    if phase is None or not phase.stages:
        return [(None, plan)]
    found: list[tuple[str | None, Plan]] = []
    for stage in phase.stages:
        params, _ = apply_stage(phase, stage.name, source=plan.source)
        found.append((stage.name, build_plan(params, source=plan.source)))
    return found


def _files_bytes(folder: Path) -> float | None:
    """The bytes of a model folder's ``*.safetensors`` files (None: none)."""
    files = sum(p.stat().st_size for p in folder.glob("*.safetensors")) if folder.is_dir() else 0
    return float(files) if files else None
