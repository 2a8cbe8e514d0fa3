"""Chat-templated prompts (issue 30): ``template: chat`` sends each document as the user's turn of
the model's own template, with the generation prompt; the prompt stays exact token ids, the
template's tokens counted in its planned length. Each engine's ``chat_render`` is checked on its
protocol stand-in (llama.cpp ``/apply-template``, vLLM ``/tokenize`` with ``messages``, SGLang
the model's ``tokenizer_config.json`` rendered here), and a sweep runs chat prompts end to end."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from cellfactory import not_ok
from fake_server import FakeLlamaServer, chatml, words
from fakeparams import fake_argv
from paramsfiles import fake_plan, write_params
from ports import free_port
from protocol_servers import sglang_server, vllm_server

import specbench_lib as sb
from specbench_lib.core.errors import PreflightError
from specbench_lib.model.cellspec import CellSpec
from specbench_lib.model.params import SweepParams
from specbench_lib.model.sections import EngineParams
from specbench_lib.model.workloadparams import WorkloadParams
from specbench_lib.prompts.chat import SENTINEL, chat_frame, user_turn
from specbench_lib.prompts.corpora import Corpora
from specbench_lib.prompts.promptbook import PromptBook
from specbench_lib.prompts.workload import build_prompts
from specbench_lib.servers.engines import get_adapter


def tokenize(text: str) -> list[int]:
    """The stand-ins' tokenizer: a word's id from its letters, special tokens on their own."""
    return [1 + sum(map(ord, w)) % 30000 for w in words(text)]


def render(messages: list[dict[str, str]]) -> list[int]:
    return tokenize(chatml(messages))


def test_the_frame_is_the_templates_tokens_around_the_users_content() -> None:
    frame = chat_frame(render, tokenize)
    assert list(frame.prefix) == tokenize("<|im_start|>user\n")
    assert list(frame.suffix) == tokenize("<|im_end|>\n<|im_start|>assistant\n")
    content = list(range(100, 200))
    prompt = frame.wrap(content, 40)
    assert len(prompt) == 40 and prompt[:len(frame.prefix)] == list(frame.prefix)
    assert prompt[-len(frame.suffix):] == list(frame.suffix)
    assert prompt[len(frame.prefix):-len(frame.suffix)] == content[:40 - frame.size]
    with pytest.raises(PreflightError, match="no room"):
        frame.wrap(content, frame.size)


def test_a_template_that_merges_the_content_is_refused() -> None:
    def merging(messages: list[dict[str, str]]) -> list[int]:  # the content changed by it
        return tokenize(f"<|im_start|>user {messages[0]['content'].upper()}<|im_end|>")
    with pytest.raises(PreflightError, match="template: raw"):
        chat_frame(merging, tokenize)


def test_chat_prompts_are_exact_and_carry_the_raw_prompts_document_ids() -> None:
    chat = WorkloadParams(name="chat", source="sharegpt", template="chat")
    raw = WorkloadParams(name="chat", source="sharegpt")
    framed = Corpora(0, tokenize, render=render).prompt(chat, 96, 0, 1)
    plain = Corpora(0, tokenize).prompt(raw, 96, 0, 1)
    frame = chat_frame(render, tokenize)
    assert len(framed.tokens) == 96 and framed.sources[0] == plain.sources[0]
    assert framed.tokens[len(frame.prefix):-len(frame.suffix)] == plain.tokens[:96 - frame.size]
    # the cache-warm path (prompt_reuse) wraps its prompts the same way
    [reused] = build_prompts(chat, n=1, tokens=96, seed=0, tokenize=tokenize, render=render)
    assert len(reused.tokens) == 96 and reused.tokens[:len(frame.prefix)] == list(frame.prefix)
    with pytest.raises(PreflightError, match="no chat render"):
        Corpora(0, tokenize).prompt(chat, 96, 0, 1)


def test_the_book_builds_chat_prompts_with_the_render_it_is_given() -> None:
    params = SweepParams.model_validate({
        "phase": "chat", "configs": [{"name": "auto", "method": "auto"}],
        "workloads": [{"name": "code", "source": "humaneval", "template": "chat"}],
        "contexts": [64], "concurrency": [1], "requests_per_cell": 2})
    cell = CellSpec("auto", "auto", "auto", None, "code", 64, 1, output_tokens=128)
    book = PromptBook(params, [cell])
    prompts = book.for_cell(cell, tokenize, render)
    assert [len(p.tokens) for p in prompts] == [64, 64]
    assert all(p.tokens[:2] == tokenize("<|im_start|>user\n") for p in prompts)
    assert book.build(tokenize) == 3  # the dry run's count needs no server (warmup + 2)


def test_llamacpp_renders_with_apply_template_and_its_tokenizer() -> None:
    adapter = get_adapter(EngineParams())
    with FakeLlamaServer("ok") as server, httpx.Client(base_url=server.url) as client:
        ids = adapter.chat_render(client, user_turn(SENTINEL))
    assert ids == [t - 1 for t in render(user_turn(SENTINEL))]  # its ids start at 0


def test_vllm_renders_with_tokenize_messages() -> None:
    adapter = get_adapter(EngineParams(kind="vllm", binary="x", model="/models/Qwen3-8B"))
    with vllm_server() as server, httpx.Client(base_url=server.url) as client:
        ids = adapter.chat_render(client, user_turn("hello there"))
        [(path, body)] = [b for b in server.bodies if b[0] == "/tokenize"]
    assert ids == render(user_turn("hello there"))
    assert body["add_generation_prompt"] is True and body["messages"][0]["role"] == "user"


def test_sglang_renders_the_models_own_template_here(tmp_path: Path) -> None:
    template = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}"
                "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n"
                "{% endif %}")
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"chat_template": template}))
    adapter = get_adapter(EngineParams(kind="sglang", binary="x", model=str(tmp_path)))
    with sglang_server() as server, httpx.Client(base_url=server.url) as client:
        assert adapter.chat_render(client, user_turn("hello there")) == render(
            user_turn("hello there"))
        bare = get_adapter(EngineParams(kind="sglang", binary="x", model=str(tmp_path / "no")))
        with pytest.raises(PreflightError, match="no chat template"):
            bare.chat_render(client, user_turn("hello"))


def test_a_chat_eos_sampled_sweep_runs_on_the_fake_engine(tmp_path: Path) -> None:
    path = write_params(tmp_path, fake_plan(
        free_port(), argv=fake_argv(interval=0.002), phase="chat", engine={"ready_timeout_s": 10},
        workloads=[{"name": "chat", "source": "sharegpt", "template": "chat", "stop": "eos"}],
        contexts=[64], output_tokens=16, temperature=[0, 1], warmup_requests=1), name="chat.yaml")
    result = sb.run_sweep(sb.load_plan(path), outputs=tmp_path / "out", progress=False)
    assert result.counts()["ok"] == 2, not_ok(result)
    cells = {c.spec.temperature: c for c in result.cells}
    assert set(cells) == {0.0, 1.0} and cells[1.0].cell_id.endswith("__t1")
    assert all(p.tokens == 64 for c in cells.values() for p in c.prompts)
    assert cells[0.0].fingerprint != cells[1.0].fingerprint


def sglang_chat_params(tmp_path: Path, model: Path) -> Path:
    """An SGLang plan of one chat-template cell whose model folder is ``model``."""
    return write_params(tmp_path, "minimal", name="sglang.yaml", phase="chat",
                        engine={"kind": "sglang", "binary": str(tmp_path / "python"),
                                "model": str(model)},
                        workloads=[{"name": "chat", "source": "sharegpt", "template": "chat"}],
                        contexts=[256])


def test_the_doctor_finds_a_missing_sglang_template_before_any_server(tmp_path: Path) -> None:
    from specbench_lib.sweep import preflight

    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    path = sglang_chat_params(tmp_path, model)
    [found] = [c for c in preflight.doctor(sb.load_plan(path)) if c.name == "chat template"]
    assert not found.ok and "no chat template" in found.detail
    (model / "chat_template.jinja").write_text("{{ messages[0]['content'] }}")
    [found] = [c for c in preflight.doctor(sb.load_plan(path)) if c.name == "chat template"]
    assert found.ok and str(model) in found.detail


@pytest.mark.parametrize(("template", "words"), [
    ("{% for m in messages %}{{ m['content'] }{% endfor %}", "does not render"),
    ("{% if messages|length > 1 %}{{ raise_exception('Conversation roles must alternate "
     "user/assistant/user') }}{% endif %}{{ messages[0]['content'] }}", "roles must alternate"),
])
def test_the_doctor_renders_the_sglang_template_before_any_server(
        tmp_path: Path, template: str, words: str) -> None:
    """Issue 42: a template with a jinja syntax error, or one that raises on the conversations a
    sweep sends (here: on turn 2's), fails the doctor with the reason; before, the doctor only
    found the file and the plan was refused after a server had started."""
    from specbench_lib.sweep import preflight

    model = tmp_path / "model"
    model.mkdir()
    (model / "tokenizer_config.json").write_text(json.dumps({"chat_template": template}))
    path = sglang_chat_params(tmp_path, model)
    [found] = [c for c in preflight.doctor(sb.load_plan(path)) if c.name == "chat template"]
    assert not found.ok and words in found.detail and str(model) in found.detail
    assert "\n" not in found.detail and "template: raw" in found.detail
