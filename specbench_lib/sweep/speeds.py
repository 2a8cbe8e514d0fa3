"""The speeds the time model (:mod:`.timemodel`) prices a plan at, each with its source:
measured here (:func:`calibrated_speed`: the newest earlier run of the same engine kind and model,
its cell files read through the typed reader, a damaged one named and skipped), else stated
defaults by GPU class, model size and GPUs a server (:func:`default_speed`, :data:`GPU_SPEEDS`)."""

from __future__ import annotations

import math
import re
import statistics
from dataclasses import dataclass
from pathlib import Path

from ..core.errors import SpecbenchError, StoreError
from ..core.store import read_json
from ..model.plan import Plan
from ..model.records import CellRecord
from ..model.sections import EngineParams
from ..runs.rundir import iter_runs
from ..servers.engines import get_adapter

_CELLS_READ = 24  # auto cells read from an earlier run (the first at each concurrency suffice)


@dataclass(frozen=True)
class GpuSpeed:
    """A class of machine's stated speed for a model of ``size_b`` billions of parameters: prefill
    and a request's decoding at c1 (tokens a second), the slowdown per extra request in flight,
    a server's start (seconds), and where each figure comes from."""

    prefill_tok_s: float
    decode_tok_s: float
    slowdown: float
    start_s: float
    size_b: float
    source: str


_H100 = ("H100, 8B: prefill 12,000 tok/s, decoding 140 tok/s a request at c1, 3 % slower per "
         "extra request in flight (the figures issue 47 assumes for SGLang on an H100 with an 8B "
         "model), {start:.0f} s a server start (tp1.yaml: SGLang's start-up of 3-5 minutes)")
_SCALED = ("{gpu}: the H100 figures scaled by memory bandwidth for decoding ({bw} TB/s against "
           "3.35) and dense BF16 compute for prefill ({tf} TFLOPS against 989): NVIDIA's "
           "datasheets, not measured here")
GPU_START_S = 240.0  # SGLang on a GPU: loading, CUDA graphs, warmup (tp1.yaml: 3-5 minutes)
GPU_SPEEDS: dict[str, GpuSpeed] = {
    "H100": GpuSpeed(12000.0, 140.0, 0.03, GPU_START_S, 8.0, _H100.format(start=GPU_START_S)),
    "H200": GpuSpeed(12000.0, 140.0 * 4.8 / 3.35, 0.03, GPU_START_S, 8.0,
                     _SCALED.format(gpu="H200", bw=4.8, tf=989)),
    "A100": GpuSpeed(12000.0 * 312 / 989, 140.0 * 2.04 / 3.35, 0.03, GPU_START_S, 8.0,
                     _SCALED.format(gpu="A100", bw=2.04, tf=312)),
    "B200": GpuSpeed(12000.0 * 2250 / 989, 140.0 * 8.0 / 3.35, 0.03, GPU_START_S, 8.0,
                     _SCALED.format(gpu="B200", bw=8.0, tf=2250)),
    # the embedded engine: llama.cpp, SmolLM2-135M on 2 cores (docs/make-run-history.md: auto
    # 24-30 tok/s a request); the slowdown from one run here (auto code ctx256: 16.4 tok/s a
    # request at c1, 13.3 at c3, load 6-7, 2026-12-06); prefill a round figure, not measured
    "cpu": GpuSpeed(400.0, 30.0, 0.12, 10.0, 0.135,
                    "cpu, 0.135B: decoding 30 tok/s a request (the embedded llama.cpp with "
                    "SmolLM2-135M here: 24-30 tok/s, docs/make-run-history.md), 12 % slower per "
                    "extra request in flight (one run here: 16.4 tok/s a request at c1, 13.3 at "
                    "c3), prefill 400 tok/s and 10 s a server start (round figures)"),
}
TP_NOTE = "× √tp for {tp} GPUs a server (an assumption: all-reduce every layer; no figure read)"


@dataclass(frozen=True)
class Speed:
    """An engine's speed: prefill and a request's decoding at c1 (tokens a second), the slowdown
    per extra request in flight, a server start's seconds; where it comes from, and whether it
    was measured here (``calibrated``) or is a stated default."""

    prefill_tok_s: float
    decode_tok_s: float
    start_s: float
    source: str
    slowdown: float = 0.0
    calibrated: bool = False

    def decode_at(self, concurrency: int) -> float:
        """A request's decoding rate with ``concurrency`` requests in flight."""
        return self.decode_tok_s / (1 + self.slowdown * (max(1, concurrency) - 1))

    @property
    def kind(self) -> str:
        return "calibrated" if self.calibrated else "default"

    def words(self) -> str:
        return (f"{self.kind}: prefill {self.prefill_tok_s:.0f} tok/s, decoding "
                f"{self.decode_tok_s:.1f} tok/s a request at c1 ({100 * self.slowdown:.0f} % "
                f"slower per extra request in flight), {self.start_s:.0f} s a server start; "
                f"{self.source}")


def model_size_b(engine: EngineParams) -> float | None:
    """The model's billions of parameters: ``engine.model_params_b``, else its name's (``Qwen3-8B``:
    8, ``SmolLM2-135M``: 0.135, a mixture's active ``-A3B``: 3), else None."""
    if engine.model_params_b is not None:
        return float(engine.model_params_b)
    return size_of_name(Path(str(engine.model or "SmolLM2-135M")).name)


