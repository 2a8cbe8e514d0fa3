"""Cells that do not remember each other (issue 20): fresh prompts per cell and repeat, the same
prompts in every config of a panel whatever the order of the params' lists, a seeded cell order,
the server's history as a fact, the ``seen_prompt`` rule, and each adapter's isolation choice.
The confound is real: ``tests/support/fake_server.py --mode learns`` remembers every prompt's 12-grams
and drafts what it has seen, as llama.cpp's ngram-mod does."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cellfactory import make_cell, not_ok
from fakeparams import fake_argv
from paramsfiles import DROP, fake_plan, write_params
from ports import free_port

import specbench_lib as sb
from specbench_lib.analysis.analyse import analyse
from specbench_lib.core.errors import EngineError, PreflightError
from specbench_lib.model.cellspec import ServerConfig
from specbench_lib.model.sections import EngineParams
from specbench_lib.model.served import PromptRecord, ServedBefore
from specbench_lib.prompts.promptbook import PromptBook
from specbench_lib.prompts.workload import build_prompts
from specbench_lib.servers.engines import get_adapter
from specbench_lib.sweep import preflight
from specbench_lib.sweep.serversweep import cell_order

# this module judges what the server remembers, not the client host (a busy 2-core host can
# coalesce reads of a fast stream): both host rules off
HOST = {"max_coalesced_fraction": 1.0, "max_coalesced_first_fraction": 1.0}


def params(tmp_path: Path, *, name: str = "iso.yaml", **overrides: Any) -> Path:
    ngram = {"name": "ngram", "method": "ngram", "budgets": [4],
             "spec_args": ["--budget", "{budget}"]}
    plan = fake_plan(free_port(), argv=fake_argv("--mode", "learns", interval=0.01),
                     engine={"ready_timeout_s": 10}, phase="iso",
                     configs=[{"name": "auto", "method": "auto"}, ngram], contexts=[48],
                     concurrency=[1, 2, 3], warmup_requests=1, **HOST)
    return write_params(tmp_path, plan, name=name, **overrides)


def words(text: str) -> list[int]:
    return [sum(map(ord, w)) % 30000 for w in text.split()]


def test_every_prompt_has_documents_no_other_prompt_of_the_run_used(tmp_path: Path) -> None:
    plan = sb.load_plan(params(tmp_path, repeats=2))
    book = PromptBook(plan.params, plan.cells)
    prompts = [*book.warmup(words)]
    keys = {}
    for cell in plan.cells:
        keys.setdefault((cell.concurrency, cell.repeat), book.for_cell(cell, words))
    for found in keys.values():
        prompts += found
    docs = [d for p in prompts for d in p.sources]
    assert len(docs) == len(set(docs))  # no document in two prompts, the warmup's included
    assert len({p.sha for p in prompts}) == len(prompts)
    # requests_scale per_concurrency: c3 sends 3 x requests_per_cell
    assert [len(keys[(c, 0)]) for c in (1, 2, 3)] == [2, 4, 6]
    # every config of a panel sends the same prompts (paired comparisons)
    auto, ngram = (next(c for c in plan.cells if c.config == label and c.concurrency == 2)
                   for label in ("auto", "ngram-b4"))
    assert [p.sha for p in book.for_cell(auto, words)] == [p.sha for p in book.for_cell(ngram, words)]


def test_the_order_of_the_load_points_does_not_change_a_cells_prompts(tmp_path: Path) -> None:
    up = sb.load_plan(params(tmp_path))
    down = sb.load_plan(params(tmp_path, concurrency=[3, 2, 1], name="down.yaml"))
    a, b = PromptBook(up.params, up.cells), PromptBook(down.params, down.cells)
    for cell in up.cells:
        other = next(c for c in down.cells if c.cell_id == cell.cell_id)
        assert [p.sha for p in a.for_cell(cell, words)] == [p.sha for p in b.for_cell(other, words)]


def test_a_plan_too_large_for_its_dataset_is_refused_with_the_way_out(tmp_path: Path) -> None:
    plan = sb.load_plan(params(tmp_path, repeats=40, name="big.yaml"))
    with pytest.raises(PreflightError, match="ran out .*prompt_reuse: true"):
        PromptBook(plan.params, plan.cells).for_cell(plan.cells[0], words)


def test_prompt_reuse_shares_prompts_between_load_points(tmp_path: Path) -> None:
    plan = sb.load_plan(params(tmp_path, prompt_reuse=True, requests_scale="fixed"))
    book = PromptBook(plan.params, plan.cells)
    c1, c2 = (next(c for c in plan.cells if c.config == "auto" and c.concurrency == k)
              for k in (1, 2))
    assert [p.sha for p in book.for_cell(c1, words)] == [p.sha for p in book.for_cell(c2, words)]


def test_cell_order_is_drawn_from_the_seed_and_keeps_profile_points_last(tmp_path: Path) -> None:
    plan = sb.load_plan(params(tmp_path, concurrency=[1, 2, 3, 4, 5, 6],
                                     request_rate={"profile": 2}))
    cells = plan.cells_for(plan.servers[0])
    first = cell_order(cells, plan.params, "auto:0")
    assert first == cell_order(cells, plan.params, "auto:0")  # seeded: the same every time
    assert [c.profile_point for c in first[-2:]] == [1, 2]
    fixed = plan.params.model_copy(update={"cell_order": "fixed"})
    assert cell_order(cells, fixed, "auto:0") == cells


def test_a_cell_whose_server_had_seen_its_prompts_is_invalid() -> None:
    cell = make_cell("ngram-b4", "ngram", 4, prompt_shas=["a", "b"], outputs=[[1], [2]])
    prompts = (PromptRecord("a", 4, ("HumanEval/1",)), PromptRecord("b", 4, ("HumanEval/2",)))
    fresh = ServedBefore(("warmup",), 1, ("w",), ("HumanEval/9",))
    same = ServedBefore(("warmup", "c1"), 3, ("w", "a"), ("HumanEval/9", "HumanEval/1"))
    overlap = ServedBefore(("warmup",), 1, ("w",), ("HumanEval/2",))
    assert analyse(with_history(cell, prompts, fresh)).verdict.ok
    verdict = analyse(with_history(cell, prompts, same)).verdict
    assert verdict.status == "invalid" and "seen_prompt" in verdict.codes
    assert "1 of 2 prompts were answered before" in str(verdict.reasons[-1])
    assert "seen_prompt" in analyse(with_history(cell, prompts, overlap)).verdict.codes
    allowed = with_history(cell, prompts, same)
    allowed = allowed.__class__(**{**allowed.__dict__, "judge": allowed.judge.__class__(
        **{**allowed.judge.__dict__, "thresholds": {"prompt_reuse": True}})})
    assert analyse(allowed).verdict.ok  # a cache-warm study asked for it


def with_history(cell, prompts, served):  # type: ignore[no-untyped-def]
    from dataclasses import replace

    return replace(cell, prompts=prompts, facts=replace(cell.facts, served_before=served))


def test_each_adapter_says_how_its_cells_are_kept_apart() -> None:
    def server(method: str, budget: int | None = 8) -> ServerConfig:
        return ServerConfig(method, method, budget, {}, None, ())  # type: ignore[arg-type]

    llama = get_adapter(EngineParams(kind="llamacpp"))
    argv = llama.launch(server("ngram"), EngineParams(kind="llamacpp"), parallel=1,
                        model=Path("m.gguf"), binary=Path("llama-server")).argv
    assert llama.isolation(server("ngram"), argv).mode == "restart"
    assert "ngram-mod" in llama.isolation(server("ngram"), argv).why
    assert llama.isolation(server("auto", None), ["llama-server"]).mode == "none"
    assert llama.isolation(server("ngram"), ["x", "--spec-type", "ngram-simple"]).mode == "none"
    pinned = get_adapter(EngineParams(kind="llamacpp", isolation="none"))
    assert pinned.isolation(server("ngram"), argv).mode == "none"
    vllm = get_adapter(EngineParams(kind="vllm", binary="vllm", model="m"))
    assert vllm.isolation(server("ngram"), ["vllm", "--speculative-config", "{}"]).mode == "none"


def test_fresh_prompts_keep_a_learning_server_from_feeding_its_cells(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The known truth: a server that drafts what it has seen accepts nothing on fresh prompts.
    When the prompts repeat (the old design, injected here as a regression of the prompt draw),
    the later cells read the earlier ones' prompts: the rule fires on them, and their acceptance
    shows why."""
    fresh = sb.run_sweep(sb.load_plan(params(tmp_path)), outputs=tmp_path / "a", progress=False)
    assert fresh.counts()["ok"] == 6, not_ok(fresh)
    for cell in fresh.cells:
        assert all(r.final and r.final.accepted_tokens == 0 for r in cell.measured)
        assert cell.facts.served_before is not None
        assert cell.facts.served_before.cells[0] == "warmup"
    manifest = fresh.manifest["servers"]["ngram-b4"]
    assert manifest["isolation"]["mode"] == "none" and len(manifest["order"]) == 3

    def shared(self: PromptBook, cell, tokenize, render=None):  # type: ignore[no-untyped-def]
        return build_prompts(self.params.workloads[0], n=2, tokens=cell.context, seed=0,
                             tokenize=tokenize)

    monkeypatch.setattr(PromptBook, "for_cell", shared)
    for folder, extra, later_ok in (("b", {}, False), ("c", {"prompt_reuse": True}, True)):
        run = sb.run_sweep(sb.load_plan(params(tmp_path, requests_scale="fixed", **extra,
                                               name=f"{folder}.yaml")),
                           outputs=tmp_path / folder, progress=False)
        cells = {c.cell_id: c for c in run.cells}
        order = run.manifest["servers"]["ngram-b4"]["order"]
        first, later = cells[order[0]], [cells[i] for i in order[1:]]
        assert first.verdict.ok, first.verdict  # its prompts were new to the server
        assert all(r.final and r.final.accepted_tokens == 0 for r in first.measured)
        # the server accepted drafts on exactly the prompts it had seen...
        assert all(r.final and r.final.accepted_tokens > 0 for c in later for r in c.measured)
        # ...so those cells are invalid, unless the plan asked for a warm server
        assert all(c.verdict.ok == later_ok for c in later), [c.verdict for c in later]
        if not later_ok:
            assert all("seen_prompt" in c.verdict.codes for c in later)


