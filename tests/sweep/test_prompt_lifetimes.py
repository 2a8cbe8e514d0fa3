"""Prompts enough for any plan (issue 30): fresh prompts are needed only within one server's
memory. A plan whose corpus cannot feed fresh prompts for a whole server's life gets a reset
before every cell (isolation auto), each cell's prompts fresh among themselves and the same at
every load point; a plan that still needs more text than its corpus holds is refused in the
dry run, the doctor and the sweep, before any server starts, with the numbers and the fixes."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from cellfactory import not_ok
from fakeparams import fake_argv
from paramsfiles import fake_plan, write_params
from ports import free_port

import specbench_lib as sb
from specbench_lib import cli
from specbench_lib.core.errors import PreflightError
from specbench_lib.prompts.promptbook import PromptBook
from specbench_lib.servers.engines import get_adapter
from specbench_lib.sweep import preflight
from specbench_lib.sweep.lifetimes import launch_argvs, plan_lifetimes

ROOT = Path(__file__).resolve().parents[2]
HOST = {"max_coalesced_fraction": 1.0, "max_coalesced_first_fraction": 1.0}


def params(tmp_path: Path, *, name: str = "plan.yaml", context: int = 96,
           budgets: tuple[int, ...] = (2, 4, 8, 16), **overrides: Any) -> Path:
    """The issue's 80-cell stand-in plan: 5 configs x 4 load points x 4 repeats at context 96,
    241 prompts (c8 sends 8 x 4), more than HumanEval's 164 problems."""
    ngram = {"name": "ngram", "method": "ngram", "budgets": list(budgets),
             "spec_args": ["--budget", "{budget}"]}
    plan = fake_plan(free_port(), argv=fake_argv("--mode", "learns", interval=0.002),
                     engine={"ready_timeout_s": 10, "context": 8192}, phase="lifetimes",
                     configs=[{"name": "auto", "method": "auto"}, ngram], contexts=[context],
                     concurrency=[1, 2, 4, 8], repeats=4, requests_per_cell=4, warmup_requests=1,
                     **HOST)
    return write_params(tmp_path, plan, name=name, **overrides)


def words(text: str) -> list[int]:
    return [sum(map(ord, w)) % 30000 for w in text.split()]


def lifetimes_of(plan: sb.Plan, argvs: dict[str, list[str]] | None = None):  # type: ignore[no-untyped-def]
    adapter = get_adapter(plan.params.engine)
    return plan_lifetimes(plan, adapter, argvs or launch_argvs(plan, adapter))


def test_the_80_cell_stand_in_plan_is_fed_by_forgetting_before_every_cell(tmp_path: Path) -> None:
    plan = sb.load_plan(params(tmp_path))
    assert len(plan.cells) == 80
    with pytest.raises(PreflightError, match=r"164 documents of humaneval ran out at prompt \d+ "
                                             r"of the plan's 241"):
        PromptBook(plan.params, plan.cells).for_cell(plan.cells[0], words)  # one server's life
    lifetimes = lifetimes_of(plan)
    assert lifetimes.per_cell and lifetimes.learns is None
    assert {i.mode for i in lifetimes.isolations.values()} == {"restart"}
    assert "cannot feed fresh prompts for a whole server's life" in lifetimes.isolations["auto"].why
    book = PromptBook(plan.params, plan.cells, lifetimes)
    warm = {d for p in book.warmup(words) for d in p.sources}
    by_key = {}
    for cell in plan.cells:
        prompts = book.for_cell(cell, words)
        docs = [d for p in prompts for d in p.sources]
        assert len(prompts) == 4 * cell.concurrency
        assert len(docs) == len(set(docs))  # fresh within the cell
        assert not warm & set(docs)  # a restarted server warms up right before its cell
        by_key.setdefault((cell.concurrency, cell.repeat), {})[cell.config] = [p.sha for p in prompts]
    # every config sends the same prompts, and the load points of a repeat are paired by prompt
    assert all(len({tuple(v) for v in configs.values()}) == 1 for configs in by_key.values())
    for repeat in range(4):
        c8 = by_key[(8, repeat)]["auto"]
        assert all(by_key[(c, repeat)]["auto"] == c8[:4 * c] for c in (1, 2, 4))
    assert by_key[(8, 0)]["auto"] != by_key[(8, 1)]["auto"]  # each repeat its own prompts


def test_a_cell_measured_again_gets_fresh_prompts_of_its_own(tmp_path: Path) -> None:
    plan = sb.load_plan(params(tmp_path))
    book = PromptBook(plan.params, plan.cells, lifetimes_of(plan))
    cell = next(c for c in plan.cells if c.concurrency == 8)
    first = book.for_cell(cell, words)
    again = book.retry(cell, 1, words)
    assert again is not None and len(again) == len(first)
    docs = [d for p in again for d in p.sources]
    assert len(docs) == len(set(docs))  # fresh within the cell
    assert not {p.sha for p in again} & {p.sha for p in first}
    assert [p.sha for p in book.retry(cell, 1, words) or []] == [p.sha for p in again]


