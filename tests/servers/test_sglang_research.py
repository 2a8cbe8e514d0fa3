"""The research path as the DDTree fork runs it (issue 48, and issue 49's SGLang counters): a tree
verified without its mask refused, the KV pool and retractions that make a cell's concurrency
untrue, seeds DFLASH never pairs, acceptance from ``spec_verify_ct`` alone, the papers' τ beside
the project's, a tree's node acceptance kept apart, and the fork's scheduler as a baseline
option. On the SGLang stand-in (tests/support/protocol_servers.py); sweeps of a few seconds."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from paramsfiles import LENIENT, write_params
from ports import free_port
from protocol_servers import sglang_server

import specbench_lib as sb
from specbench_lib.analysis.analyse import analyse
from specbench_lib.analysis.specmetrics import spec_metrics
from specbench_lib.core.errors import ParamsError, TreeMaskIgnored
from specbench_lib.model.cellspec import ServerConfig
from specbench_lib.model.sections import EngineParams
from specbench_lib.servers.engines.base import ServerInfo
from specbench_lib.servers.engines.sglang import TREE_TEMPLATES, SGLangAdapter
from specbench_lib.servers.engines.sglangstream import SGLangStream
from specbench_lib.sweep import preflight

ROOT = Path(__file__).resolve().parents[2]
PROTOCOL = ROOT / "tests" / "support" / "protocol_servers.py"
FORK_TREE = json.dumps(list(TREE_TEMPLATES["fork"]))
AUTO = {"name": "auto", "method": "auto"}
SGL = EngineParams(kind="sglang", binary="/venv/bin/python", model="/m/target",
                   draft_model="/m/draft", attention_backend="flashinfer",
                   spec_templates={"tree": TREE_TEMPLATES["fork"]})


def cfg(name: str, method: str, budget: int | None = None, **kw) -> ServerConfig:
    return ServerConfig(name, method, budget, kw.pop("options", {}), kw.pop("draft_model", None),
                        tuple(kw.pop("extra_args", ())), **kw)


def argv_of(server: ServerConfig, engine: EngineParams = SGL) -> list[str]:
    return SGLangAdapter(engine).launch(server, engine, parallel=1, model=Path("/m/target"),
                                        binary=Path("/venv/bin/python")).argv


def _plan(tmp: Path, configs: list[dict[str, Any]], *, backend: str | None = "flashinfer",
          concurrency: int = 2, **more: Any) -> Path:
    model = tmp / "model"
    model.mkdir(exist_ok=True)
    (model / "config.json").write_text("{}")
    engine = {"kind": "sglang", "binary": sys.executable, "launcher": [str(PROTOCOL), "sglang"],
              "tokenizer": "server", "model": str(model), "draft_model": str(model),
              "port": free_port(), "context": 256, "ready_timeout_s": 30,
              "attention_backend": backend, "spec_templates": {"tree": json.loads(FORK_TREE)}}
    return write_params(tmp, "minimal", phase="research", engine=engine, configs=configs,
                        contexts=[16], concurrency=[concurrency], output_tokens=8,
                        requests_per_cell=2, requests_scale="fixed", warmup_requests=1,
                        cell_order="fixed", **LENIENT, **more)


def _lenient(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(preflight, "gpus_check", lambda tp: f"{tp} visible (test stand-in)")


# --- 1. a tree verified without its tree mask ---------------------------------------------------

def test_a_tree_config_without_a_mask_backend_is_refused_before_any_server_starts(
        tmp_path: Path) -> None:
    """Before: tp1's ``attention_backend: null`` let SGLang pick FA3 on Hopper, whose verify pass
    ignores the tree mask, and nothing refused it. Now the doctor's ``configs`` check names each
    tree config and the fix; flashinfer and triton pass, a chain is not concerned."""
    tree = cfg("ddtree", "tree", 15)
    assert SGLangAdapter(SGL).config_refusal(tree, argv_of(tree)) is None
    for backend in (None, "fa3"):
        engine = SGL.model_copy(update={"attention_backend": backend,
                                        "spec_templates": {"tree": TREE_TEMPLATES["fork"]}})
        why = SGLangAdapter(engine).config_refusal(tree, argv_of(tree, engine))
        assert why is not None and "ddtree-b15" in why and "flashinfer or triton" in why
        linear = cfg("dflash", "linear", 16)
        assert SGLangAdapter(engine).config_refusal(linear, argv_of(linear, engine)) is None
    pr = SGL.model_copy(update={"attention_backend": None,
                                "spec_templates": {"tree": TREE_TEMPLATES["pr29907"]}})
    assert SGLangAdapter(pr).config_refusal(tree, argv_of(tree, pr)) is None  # its own triton
    plan = sb.load_plan(_plan(tmp_path, [AUTO, {"name": "ddtree", "method": "tree", "budgets": [15]}],
                              backend=None))
    checks = {c.name: c for c in preflight.doctor(plan, outputs=tmp_path / "out")}
    assert not checks["configs"].ok and "ddtree-b15" in checks["configs"].detail


def test_a_server_that_resolves_fa3_for_a_tree_is_a_config_failure(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """After a start, the resolved backends from /server_info: a tree config whose server runs
    FA3 (a fork that overrides the flag) measures no cell (``tree_mask_ignored``); the chain
    on the same server kind is measured."""
    _lenient(monkeypatch)
    tree = cfg("ddtree", "tree", 15)
    with pytest.raises(TreeMaskIgnored, match="attention_backend 'fa3'"):
        SGLangAdapter(SGL).check_spec(tree, argv_of(tree), ServerInfo(1, raw={
            "speculative_algorithm": "DFLASH", "speculative_dflash_enable_ddtree": True,
            "attention_backend": "fa3"}), "")
    fa3 = ["--mode", "fa3"]
    configs = [{"name": "ddtree", "method": "tree", "budgets": [15], "extra_args": fa3},
               {"name": "dflash", "method": "linear", "budgets": [4], "extra_args": fa3}, AUTO]
    result = sb.run_sweep(sb.load_plan(_plan(tmp_path, configs)), outputs=tmp_path / "out",
                          progress=False)
    by = {c.spec.config: c for c in result.cells}
    assert by["ddtree-b15"].status == "invalid"
    assert by["ddtree-b15"].verdict.codes == {"tree_mask_ignored"}
    assert by["dflash-b4"].status == "ok" and by["auto"].status == "ok"


# --- 4. the KV pool and retractions ---------------------------------------------------------------

def test_a_cell_whose_concurrency_the_server_cannot_hold_is_skipped_or_invalid(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: ``max_total_num_tokens`` was read only as a per-request limit and
    ``num_retractions`` never: a "c4" cell whose pool held 2 requests, or whose requests were
    retracted, was ok. Then each was ``concurrency_not_held`` after its requests ran. Now a cell
    the started server's pool cannot hold is skipped before its requests are sent
    (``kv_pool_too_small``, with the numbers); one whose requests were retracted is still
    ``concurrency_not_held``."""
    _lenient(monkeypatch)
    configs = [AUTO, {"name": "small", "method": "auto", "extra_args": ["--max-total-tokens", "60"]},
               {"name": "retracts", "method": "auto", "extra_args": ["--mode", "retracts"]}]
    result = sb.run_sweep(sb.load_plan(_plan(tmp_path, configs, concurrency=4)),
                          outputs=tmp_path / "out", progress=False)
    by = {c.spec.config: c for c in result.cells}
    assert by["auto"].status == "ok" and by["auto"].facts.kv_fit == {
        "kv_tokens": 1024, "needed": 96, "per_request": 24}
    small = by["small"]
    assert small.status == "skipped" and small.verdict.codes == {"kv_pool_too_small"}
    assert "holds 60 tokens, the cell needs 4 × (16 + 8) = 96: at most 2 requests" in str(
        small.verdict.reasons[0])
    assert not [r for r in small.requests if not r.warmup]  # none of its requests was spent
    retracted = by["retracts"]
    assert retracted.status == "invalid" and "2 of 2 requests were retracted" in str(
        retracted.verdict.reasons[0])
    assert all(r.final.retractions == 1 for r in retracted.requests if not r.warmup)


