"""Params values that validate as their type but that what receives them refuses: an
environment variable the OS will not set (``engine.env``), a chat-template option of the wrong
type (``chat_template_kwargs``), a random workload's vocabulary and special ids. Each check
raises a ValueError that names the key, the value and the fix (pydantic adds the file)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# chat-template options whose type is known: a jinja template reads the string "false" as true
# (Qwen3's enable_thinking, DeepSeek-V3.1's thinking), and llama-server refuses it with a 400
TEMPLATE_OPTIONS: dict[str, type] = {"enable_thinking": bool, "thinking": bool}

# no model's vocabulary comes near it (the largest are about 262,144 ids): past it, a typo
MAX_VOCAB = 10_000_000


def check_env(env: Mapping[str, str]) -> None:
    """Names and values ``os.environ`` and ``exec`` take: a name not empty, without ``=`` or a
    NUL byte; a value without a NUL byte."""
    for name, value in env.items():
        if not name or "=" in name or "\0" in name:
            raise ValueError(f"{name!r} is not a name the OS takes for an environment variable "
                             f"(not empty, no '=' or NUL byte): rename the key of engine.env")
        if "\0" in value:
            raise ValueError(f"engine.env {name}: its value has a NUL byte, which the OS cannot "
                             f"pass to a process; remove it")


def check_template_options(options: Mapping[str, Any]) -> None:
    """The chat template's known options (:data:`TEMPLATE_OPTIONS`) of their type."""
    for key, kind in TEMPLATE_OPTIONS.items():
        if key in options and not isinstance(options[key], kind):
            raise ValueError(f"chat_template_kwargs {key}: {options[key]!r} is not a "
                             f"{kind.__name__}; write {key}: true or {key}: false (no quotes)")


def check_vocabulary(vocab_size: int | None, special_ids: tuple[int, ...]) -> None:
    """A random workload's vocabulary: at most :data:`MAX_VOCAB` ids, its special ids inside
    it, and at least one id left to send."""
    if vocab_size is None:
        if special_ids:
            raise ValueError("special_ids are for the source that takes a vocab_size, with one")
        return
    if vocab_size > MAX_VOCAB:
        raise ValueError(f"vocab_size {vocab_size} is no model's vocabulary (at most {MAX_VOCAB}); "
                         f"give the model's own (n_vocab of llama-server's /v1/models)")
    outside = sorted({i for i in special_ids if not 0 <= i < vocab_size})
    if outside:
        raise ValueError(f"special_ids {outside[:5]} are outside the vocabulary (ids 0 to "
                         f"{vocab_size - 1}); give the tokenizer's special ids")
    if len(set(special_ids)) >= vocab_size:
        raise ValueError(f"special_ids leave no id of the {vocab_size} to send; list only the "
                         f"tokenizer's special ids")
