"""Sampling as an axis (issue 30): ``temperature: [0, 1]`` makes each temperature its own cells
and panels, every engine's request carries the temperature, top-p, top-k and a per-request seed
(greedy requests are what they always were), the fingerprint covers them, the losslessness check
never calls a sampled difference a loss, and cells and answers written before keep reading as
greedy."""

from __future__ import annotations

from dataclasses import asdict, replace
from pathlib import Path

import pytest
from cellfactory import make_cell

from specbench_lib.analysis.claim import panel_of_cell
from specbench_lib.analysis.metricfamilies.lossless import losslessness
from specbench_lib.analysis.rounds import panel_of
from specbench_lib.core.readback import from_doc
from specbench_lib.model.answerfile import PanelKey
from specbench_lib.model.cellspec import CellSpec
from specbench_lib.model.fingerprint import Components, cell_fingerprints
from specbench_lib.model.params import SweepParams
from specbench_lib.model.plan import Plan
from specbench_lib.model.plan import build_plan as _build_plan
from specbench_lib.model.sampling import Sampling
from specbench_lib.model.sections import EngineParams
from specbench_lib.servers.engines import get_adapter

SAMPLED = Sampling(temperature=1.0, top_p=0.9, top_k=50, seed=7)


def build_plan(found: SweepParams) -> Plan:
    return _build_plan(found, source=Path("sampling.yaml"))


def params(**more: object) -> SweepParams:
    return SweepParams.model_validate({
        "phase": "t", "configs": [{"name": "auto", "method": "auto"},
                                  {"name": "ng", "method": "ngram", "budgets": [4]}],
        "workloads": [{"name": "code", "source": "humaneval"}], "contexts": [64],
        "concurrency": [1], **more})


@pytest.mark.parametrize(("kind", "where", "seed_key"), [
    ("llamacpp", lambda body: body, "seed"), ("vllm", lambda body: body, "seed"),
    ("sglang", lambda body: body["sampling_params"], "sampling_seed")])
def test_every_adapter_sends_the_sampling_and_greedy_stays_as_it_was(
        kind: str, where, seed_key: str) -> None:  # type: ignore[no-untyped-def]
    adapter = get_adapter(EngineParams(kind=kind, binary="x", model="m"))
    before = adapter.generation_request([1, 2], max_tokens=8)[1]
    greedy = adapter.generation_request([1, 2], max_tokens=8, sampling=Sampling())[1]
    assert greedy == before and where(greedy)["temperature"] == 0.0
    assert seed_key not in where(greedy) and "top_p" not in where(greedy)
    sampled = where(adapter.generation_request([1, 2], max_tokens=8, sampling=SAMPLED)[1])
    assert (sampled["temperature"], sampled["top_p"], sampled["top_k"]) == (1.0, 0.9, 50)
    assert sampled[seed_key] == 7
    if kind == "llamacpp":  # its own min_p 0.05 would cut more than the other engines do
        assert sampled["min_p"] == 0.0


def test_a_prompts_seed_is_the_same_in_every_config_and_differs_between_prompts() -> None:
    base = Sampling(temperature=1.0, seed=3)
    assert base.for_prompt([1, 2, 3]) == base.for_prompt([1, 2, 3])
    assert base.for_prompt([1, 2, 3]).seed != base.for_prompt([1, 2, 4]).seed
    assert base.for_prompt([1]).seed != Sampling(temperature=1.0, seed=4).for_prompt([1]).seed
    assert Sampling().for_prompt([1]) == Sampling()  # greedy: no seed to draw


def test_temperatures_are_an_axis_with_their_own_panels() -> None:
    plan = build_plan(params(temperature=[0, 1]))
    assert len(plan.cells) == 2 * len(build_plan(params()).cells)
    ids = {c.cell_id for c in plan.cells}
    assert {"auto__code__ctx64__c1__t0", "auto__code__ctx64__c1__t1"} <= ids
    panels = {panel_of(c) for c in plan.cells}
    assert len(panels) == 2 and {p[5] for p in panels} == {0.0, 1.0}
    assert {c.cell_id for c in build_plan(params(temperature=1)).cells} == {
        c.cell_id for c in build_plan(params()).cells}  # one temperature: the ids as before
    with pytest.raises(ValueError, match="temperatures"):
        params(temperature=[0, 0])


def test_the_fingerprint_covers_the_sampling_and_keeps_greedy_cells_as_they_were() -> None:
    parts = Components({"kind": "llamacpp"}, "model", "code", {"temperature": 0.0})

    def prints(**more: object) -> dict[str, str]:
        plan = build_plan(params(**more))
        return cell_fingerprints(plan, {s.label: ["x"] for s in plan.servers}, parts)

    greedy = prints()
    assert prints(temperature=0.0, top_p=1.0, top_k=0) == greedy
    assert set(prints(top_p=0.9).values()).isdisjoint(greedy.values())
    both = prints(temperature=[0, 1])
    assert both["auto__code__ctx64__c1__t0"] != both["auto__code__ctx64__c1__t1"]
    chat = build_plan(params(workloads=[{"name": "code", "source": "humaneval",
                                         "template": "chat"}]))
    chat_prints = cell_fingerprints(chat, {s.label: ["x"] for s in chat.servers}, parts)
    assert set(chat_prints.values()).isdisjoint(greedy.values())


def test_a_sampled_cell_is_never_called_a_loss() -> None:
    base = make_cell("auto", "auto", None, outputs=[[1, 2, 3], [4, 5, 6]])
    other = make_cell("ng-b4", "ngram", 4, outputs=[[1, 9, 9], [7, 7, 7]])
    assert losslessness([base, other])[other.cell_id]["lossless_identical"] == 0.0
    hot = [replace(c, spec=replace(c.spec, temperature=1.0)) for c in (base, other)]
    found = losslessness(hot)[hot[1].cell_id]
    assert found["lossless_identical"] is None and found["lossless_n"] == 0
    assert panel_of_cell(hot[1]) != panel_of_cell(other)  # never one claim across temperatures


def test_cells_and_answers_written_before_read_as_greedy() -> None:
    spec = asdict(CellSpec("auto", "auto", "auto", None, "code", 64, 1, output_tokens=8))
    del spec["temperature"], spec["temperatures"]
    assert CellSpec(**spec).temperature == 0.0
    old = {"workload": "code", "context": 64, "output_tokens": 8, "concurrency": 1, "load": ""}
    assert from_doc(PanelKey, old).values() == ("code", 64, 8, 1, "", 0.0, 1)  # and turn 1
