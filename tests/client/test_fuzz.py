"""Property-based fuzzing (Hypothesis): whatever bytes a server sends, only specbench's documented
errors or stream events come out, never another exception.

- :mod:`specbench_lib.client.http1` reads random and mutated response heads, chunk framing and bodies
  from a real socket server on 127.0.0.1 that writes the fuzzed bytes in random pieces: the
  result is a response or a :class:`~specbench_lib.core.errors.TransportError`; a well-framed chunked
  body split anywhere is decoded exactly.
- every adapter's ``stream_parser()`` reads random and mutated SSE lines and JSON objects
  (sequences of them, one parser per stream): each line gives None or a well-typed StreamEvent.
- :func:`~specbench_lib.client.dispatch.dispatch_cell` end to end: mutated streams of each engine,
  framed as chunked, Content-Length or read-until-close bodies: every request gets a record
  whose outcome is a documented reason or a valid final.

Each test prints how many examples ran (``pytest -s``); the whole file runs in well under a
minute on two cores. The example database is off and the runs are derandomized (the same
examples each run); Hypothesis keeps only its caches in ``.hypothesis/`` (self-ignored by git).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from fuzzing import FUZZ
from hypothesis import given, settings
from hypothesis import strategies as st

from specbench_lib.analysis.validate import request_problems
from specbench_lib.client.dispatch import dispatch_cell
from specbench_lib.client.http1 import Connection
from specbench_lib.client.streamread import parse_line
from specbench_lib.core.errors import TransportError
from specbench_lib.model.catalogue import codes
from specbench_lib.model.records import FinalStats, RequestRecord
from specbench_lib.servers.engines import BaseAdapter, StreamEvent
from specbench_lib.servers.engines.llamacpp import LlamaCppAdapter
from specbench_lib.servers.engines.sglang import SGLangAdapter
from specbench_lib.servers.engines.vllm import VllmAdapter

ADAPTERS = [LlamaCppAdapter(), SGLangAdapter(), VllmAdapter()]
IDS = [a.name for a in ADAPTERS]
COUNTS: dict[str, int] = {}


def counted(name: str) -> None:
    COUNTS[name] = COUNTS.get(name, 0) + 1


@pytest.fixture(scope="module", autouse=True)
def report_counts() -> Iterator[None]:
    began = time.monotonic()
    yield
    total = sum(COUNTS.values())
    print(f"\nfuzz examples: {dict(sorted(COUNTS.items()))}, {total} in all, "
          f"{time.monotonic() - began:.1f} s")


# --- a socket server that writes the fuzzed bytes --------------------------------------------

class ScriptServer:
    """Answers each request on 127.0.0.1 with ``self.pieces`` (written one by one, a short
    pause between them, so framing boundaries fall between the client's reads), then closes."""

    def __init__(self) -> None:
        self.pieces: list[bytes] = []
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(0.2)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.listener.getsockname()[1]}"

    def _accept(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=self._answer, args=(conn, list(self.pieces)), daemon=True).start()

    @staticmethod
    def _answer(conn: socket.socket, pieces: list[bytes]) -> None:
        with conn:
            try:
                conn.settimeout(5.0)
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                data = b""
                while b"\r\n\r\n" not in data:
                    more = conn.recv(65536)
                    if not more:
                        return  # a connection opened ahead and never used
                    data += more
                head, body = data.split(b"\r\n\r\n", 1)
                length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), 0)
                while len(body) < length:
                    more = conn.recv(65536)
                    if not more:
                        return
                    body += more
                for i, piece in enumerate(pieces):
                    if i:
                        time.sleep(0.0003)
                    conn.sendall(piece)
                conn.shutdown(socket.SHUT_WR)
                conn.settimeout(1.0)
                while conn.recv(65536):  # until the client closes (no RST under its last read)
                    pass
            except OSError:
                return

    def close(self) -> None:
        self.stop.set()
        self.listener.close()
        self.thread.join(2.0)


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptServer]:
    srv = ScriptServer()
    yield srv
    srv.close()


def split(data: bytes, cuts: list[int]) -> list[bytes]:
    """``data`` cut at the given offsets (taken modulo its length), every piece non-empty."""
    points = sorted({c % len(data) for c in cuts if len(data)} - {0}) if data else []
    pieces, last = [], 0
    for point in [*points, len(data)]:
        pieces.append(data[last:point])
        last = point
    return [p for p in pieces if p]


# --- strategies: heads, chunk framing, bodies --------------------------------------------------

