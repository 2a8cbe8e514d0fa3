"""The research path against the engines as their source says they run (issue 38): template
options in every render, budgets that mean one thing, settings read back after a start, seeds
that pair or say they do not, and one definition of acceptance on every engine. On stand-ins
(tests/support/protocol_servers.py, tests/support/fake_server.py); about 3 s."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import httpx
import pytest
from fake_server import FakeLlamaServer, chatml
from paramsfiles import write_params
from protocol_servers import sglang_server, vllm_server

from specbench_lib import load_plan
from specbench_lib.analysis.metrics import cell_metrics
from specbench_lib.analysis.pairing import pairing_note, seeds_paired
from specbench_lib.analysis.validate import judge_cell
from specbench_lib.client.dispatch import dispatch_cell
from specbench_lib.core.errors import PreflightError, SpecMismatch
from specbench_lib.model.cellspec import CellSpec, ServerConfig
from specbench_lib.model.sections import EngineParams
from specbench_lib.model.workloadparams import WorkloadParams
from specbench_lib.prompts.chat import user_turn
from specbench_lib.prompts.workload import frame_of
from specbench_lib.servers.engines import get_adapter
from specbench_lib.servers.engines.base import ServerInfo
from specbench_lib.servers.engines.chat_template import render_local
from specbench_lib.servers.engines.llamacpp import LlamaCppAdapter
from specbench_lib.servers.engines.sglang import TREE_TEMPLATES, SGLangAdapter
from specbench_lib.servers.engines.vllm import VllmAdapter
from specbench_lib.servers.facts import failed_facts
from specbench_lib.servers.process import open_server
from specbench_lib.sweep.lifetimes import launch_argvs
from specbench_lib.sweep.modelfit import model_fit, seed_pairing

NO_THINKING = {"enable_thinking": False}
QWEN3_LIKE = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
              "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% if "
              "enable_thinking is defined and enable_thinking is false %}<think>\n\n</think>\n\n"
              "{% endif %}{% endif %}")
PROMPTS = [[11, 12, 13, 14, 15]] * 3


def cfg(method: str, budget: int | None = None, **kw) -> ServerConfig:
    return ServerConfig(kw.pop("name", method), method, budget, kw.pop("options", {}),
                        kw.pop("draft_model", None), kw.pop("extra_args", ()), **kw)


def run(adapter, url: str, max_tokens: int = 12):
    return dispatch_cell(adapter, url, PROMPTS, warmup=1, concurrency=1, max_tokens=max_tokens,
                         timeout_s=5.0)


# --- 1. template options -----------------------------------------------------------------------

def test_template_options_reach_every_render(tmp_path: Path) -> None:
    """``chat_template_kwargs`` reach the local jinja render, SGLang's and vLLM's /tokenize
    with messages, llama.cpp's /apply-template, and every prompt built for the workload."""
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"chat_template": QWEN3_LIKE}))
    turn = user_turn("hello")
    assert render_local(tmp_path, turn).endswith("<|im_start|>assistant\n")
    assert render_local(tmp_path, turn, NO_THINKING).endswith("assistant\n<think>\n\n</think>\n\n")
    local = SGLangAdapter(EngineParams(kind="sglang", binary="x", model=str(tmp_path)))
    served = SGLangAdapter(EngineParams(kind="sglang", binary="x", model=str(tmp_path),
                                        tokenizer="server"))
    with sglang_server() as srv, httpx.Client(base_url=srv.url) as client:
        think = local.tokenize(client, chatml(turn, NO_THINKING))
        assert local.chat_render(client, turn, NO_THINKING) == think
        assert served.chat_render(client, turn, NO_THINKING) == think
        asked = [b for p, b in srv.bodies if p == "/tokenize" and "messages" in b]
    assert asked[-1]["chat_template_kwargs"] == NO_THINKING
    with vllm_server() as srv, httpx.Client(base_url=srv.url) as client:
        assert VllmAdapter().chat_render(client, turn, NO_THINKING) == think
        assert [b for p, b in srv.bodies if p == "/tokenize"][-1]["chat_template_kwargs"] == NO_THINKING
    with FakeLlamaServer("ok") as srv, httpx.Client(base_url=srv.url) as client:
        LlamaCppAdapter().chat_render(client, turn, NO_THINKING)
        assert srv.templated[-1]["chat_template_kwargs"] == NO_THINKING
    seen: list[object] = []
    workload = WorkloadParams(name="chat", source="sharegpt", template="chat",
                              chat_template_kwargs=NO_THINKING)
    frame_of(workload, lambda m, o=None: seen.append(o) or [1, 100, 2], lambda text: [100])
    assert seen == [NO_THINKING]
    with pytest.raises(ValueError, match="chat_template_kwargs need template: chat"):
        WorkloadParams(name="raw", source="sharegpt", chat_template_kwargs=NO_THINKING)