def test_isolation_restart_gives_every_cell_a_fresh_server(tmp_path: Path) -> None:
    path = params(tmp_path, prompt_reuse=True, requests_scale="fixed",
                  engine={"isolation": "restart"}, name="restart.yaml")
    result = sb.run_sweep(sb.load_plan(path), outputs=tmp_path / "c", progress=False)
    assert result.counts()["ok"] == 6, not_ok(result)
    assert result.manifest["servers"]["ngram-b4"]["starts"] == 3
    # each cell on its own server: shared prompts, yet nothing learned before the cell
    for cell in result.cells:
        assert cell.facts.served_before is not None and cell.facts.served_before.cells == ("warmup",)
        assert all(r.final and r.final.accepted_tokens == 0 for r in cell.measured)


def sglang_params(tmp_path: Path, mode: str) -> Path:
    program = [str(Path(__file__).resolve().parents[1] / "support" / "protocol_servers.py"), "sglang"]
    argv = json.dumps(["{binary}", *program, "--port", "{port}", "--mode", mode, "{spec_args}"])
    ngram = {"name": "ngram", "method": "ngram", "budgets": [4],
             "spec_args": ["--speculative-algorithm", "NGRAM", "--budget", "{budget}"]}
    plan = fake_plan(free_port(), argv=argv, phase="isosglang",
                     engine={"ready_timeout_s": 10, "api": "sglang", "model": program[0]},
                     configs=[{"name": "auto", "method": "auto"}, ngram], contexts=[32],
                     concurrency=[1, 2], warmup_requests=DROP, **HOST)
    return write_params(tmp_path, plan, name=f"sglang-{mode}.yaml")