def mutate(data: bytes, edits: list[tuple[int, int, int]]) -> bytes:
    """Byte edits: (kind, position, byte): 0 replace, 1 insert, 2 delete."""
    buf = bytearray(data)
    for kind, pos, byte in edits:
        if not buf and kind != 1:
            continue
        at = pos % (len(buf) + (kind == 1)) if buf or kind == 1 else 0
        if kind == 0:
            buf[at] = byte
        elif kind == 1:
            buf.insert(at, byte)
        else:
            del buf[at]
    return bytes(buf)


edits = st.lists(st.tuples(st.integers(0, 2), st.integers(0, 10_000), st.integers(0, 255)),
                 max_size=4)
STATUS_LINES = [b"HTTP/1.1 200 OK", b"HTTP/1.0 200 OK", b"HTTP/1.1 500 Internal Server Error",
                b"HTTP/1.1 204 No Content", b"HTTP/1.1 304 Not Modified", b"HTTP/1.1 100 Continue",
                b"HTTP/1.1 200", b"HTTP/1.1 2000 OK", b"HTTP/2 200 OK", b"HTTP/1.1 -20 OK",
                b"HTTP/1.1 \xb2\xb2\xb2 OK", b"", b"ICY 200 OK", b"HTTP/1.1 200 OK\x00"]
header_names = st.sampled_from([b"Content-Length", b"Transfer-Encoding", b"Connection",
                                b"Content-Type", b"content-length", b"TRANSFER-ENCODING", b"X-A"])
header_values = st.one_of(
    st.integers(-5, 2**70).map(lambda n: str(n).encode()),
    st.sampled_from([b"chunked", b"gzip, chunked", b"identity", b"close", b"keep-alive",
                     b"text/event-stream", b"", b"5, 5", b"0x10", b" 12 ", b"\xff\xfe", b"1e3"]),
    st.binary(max_size=12),
)
headers = st.lists(st.tuples(header_names, header_values), max_size=5)


@st.composite
def chunked_body(draw: st.DrawFn) -> tuple[bytes, bytes]:
    """A chunked body and the payload it frames (sizes in any case, extensions, trailers)."""
    payloads = draw(st.lists(st.binary(min_size=1, max_size=40), max_size=6))
    out = []
    for payload in payloads:
        size = f"{len(payload):x}"
        size = size.upper() if draw(st.booleans()) else size
        ext = draw(st.sampled_from([b"", b";x=1", b"; name=\"v\"", b" "]))
        out.append(size.encode() + ext + b"\r\n" + payload + b"\r\n")
    trailers = draw(st.sampled_from([b"", b"X-T: 1\r\n", b"A: b\r\nC: d\r\n"]))
    out.append(b"0\r\n" + trailers + b"\r\n")
    return b"".join(out), b"".join(payloads)


@st.composite
def responses(draw: st.DrawFn) -> bytes:
    fuzzed = st.one_of(st.sampled_from(STATUS_LINES), st.binary(max_size=30))
    status = draw(fuzzed) if draw(st.integers(0, 3)) == 0 else b"HTTP/1.1 200 OK"
    head = [status] + [n + b": " + v for n, v in draw(headers)]
    if draw(st.booleans()):
        head.append(b"Transfer-Encoding: chunked")
    body_kind = draw(st.integers(0, 3))
    if body_kind == 0:
        body, _ = draw(chunked_body())
    elif body_kind == 1:  # chunk framing with fuzzed sizes and separators
        parts = draw(st.lists(st.tuples(st.one_of(st.integers(0, 2**66).map(lambda n: b"%x" % n),
                                                  st.binary(max_size=8)),
                                        st.binary(max_size=20),
                                        st.sampled_from([b"\r\n", b"\n", b"", b"\r\r"])),
                              max_size=5))
        body = b"".join(size + b"\r\n" + data + sep for size, data, sep in parts)
    elif body_kind == 2:  # SSE-looking bytes
        body = b"".join(b"data: " + line + b"\n\n" for line in draw(st.lists(st.binary(max_size=30),
                                                                             max_size=4)))
    else:
        body = draw(st.binary(max_size=200))
    terminator = draw(st.sampled_from([b"\r\n\r\n"] * 12 + [b"\r\n", b"\n\n", b""]))
    reply = b"\r\n".join(head) + terminator + body
    return mutate(reply, draw(edits)) if draw(st.booleans()) else reply