def test_answers_that_open_a_reasoning_block_the_plan_did_not_ask_for_are_not_ok() -> None:
    with sglang_server("thinking") as srv:
        thinking = run(SGLangAdapter(), srv.url)
    with sglang_server("ok") as srv:
        plain = run(SGLangAdapter(), srv.url)
    assert all(r.reasoning for r in thinking.records) and not any(r.reasoning for r in plain.records)
    verdict = judge_cell(thinking.records)
    assert verdict.status == "invalid"
    assert verdict.reasons[0].startswith("unplanned_reasoning: 2 of 2 answers opened a reasoning")
    assert judge_cell(thinking.records, reasoning=True).status == "ok"  # asked for: a workload
    assert judge_cell(plain.records).status == "ok"


# --- 2. budgets ---------------------------------------------------------------------------------

SGL = EngineParams(kind="sglang", binary="/venv/bin/python", model="/m/target", draft_model="/m/draft",
                   port=30000, context=32768)


def test_a_linear_budget_is_the_same_block_on_sglang_and_vllm() -> None:
    vllm = EngineParams(kind="vllm", binary="/venv/bin/vllm", model="/m/target", draft_model="/m/draft",
                        launcher=("serve",))
    sgl_argv = SGLangAdapter().launch(cfg("linear", 16), SGL, parallel=1, model=Path("/m/target"),
                                      binary=Path("/venv/bin/python")).argv
    vllm_argv = VllmAdapter().launch(cfg("linear", 16), vllm, parallel=1, model=Path("/m/target"),
                                     binary=Path("/venv/bin/vllm")).argv
    spec = vllm_argv[vllm_argv.index("--speculative-config") + 1]
    assert json.loads(spec)["num_speculative_tokens"] == 15  # vLLM's block is K + 1
    assert SGLangAdapter().drafter_block(sgl_argv) == 16 == VllmAdapter().drafter_block(vllm_argv)


def _plan(tmp_path: Path, template: str, *, context: int = 32768,
          env: dict[str, str] | None = None) -> object:
    (tmp_path / "target").mkdir(parents=True)
    (tmp_path / "target" / "config.json").write_text(json.dumps({
        "max_position_embeddings": 40960, "rope_scaling": None}))
    (tmp_path / "draft").mkdir()
    (tmp_path / "draft" / "config.json").write_text(json.dumps({
        "max_position_embeddings": 40960, "dflash_config": {"block_size": 16}}))
    engine = {"kind": "sglang", "binary": sys.executable, "model": str(tmp_path / "target"),
              "draft_model": str(tmp_path / "draft"), "context": context,
              "spec_templates": {"tree": list(TREE_TEMPLATES[template])}, **({"env": env} if env else {})}
    path = write_params(tmp_path, "minimal", engine=engine,
                        configs=[{"name": "auto", "method": "auto"},
                                 {"name": "ddtree", "method": "tree", "budgets": [8, 15]}],
                        workloads=[{"name": "chat", "source": "sharegpt", "template": "chat",
                                    "chat_template_kwargs": {"enable_thinking": False}}],
                        contexts=[1024], output_tokens=16)
    return load_plan(path)


@pytest.mark.parametrize(("template", "warned"), [("fork", ["ddtree-b8"]), ("pr29907", [])])
def test_the_doctor_warns_when_a_tree_budget_changes_the_drafters_block(
        tmp_path: Path, template: str, warned: list[str]) -> None:
    plan = _plan(tmp_path, template)
    adapter = get_adapter(plan.params.engine)
    argvs = launch_argvs(plan, adapter)
    if template == "pr29907":  # the block read from the drafter's config, the budget its own
        assert argvs["ddtree-b8"][-9:-5] == ["--speculative-num-draft-tokens", "16",
                                             "--speculative-ddtree-budget", "8"]
    detail, warning = model_fit(plan, adapter, argvs)
    assert "target target: 40960 positions" in detail
    assert [w.split(":")[0] for w in warning.split("; ") if w] == warned
    if warned:  # budget 15 is block 16, the design; budget 8 runs the b16 drafter at block 9
        assert "runs at block 9, trained at 16" in warning


