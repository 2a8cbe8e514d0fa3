"""Engine adapters; :func:`get_adapter` maps an engine kind to its adapter."""

from __future__ import annotations

from .base import Adapter, FinalStats, Launch, ServerInfo, StreamEvent


def get_adapter(kind: str) -> Adapter:
    if kind == "llamacpp":
        from .llamacpp import LlamaCppAdapter

        return LlamaCppAdapter()
    raise ValueError(f"unknown engine kind {kind!r}")


__all__ = ["Adapter", "FinalStats", "Launch", "ServerInfo", "StreamEvent", "get_adapter"]