def test_an_open_loop_cell_is_measured_whatever_the_pool_holds(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An open loop's load is its rate: the server queues what its pool cannot hold, and that
    queueing is what the cell measures (the doctor checks closed loops only). Before, its
    requests were sent and then the cell was ``concurrency_not_held`` from the pool's count of
    its cap; now it is neither skipped nor judged on the pool, as the doctor said."""
    _lenient(monkeypatch)
    configs = [{"name": "small", "method": "auto", "extra_args": ["--max-total-tokens", "60"]}]
    plan = sb.load_plan(_plan(tmp_path, configs, concurrency=4,
                              request_rate={"per_s": 50, "arrival": "fixed"}))
    result = sb.run_sweep(plan, outputs=tmp_path / "out", progress=False)
    (cell,) = [c for c in result.cells if not c.spec.closed_loop]
    assert cell.spec.rate == 50 and cell.facts.kv_fit is None
    assert {"kv_pool_too_small", "concurrency_not_held"}.isdisjoint(cell.verdict.codes)
    assert [r for r in cell.requests if not r.warmup]  # its requests were sent


# --- 5, 6, 49.6: seeds, acceptance past the end, counters that contradict the stream --------------

def test_dflash_and_ddtree_never_pair_their_sampled_draws() -> None:
    """Before: ``--enable-deterministic-inference`` marked DFLASH's sampled cells paired, but its
    verify draws ``torch.rand`` whatever the flag. Now only the baseline and EAGLE pair."""
    adapter = SGLangAdapter(SGL)
    deterministic = ServerInfo(1, raw={"enable_deterministic_inference": True})
    for server in (cfg("dflash", "linear", 16), cfg("ddtree", "tree", 15)):
        raw = {**deterministic.raw, "speculative_algorithm": "DFLASH"}
        assert not adapter.pairs_seeds(ServerInfo(1, raw=raw), argv_of(server))
    assert adapter.pairs_seeds(deterministic, argv_of(cfg("auto", "auto")))
    eagle = cfg("eagle", "eagle", 4, draft_model="/m/e")
    assert adapter.pairs_seeds(ServerInfo(1, raw={**deterministic.raw,
                                                  "speculative_algorithm": "EAGLE"}), argv_of(eagle))


def _final(meta: dict) -> object:
    stream = SGLangStream()
    event = stream.parse({"text": "x" * meta["completion_tokens"],
                          "output_ids": list(range(meta["completion_tokens"])),
                          "meta_info": {"finish_reason": {"type": "stop", "matched": 2}, **meta}})
    return event.final


def test_acceptance_comes_from_verify_steps_not_from_drafts_accepted_past_the_end() -> None:
    """SGLang's ``spec_num_correct_drafts`` counts drafts the last step accepted past EOS
    (batch_result_processor.py:785-788): 20 tokens in 1 prefill + 5 verify passes are 14
    accepted drafts, though SGLang says 17. Before, the adapter took the 17."""
    final = _final({"completion_tokens": 20, "spec_verify_ct": 5, "spec_num_correct_drafts": 17,
                    "spec_num_proposed_drafts": 75, "num_retractions": 0})
    assert (final.verify_steps, final.accepted_tokens, final.retractions) == (6, 14, 0)


def test_sglang_verify_passes_above_the_tokens_make_the_cell_invalid(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: ``spec_verify_ct`` above the completion tokens gave τ 1.00 as measured (the
    accepted count clipped at 0). Now the cell is invalid, ``impossible_spec_stats``."""
    _lenient(monkeypatch)
    configs = [{"name": "liar", "method": "linear", "budgets": [4],
                "extra_args": ["--mode", "overcounts_verify"]}, AUTO]
    result = sb.run_sweep(sb.load_plan(_plan(tmp_path, configs)), outputs=tmp_path / "out",
                          progress=False)
    liar = next(c for c in result.cells if c.spec.config == "liar-b4")
    assert liar.status == "invalid" and "impossible_spec_stats" in liar.verdict.codes
    assert "verify steps for 8 tokens" in " ".join(map(str, liar.verdict.reasons))


# --- 7, 9: the papers' τ beside the project's; a tree's nodes apart -----------------------------

def test_the_papers_tau_is_reported_beside_the_projects() -> None:
    """Two requests of 101 tokens in 21 forward steps each (1 prefill + 20 verify passes):
    the project's acceptance length 202 / 42 = 4.81; the papers' τ (accepted + 1 over verify
    passes) 200 / 40 = 5.0; SGLang's ``spec_accept_length`` 202 / 40 = 5.05."""
    found = spec_metrics(202, 2, accepted=160, drafted_tokens=600)
    assert found["acceptance_length"] == pytest.approx(202 / 42)
    assert found["tau_verify"] == pytest.approx(5.0)
    assert found["spec_accept_length"] == pytest.approx(5.05)


def test_a_tree_configs_acceptance_rate_is_its_nodes_not_a_chains(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A tree's drafted tokens are its nodes (verify × budget): its rate is named
    ``tree_node_acceptance_rate`` and its ``draft_acceptance_rate`` left empty, so no table
    compares it with a chain's."""
    _lenient(monkeypatch)
    configs = [{"name": "ddtree", "method": "tree", "budgets": [3]},
               {"name": "dflash", "method": "linear", "budgets": [4]}, AUTO]
    result = sb.run_sweep(sb.load_plan(_plan(tmp_path, configs)), outputs=tmp_path / "out",
                          progress=False)
    by = {c.spec.config: analyse(c) for c in result.cells}
    tree, chain = by["ddtree-b3"].metrics, by["dflash-b4"].metrics
    assert tree["draft_acceptance_rate"] is None and 0 < tree["tree_node_acceptance_rate"] <= 1
    assert 0 < chain["draft_acceptance_rate"] <= 1 and "tree_node_acceptance_rate" not in chain
    assert tree["tau_verify"] > tree["acceptance_length"] > 1


# --- 8: the fork's dflash scheduler, as a baseline option ---------------------------------------

def test_a_baseline_can_run_the_forks_dflash_scheduler() -> None:
    """The fork's DFLASH forces overlap off and 48 running requests; ``scheduler: dflash`` gives
    a baseline the same, so dflash vs auto differs in drafting only. Anything else is refused."""
    assert argv_of(cfg("auto-sync", "auto", options={"scheduler": "dflash"}))[-3:] == [
        "--disable-overlap-schedule", "--max-running-requests", "48"]
    assert "--disable-overlap-schedule" not in argv_of(cfg("auto", "auto"))
    with pytest.raises(ParamsError, match=r"scheduler .* one of \[.dflash.\], not .eagle."):
        argv_of(cfg("auto-x", "auto", options={"scheduler": "eagle"}))


def test_the_scheduler_a_server_resolved_is_recorded_with_its_settings() -> None:
    """The resolved overlap and running-request settings are read back with the speculative
    ones, so a run says what the fork's dflash ran."""
    server = cfg("dflash", "linear", 4)
    adapter = SGLangAdapter(SGL)
    with sglang_server("spec", accept=4) as srv:
        import httpx
        with httpx.Client(base_url=srv.url) as client:
            found = adapter.check_spec(server, argv_of(server), adapter.server_info(client), "")
    assert found["disable_overlap_schedule"] is True and found["max_running_requests"] == 48