def size_of_name(name: str, *, active: bool = True) -> float | None:
    """The billions of parameters a model's name says (``Qwen3-8B``: 8, ``SmolLM2-135M``: 0.135,
    a mixture's active ``-A3B``: 3, or with ``active`` False its total, 30 of ``-30B-A3B``);
    None: it says none."""
    found_active = re.search(r"(?i)(?:^|[-_])A(\d+(?:\.\d+)?)B(?![a-z])", name)
    if active and found_active:
        return float(found_active.group(1))
    found = re.search(r"(?i)(?:^|[-_])(\d+(?:\.\d+)?)([BM])(?![a-z])", name)
    if not found:
        return None
    return float(found.group(1)) / (1000.0 if found.group(2).upper() == "M" else 1.0)


def gpu_class(engine: EngineParams) -> tuple[str, str]:
    """The class the servers run on and why: ``engine.gpu``, else cpu or H100 by the engine."""
    if engine.gpu is not None:
        return engine.gpu, "engine.gpu"
    if get_adapter(engine).needs_gpu:
        return "H100", "a GPU engine, engine.gpu not set: H100 assumed"
    return "cpu", "a CPU engine"


def default_speed(engine: EngineParams) -> Speed:
    """The stated default for ``engine`` (see the module): its class's figures, scaled by the
    model's size (decoding and prefill go as 1 / parameters) and the GPUs a server."""
    name, why = gpu_class(engine)
    base = GPU_SPEEDS[name]
    size = model_size_b(engine)
    scale = 1.0 if size is None else base.size_b / size
    tp = max(1, engine.tp) if name != "cpu" else 1
    wide = math.sqrt(tp)
    sized = (f"a {size:g}B model: × {scale:.3g} (1 / parameters)" if size is not None else
             f"the model's size unknown (set engine.model_params_b): taken as {base.size_b:g}B")
    notes = [f"default for {name} ({why}), {sized}"]
    if tp > 1:
        notes.append(TP_NOTE.format(tp=tp))
    if engine.start_s is not None:
        notes.append(f"a server start {engine.start_s:g} s (engine.start_s)")
    return Speed(base.prefill_tok_s * scale * wide, base.decode_tok_s * scale * wide,
                 engine.start_s or base.start_s, "; ".join(notes) + f"; from {base.source}",
                 base.slowdown)


def speed_of(plan: Plan, root: Path | None = None) -> Speed:
    """The speed the plan is priced at: measured here (:func:`calibrated_speed`), else the
    stated default (:func:`default_speed`); damaged earlier cell files are named in its source."""
    found, damaged = calibrated_speed(plan, root)
    speed = found or default_speed(plan.params.engine)
    if not damaged:
        return speed
    names = ", ".join(Path(e.path).name for e in damaged[:3]) + (
        f" and {len(damaged) - 3} more" if len(damaged) > 3 else "")
    return Speed(speed.prefill_tok_s, speed.decode_tok_s, speed.start_s,
                 f"{speed.source} (skipped {len(damaged)} damaged cell file"
                 f"{'s' if len(damaged) > 1 else ''} of earlier runs: {names})",
                 speed.slowdown, speed.calibrated)


def calibrated_speed(plan: Plan, root: Path | None = None
                     ) -> tuple[Speed | None, list[StoreError]]:
    """The newest earlier run's speed of this engine kind and model (None: none), and the
    damaged cell files met on the way (each a :class:`StoreError` naming it)."""
    engine = plan.params.engine
    model = Path(str(engine.model or "")).name
    damaged: list[StoreError] = []
    for run in reversed(list(iter_runs(root))):
        try:
            info = run.read_manifest()
        except SpecbenchError:
            continue
        if info.engine.get("kind") != engine.kind or (
                model and Path(str(info.model.get("path", ""))).name != model):
            continue
        found = _auto_speed(run.cells_dir, damaged)
        if found is None:
            continue
        starts = [float(e.raw["ready_s"]) for e in info.servers.values()
                  if isinstance(e.raw.get("ready_s"), (int, float)) and e.raw["ready_s"] > 0]
        start = statistics.fmean(starts) if starts else default_speed(engine).start_s
        prefill, decode, slowdown = found
        source = f"measured in run {run.run_id} (auto)" + (
            "" if slowdown is not None else ", the slowdown per request in flight the default's")
        return Speed(prefill, decode, start, source,
                     default_speed(engine).slowdown if slowdown is None else slowdown,
                     calibrated=True), damaged
    return None, damaged


def _auto_speed(cells: Path, damaged: list[StoreError]
                ) -> tuple[float, float, float | None] | None:
    """Prefill, decoding at c1 and the slowdown per extra request of a run's ok auto cells
    (None: no ok one at c1; the slowdown None: no ok one at a higher concurrency); a cell file
    the typed reader refuses is added to ``damaged``."""
    from ..analysis.analyse import analyse

    prefill: list[float] = []
    decode: dict[int, list[float]] = {}
    for path in sorted(cells.glob("auto__*.json"))[:_CELLS_READ]:
        try:
            record = analyse(CellRecord.from_dict(read_json(path), path=path))
        except StoreError as exc:
            damaged.append(exc)
            continue
        metrics = record.metrics or {}
        rate, ttft = metrics.get("request_decode_tok_s"), metrics.get("ttft_mean_s")
        prompt = metrics.get("prompt_tokens_mean")
        if not (record.verdict.ok and rate and ttft and prompt):
            continue
        decode.setdefault(record.spec.concurrency, []).append(float(rate))
        if record.spec.concurrency == 1:
            prefill.append(float(prompt) / float(ttft))
    if not prefill:
        return None
    one = statistics.fmean(decode[1])
    slowdowns = [(one / statistics.fmean(v) - 1) / (c - 1) for c, v in decode.items() if c > 1]
    return (statistics.fmean(prefill), one,
            max(0.0, statistics.fmean(slowdowns)) if slowdowns else None)


__all__ = ["GPU_SPEEDS", "Speed", "calibrated_speed", "default_speed", "gpu_class",
           "model_size_b", "size_of_name", "speed_of"]
