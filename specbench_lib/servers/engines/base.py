"""The seam between the sweep and a server's API: its data types, and the reading of stream lines.

Whatever a server sends, an adapter's stream parsers return an error event instead of raising:
the helpers here are where json's and shape errors in a stream are translated (its control
calls go through :mod:`.control`, which raises only
:class:`~specbench_lib.core.errors.EngineError`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol

from ...host.cpuset import CpuSplit

if TYPE_CHECKING:
    import httpx

    from ...model.cellspec import ServerConfig
    from ...model.records import FinalStats
    from ...model.sampling import Sampling
    from ...model.sections import EngineParams


@dataclass(frozen=True)
class Launch:
    """How to start one server: its argv and where it answers."""

    argv: list[str]
    base_url: str
    health_path: str
    cpus: CpuSplit | None = None  # the server's and the client's CPUs (None: not pinned)


@dataclass
class StreamEvent:
    """One parsed stream line: tokens it carries, text, an error, or the final statistics."""

    n_tokens: int = 0
    text: str = ""
    error: str | None = None
    final: FinalStats | None = None
    done: bool = False
    token_ids: list[int] = field(default_factory=list)  # the ids of the tokens, when the engine sends them


@dataclass(frozen=True)
class ServerInfo:
    """The effective server configuration, read back from the running server."""

    context_per_request: int
    raw: dict[str, Any] = field(default_factory=dict)
    # the stable part of ``raw`` that identifies the configuration (no counters, timestamps or
    # per-start random values): what an attached server's cells are fingerprinted with
    settings: dict[str, Any] = field(default_factory=dict)
    served_model: str | None = None  # the model name requests must carry, where the API has one
    version: str | None = None  # the server's own version, where its API reports one
    kv_tokens: int | None = None  # the tokens its KV pool holds, where its API reports it


@dataclass(frozen=True)
class EngineIdentity:
    """What exactly the engine program is: its version and, where it can be had, its bytes'
    sha256 (a native binary, with the source package it was built from where its build recorded
    it) or its Python distribution and the commit of a fork's checkout."""

    kind: str
    version: str
    sha256: str | None = None
    package: str | None = None
    package_version: str | None = None
    commit: str | None = None
    source_sha256: str | None = None  # the sdist a native binary was built from

    def to_dict(self) -> dict[str, Any]:
        """The identity as stored (and fingerprinted); ``source_sha256`` only where known, so
        an identity without it is the dict it always was."""
        found = asdict(self)
        if found["source_sha256"] is None:
            del found["source_sha256"]
        return found


@dataclass(frozen=True)
class Isolation:
    """How a sweep keeps a config's cells from remembering each other: ``restart`` (a fresh
    server for every cell), ``flush`` (the engine's own reset, e.g. SGLang's ``/flush_cache``,
    before every cell) or ``none`` (one server for the config: the engine keeps nothing across
    requests that changes speed, given fresh prompts); ``why`` says which engine state decided
    it (stored in the manifest); ``learns`` names the engine state that learns from the text it
    serves (an n-gram pool: any text shared between prompts carries over), None when there is
    none (the prompt book then needs prompts fresh only by their start,
    :mod:`~specbench_lib.prompts.promptbook`)."""

    mode: Literal["restart", "flush", "none"]
    why: str
    learns: str | None = None

    def to_dict(self) -> dict[str, str]:
        found = {"mode": self.mode, "why": self.why}
        if self.learns is not None:
            found["learns"] = self.learns
        return found


