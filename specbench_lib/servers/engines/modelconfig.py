"""What a model folder's ``config.json`` says that a server start depends on: the context the
engine derives from it (``max_position_embeddings`` and rope scaling) and, for a DFlash drafter,
the block it was trained at. Read before any server starts (the doctor's "model fit" check)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from ...core.errors import PreflightError

# SGLang's order of context keys (0.5.23 utils/hf_transformers/common.py:668-674)
_CONTEXT_KEYS = ("max_sequence_length", "seq_length", "max_seq_len", "model_max_length",
                 "max_position_embeddings")
DEFAULT_BLOCK = 16  # SGLang's DFLASH block when the draft config has none (speculative_hook.py)


def config_path(folder: str | Path) -> Path:
    """Where a model's ``config.json`` is: in its folder, or beside its file."""
    path = Path(folder).expanduser()
    return (path if path.is_dir() else path.parent) / "config.json"


def read_config(folder: str | Path | None) -> dict[str, Any] | None:
    """The model's ``config.json`` (a folder's, or the folder of a file); None when there is
    none or it cannot be read (a GGUF file, a hub id)."""
    if folder is None:
        return None
    path = config_path(folder)
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(found, dict):
        return None
    text = found.get("text_config")  # a multimodal model's language part
    return {**found, **text} if isinstance(text, dict) else found


def derived_context(config: dict[str, Any], folder: str | Path | None = None) -> int | None:
    """The context SGLang derives from a config (0.5.23 common.py:677-695): the first context
    key, times the rope scaling factor unless the scaling names its
    ``original_max_position_embeddings`` (YaRN as Qwen3 ships it) or is llama3's. vLLM 0.32.0
    never applies a YaRN or llama3 factor (config/model.py:2580-2616): the same for Qwen3.
    A factor that is not a positive number is a :class:`PreflightError` naming the file
    (``folder``'s config.json), the key and the value: the engine would refuse it too."""
    scaling = config.get("rope_scaling")
    factor = 1.0
    if isinstance(scaling, dict):
        found = scaling.get("factor", 1) or 1
        if isinstance(found, bool) or not isinstance(found, int | float) or not 0 < found < math.inf:
            where = config_path(folder) if folder is not None else "the model's config.json"
            raise PreflightError(f"{where}: rope_scaling.factor {found!r} is not a positive "
                                 f"number; fix the model's config.json (e.g. \"factor\": 4.0)",
                                 what="model fit", path=where)
        factor = float(found)
        if "original_max_position_embeddings" in scaling or scaling.get("rope_type") == "llama3":
            factor = 1.0
    for key in _CONTEXT_KEYS:
        value = config.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return int(factor * value)
    return None


def trained_block(config: dict[str, Any] | None) -> int | None:
    """A DFlash drafter's trained block: ``dflash_config.block_size``, else a top-level
    ``block_size`` (0.5.23 speculative/dflash_utils.py:608-616); None for a config without one."""
    if config is None:
        return None
    inner = config.get("dflash_config")
    for value in ((inner or {}).get("block_size") if isinstance(inner, dict) else None,
                  config.get("block_size")):
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def rope_text(config: dict[str, Any]) -> str:
    """The config's rope scaling in words (for a message)."""
    scaling = config.get("rope_scaling")
    return f"rope_scaling {json.dumps(scaling)}" if isinstance(scaling, dict) else "no rope scaling"
