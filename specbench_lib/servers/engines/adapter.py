"""What the three adapters share: the launch prelude, identity, counters and the defaults."""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal

import httpx

from ...core.errors import EngineError, ParamsError, PreflightError
from ...model.cellspec import ServerConfig
from ...model.sampling import Sampling
from ...model.sections import EngineParams
from . import prometheus
from .argv import spec_override, template_launch, template_values
from .base import EngineIdentity, Isolation, Launch, ServerInfo, StreamEvent
from .control import control_limit, excerpt, request, url_of
from .identity import identify


@dataclass(frozen=True)
class BaseAdapter(ABC):
    """An engine adapter: an immutable value holding the engine section it was made for.

    Subclasses name the engine (class attributes), map a config to their own flags
    (:meth:`_default_argv`, :meth:`_spec_flags`) and read the server's API.
    """

    engine: EngineParams | None = None

    name: ClassVar[str]
    needs_gpu: ClassVar[bool]
    spec_stats_per_request: ClassVar[bool]
    crash_signatures: ClassVar[tuple[re.Pattern[str], ...]]
    health_path: ClassVar[str] = "/health"
    python_dists: ClassVar[tuple[str, ...]] = ()  # a Python engine's distributions, tried in order
    metrics_prefix: ClassVar[str | None] = None  # of the /metrics speculative counters, if any
    flush_path: ClassVar[str | None] = None  # POST here clears the state that outlives requests
    # the environment variable that lets a server run a context past the model's derived one
    # (None: the engine has no such check, or no config.json to derive it from)
    context_override_env: ClassVar[str | None] = None
    kv_pool_estimated: ClassVar[bool] = False  # sizes its KV pool as SGLang does (sweep/kvpool.py)

    def launch(self, server: ServerConfig, engine: EngineParams, *, parallel: int,
               model: Path, binary: Path) -> Launch:
        """The argv of a config: its template if it has one, else the engine's own flags."""
        templated = template_launch(server, engine, model=model, binary=binary, parallel=parallel,
                                    health_path=self.health_path,
                                    builtin=lambda: self._spec_flags(server, engine, model))
        if templated is not None:
            return templated
        argv = self._default_argv(server, engine, parallel=parallel, model=model, binary=binary)
        values = template_values(server, engine, model=model, binary=binary, parallel=parallel)
        spec = spec_override(server, engine, values)
        argv += self._spec_flags(server, engine, model) if spec is None else spec
        argv += [*engine.extra_args, *server.extra_args]
        return Launch(argv, f"http://{engine.host}:{engine.port}", self.health_path)

    @abstractmethod
    def _default_argv(self, server: ServerConfig, engine: EngineParams, *, parallel: int,
                      model: Path, binary: Path) -> list[str]:
        """The engine's own argv before its speculative flags."""

    @abstractmethod
    def _spec_flags(self, server: ServerConfig, engine: EngineParams, model: Path) -> list[str]:
        """The engine's flags for the config's method and budget (ParamsError if it has none)."""

    @property
    def control_timeout_s(self) -> float:
        """The whole-call limit of every control call (server info, tokenize, metrics):
        ``engine.control_timeout_s`` when the engine section has one, else 30 s."""
        return control_limit(self.engine)

    def identity(self, binary: Path) -> EngineIdentity:
        kind = self.engine.kind if self.engine is not None else self.name
        return identify(kind, binary, dists=self.python_dists, template=kind == "template")

    def version(self, binary: Path) -> str:
        return self.identity(binary).version

    @abstractmethod
    def server_info(self, client: httpx.Client) -> ServerInfo: ...

    def for_server(self, info: ServerInfo) -> BaseAdapter:
        return self

    def speculative_reserve(self, server: ServerConfig) -> int:
        """Extra context a speculative config takes: option ``reserve``, else its budget."""
        if "reserve" in server.options:
            return int_option(server, "reserve", 0)
        return int(server.budget or 0)

    def running_cap(self, server: ServerConfig, argv: Sequence[str]) -> int | None:
        """The most requests the config's server runs at once (None: only its KV pool's)."""
        return None

    def isolation(self, server: ServerConfig, argv: Sequence[str]) -> Isolation:
        """``engine.isolation`` when it is not ``auto``; else what the engine's state needs
        (:meth:`_learns` names the state that outlives a request, if any)."""
        chosen = self.engine.isolation if self.engine is not None else "auto"
        learns = self._learns(server, argv)
        if chosen == "flush" and self.flush_path is None:
            raise PreflightError(f"engine.isolation: flush, but the {self.name} adapter has no "
                                 "reset call; use engine.isolation: restart (a fresh server for "
                                 "every cell)", what="isolation")
        if chosen != "auto":
            return Isolation(chosen, f"engine.isolation: {chosen}", learns)
        if learns is None:
            return Isolation("none", "no engine state outlives a request that changes its speed, "
                             "given fresh prompts")
        if self.flush_path is not None:
            return Isolation("flush", f"{learns}: POST {self.flush_path} before every cell", learns)
        return Isolation("restart", f"{learns}: a fresh server for every cell", learns)

    def reset_mode(self) -> Literal["flush", "restart"]:
        """How this engine forgets before a cell: its reset call if it has one, else a restart."""
        return "flush" if self.flush_path is not None else "restart"

    def reset(self, client: httpx.Client) -> None:
        if self.flush_path is None:
            raise EngineError(f"the {self.name} adapter has no reset; use engine.isolation: "
                              "restart", url=url_of(client, "/"))
        resp = request(client, "POST", self.flush_path, limit_s=self.control_timeout_s)
        if resp.status_code != 200:
            why = ("the server has no such endpoint: set engine.isolation: restart"
                   if resp.status_code == 404 else "it refuses while requests are pending")
            raise EngineError(f"POST {self.flush_path} did not clear the server's state ({why}): "
                              f"{excerpt(resp)}", url=url_of(client, self.flush_path),
                              status=resp.status_code)

    def _learns(self, server: ServerConfig, argv: Sequence[str]) -> str | None:
        """The engine state that outlives a request for this config and changes speed (None:
        none known); every adapter overrides what its engine keeps."""
        return None

    @abstractmethod
    def tokenize(self, client: httpx.Client, text: str) -> list[int]: ...

    def chat_template_source(self) -> str:
        return "the model's own, applied by the server once it runs"

    def chat_render(self, client: httpx.Client, messages: list[dict[str, str]],
                    options: Mapping[str, Any] | None = None) -> list[int]:
        raise PreflightError(f"the {self.name} adapter cannot apply a chat template; use "
                             f"template: raw", what="template")

    def check_spec(self, server: ServerConfig, argv: Sequence[str], info: ServerInfo,
                   log_text: str) -> dict[str, Any]:
        """Nothing read back unless the engine's adapter knows where its settings are."""
        return {}

    def config_refusal(self, server: ServerConfig, argv: Sequence[str]) -> str | None:
        return None

    def pairs_seeds(self, info: ServerInfo, argv: Sequence[str]) -> bool:
        return True

    def drafter_block(self, argv: Sequence[str]) -> int | None:
        """The block a DFlash drafter runs at under ``argv`` (None: no DFlash drafter)."""
        return None

    @abstractmethod
    def generation_request(self, prompt: list[int], *, max_tokens: int, stop: str = "length",
                           sampling: Sampling | None = None) -> tuple[str, dict[str, Any]]: ...

    @abstractmethod
    def stream_parser(self) -> Callable[[str], StreamEvent | None]: ...

    def metrics_snapshot(self, client: httpx.Client) -> dict[str, float]:
        if self.metrics_prefix is None:
            return {}
        return prometheus.snapshot(client, self.metrics_prefix, limit_s=self.control_timeout_s)

    def cell_spec_stats(self, before: dict[str, float], after: dict[str, float]) -> dict[str, Any]:
        if self.metrics_prefix is None:
            return {}
        return prometheus.spec_deltas(before, after, self.metrics_prefix)


def int_option(server: ServerConfig, key: str, default: int) -> int:
    """A config's integer option (``options: {steps: 3}``); ParamsError for one that is not."""
    value = server.options.get(key, default)
    if isinstance(value, int):
        return value
    try:
        number: int | None = int(value)  # "3" or 3.0
    except (TypeError, ValueError, OverflowError):
        number = None
    if number is None or (isinstance(value, float) and value != number):
        raise ParamsError(f"option {key!r} of config {server.name!r} must be an integer, got "
                          f"{value!r}", key=f"configs.{server.name}.options.{key}", value=value)
    return number
