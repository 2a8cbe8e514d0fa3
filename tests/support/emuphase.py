"""A shipped phase against the GPU emulator, compressed (tests and benchmarks only; issue 47).

:func:`emulated_params` writes a params file that ``extends`` a shipped phase (params/tp1.yaml)
and swaps only where its servers come from: the emulator (tests/support/gpu_emulator.py) with a
truth profile and a time scale, a model folder named as the phase's model, and the phase's time
budget divided by the scale (so each stage's share of it too: model/stages.py). The design, its
configs, axes and stages are the shipped file's. :func:`score` reads a stage's ``answer.json``
against the emulator's closed-form truth (gpu_truth.best): whether the answer covers every panel
of the stage, whether each panel's confidence set holds the true best (of the configs the stage
measured, and of every config of the phase), a "decided" best that is not the true best, and the
seconds it took against its budget.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from gpu_emulator import START_S, resolve_config
from gpu_emulator import parser as emulator_parser
from gpu_model import hardware
from gpu_profiles import truth as truth_of
from gpu_truth import Config, Panel, best
from nvsmi import StandIn, gpu
from ports import free_port

SUPPORT = Path(__file__).resolve().parent
EMULATOR = SUPPORT / "gpu_emulator.py"
TASKS = {"code": "code", "chat": "chat"}  # a workload's task in the emulator


def emulated_params(folder: Path, shipped: Path, *, truth: str, scale: float, task: str = "chat",
                    extra: dict[str, Any] | None = None) -> Path:
    """A params file: ``shipped`` on the emulator under ``truth`` at ``scale`` (see the module);
    every prompt is the emulator's ``task`` (its acceptance), so each panel's truth is one
    closed form; ``extra``: top-level keys over the phase's (a smaller test)."""
    phase = yaml.safe_load(shipped.read_text())
    model = folder / Path(str(phase["engine"]["model"])).name  # the emulator reads its size there
    model.mkdir(parents=True, exist_ok=True)
    (model / "config.json").write_text("{}")
    template = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}"
                "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n"
                "{% endif %}")
    (model / "tokenizer_config.json").write_text(json.dumps({"chat_template": template}))
    from specbench_lib.model.layering import load_params

    budget = float(load_params(shipped).time_budget_s or 0) / scale
    launcher = [str(EMULATOR), "--emu-truth", truth, "--emu-time-scale", f"{scale:g}",
                "--emu-workload", task]
    data: dict[str, Any] = {
        "extends": str(shipped),
        "engine": {"binary": sys.executable, "launcher": launcher, "model": str(model),
                   "model_cache": None, "draft_model": str(model), "port": free_port(),
                   "tokenizer": "server", "ready_timeout_s": 60,
                   # the time model's defaults, scaled as the emulator is (an 8B model on an H100
                   # at `scale` times its speed: 8 / scale billions; its 180 s start / scale), so
                   # the budget kept to the cell prices the compressed cells, not real ones
                   "model_params_b": 8.0 / scale, "start_s": START_S / scale},
        "time_budget_s": budget, "known_bad": [],
        # the emulator's client is this machine's: its other load is not the phase's question
        "host": {"max_other_cpu_cores": None}, "max_coalesced_fraction": 0.5,
        "max_coalesced_first_fraction": 0.5, **(extra or {})}
    path = folder / f"emulated-{shipped.stem}-{truth}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def stand_in_gpus(folder: Path, count: int = 1) -> StandIn:
    """A stand-in nvidia-smi listing ``count`` H100s (put ``.folder`` first on PATH): the
    emulator's GPUs, for the preflight and the per-cell telemetry."""
    return StandIn(folder, [{**gpu(i, power=350.0, util=90.0), "name": "NVIDIA H100 80GB HBM3",
                             "memory.total": 81559} for i in range(count)])


def emulated_config(argv: list[str]) -> Config:
    """The emulator's config for a server's argv (the flags it would be launched with)."""
    args, _ = emulator_parser().parse_known_args(["--model-path", "m", *argv])
    return resolve_config(args)


@dataclass
class PanelScore:
    """One panel of a stage's answer against the truth."""

    panel: str
    decision: str
    leader: str | None
    members: list[str]
    best_measured: str  # the true best of the configs the stage measured
    best_phase: str  # the true best of every config of the phase
    covered: bool  # the set holds best_measured
    covered_phase: bool  # the set holds best_phase
    # decided, and its best is not the true best of those measured; or a tie (every member
    # within the equivalence of the best) whose leader is truly further than that from it
    wrong: bool
    gap: float  # the true best's decode rate over the leader's, - 1
    gap_phase: float  # the same against the true best of every config of the phase


def panel_truth(entry: dict[str, Any], configs: dict[str, Config], truth: str, gpu: str,
                model: str, tp: int, task: str) -> tuple[str, dict[str, float]]:
    """The true best of ``configs`` in an answer's panel and every config's decode rate."""
    key = entry["panel"]
    panel = Panel(task, int(key["context"]), int(key["concurrency"]),
                  int(key["output_tokens"]), True, float(key.get("temperature") or 0.0))
    found, rates = best(list(configs.values()), panel, truth_of(truth), hardware(gpu, model, tp))
    by_label = {label: rates[c.name].decode_rate for label, c in configs.items()}
    return next(k for k, c in configs.items() if c.name == found), by_label


def score(answer: dict[str, Any], measured: dict[str, Config], every: dict[str, Config], *,
          truth: str, gpu: str, model: str, tp: int, task: str) -> list[PanelScore]:
    """Each panel of ``answer`` against the truth (see the module)."""
    scores, equivalence = [], float(answer.get("equivalence") or 0.05)
    for entry in answer["panels"]:
        mine, rates = panel_truth(entry, measured, truth, gpu, model, tp, task)
        phase, all_rates = panel_truth(entry, every, truth, gpu, model, tp, task)
        members = list(entry["confidence_set"])
        leader = entry.get("best")
        gap = rates[mine] / rates[leader] - 1 if leader in rates and rates[leader] else float("nan")
        far = (all_rates[phase] / all_rates[leader] - 1 if leader in all_rates
               and all_rates[leader] else float("nan"))
        key = entry["panel"]
        name = "/".join([key["workload"], f"ctx{key['context']}", f"c{key['concurrency']}",
                         f"o{key['output_tokens']}", f"T{key.get('temperature') or 0:g}"])
        wrong = ((entry["decision"] == "decided" and leader != mine)
                 or (entry["decision"] == "tie" and not gap <= equivalence))
        scores.append(PanelScore(name, entry["decision"], leader, members, mine, phase,
                                 mine in members, phase in members, wrong, gap, far))
    return scores


__all__ = ["PanelScore", "emulated_config", "emulated_params", "panel_truth", "score",
           "stand_in_gpus"]