def test_the_doctor_refuses_a_context_past_the_models_without_the_environment(tmp_path: Path) -> None:
    plan = _plan(tmp_path / "a", "pr29907", context=73728)
    adapter = get_adapter(plan.params.engine)
    with pytest.raises(PreflightError, match="SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN") as err:
        model_fit(plan, adapter, {})
    assert "73728 is more than the 40960" in str(err.value) and "target" in str(err.value)
    allowed = _plan(tmp_path / "b", "pr29907", context=73728,
                    env={"SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN": "1"})
    _, warning = model_fit(allowed, adapter, {})
    assert "lets it start" in warning and "draft" in warning  # the drafter is checked too


def test_a_server_that_runs_other_speculative_settings_is_a_config_failure() -> None:
    server = cfg("linear", 4, draft_model="/m/draft")
    argv = SGLangAdapter().launch(server, SGL, parallel=1, model=Path("/m/target"),
                                  binary=Path("/venv/bin/python")).argv
    adapter = SGLangAdapter()
    with sglang_server("spec", accept=4) as srv, httpx.Client(base_url=srv.url) as client:
        resolved = adapter.check_spec(server, argv, adapter.server_info(client), "")
    assert resolved == {"speculative_algorithm": "DFLASH", "speculative_num_draft_tokens": 4,
                        "disable_overlap_schedule": True, "max_running_requests": 48}
    with sglang_server("rewrites_spec", spec=True, accept=4) as srv, \
            httpx.Client(base_url=srv.url) as client:
        info = adapter.server_info(client)
        with pytest.raises(SpecMismatch) as err:
            adapter.check_spec(server, argv, info, "")
    assert "speculative_num_draft_tokens: asked '4', the server runs 5" in str(err.value)
    proc = SimpleNamespace(crash_signature=lambda *a: None, healthy=lambda: True,
                           log_tail=lambda n=40: "")
    facts = failed_facts(proc, err.value, 0)  # type: ignore[arg-type]
    assert facts.decided.status == "invalid" and facts.decided.reasons[0].startswith("spec_mismatch:")
    with pytest.raises(SpecMismatch, match="asked none, the server runs 'DFLASH'"):
        adapter.check_spec(cfg("auto"), [], info, "")
    # vLLM: the engine's config line in its log
    line = ("INFO Initializing a V1 LLM engine (v0.32.0) with config: model='/m', "
            "speculative_config=SpeculativeConfig(method='dflash', model='/m/draft', num_spec_tokens=15), x")
    vllm_argv = ["vllm", "--speculative-config", '{"method": "dflash", "num_speculative_tokens": 15}']
    assert VllmAdapter().check_spec(cfg("linear", 16), vllm_argv, info, line) == {
        "method": "dflash", "num_speculative_tokens": 15}
    with pytest.raises(SpecMismatch, match="num_speculative_tokens: asked 16"):
        VllmAdapter().check_spec(cfg("linear", 17), [*vllm_argv[:2], vllm_argv[2].replace("15", "16")],
                                 info, line)


def test_llamacpp_reads_back_whether_its_slots_speculate() -> None:
    """/props cannot say (its speculative.types are a fresh task's defaults); /slots can."""
    drafting = ServerInfo(context_per_request=64, raw={"slots_speculative": [True, True]})
    assert LlamaCppAdapter().check_spec(cfg("ngram", 8), [], drafting, "") == {"speculative": True}
    with pytest.raises(SpecMismatch, match="asked for no speculative decoding"):
        LlamaCppAdapter().check_spec(cfg("auto"), [], drafting, "")
    assert LlamaCppAdapter().check_spec(cfg("ngram", 8), [], ServerInfo(64, raw={}), "") == {}


# --- 3. seeds -----------------------------------------------------------------------------------

def test_sampled_cells_on_sglang_pair_only_with_deterministic_inference() -> None:
    plain = ServerInfo(context_per_request=64, raw={"enable_deterministic_inference": False})
    assert not SGLangAdapter().pairs_seeds(plain, ["python", "-m", "sglang.launch_server"])
    assert SGLangAdapter().pairs_seeds(plain, ["--enable-deterministic-inference"])
    assert SGLangAdapter().pairs_seeds(ServerInfo(64, raw={"enable_deterministic_inference": True}), [])
    assert VllmAdapter().pairs_seeds(plain, []) and LlamaCppAdapter().pairs_seeds(plain, [])
    spec = CellSpec("dflash-b16", "dflash", "linear", 16, "chat", 1024, 1, temperature=1.0)
    judge = SimpleNamespace(seeds_paired=False)
    cell = SimpleNamespace(spec=spec, judge=judge)
    greedy = SimpleNamespace(spec=CellSpec("auto", "auto", "auto", None, "chat", 1024, 1), judge=judge)
    assert not seeds_paired(cell) and seeds_paired(greedy)  # type: ignore[arg-type]
    assert "dflash-b16" in (pairing_note([cell, greedy]) or "")  # type: ignore[list-item]
    tp1 = load_plan(Path(__file__).resolve().parents[2] / "params" / "tp1.yaml",
                    stage="sampling")  # the design's stage at temperature 1 (docs/stages.md)
    adapter = get_adapter(tp1.params.engine)
    detail, warning = seed_pairing(tp1, adapter, launch_argvs(tp1, adapter))
    assert detail == "sampled cells unpaired on 4 servers" and "--enable-deterministic-inference" in warning


