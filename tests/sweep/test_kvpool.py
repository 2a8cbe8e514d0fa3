"""The KV pool before any server starts (issue 47's c16 at 25,600 tokens on one H100): SGLang's
sizing estimated from the GPU, the model's config.json and the drafter; every panel whose tokens
in flight exceed it named by the doctor and the dry run, with the concurrency that fits;
``concurrency_cap`` to measure the long context at that concurrency; after a start, a cell the
server's real pool cannot hold skipped before its requests are spent (tests/servers/
test_sglang_research.py has the sweep on the stand-in)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from ports import free_port

import specbench_lib as sb
from specbench_lib.analysis.validate import kv_guard
from specbench_lib.core.errors import ParamsError, PreflightError
from specbench_lib.sweep import kvpool, preflight
from specbench_lib.sweep.preview import PlanPreview

ROOT = Path(__file__).resolve().parents[2]
PROTOCOL = ROOT / "tests" / "support" / "protocol_servers.py"
# Qwen/Qwen3-8B's config.json, the keys the pool is sized from
QWEN3_8B = {"num_hidden_layers": 36, "num_attention_heads": 32, "num_key_value_heads": 8,
            "head_dim": 128, "hidden_size": 4096, "torch_dtype": "bfloat16"}
KV_8B = 2 * 36 * 8 * 128 * 2  # K and V, 36 layers, 8 KV heads of 128, bf16: 147,456 B a token
WEIGHTS_8B = 8.19e9 * 2


def _params(tmp: Path, *, concurrency: str = "[1, 16]", extra: str = "",
            config: dict | None = None, contexts: str = "[3072, 25600]") -> Path:
    model = tmp / "Qwen3-8B"
    model.mkdir(exist_ok=True)
    if config is not None:
        (model / "config.json").write_text(json.dumps(config))
    else:
        (model / "README").write_text("no config.json: the known table's shape")
    draft = tmp / "Qwen3-8B-DFlash-b16"
    draft.mkdir(exist_ok=True)
    (draft / "README").write_text("a drafter without config.json: 5 layers assumed")
    path = tmp / "p.yaml"
    path.write_text(f"""phase: kv
engine:
  kind: sglang
  binary: {sys.executable}
  launcher: {json.dumps([str(PROTOCOL), 'sglang'])}
  tokenizer: server
  model: {model}
  draft_model: {draft}
  port: {free_port()}
  context: 32768
  mem_fraction: 0.85
  attention_backend: flashinfer
configs:
  - {{name: auto, method: auto}}
  - {{name: dflash, method: linear, budgets: [16]}}
workloads:
  - {{name: chat, source: sharegpt}}
contexts: {contexts}
concurrency: {concurrency}
output_tokens: 256
requests_per_cell: 1
{extra}""")
    return path


def test_the_estimate_is_sglangs_sizing_of_qwen3_8b_on_an_h100() -> None:
    """The emulator's pool (docs/emulator.md: 350,070 tokens, 293,832 with a drafter) by hand:
    80 GB × 0.85 less 16.38 GB of weights, over 147,456 B a token; the drafter 5 of 36 layers."""
    target = kvpool.KNOWN_MODELS["Qwen3-8B"]
    alone = int((80e9 * 0.85 - WEIGHTS_8B) // KV_8B)
    drafter = kvpool.read_drafter(None, target)
    drafted = int((80e9 * 0.85 - WEIGHTS_8B * 41 / 36) // (KV_8B * 41 // 36))
    assert kvpool.pool_tokens(80e9, 0.85, 1, target) == alone == 350_070
    assert kvpool.pool_tokens(80e9, 0.85, 1, target, drafter) == drafted == 293_832
    # four GPUs: a quarter of the weights and of the KV heads each
    assert kvpool.pool_tokens(80e9, 0.85, 4, target) == int(
        (80e9 * 0.85 - WEIGHTS_8B / 4) // (KV_8B // 4))


def test_the_estimate_reads_the_models_config_json_and_weights(tmp_path: Path) -> None:
    """A model the table does not know: its shape from config.json (head_dim from hidden /
    heads, fp32 values), its weights from its safetensors files; with none, not estimated."""
    folder = tmp_path / "my-model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(
        {"num_hidden_layers": 10, "num_attention_heads": 16, "num_key_value_heads": 4,
         "hidden_size": 1024, "torch_dtype": "float32"}))
    assert kvpool.read_model(folder) is None  # no size anywhere: not guessed
    (folder / "model.safetensors").write_bytes(b"\0" * 4096)
    model = kvpool.read_model(folder)
    assert model is not None and model.weight_bytes == 4096
    assert model.kv_bytes_per_token() == 2 * 10 * 4 * 64 * 4
    assert model.kv_bytes_per_token(tp=8) == 2 * 10 * 1 * 64 * 4  # at least one head a GPU
    given = kvpool.read_model(folder, params_b=1.5)
    assert given is not None and given.weight_bytes == 3e9
    assert kvpool.pool_tokens(40e9, 0.5, 1, given) == int((20e9 - 3e9) // (2 * 10 * 4 * 64 * 4))


def test_the_doctor_names_each_panel_the_pool_cannot_hold(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: nothing checked it; c16 at 25,600 tokens (16 × 25,856 = 413,696 tokens) started
    its servers and ended concurrency_not_held after the requests. Now the doctor's ``kv pool``
    check is a PROBLEM naming the panel, both pools and the concurrency that fits."""
    monkeypatch.setattr(preflight, "gpus_check", lambda tp: f"{tp} visible (test stand-in)")
    plan = sb.load_plan(_params(tmp_path, config=QWEN3_8B))
    found = {c.name: c for c in preflight.doctor(plan, outputs=tmp_path / "out")}
    check = found["kv pool"]
    assert not check.ok and check.what == "kv pool"
    assert "context 25600 + 256 out × concurrency 16 = 413,696 tokens" in check.detail
    assert "~350,070 for auto: 13 fit" in check.detail
    assert "~293,832 for dflash-b16: 11 fit" in check.detail
    assert "concurrency_cap: {25600: 11}" in check.detail
    assert "3072" not in check.detail.split("tokens in flight")[0]  # the short context fits
    with pytest.raises(PreflightError, match="kv pool"):
        preflight.require(plan, outputs=tmp_path / "out")
    assert "KV pool: PROBLEM" in PlanPreview(plan).text()


