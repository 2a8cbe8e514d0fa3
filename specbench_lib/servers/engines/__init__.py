"""Engine adapters; :func:`get_adapter` maps an engine kind to its adapter (imported lazily).

:data:`ADAPTERS` is the one table of engines: each protocol's adapter class, by module. A new
engine is its module here plus one line there (and its name in
:data:`~specbench_lib.model.kinds.APIS`, which params validates against).

Everything engine-specific lives in this package but the kind names, which params validates
``engine.kind`` and ``engine.api`` against: they are :mod:`~specbench_lib.model.kinds`'s (:data:`KINDS`,
:data:`APIS`), re-exported here. The types are loaded on first use.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from ...host.cpuset import split
from ...model.kinds import APIS, DEFAULT_KIND, KINDS

if TYPE_CHECKING:
    from pathlib import Path

    from ...model.cellspec import ServerConfig
    from ...model.records import FinalStats
    from ...model.sections import EngineParams
    from .adapter import BaseAdapter
    from .base import Adapter, EngineIdentity, Isolation, Launch, ServerInfo, StreamEvent

# each engine protocol's adapter, "module:class" (imported on first use)
ADAPTERS = {"llamacpp": ".llamacpp:LlamaCppAdapter",
            "sglang": ".sglang:SGLangAdapter",
            "vllm": ".vllm:VllmAdapter"}
_LAZY = {"Adapter": ".base", "EngineIdentity": ".base", "Isolation": ".base", "Launch": ".base",
         "ServerInfo": ".base",
         "StreamEvent": ".base", "BaseAdapter": ".adapter", "FinalStats": "...model.records"}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(_LAZY[name], __name__), name)
    globals()[name] = value
    return value


def get_adapter(engine: EngineParams | str) -> Adapter:
    """The adapter of an engine section (or of a bare kind, with default settings).

    Kind ``template`` starts a server from ``engine.argv_template`` and speaks ``engine.api``.
    """
    from ...core.errors import ParamsError
    from ...model.sections import EngineParams

    params = engine if isinstance(engine, EngineParams) else None
    kind = params.kind if params is not None else str(engine)
    if kind == "template":
        if params is None or params.api is None:
            raise ParamsError("kind 'template' needs its engine params (with 'api') to pick a "
                              "protocol", key="engine.api", value=None)
        kind = params.api
    if kind not in ADAPTERS:
        raise ParamsError(f"unknown engine kind {kind!r}; known: {', '.join(KINDS)}",
                          key="engine.kind", value=kind)
    module, _, name = ADAPTERS[kind].partition(":")
    adapter: Adapter = getattr(import_module(module, __name__), name)(params)
    return adapter


def server_launch(adapter: Adapter, server: ServerConfig, engine: EngineParams, *, parallel: int,
                  model: Path, binary: Path, local: bool = True) -> Launch:
    """The adapter's launch of a config, with the CPUs its server and the client run on
    (``engine.cpus``, ``threads: auto``: :mod:`~specbench_lib.host.cpuset`; ``local``: the server starts on
    this host); for an attached config, no argv and the attach URL."""
    from .base import Launch

    if server.attach is not None:
        return Launch([], server.attach.url, adapter.health_path)
    cpus = split(engine.cpus, cpu_engine=not adapter.needs_gpu, launched=True, local=local)
    engine = engine.model_copy(update={"threads": cpus.threads(engine.threads)})
    launch = adapter.launch(server, engine, parallel=parallel, model=model, binary=binary)
    return Launch(launch.argv, launch.base_url, launch.health_path, cpus)


__all__ = ["ADAPTERS", "APIS", "DEFAULT_KIND", "KINDS", "Adapter", "BaseAdapter", "EngineIdentity",
           "FinalStats", "Isolation", "Launch", "ServerInfo", "StreamEvent", "get_adapter", "server_launch"]