async def _fetch(url: str) -> tuple[int, bytes, bool]:
    conn = Connection(url, connect_timeout_s=2.0)
    try:
        async with asyncio.timeout(5.0):  # a hang would be a TimeoutError: a failure here
            resp = await conn.request("POST", "/fuzz", b"{}")
            body = await resp.read()
            return resp.status_code, body, resp.complete
    finally:
        conn.close()


@settings(FUZZ, max_examples=600)
@given(reply=responses(), cuts=st.lists(st.integers(0, 10_000), max_size=6))
def test_http1_reads_any_reply_or_raises_a_transport_error(server: ScriptServer, reply: bytes,
                                                           cuts: list[int]) -> None:
    counted("http1_any_reply")
    server.pieces = split(reply, cuts)
    try:
        status, body, complete = asyncio.run(_fetch(server.url))
    except TransportError as exc:
        assert str(exc)  # a message naming the fault
        return
    assert 100 <= status <= 999 and isinstance(body, bytes) and complete


@settings(FUZZ, max_examples=150)
@given(framed=chunked_body(), cuts=st.lists(st.integers(0, 10_000), max_size=8))
def test_http1_decodes_a_well_framed_chunked_body_split_anywhere(server: ScriptServer,
                                                                 framed: tuple[bytes, bytes],
                                                                 cuts: list[int]) -> None:
    counted("http1_chunked_exact")
    body, payload = framed
    server.pieces = split(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + body, cuts)
    status, got, complete = asyncio.run(_fetch(server.url))
    assert (status, got, complete) == (200, payload, True)


# --- strategies: stream lines for the parsers --------------------------------------------------

KEYS = ["content", "tokens", "stop", "tokens_predicted", "tokens_evaluated", "stop_type",
        "truncated", "timings", "text", "meta_info", "output_ids", "completion_tokens",
        "prompt_tokens", "finish_reason", "type", "spec_verify_ct", "cached_tokens", "choices",
        "usage", "token_ids", "object", "error", "message", "prompt_tokens_details"]
scalars = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(),
                    st.text(max_size=8), st.sampled_from(["\ud800", "length", "abort", "stop"]))
json_values = st.recursive(
    scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                     st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=4),
                                                     inner, max_size=4)),
    max_leaves=12)

VALID: dict[str, list[Any]] = {
    "llamacpp": [{"content": "a", "tokens": [5], "stop": False, "tokens_predicted": 1},
                 {"content": "", "tokens": [], "stop": True, "tokens_predicted": 1,
                  "tokens_evaluated": 3, "stop_type": "limit", "truncated": False,
                  "timings": {"prompt_n": 3, "predicted_n": 1, "draft_n": 2, "draft_n_accepted": 1,
                              "cache_n": 0}}],
    "sglang": [{"text": " t0", "output_ids": [1000], "meta_info": {
        "completion_tokens": 1, "prompt_tokens": 3, "cached_tokens": 0, "spec_verify_ct": 1,
        "finish_reason": {"type": "length", "length": 1}}},
        {"text": " t0", "meta_info": {"finish_reason": {"type": "abort", "message": "x"}}}],
    "vllm": [{"choices": [{"text": " t0", "token_ids": [1000], "finish_reason": "length"}],
              "usage": {"completion_tokens": 1, "prompt_tokens": 3,
                        "prompt_tokens_details": {"cached_tokens": 0}}},
             {"choices": [], "usage": {"completion_tokens": 1, "prompt_tokens": 3}},
             {"object": "error", "message": "bad"}],
}


def mutated(value: Any, depth: int = 0) -> st.SearchStrategy[Any]:
    """``value`` with any of its parts replaced by junk, dropped, or kept."""
    if isinstance(value, dict):
        fields = {k: mutated(v, depth + 1) for k, v in value.items()}
        return st.one_of(
            st.fixed_dictionaries({}, optional=fields),
            st.fixed_dictionaries(fields, optional={k: json_values for k in KEYS if k not in fields}),
        )
    if isinstance(value, list) and value:
        return st.one_of(st.just(value), st.lists(mutated(value[0], depth + 1), max_size=3),
                         json_values)
    return st.one_of(st.just(value), json_values) if depth < 4 else st.just(value)


def dumps(obj: Any, ascii_only: bool) -> str:
    return json.dumps(obj, ensure_ascii=ascii_only, allow_nan=True)