def test_sglang_ngram_cells_are_kept_apart_by_flush_cache(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """SGLang's NGRAM keeps one n-gram corpus for all requests; /flush_cache resets it (read in
    SGLang's source, tests/PROTOCOLS.md): the sweep flushes before every cell, and a server that
    refuses the flush leaves the config invalid with its words, not measured."""
    monkeypatch.setattr(preflight, "gpus_check", lambda tp: f"{tp} visible (test stand-in)")
    result = sb.run_sweep(sb.load_plan(sglang_params(tmp_path, "ok")), outputs=tmp_path / "s",
                          progress=False)
    assert result.counts()["ok"] == 4, not_ok(result)
    servers = result.manifest["servers"]
    assert servers["ngram-b4"]["isolation"]["mode"] == "flush"
    assert servers["auto"]["isolation"]["mode"] == "none"
    log = (result.run_dir / servers["ngram-b4"]["log"]).read_text()
    assert log.count("Cache flushed successfully!") == 2  # one per cell
    for cell in result.cells:
        if cell.spec.config == "ngram-b4":
            assert cell.facts.served_before.cells == ("flush",)
    refused = sb.run_sweep(sb.load_plan(sglang_params(tmp_path, "no_flush")),
                           outputs=tmp_path / "t", progress=False)
    for cell in refused.cells:
        if cell.spec.config == "ngram-b4":
            assert cell.status == "invalid" and cell.verdict.reasons[0].code == "bad_answer"
            assert "pending requests" in str(cell.verdict.reasons[0])


def test_a_server_that_tokenizes_differently_is_refused(tmp_path: Path) -> None:
    plan = sb.load_plan(params(tmp_path))
    book = PromptBook(plan.params, plan.cells)
    book.check(words, url="http://a")  # the first server builds the prompts
    book.check(words, url="http://b")  # the same tokenizer: fine
    with pytest.raises(EngineError, match="tokenizes differently"):
        book.check(lambda text: [1, *words(text)], url="http://c")


@pytest.mark.parametrize(("status", "words", "not_words"), [
    (404, "the server has no such endpoint: set engine.isolation: restart", "pending"),
    (400, "it refuses while requests are pending", "no such endpoint"),
])
def test_a_refused_flush_says_why_by_its_status(status: int, words: str, not_words: str) -> None:
    """Issue 42: a ``/flush_cache`` 404 was explained as "it refuses while requests are
    pending" (SGLang's 400)."""
    import httpx

    adapter = get_adapter(EngineParams(kind="sglang", binary="x", model="m"))
    answer = httpx.MockTransport(lambda request: httpx.Response(status, text="nope"))
    with httpx.Client(transport=answer, base_url="http://127.0.0.1:1") as client:
        with pytest.raises(EngineError) as err:
            adapter.reset(client)
    assert words in str(err.value) and not_words not in str(err.value)
    assert err.value.status == status