# --- 4. acceptance ------------------------------------------------------------------------------

def test_acceptance_has_one_definition_on_every_engine() -> None:
    """A known truth: the prefill's token, then verify steps of 1 + 3, 1 + 3 and 1 + 2 accepted
    drafts (12 tokens, 4 forward steps, 8 drafts accepted) on each engine's stand-in."""
    with sglang_server("spec", accept=4) as srv:
        sgl = run(SGLangAdapter(), srv.url)
    with vllm_server(spec=True, accept=4) as srv, httpx.Client(base_url=srv.url) as client:
        before = VllmAdapter().metrics_snapshot(client)
        vllm = run(VllmAdapter(), srv.url)
        counters = VllmAdapter().cell_spec_stats(before, VllmAdapter().metrics_snapshot(client))
    for rec in sgl.records:
        assert rec.chunk_sizes == [1, 4, 4, 3]  # spec_verify_ct 3: the prefill is no verify pass
        assert (rec.final.verify_steps, rec.final.accepted_tokens) == (4, 8)
    assert all(rec.chunk_sizes == [1, 4, 4, 3] for rec in vllm.records)
    assert counters["verify_steps"] == 4 * len(vllm.records)  # counted over every request
    metrics = cell_metrics(sgl)
    assert metrics["tokens_per_step"] == 3.0 == counters["tokens_per_step"]
    assert metrics["acceptance_histogram"] == [0, 0, 2, 4]  # two requests' passes by drafts accepted
    assert metrics["position_acceptance_rate"] == [1.0, 1.0, 4 / 6]
    # llama.cpp: its final line's counts, the prefill's token counted as a step
    final = LlamaCppAdapter().stream_parser()(
        'data: {"content": "", "stop": true, "tokens_predicted": 12, "tokens_evaluated": 5, '
        '"timings": {"draft_n": 9, "draft_n_accepted": 8}}').final
    assert (final.verify_steps, final.accepted_tokens) == (4, 8)


# --- 5. the renamed key, the environment, the fingerprint ---------------------------------------

def test_sglang_reads_the_incremental_stream_under_its_new_name() -> None:
    info = ServerInfo(context_per_request=64, raw={"incremental_streaming_output": True})
    assert SGLangAdapter().for_server(info).incremental
    assert SGLangAdapter().for_server(ServerInfo(64, raw={"stream_output": True})).incremental
    with sglang_server("incremental") as srv, httpx.Client(base_url=srv.url) as client:
        adapter = SGLangAdapter().for_server(SGLangAdapter().server_info(client))
        result = run(adapter, srv.url)
    assert judge_cell(result.records).status == "ok"
    assert all(len(r.output_ids) == 12 for r in result.records)


def test_a_restarted_sglang_keeps_its_fingerprint_settings() -> None:
    settings = []
    for _ in range(2):
        with sglang_server("ok") as srv, httpx.Client(base_url=srv.url) as client:
            info = SGLangAdapter().server_info(client)
        assert "startup_time" in info.raw
        settings.append(info.settings)
        time.sleep(0.01)
    assert settings[0] == settings[1]


def test_a_server_starts_with_the_params_environment(tmp_path: Path) -> None:
    argv = [sys.executable, "-c", "import os; print('ENV=' + os.environ['SPECBENCH_TEST_ENV'])"]
    proc = open_server("env", None, (argv, "http://127.0.0.1:1", "/health"), tmp_path / "log",
                       (), (), env={"SPECBENCH_TEST_ENV": "yes"})
    proc.start()
    proc.exit_status(5.0)
    proc.stop()
    assert "ENV=yes" in (tmp_path / "log").read_text()


def test_vllm_takes_the_attention_backend_flag() -> None:
    engine = EngineParams(kind="vllm", binary="/venv/bin/vllm", model="/m", launcher=("serve",),
                          attention_backend="flash_attn")
    argv = VllmAdapter().launch(cfg("auto"), engine, parallel=1, model=Path("/m"),
                                binary=Path("/venv/bin/vllm")).argv
    assert argv[argv.index("--attention-backend") + 1] == "flash_attn"
