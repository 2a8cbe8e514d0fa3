"""Params files that run a shipped SGLang plan on the GPU emulator (tests and benchmarks only).

Only the engine's binary, launcher and model paths change: ``binary`` is this Python,
``launcher`` is tests/support/gpu_emulator.py with its ``--emu-*`` options, ``model`` and
``draft_model`` a folder named after the emulated model (its name picks the model's figures),
``tokenizer: server`` (the emulator tokenizes and renders the chat template, as the stand-ins
do). Everything else — configs, flag templates, contexts, the budget — stays the plan's.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

EMULATOR = Path(__file__).resolve().parent / "gpu_emulator.py"
# the model's chat template for workloads with ``template: chat`` (ChatML, as the emulator's
# /tokenize renders it)
TEMPLATE = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
            "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def model_folder(root: Path, model: str = "Qwen3-8B") -> Path:
    """A model folder the emulator loads nothing from: its name is the model's."""
    folder = root / model
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text("{}")
    (folder / "tokenizer_config.json").write_text(json.dumps({"chat_template": TEMPLATE}))
    return folder


def emulator_launcher(*, scale: float, gpu: str = "H100", truth: str = "published",
                      start_s: float | None = None, seed: int | None = None,
                      knobs: dict[str, float] | None = None) -> list[str]:
    """The engine's ``launcher``: the emulator and its options."""
    argv = [str(EMULATOR), "--emu-gpu", gpu, "--emu-truth", truth, "--emu-time-scale", f"{scale:g}"]
    if start_s is not None:
        argv += ["--emu-start-s", f"{start_s:g}"]
    if seed is not None:
        argv += ["--emu-seed", str(seed)]
    for key, value in (knobs or {}).items():
        argv += ["--emu-set", f"{key}={value:g}"]
    return argv


def emulator_engine(root: Path, port: int, *, model: str = "Qwen3-8B", **launcher: object) -> str:
    """The ``engine:`` keys (YAML) that put a shipped SGLang plan on the emulator."""
    folder = model_folder(root, model)
    argv = emulator_launcher(**launcher)  # type: ignore[arg-type]
    return (f"engine:\n  binary: {sys.executable}\n  launcher: {json.dumps(argv)}\n"
            f"  model: {folder}\n  model_cache: null\n  draft_model: {folder}\n"
            f"  tokenizer: server\n  port: {port}\n")
