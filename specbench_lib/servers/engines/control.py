"""An adapter's control calls (server info, tokenization, counters): each read within a whole-call
deadline, and every failure an :class:`~specbench_lib.core.errors.EngineError`.

Whatever a server sends, an adapter raises only EngineError for its control calls: the helpers
here are where httpx's, json's and shape errors are translated. Every control call has a
whole-call deadline (``engine.control_timeout_s``, 30 s by default), so a server that trickles
its answer a byte at a time cannot hang the sweep.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx

from ...core.errors import ControlTimeout, EngineError
from .base import int_list


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