class Adapter(Protocol):
    """What the sweep needs from an engine; nothing outside ``engines/`` knows the engine.

    Adapters are immutable values: :meth:`for_server` returns a copy bound to what a running
    server reported (e.g. vLLM's served model name), to be used for its generation requests.
    """

    name: ClassVar[str]
    needs_gpu: ClassVar[bool]
    spec_stats_per_request: ClassVar[bool]  # False: spec statistics only as server counters per cell
    crash_signatures: ClassVar[tuple[re.Pattern[str], ...]]
    health_path: ClassVar[str]  # 200 when the server is ready (also for a server started elsewhere)
    kv_pool_estimated: ClassVar[bool]  # sizes its KV pool as SGLang does (sweep/kvpool.py)

    def launch(self, server: ServerConfig, engine: EngineParams, *, parallel: int,
               model: Path, binary: Path) -> Launch: ...

    def identity(self, binary: Path) -> EngineIdentity:
        """The engine program's identity; version "unknown" when it cannot be read (no error)."""
        ...

    def version(self, binary: Path) -> str:
        """``identity(binary).version``."""
        ...

    def server_info(self, client: httpx.Client) -> ServerInfo:
        """The running server's effective settings; EngineError when it cannot be read."""
        ...

    def for_server(self, info: ServerInfo) -> Adapter:
        """This adapter bound to the server that reported ``info``."""
        ...

    def speculative_reserve(self, server: ServerConfig) -> int: ...

    def running_cap(self, server: ServerConfig, argv: Sequence[str]) -> int | None:
        """The most requests the config's server runs at once (None: only its KV pool's)."""
        ...

    def isolation(self, server: ServerConfig, argv: Sequence[str]) -> Isolation:
        """Whether the engine carries state that changes speed from one request to the next
        (an n-gram pool, a prefix cache) for this config, and so how its cells are isolated."""
        ...

    def reset_mode(self) -> Literal["flush", "restart"]:
        """How this engine forgets before a cell: its reset call if it has one, else a restart."""
        ...

    def reset(self, client: httpx.Client) -> None:
        """Clear the state :meth:`isolation` named (isolation ``flush``); EngineError when the
        server does not confirm it."""
        ...

    def tokenize(self, client: httpx.Client, text: str) -> list[int]: ...

    def chat_render(self, client: httpx.Client, messages: list[dict[str, str]],
                    options: Mapping[str, Any] | None = None) -> list[int]:
        """The token ids of ``messages`` (``role``/``content`` dicts) in the model's own chat
        template, the generation prompt added (the assistant's turn opened), ``options`` the
        template's variables (a workload's ``chat_template_kwargs``); EngineError or
        PreflightError when the engine or the model has no template to apply."""
        ...

    def check_spec(self, server: ServerConfig, argv: Sequence[str], info: ServerInfo,
                   log_text: str) -> dict[str, Any]:
        """The speculative settings the started server resolved, read back (its server info,
        else its log), as ``{name: value}``; :class:`~specbench_lib.core.errors.SpecMismatch`
        naming both values when
        one differs from what ``server`` asked for (empty: nothing to read back)."""
        ...

    def config_refusal(self, server: ServerConfig, argv: Sequence[str]) -> str | None:
        """Why ``server`` cannot be measured fairly as ``argv`` launches it, before any server
        starts (None: nothing known against it), e.g. a tree verified without its mask."""
        ...

    def pairs_seeds(self, info: ServerInfo, argv: Sequence[str]) -> bool:
        """Whether a sampled request's seed decides its draws on this server (requests of two
        configs with one seed then share their randomness: paired)."""
        ...

    def drafter_block(self, argv: Sequence[str]) -> int | None:
        """The block a DFlash drafter runs at under ``argv`` (None: no drafter block)."""
        ...

    def chat_template_source(self) -> str:
        """Where :meth:`chat_render`'s template comes from, checked before any server starts
        (the doctor's); PreflightError when it is known now not to be there."""
        ...

    def generation_request(self, prompt: list[int], *, max_tokens: int, stop: str = "length",
                           sampling: Sampling | None = None) -> tuple[str, dict[str, Any]]:
        """The path and JSON body of one streamed generation: of exactly max_tokens (``stop``
        ``length``: the end of sequence ignored), or ending at the model's end of sequence with
        max_tokens as a cap (``eos``); greedy, or sampled as ``sampling`` says (its temperature,
        top-p, top-k and seed, each where the engine takes it)."""
        ...

    def stream_parser(self) -> Callable[[str], StreamEvent | None]:
        """A line parser for one response stream (it may keep state, e.g. cumulative counts);
        it never raises: a line it cannot read becomes an error event."""
        ...

    def metrics_snapshot(self, client: httpx.Client) -> dict[str, float]:
        """The server's speculative counters now (empty when it exposes none or is down)."""
        ...

    def cell_spec_stats(self, before: dict[str, float], after: dict[str, float]) -> dict[str, Any]:
        """Speculative statistics of a cell from two snapshots (empty when there are none)."""
        ...