def sse_lines(engine: str) -> st.SearchStrategy[str]:
    events = st.one_of(*(mutated(v) for v in VALID[engine]), json_values)
    return st.one_of(
        st.tuples(events, st.booleans()).map(lambda e: "data: " + dumps(*e)),
        st.tuples(events, st.booleans()).map(lambda e: "data:" + dumps(*e)[:-1]),  # cut short
        st.sampled_from(["data: [DONE]", "data:[DONE]", "data: [DONE] ", ": keep-alive", "",
                         "event: error", "data:", "data: 1e400", "data: -0", 'data: "\\ud800"',
                         "data: " + "[" * 5000, "data: " + '{"a":' * 3000, "id: 7", "retry: x"]),
        st.text(max_size=40).map(lambda t: "data: " + t),
        st.text(max_size=40),
    )


def check_event(event: object) -> None:
    if event is None:
        return
    assert type(event) is StreamEvent, type(event)
    assert type(event.n_tokens) is int and event.n_tokens >= 0
    assert isinstance(event.text, str)
    event.text.encode("utf-8", "surrogatepass")
    assert type(event.token_ids) is list and all(type(t) is int for t in event.token_ids)
    assert event.error is None or (isinstance(event.error, str) and len(event.error) <= 1000)
    assert isinstance(event.done, bool)
    if event.final is not None:
        assert type(event.final) is FinalStats
        for name, value in dataclasses.asdict(event.final).items():
            assert value is None or type(value) in (int, str, bool), (name, value)


@pytest.mark.parametrize("adapter", ADAPTERS, ids=IDS)
def test_every_stream_parser_gives_only_stream_events(adapter: BaseAdapter) -> None:
    @settings(FUZZ, max_examples=250)
    @given(lines=st.lists(sse_lines(adapter.name), min_size=1, max_size=8))
    def run(lines: list[str]) -> None:
        counted(f"parser_{adapter.name}")
        parse = adapter.stream_parser()  # one stream: the parser's state carries across lines
        for line in lines:
            check_event(parse(line))

    run()


@pytest.mark.parametrize("adapter", ADAPTERS, ids=IDS)
def test_raw_stream_bytes_give_only_stream_events(adapter: BaseAdapter) -> None:
    """Bytes as the dispatcher hands them on (not UTF-8, lone surrogates, CR, NUL)."""
    raw = st.one_of(st.binary(max_size=60).map(lambda b: b"data: " + b), st.binary(max_size=60),
                    sse_lines(adapter.name).map(lambda t: t.encode("utf-8", "surrogatepass")))

    @settings(FUZZ, max_examples=150)
    @given(lines=st.lists(raw, min_size=1, max_size=6))
    def run(lines: list[bytes]) -> None:
        counted(f"bytes_{adapter.name}")
        parse = adapter.stream_parser()
        for line in lines:
            check_event(parse_line(parse, line))

    run()


# --- dispatch end to end ------------------------------------------------------------------------

MAX_TOKENS = 4


def valid_stream(engine: str) -> list[bytes]:
    """The lines of a correct stream of MAX_TOKENS tokens for a 3-token prompt."""
    lines: list[Any] = []
    if engine == "llamacpp":
        lines = [{"content": "x", "tokens": [i], "stop": False} for i in range(MAX_TOKENS)]
        lines.append({"content": "", "tokens": [], "stop": True, "tokens_predicted": MAX_TOKENS,
                      "tokens_evaluated": 3, "stop_type": "limit", "truncated": False,
                      "timings": {"prompt_n": 3, "predicted_n": MAX_TOKENS}})
    elif engine == "sglang":
        for i in range(1, MAX_TOKENS + 1):
            meta: dict[str, Any] = {"completion_tokens": i, "prompt_tokens": 3, "cached_tokens": 0}
            if i == MAX_TOKENS:
                meta["finish_reason"] = {"type": "length", "length": MAX_TOKENS}
            lines.append({"text": " t" * i, "output_ids": list(range(i)), "meta_info": meta})
        lines.append("[DONE]")
    else:
        for i in range(1, MAX_TOKENS + 1):
            lines.append({"choices": [{"text": " t", "token_ids": [i],
                                       "finish_reason": "length" if i == MAX_TOKENS else None}],
                          "usage": {"completion_tokens": i, "prompt_tokens": 3}})
        lines.append({"choices": [], "usage": {"completion_tokens": MAX_TOKENS, "prompt_tokens": 3}})
        lines.append("[DONE]")
    return [b"data: " + (x.encode() if isinstance(x, str) else json.dumps(x).encode()) + b"\n\n"
            for x in lines]


line_edits = st.lists(st.tuples(st.integers(0, 4), st.integers(0, 100),
                                st.one_of(st.binary(max_size=30),
                                          json_values.map(lambda v: b"data: " + json.dumps(v).encode()
                                                          + b"\n\n"))),
                      max_size=3)