def test_a_concurrency_cap_at_the_long_context_fits_and_says_what_it_measures(
        tmp_path: Path) -> None:
    plan = sb.load_plan(_params(tmp_path, concurrency="[1, 4, 16]",
                                extra="concurrency_cap: {25600: 8}\n"))
    levels = {(c.context, c.concurrency) for c in plan.cells}
    assert levels == {(3072, 1), (3072, 4), (3072, 16), (25600, 1), (25600, 4), (25600, 8)}
    assert "(at 25600: [1, 4, 8])" in repr(plan)
    said = kvpool.kv_check(plan)
    assert "~350,070 tokens for auto" in said and "~293,832 tokens for dflash-b16" in said
    assert "at most 48 running" in said  # SGLang's cap under speculation
    assert "KV pool: every panel fits" in PlanPreview(plan).text()


@pytest.mark.parametrize("cap", ["{25600: 0}", "{-1: 8}", "{25600: many}", "[8]"])
def test_a_bad_concurrency_cap_is_refused_naming_it(tmp_path: Path, cap: str) -> None:
    with pytest.raises(ParamsError, match="concurrency_cap"):
        sb.load_plan(_params(tmp_path, extra=f"concurrency_cap: {cap}\n"))


def test_a_cap_at_a_context_the_plan_does_not_measure_caps_nothing(tmp_path: Path) -> None:
    """A file that extends one with a cap may narrow its contexts (the emulator's tp1 plan)."""
    plan = sb.load_plan(_params(tmp_path, contexts="[3072]", extra="concurrency_cap: {25600: 8}\n"))
    assert {c.concurrency for c in plan.cells} == {1, 16} and "(at 25600" not in repr(plan)


def test_speculation_caps_running_requests_at_48(tmp_path: Path) -> None:
    """SGLang runs at most 48 requests at once under speculation (speculative_hook.py:438-446):
    a c64 panel of a short context fits the pool but not the cap."""
    plan = sb.load_plan(_params(tmp_path, concurrency="[1, 64]", contexts="[512]"))
    with pytest.raises(PreflightError) as caught:
        kvpool.kv_check(plan)
    assert "dflash-b16: 48 fit (at most 48 running)" in str(caught.value)
    assert "for auto" not in str(caught.value)  # its pool holds 64 × 768 tokens, and no cap


def test_the_server_pool_after_start_skips_a_cell_it_cannot_hold() -> None:
    assert kv_guard(prompt_tokens=100, output_tokens=20, concurrency=4, kv_tokens=480) is None
    assert kv_guard(prompt_tokens=100, output_tokens=20, concurrency=4, kv_tokens=None) is None
    verdict = kv_guard(prompt_tokens=100, output_tokens=20, concurrency=4, kv_tokens=400)
    assert verdict is not None and verdict.status == "skipped" and not verdict.by_design
    assert verdict.codes == {"kv_pool_too_small"}
    assert "holds 400 tokens, the cell needs 4 × (100 + 20) = 480: at most 3" in str(
        verdict.reasons[0])


def test_the_plans_estimate_is_the_emulators_pool(tmp_path: Path) -> None:
    """The doctor's estimate of a plan (the model and drafter read from their folders) and the
    GPU emulator's pool (its own figures, tests/support/gpu_figures.py) are one computation."""
    from gpu_model import drafter_share, hardware

    plan = sb.load_plan(_params(tmp_path, config=QWEN3_8B, extra="concurrency_cap: {25600: 8}\n"))
    pools = {labels[0]: pool for pool, labels in kvpool.plan_pools(plan).items()}
    hw = hardware("H100", "Qwen3-8B", 1)
    assert isinstance(pools["auto"], kvpool.PoolEstimate)
    assert isinstance(pools["dflash-b16"], kvpool.PoolEstimate)
    assert pools["auto"].tokens == hw.pool_tokens(0.85)
    assert pools["dflash-b16"].tokens == hw.pool_tokens(0.85, drafter_share(hw.model))
    assert pools["auto"].running_cap is None and pools["dflash-b16"].running_cap == 48


def test_an_open_loop_cell_is_measured_its_server_queueing_what_it_cannot_hold() -> None:
    """A rate profile's cells are uncapped by design (docs/params.md): the guard leaves them."""
    assert kv_guard(prompt_tokens=100, output_tokens=20, concurrency=4, kv_tokens=400,
                    closed=False) is None
