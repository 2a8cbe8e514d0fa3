"""Engine adapters; :func:`get_adapter` maps an engine kind to its adapter (imported lazily)."""

from __future__ import annotations

from pathlib import Path

from ..params import EngineParams, ServerConfig
from .base import Adapter, FinalStats, Launch, ServerInfo, StreamEvent

KINDS = ("llamacpp", "sglang", "vllm", "template")


def get_adapter(engine: EngineParams | str) -> Adapter:
    """The adapter of an engine section (or of a bare kind, with default settings).

    Kind ``template`` starts a server from ``engine.argv_template`` and speaks ``engine.api``.
    """
    params = engine if isinstance(engine, EngineParams) else None
    kind = params.kind if params is not None else str(engine)
    if kind == "template":
        if params is None or params.api is None:
            raise ValueError("kind 'template' needs its engine params (with 'api') to pick a protocol")
        kind = params.api
    if kind == "llamacpp":
        from .llamacpp import LlamaCppAdapter

        return LlamaCppAdapter(params)
    if kind == "sglang":
        from .sglang import SGLangAdapter

        return SGLangAdapter(params)
    if kind == "vllm":
        from .vllm import VllmAdapter

        return VllmAdapter(params)
    raise ValueError(f"unknown engine kind {kind!r}; known: {', '.join(KINDS)}")


def server_launch(adapter: Adapter, server: ServerConfig, engine: EngineParams, *, parallel: int,
                  model: Path, binary: Path) -> Launch:
    """The adapter's launch of a config; for an attached config, no argv and the attach URL."""
    if server.attach is not None:
        return Launch([], server.attach.url, adapter.health_path)
    return adapter.launch(server, engine, parallel=parallel, model=model, binary=binary)


__all__ = ["KINDS", "Adapter", "FinalStats", "Launch", "ServerInfo", "StreamEvent", "get_adapter",
           "server_launch"]
