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
    # a pool of a GPU node's size (4M tokens): the stand-in's own (4 contexts) is a small GPU's,
    # which holds no c16 cell of a long context (concurrency_not_held, tests/servers)
    pool = [str(PROTOCOL), "sglang", "--max-total-tokens", "4000000"]
    return f"  launcher: {json.dumps(pool)}\n  tokenizer: server\n"


def standin_params(name: str, tmp: Path) -> Path:
    shipped = ROOT / "params" / name
    kind = sb.load_plan(shipped).params.engine.kind
    model = tmp / "model"  # the stand-ins load nothing: a model folder with a file in it
    model.mkdir(exist_ok=True)
    (model / "config.json").write_text("{}")
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
  draft_model: {model}
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
    monkeypatch.setattr(preflight, "_gpus", lambda tp: f"{tp} visible (test stand-in)")
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
