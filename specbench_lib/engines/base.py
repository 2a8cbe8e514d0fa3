"""The seam between the sweep and a server's API: its data types, and the reading of answers.

Whatever a server sends, an adapter raises only :class:`~specbench_lib.errors.EngineError` for
its control calls (server info, tokenization), and its stream parsers return an error event
instead of raising: the helpers here are where httpx's, json's and shape errors are translated.
Every control call has a whole-call deadline (``engine.control_timeout_s``, 30 s by default), so
a server that trickles its answer a byte at a time cannot hang the sweep.
"""

from __future__ import annotations

import contextlib
import json
import re
import socket
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol

import httpx

from ..errors import ControlTimeout, EngineError

if TYPE_CHECKING:
    from ..params import EngineParams, ServerConfig
    from ..records import FinalStats


@dataclass(frozen=True)
class Launch:
    """How to start one server: its argv and where it answers."""

    argv: list[str]
    base_url: str
    health_path: str


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
    it (stored in the manifest)."""

    mode: Literal["restart", "flush", "none"]
    why: str

    def to_dict(self) -> dict[str, str]:
        return {"mode": self.mode, "why": self.why}


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

    def isolation(self, server: ServerConfig, argv: Sequence[str]) -> Isolation:
        """Whether the engine carries state that changes speed from one request to the next
        (an n-gram pool, a prefix cache) for this config, and so how its cells are isolated."""
        ...

    def reset(self, client: httpx.Client) -> None:
        """Clear the state :meth:`isolation` named (isolation ``flush``); EngineError when the
        server does not confirm it."""
        ...

    def tokenize(self, client: httpx.Client, text: str) -> list[int]: ...

    def generation_request(self, prompt: list[int], *, max_tokens: int) -> tuple[str, dict[str, Any]]:
        """The path and JSON body of one streamed, greedy generation of exactly max_tokens."""
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


# --- control calls: httpx, JSON and shape errors become EngineError -----------------------------

def url_of(client: httpx.Client, path: str) -> str:
    """The URL a request to ``path`` goes to, for error messages."""
    base = str(client.base_url).rstrip("/")
    return f"{base}{path}" if base else path


DEFAULT_CONTROL_TIMEOUT_S = 30.0
CONTROL_TIMEOUT_KEY = "engine.control_timeout_s"  # the params field that sets the limit
MAX_CONTROL_BODY = 64 * 1024 * 1024  # an answer larger than this is not a control answer


def control_limit(engine: Any) -> float:
    """The whole-call limit of control calls: ``engine.control_timeout_s`` when the engine section
    has a positive one, else :data:`DEFAULT_CONTROL_TIMEOUT_S`."""
    value = getattr(engine, "control_timeout_s", None)
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        return float(value)
    return DEFAULT_CONTROL_TIMEOUT_S


class _Overdue(Exception):
    """The deadline passed between two pieces of the answer (inside the worker, never escapes)."""


class _TooLarge(Exception):
    """The answer grew over :data:`MAX_CONTROL_BODY` (inside the worker, never escapes)."""


def _capped_timeout(client: httpx.Client, limit_s: float) -> httpx.Timeout:
    """The client's per-operation timeouts, none longer than the whole call's limit."""
    t = client.timeout
    return httpx.Timeout(connect=min(t.connect or limit_s, limit_s), read=min(t.read or limit_s, limit_s),
                         write=min(t.write or limit_s, limit_s), pool=min(t.pool or limit_s, limit_s))


def request(client: httpx.Client, method: str, path: str, *, body: dict[str, Any] | None = None,
            limit_s: float = DEFAULT_CONTROL_TIMEOUT_S) -> httpx.Response:
    """One control request, its answer read to the end within ``limit_s`` seconds in all.

    httpx's timeouts apply to each read, so a server that trickles a byte at a time never
    times out; here the request runs in a worker thread that checks a deadline between pieces
    of the body, and the caller waits for it at most ``limit_s``. At the deadline the socket is
    shut down when the worker opened it (which frees the worker at once); otherwise the worker
    ends at its next read. A connection failure, a timeout, an answer that cannot be decoded or
    one over :data:`MAX_CONTROL_BODY` is an EngineError.
    """
    url = url_of(client, path)
    deadline = time.monotonic() + limit_s
    box: dict[str, Any] = {}
    streams: list[Any] = []
    done = threading.Event()

    def trace(event: str, info: dict[str, Any]) -> None:
        if event in ("connection.connect_tcp.complete", "connection.start_tls.complete"):
            streams.append(info.get("return_value"))

    def work() -> None:
        try:
            box["response"] = _read_within(client, method, path, body, deadline, limit_s, trace)
        except BaseException as exc:  # handed to the caller
            box["error"] = exc
        finally:
            done.set()

    worker = threading.Thread(target=work, name="specbench-control", daemon=True)
    worker.start()
    overdue = ControlTimeout(f"{method} {path}: no complete answer within {limit_s:g} s "
                          f"({CONTROL_TIMEOUT_KEY})", url=url)
    if not done.wait(max(0.0, deadline - time.monotonic())):
        for stream in streams:
            _shut(stream)
        raise overdue
    error = box.get("error")
    if error is None:
        return box["response"]
    if isinstance(error, _Overdue):
        raise overdue
    if isinstance(error, _TooLarge):
        raise EngineError(f"{method} {path}: answer over {MAX_CONTROL_BODY >> 20} MiB", url=url)
    if isinstance(error, Exception):  # httpx's errors, a closed client, an undecodable body
        raise EngineError(f"{method} failed: {type(error).__name__}: {error}", url=url) from error
    raise error


def _read_within(client: httpx.Client, method: str, path: str, body: dict[str, Any] | None,
                 deadline: float, limit_s: float, trace: Callable[[str, dict[str, Any]], None],
                 ) -> httpx.Response:
    with client.stream(method, path, json=body, timeout=_capped_timeout(client, limit_s),
                       extensions={"trace": trace}) as resp:
        pieces, size = [], 0
        for piece in resp.iter_bytes():  # decoded (gzip...) as it arrives
            if time.monotonic() > deadline:
                raise _Overdue
            pieces.append(piece)
            size += len(piece)
            if size > MAX_CONTROL_BODY:
                raise _TooLarge
        if time.monotonic() > deadline:
            raise _Overdue
    # the decoded body, with the headers that describe it (no encoding, its own length)
    headers = [(k, v) for k, v in resp.headers.multi_items()
               if k.lower() not in ("content-encoding", "content-length", "transfer-encoding")]
    return httpx.Response(resp.status_code, headers=headers, content=b"".join(pieces),
                          request=resp.request)


def _shut(stream: Any) -> None:
    """Shut down the socket under an httpcore network stream, waking a read blocked on it."""
    with contextlib.suppress(Exception):
        sock = stream.get_extra_info("socket")
        if sock is not None:
            sock.shutdown(socket.SHUT_RDWR)


def excerpt(resp: httpx.Response, limit: int = 200) -> str:
    """The start of a response body as text, whatever its bytes."""
    return resp.content[:limit].decode("utf-8", errors="replace")


def json_object(client: httpx.Client, path: str, resp: httpx.Response) -> dict[str, Any]:
    """A response's JSON object; EngineError for a body that is not JSON or not an object."""
    try:
        data = resp.json()
    except (ValueError, RecursionError):  # JSONDecodeError, UnicodeDecodeError, deep nesting
        raise EngineError(f"answer is not JSON: {excerpt(resp)!r}", url=url_of(client, path),
                          status=resp.status_code) from None
    if not isinstance(data, dict):
        raise EngineError(f"answer is not a JSON object but {type(data).__name__}",
                          url=url_of(client, path), status=resp.status_code)
    return data