def edit_lines(lines: list[bytes], ops: list[tuple[int, int, bytes]]) -> list[bytes]:
    """Line edits: 0 drop, 1 duplicate, 2 replace with junk, 3 insert junk, 4 byte-mutate."""
    out = list(lines)
    for kind, pos, junk in ops:
        at = pos % (len(out) + 1)
        if kind == 3 or not out:
            out.insert(at, junk)
            continue
        at %= len(out)
        if kind == 0:
            del out[at]
        elif kind == 1:
            out.insert(at, out[at])
        elif kind == 2:
            out[at] = junk
        else:
            out[at] = mutate(out[at], [(0, pos * 7, junk[0] if junk else 0xFF)])
    return out


def frame(body: bytes, how: int, cuts: list[int], status: bytes) -> list[bytes]:
    """A response around ``body``: 0 chunked (cut into chunks), 1 Content-Length, 2 a
    Content-Length a few bytes over the body (the server then closes), 3 read until close,
    4 chunked without its last chunk (the connection closes mid-body)."""
    head = b"HTTP/1.1 " + status + b"\r\nContent-Type: text/event-stream\r\n"
    if how in (0, 4):
        chunks = b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in split(body, cuts))
        last = b"0\r\n\r\n" if how == 0 else b""
        return split(head + b"Transfer-Encoding: chunked\r\n\r\n" + chunks + last, cuts)
    if how in (1, 2):
        length = len(body) + (1 + cuts[0] % 5 if how == 2 and cuts else 3 if how == 2 else 0)
        return split(head + b"Content-Length: %d\r\n\r\n" % length + body, cuts)
    return split(head + b"Connection: close\r\n\r\n" + body, cuts)


def check_record(rec: RequestRecord) -> None:
    kind = rec.error_kind
    assert kind is None or kind in codes() or (kind.startswith("http_") and kind[5:].isdigit()), kind
    if kind is not None:
        assert isinstance(rec.error, str)
    problems = request_problems(rec)  # reads every record without raising
    assert all(p.code in codes() or p.code.startswith("http_") for p in problems), problems
    if kind is None and rec.final is None:
        assert [p.code for p in problems] == ["incomplete_stream"]
    if not problems:  # an ok request is a whole, consistent one
        assert rec.final is not None and rec.final.completion_tokens == len(rec.token_times)


@pytest.mark.parametrize("adapter", ADAPTERS, ids=IDS)
def test_dispatch_gives_every_request_a_record_whatever_the_stream(server: ScriptServer,
                                                                   adapter: BaseAdapter) -> None:
    @settings(FUZZ, max_examples=20)
    @given(ops=line_edits, how=st.integers(0, 4), cuts=st.lists(st.integers(0, 10_000), max_size=5),
           status=st.sampled_from([b"200 OK"] * 8 + [b"500 Oops", b"429 Busy"]),
           cut_at=st.one_of(st.none(), st.integers(0, 10_000)))
    def run(ops: list[tuple[int, int, bytes]], how: int, cuts: list[int], status: bytes,
            cut_at: int | None) -> None:
        counted(f"dispatch_{adapter.name}")
        body = b"".join(edit_lines(valid_stream(adapter.name), ops))
        if cut_at is not None and body:
            body = body[:cut_at % len(body)]  # the stream stops mid-way (then a clean end)
        server.pieces = frame(body, how, cuts, status)
        result = dispatch_cell(adapter, server.url, [[1, 2, 3]] * 3, warmup=0, concurrency=2,
                               max_tokens=MAX_TOKENS, timeout_s=3.0)
        assert len(result.records) == 3
        for rec in result.records:
            check_record(rec)

    run()


def test_the_unmutated_streams_are_ok_through_the_fuzz_server(server: ScriptServer) -> None:
    """The fuzz server and framings themselves are sound: no edit, every framing, ok requests."""
    for adapter in ADAPTERS:
        for how in (0, 1, 3):
            server.pieces = frame(b"".join(valid_stream(adapter.name)), how, [5, 50, 97], b"200 OK")
            result = dispatch_cell(adapter, server.url, [[1, 2, 3]] * 2, warmup=0, concurrency=2,
                                   max_tokens=MAX_TOKENS, timeout_s=3.0)
            for rec in result.records:
                assert request_problems(rec) == [], (adapter.name, how, rec.error)
                assert len(rec.token_times) == MAX_TOKENS