def test_a_server_that_learns_from_text_needs_fresh_documents_within_a_cell(tmp_path: Path) -> None:
    plan = sb.load_plan(params(tmp_path, requests_per_cell=32, context=400, name="big.yaml"))
    argvs = {s.label: ["llama-server"] + (["--spec-type", "ngram-mod"] if s.method != "auto" else [])
             for s in plan.servers}
    with pytest.raises(PreflightError) as refused:
        lifetimes_of(plan, argvs)
    text = str(refused.value)
    assert "one cell's 256 prompts of 400 tokens need" in text and "documents of humaneval" in text
    assert "ngram-mod's n-gram pool" in text and "lower requests_per_cell to" in text
    # without a state that learns from text, prompts spread over the corpus instead
    assert lifetimes_of(plan, {label: ["llama-server"] for label in argvs}).per_cell


def test_an_infeasible_plan_is_refused_before_any_server_starts(tmp_path: Path) -> None:
    """isolation none keeps one server for all its cells: the dry run, the doctor and the sweep
    refuse the plan with the numbers and the fixes, and nothing is started."""
    plan = sb.load_plan(params(tmp_path, engine={"isolation": "none"}, name="none.yaml"))
    with pytest.raises(PreflightError, match="ran out at prompt .* of the plan's 241.*engine."
                                             "isolation: auto, flush or restart.*"
                                             r"\(engine.isolation: none\)"):
        sb.run_sweep(plan, dry_run=True)
    check = next(c for c in preflight.doctor(plan, outputs=tmp_path / "out") if c.name == "prompts")
    assert not check.ok and "164 documents of humaneval ran out" in check.detail
    with pytest.raises(PreflightError, match="prompts: .*ran out"):
        sb.run_sweep(plan, outputs=tmp_path / "out", progress=False)
    assert not (tmp_path / "out" / "runs").exists()  # no run, no server


def test_a_sweep_whose_corpus_is_short_restarts_before_every_cell_and_stays_clean(
        tmp_path: Path) -> None:
    """End to end on the fake server that drafts what it has seen (ngram-mod's confound): the
    plan needs 17 prompts of 1900 words for one server's life, HumanEval holds ~15k words, so
    every cell gets its own server; no cell sees text its server answered before."""
    path = params(tmp_path, requests_scale="fixed", requests_per_cell=2, concurrency=[1, 2],
                  context=1900, budgets=(4,), name="short.yaml")
    result = sb.run_sweep(sb.load_plan(path), outputs=tmp_path / "out", progress=False)
    assert result.counts()["ok"] == 16, not_ok(result)
    servers = result.manifest["servers"]  # a server entry per config and round of repeats
    for label in ("auto", "ngram-b4"):
        mine = [v for k, v in servers.items() if k.split(".")[0] == label]
        assert sum(s["starts"] for s in mine) == 8  # one server per cell
        assert all(s["isolation"]["mode"] == "restart" for s in mine)
        assert all("cannot feed fresh prompts" in s["isolation"]["why"] for s in mine)
    for cell in result.cells:
        assert cell.facts.served_before is not None
        assert cell.facts.served_before.cells == ("warmup",)
        assert all(r.final and r.final.accepted_tokens == 0 for r in cell.measured)


def standin(tmp_path: Path, phase: str) -> Path:
    """The shipped ``params/<phase>.yaml`` with its launcher pointed at the SGLang stand-in."""
    model = tmp_path / "model"
    model.mkdir(exist_ok=True)
    path = tmp_path / f"{phase}-standin.yaml"
    path.write_text(f"""extends: {ROOT / 'params' / f'{phase}.yaml'}
engine:
  binary: {sys.executable}
  launcher: [{ROOT / 'tests' / 'support' / 'protocol_servers.py'}, sglang]
  model: {model}
  model_cache: null
  draft_model: {model}
""")
    return path


def test_the_research_phases_dry_run_and_doctor_end_with_a_plan_that_can_be_fed(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # tp1's screen (c8 at 25600: the KV pool's concurrency_cap) needs 412 fewer long prompts than
    # c16 did: ShareGPT feeds its servers' whole lives; tp4's and tp8's longer contexts are fed
    # fresh within each cell, the server flushed between cells
    fed = {"tp1": ("prompts: fresh per run", "isolation none"),
           "tp4": ("prompts: fresh per cell", "isolation flush"),
           "tp8": ("prompts: fresh per cell", "isolation flush")}
    for phase, words in fed.items():
        assert cli.main(["run", phase, "--dry-run", "--params", str(standin(tmp_path, phase))]) == 0
        out = capsys.readouterr().out
        assert all(w in out for w in words), out[-2000:]
    # `specbench doctor`: the stand-in's other checks may fail here (no GPU), the prompts pass
    cli.main(["doctor", str(standin(tmp_path, "tp4"))])
    line = next(x for x in capsys.readouterr().out.splitlines() if " prompts: " in x)
    assert line.startswith("ok") and "fresh per cell" in line and "flush" in line, line
    # tp1, tp4 and tp8: code runs at the short context only (HumanEval is about 26k tokens in all)
    # (the phase's axes as one plan: its stages measure code in the grid stage only)
    whole = standin(tmp_path, "tp8")
    whole.write_text(whole.read_text() + "stages: []\n")
    assert {c.context for c in sb.load_plan(whole).cells if c.workload == "code"} == {3072}