def get_json(client: httpx.Client, path: str, *, method: str = "GET",
             body: dict[str, Any] | None = None,
             limit_s: float = DEFAULT_CONTROL_TIMEOUT_S) -> dict[str, Any]:
    """The JSON object of a 200 answer to ``method path``; anything else is an EngineError."""
    resp = request(client, method, path, body=body, limit_s=limit_s)
    if resp.status_code != 200:
        raise EngineError(f"unexpected status: {excerpt(resp)!r}", url=url_of(client, path),
                          status=resp.status_code)
    return json_object(client, path, resp)


def try_get_json(client: httpx.Client, path: str, *,
                 limit_s: float = DEFAULT_CONTROL_TIMEOUT_S) -> dict[str, Any] | None:
    """The JSON object at ``path``, or None when there is none (an optional endpoint)."""
    try:
        return get_json(client, path, limit_s=limit_s)
    except EngineError:
        return None


def post_tokens(client: httpx.Client, path: str, body: dict[str, Any], *,
                limit_s: float = DEFAULT_CONTROL_TIMEOUT_S) -> list[int]:
    """The ``tokens`` list of ints of a tokenize endpoint's answer."""
    resp = request(client, "POST", path, body=body, limit_s=limit_s)
    url = url_of(client, path)
    if resp.status_code != 200:
        raise EngineError(f"tokenize failed: {excerpt(resp)!r}", url=url, status=resp.status_code)
    tokens = int_list(json_object(client, path, resp).get("tokens"))
    if tokens is None:
        raise EngineError("tokenize answer has no 'tokens' list of integers", url=url,
                          status=resp.status_code)
    return tokens


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
