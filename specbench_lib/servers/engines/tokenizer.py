"""Tokenization for servers that take token ids: the model's own tokenizer, or the server's.

The local tokenizer needs the optional ``tokenizers`` package (imported only when used). Any
tokenizer gives exact prompt sizes, since prompts are sent as ids cut to the planned count; the
model's own tokenizer keeps the prompts meaningful text.
"""

from __future__ import annotations

import importlib
import importlib.util
from functools import lru_cache
from pathlib import Path
from typing import Any

import httpx

from ...core.errors import PreflightError
from .control import DEFAULT_CONTROL_TIMEOUT_S, post_tokens


def tokenizer_file(path: str | Path) -> Path | None:
    """The ``tokenizer.json`` at ``path`` (a file or a model folder), if there is one."""
    given = Path(path).expanduser()
    candidate = given / "tokenizer.json" if given.is_dir() else given
    return candidate if candidate.is_file() else None


def local_available(path: str | Path) -> bool:
    """Whether a local tokenizer can be used: the file exists and ``tokenizers`` is installed."""
    return tokenizer_file(path) is not None and importlib.util.find_spec("tokenizers") is not None


@lru_cache(maxsize=4)
def _load(file: Path) -> Any:
    try:
        tokenizers = importlib.import_module("tokenizers")
    except ImportError:
        raise PreflightError("the 'tokenizers' package is needed to tokenize with the model's "
                             "tokenizer.json: pip install tokenizers, or set engine.tokenizer: "
                             "server", what="tokenizer", path=file) from None
    try:
        return tokenizers.Tokenizer.from_file(str(file))
    except Exception as exc:  # the tokenizers library raises its own plain Exception
        raise PreflightError(f"cannot load {file}: {exc}", what="tokenizer", path=file) from None


def encode_local(path: str | Path, text: str) -> list[int]:
    """Token ids of ``text`` with the tokenizer at ``path``, without special tokens."""
    file = tokenizer_file(path)
    if file is None:
        raise PreflightError(f"no tokenizer.json at {path}; point engine.tokenizer at one or set "
                             f"it to 'server'", what="tokenizer", path=path)
    return [int(t) for t in _load(file).encode(text, add_special_tokens=False).ids]


def encode_server(client: httpx.Client, text: str, *, model: str | None = None,
                  path: str = "/tokenize", limit_s: float = DEFAULT_CONTROL_TIMEOUT_S) -> list[int]:
    """Token ids from an OpenAI-style ``/tokenize`` endpoint (vLLM; SGLang since 2025)."""
    body: dict[str, Any] = {"prompt": text, "add_special_tokens": False}
    if model:
        body["model"] = model
    return post_tokens(client, path, body, limit_s=limit_s)
