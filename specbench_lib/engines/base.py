"""The seam between the sweep and a server's API: one adapter per engine."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import httpx

from ..params import EngineParams, ServerConfig


@dataclass(frozen=True)
class Launch:
    """How to start one server: its argv and where it answers."""

    argv: list[str]
    base_url: str
    health_path: str


@dataclass
class FinalStats:
    """What the server reports about one finished generation (its own token counts)."""

    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    finish_reason: str | None = None
    truncated: bool = False
    draft_tokens: int | None = None
    accepted_tokens: int | None = None
    verify_steps: int | None = None
    cached_tokens: int | None = None  # prompt tokens the server took from its prefix cache


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


class Adapter(Protocol):
    """What the sweep needs from an engine; nothing outside ``engines/`` knows the engine."""

    name: str
    needs_gpu: bool
    spec_stats_per_request: bool  # False: speculative statistics only as server counters per cell
    crash_signatures: tuple[re.Pattern[str], ...]
    health_path: str  # 200 when the server is ready (also for a server started elsewhere)

    def launch(self, server: ServerConfig, engine: EngineParams, *, parallel: int,
               model: Path, binary: Path) -> Launch: ...

    def version(self, binary: Path) -> str: ...

    def server_info(self, client: httpx.Client) -> ServerInfo: ...

    def speculative_reserve(self, server: ServerConfig) -> int: ...

    def tokenize(self, client: httpx.Client, text: str) -> list[int]: ...

    def generation_request(self, prompt: list[int], *, max_tokens: int) -> tuple[str, dict[str, Any]]:
        """The path and JSON body of one streamed, greedy generation of exactly max_tokens."""
        ...

    def parse_line(self, line: str) -> StreamEvent | None: ...

    def stream_parser(self) -> Callable[[str], StreamEvent | None]:
        """A line parser for one response stream (it may keep state, e.g. cumulative counts)."""
        ...

    def metrics_snapshot(self, client: httpx.Client) -> dict[str, float]:
        """The server's speculative counters now (empty when it exposes none or is down)."""
        ...

    def cell_spec_stats(self, before: dict[str, float], after: dict[str, float]) -> dict[str, Any]:
        """Speculative statistics of a cell from two snapshots (empty when there are none)."""
        ...


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
    except json.JSONDecodeError:
        return StreamEvent(error=f"unreadable stream line: {payload[:200]}")
    if not isinstance(data, dict):
        return StreamEvent(error=f"stream line is not a JSON object: {payload[:200]}")
    if "error" in data:
        return StreamEvent(error=json.dumps(data["error"])[:500])
    return data
