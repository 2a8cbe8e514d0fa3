"""Every shipped params file, end to end on stand-ins (issue 32): each with its launcher swapped
for a stand-in that speaks its engine's protocol (llama.cpp: tests/support/fake_server.py; SGLang and
vLLM: tests/support/protocol_servers.py, which take the engine's own flags), its model a folder, and a
short plan (one load point, short outputs, two requests a cell, two rounds at most in a budget
the time model says they fit; its workloads and contexts as shipped). The dry run, the doctor and a real run
must all pass, and the run must refuse nothing once a server started: every cell ``ok`` or
skipped by design, no exception.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from fakeparams import FAKE, LENIENT_HOST
from ports import free_port

import specbench_lib as sb
from specbench_lib.sweep import preflight

ROOT = Path(__file__).resolve().parents[2]
PROTOCOL = ROOT / "tests" / "support" / "protocol_servers.py"
SHIPPED = sorted(p.name for p in (ROOT / "params").glob("*.yaml"))


def _engine(kind: str) -> str:
    """The engine keys that swap the shipped launcher for its stand-in."""
    if kind == "llamacpp":  # llama.cpp's own flags, then its spec flags, to the stand-in
        argv = ["{binary}", str(FAKE), "--port", "{port}", "{spec_args}"]
        return f"  argv_template: {json.dumps(argv)}\n"
    if kind == "vllm":
        argv = ["{binary}", str(PROTOCOL), "vllm", "--port", "{port}", "--max-model-len",
                "{context}", "{spec_args}"]
        return f"  argv_template: {json.dumps(argv)}\n"
    # an H100's KV pool, sized as SGLang sizes it from the model's config.json, the drafter,
    # --tp-size and --mem-fraction-static (the doctor's estimate, sweep/kvpool.py): the shipped
    # plans must fit it, or their cells would be skipped after start (kv_pool_too_small)
    pool = [str(PROTOCOL), "sglang", "--pool-of-gpu", "H100"]
    return f"  launcher: {json.dumps(pool)}\n  tokenizer: server\n"


# Qwen/Qwen3-8B's config.json, the keys the KV pool is sized from (the shipped GPU plans' model)
SHAPES = {"Qwen3-8B": {"num_hidden_layers": 36, "num_attention_heads": 32,
                       "num_key_value_heads": 8, "head_dim": 128, "hidden_size": 4096,
                       "torch_dtype": "bfloat16"}}


def standin_params(name: str, tmp: Path) -> Path:
    shipped = ROOT / "params" / name
    engine = sb.load_plan(shipped).params.engine
    kind = engine.kind
    # the stand-ins load nothing: a model folder with a file in it (an SGLang model's its
    # config.json's shape, under its own name; its drafter a folder without one: assumed size)
    named = kind == "sglang" and engine.model is not None
    model = tmp / (Path(engine.model).name if named and engine.model else "model")
    model.mkdir(exist_ok=True)
    (model / "config.json").write_text(json.dumps(SHAPES.get(model.name, {})))
    draft = tmp / (Path(engine.draft_model).name if named and engine.draft_model else "model")
    draft.mkdir(exist_ok=True)
    (draft / "README").write_text("a stand-in drafter: no weights, no config.json")
    # the model's chat template (workloads with template: chat; SGLang renders it here), ChatML
    # as the stand-ins' /apply-template and /tokenize render it
    template = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}"
                "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n"
                "{% endif %}")
    (model / "tokenizer_config.json").write_text(json.dumps({"chat_template": template}))
    path = tmp / f"standin-{name}"
    path.write_text(f"""extends: {shipped}
engine:
  binary: {sys.executable}
  model: {model}
  model_cache: null
  draft_model: {draft}
  port: {free_port()}
  ready_timeout_s: 30
{_engine(kind)}concurrency: [1]
output_tokens: 16
warmup_output_tokens: 4
requests_per_cell: 2
requests_scale: fixed
warmup_requests: 1
request_rate: null
time_budget_s: 48h
max_rounds: 2
request_timeout_s: 30
{LENIENT_HOST}""")
    return path


# Before issue 30's prompt planning, tp1/tp4/tp8 were refused once their first server started
# ("workload 'code': the 164 documents of humaneval ran out at prompt 8 of the plan's 33"); the
# prompt book planned by server lifetime feeds them now, and this test says so for every file.
@pytest.mark.parametrize("name", SHIPPED)
def test_a_shipped_params_file_runs_on_stand_ins_refusing_nothing_after_a_server_started(
        name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(preflight, "gpus_check", lambda tp: f"{tp} visible (test stand-in)")
    plan = sb.load_plan(standin_params(name, tmp_path))
    outputs = tmp_path / "out"
    preview = sb.run_sweep(plan, outputs=outputs, dry_run=True, progress=False)
    assert not isinstance(preview, sb.SweepResult)
    failed = [c for c in preflight.doctor(plan, outputs=outputs) if not c.ok]
    assert not failed, failed
    result = sb.run_sweep(plan, outputs=outputs, progress=False)
    assert isinstance(result, sb.SweepResult)
    refused = [(c.cell_id, c.verdict.reasons) for c in result.cells
               if not (c.verdict.ok or c.verdict.by_design)]
    assert not refused, refused
    configs = {s.series for s in plan.cells}
    assert {c.spec.series for c in result.cells if c.verdict.ok} == configs