def opt_int(value: Any) -> int | None:
    """``value`` if it is an integer (not a bool), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def opt_str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def int_list(value: Any) -> list[int] | None:
    """``value`` if it is a list of integers (not bools), else None."""
    if not isinstance(value, list) or not all(opt_int(v) is not None for v in value):
        return None
    return list(value)


# --- stream lines ------------------------------------------------------------------------------

def sse_json(line: str) -> dict[str, Any] | StreamEvent | None:
    """One server-sent-events line: its JSON object, or the event it stands for.

    None for a line that is not ``data:`` (blank separators, comments); ``StreamEvent(done=True)``
    for ``data: [DONE]``; an error event for a payload that is not a JSON object or that carries
    an ``error`` (how every engine reports a failure inside a 200 stream).
    """
    if not line.startswith("data:"):
        return None
    payload = line[5:].strip()
    if payload == "[DONE]":
        return StreamEvent(done=True)
    try:
        data = json.loads(payload)
    except (ValueError, RecursionError):
        return StreamEvent(error=f"unreadable stream line: {payload[:200]}")
    if not isinstance(data, dict):
        return StreamEvent(error=f"stream line is not a JSON object: {payload[:200]}")
    if "error" in data:
        return StreamEvent(error=json.dumps(data["error"])[:500])
    return data


class BadLine(Exception):
    """Raised inside :meth:`StreamParser.parse` for a line of the wrong shape (never escapes)."""


class StreamParser:
    """The line parser of one response stream; subclasses read one engine's JSON objects.

    Calling it never raises: a line that is not JSON, not an object, or whose fields have the
    wrong types becomes ``StreamEvent(error=...)``, which the dispatcher records as
    ``error_in_stream``.
    """

    def __call__(self, line: str) -> StreamEvent | None:
        try:
            data = sse_json(line)
            if isinstance(data, dict):
                return self.parse(data)
            if data is not None and data.done:
                return self.end(data)
            return data
        except BadLine as exc:
            return StreamEvent(error=f"{exc}: {str(line)[:200]}")
        except Exception as exc:  # the last guard: a parser must not take the dispatcher down
            return StreamEvent(error=f"unreadable stream line ({type(exc).__name__}: {exc}): "
                                     f"{str(line)[:200]}")

    def parse(self, data: dict[str, Any]) -> StreamEvent:
        raise NotImplementedError

    def end(self, event: StreamEvent) -> StreamEvent:
        """The ``[DONE]`` event (an engine may attach its final statistics to it)."""
        return event


def field_dict(data: dict[str, Any], key: str) -> dict[str, Any]:
    """``data[key]`` as a dict: ``{}`` when absent or null, BadLine when it is something else."""
    value = data.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise BadLine(f"stream field {key!r} is not an object")
    return value


def field_ids(data: dict[str, Any], key: str) -> list[int] | None:
    """``data[key]`` as token ids: None when absent or null, BadLine when not a list of ints."""
    value = data.get(key)
    if value is None:
        return None
    ids = int_list(value)
    if ids is None:
        raise BadLine(f"stream field {key!r} is not a list of integer token ids")
    return ids
