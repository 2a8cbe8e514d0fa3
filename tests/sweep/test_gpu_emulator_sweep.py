"""The GPU emulator as an SGLang engine (issue 47 item 2): params/tp1.yaml with only its binary,
launcher and model paths changed (tests/support/gpu_params.py) runs through the sweep and the
project's own SGLang adapter, every cell ok, the adapter's counters the emulator's truth, and
``/server_info`` as SGLang reports it (the resolved speculative flags, the KV pool)."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from fakeparams import LENIENT_HOST
from gpu_emulator import emulated_config
from gpu_params import emulator_engine
from ports import free_port

import specbench_lib as sb
from specbench_lib.servers.engines.sglang import SGLangAdapter
from specbench_lib.sweep import preflight

ROOT = Path(__file__).resolve().parents[2]


def _plan(tmp: Path) -> Path:
    path = tmp / "tp1-emulated.yaml"
    path.write_text(f"""extends: {ROOT / "params" / "tp1.yaml"}
{emulator_engine(tmp, free_port(), scale=100, seed=1, start_s=120)}  ready_timeout_s: 30
configs:
  - {{name: auto, method: auto}}
  - {{name: dflash, method: linear, budgets: [16]}}
  - {{name: ddtree, method: tree, budgets: [8]}}
contexts: [3072]
concurrency: [1]
temperature: [0]
output_tokens: 96
warmup_output_tokens: 4
requests_per_cell: 3
requests_scale: fixed
warmup_requests: 1
request_rate: null
time_budget_s: null  # a fixed plan: one round of these cells, whatever the time model says
request_timeout_s: 30
prompt_reuse: true  # the emulator learns nothing across requests; HumanEval's 164 documents
stages: []  # the phase's axes as one plan, not its design's first stage (docs/stages.md)
{LENIENT_HOST}""")
    return path


def test_a_tp1_plan_runs_on_the_emulator_through_the_sglang_adapter(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(preflight, "gpus_check", lambda tp: f"{tp} visible (emulated)")
    plan = sb.load_plan(_plan(tmp_path))
    result = sb.run_sweep(plan, outputs=tmp_path / "out", progress=False)
    assert isinstance(result, sb.SweepResult)
    measured = [c for c in result.cells if not c.verdict.by_design]
    assert measured and all(c.verdict.ok for c in measured), [
        (c.cell_id, c.verdict.reasons) for c in measured if not c.verdict.ok]
    tau: dict[tuple[str, str], float] = {}
    for cell in measured:
        config = emulated_config(list(cell.server_argv))
        finals = [r.final for r in cell.measured if r.final]
        tokens = sum(f.completion_tokens or 0 for f in finals)
        if config.method == "auto":
            assert all(f.verify_steps is None for f in finals)
            continue
        # the adapter's verify steps: spec_verify_ct + the prefill's step (sglang.py _final_stats)
        tau[(config.name, cell.spec.workload)] = tokens / sum(f.verify_steps or 0 for f in finals)
    assert {name for name, _ in tau} == {"dflash-b16", "ddtree-b8"}  # the fork's template: block 9
    # HumanEval prompts draft at code's acceptance, ShareGPT's at chat's (DFlash's τ 8.02 vs 3.12)
    assert tau[("dflash-b16", "code")] > 1.5 * tau[("dflash-b16", "chat")] > 3.0


def test_server_info_says_what_sglang_resolved_and_the_pool_it_holds(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    from gpu_emulator import EMULATOR_FILE, wait_ready

    port = free_port()
    argv = [sys.executable, str(EMULATOR_FILE), "--model-path", str(tmp_path / "Qwen3-8B"),
            "--port", str(port), "--mem-fraction-static", "0.85",
            "--speculative-algorithm", "DFLASH", "--speculative-draft-model-path", "/d",
            "--speculative-dflash-enable-ddtree", "--speculative-num-draft-tokens", "17"]
    env = {**os.environ, "SPECBENCH_EMU_TIME_SCALE": "1000"}  # the start's 180 s in 0.18 s
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, env=env)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_ready(url, 20)
        with httpx.Client(base_url=url, timeout=10) as client:
            info = SGLangAdapter().server_info(client)
            flush = client.post("/flush_cache")
        assert info.raw["speculative_num_draft_tokens"] == 17 and info.raw["max_running_requests"] == 48
        assert info.raw["speculative_dflash_enable_ddtree"] is True
        assert info.raw["max_total_num_tokens"] == info.raw["internal_states"][0]["max_total_num_tokens"]
        assert 280_000 < info.raw["max_total_num_tokens"] < 300_000  # the drafter's share taken
        state = info.raw["internal_states"][0]["emulator"]
        assert (state["method"], state["budget"], state["block"]) == ("tree", 16, 17)
        assert state["time_scale"] == 1000
        assert flush.status_code == 200
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=10)
    assert "The server is fired up and ready to roll!" in out
    assert json.dumps(argv)  # the argv a params file would give it
