"""A placeholder for SGLang's compiled CPU kernels, which PyPI has no build of (issue 38): on the
CPU path SGLang imports ``sgl_kernel`` at start (0.5.23 kernels/ops/kvcache/cache_move.py:10).
Every name is a function that raises when called; plain decoding calls none (run for real on
SmolLM2-135M), speculative decoding does (NGRAM's start: ``copy_all_layer_kv_cache_cpu``)."""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)

    def missing(*args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"sgl_kernel placeholder: sgl_kernel.{name} has no CPU build")
    missing.__name__ = name
    return missing
