"""Results by category (issue 41): the category × config table from the one claim computation,
groups that pool categories into workloads, the turn in ids, columns and labels, the selector
of two-turn categories, readable answers, and colours that stay distinct for any number of
workloads. One sweep on fake servers (about 10 s on 2 cores); the rest reads params."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cellfactory import not_ok
from paramsfiles import fake_plan, write_params
from ports import free_port
from pydantic import ValidationError

import specbench_lib as sb
from specbench_lib.model.answerfile import read_answer
from specbench_lib.model.params import SweepParams
from specbench_lib.model.plan import build_plan

ROOT = Path(__file__).resolve().parents[2]
SPEC_BENCH = ROOT / "tests" / "data" / "spec_bench_question.jsonl"


def argv(interval: float, *extra: str) -> str:
    return json.dumps(["{binary}", str(ROOT / "tests" / "support" / "fake_server.py"), "--port", "{port}",
                       "--interval", str(interval), *extra])


def swept(tmp_path: Path) -> sb.SweepResult:
    path = write_params(tmp_path, fake_plan(
        free_port(), argv=argv(0.004), phase="bycat", engine={"ready_timeout_s": 10},
        configs=[{"name": "auto", "method": "auto"},
                 {"name": "ngram", "method": "ngram", "budgets": [8],
                  "argv": json.loads(argv(0.002, "--budget", "{budget}"))}],
        workloads=[{"name": "sb", "source": "spec_bench", "path": str(SPEC_BENCH),
                    "categories": ["writing", "translation", "summarization"]}],
        groups={"pool": ["sb-writing", "sb-translation"]}, contexts=[256]), name="cat.yaml")
    return sb.run_sweep(sb.load_plan(path), outputs=tmp_path / "out", progress=False)


def test_the_category_table_groups_figure_and_answers_come_from_the_one_claim(
        tmp_path: Path) -> None:
    result = swept(tmp_path)
    assert result.counts()["ok"] == 6, not_ok(result)
    frame = result.categories().frame
    assert set(frame["workload"]) == {"sb-writing", "sb-translation", "sb-summarization", "pool"}
    table = result.table().set_index(["workload", "config"])
    for row in frame[frame["kind"] == "category"].to_dict("records"):  # the claim's, as read
        claim = table.loc[(row["workload"], row["config"])]
        assert row["speedup"] == pytest.approx(claim["speedup"], nan_ok=True)
        assert row["tokens_per_step"] == pytest.approx(claim["acceptance_length"], nan_ok=True)
        assert row["answer_tokens"] == pytest.approx(8) and row["prompt_tokens"] > 0
        assert row["decision"] in ("decided", "tie", "undecided") and row["place"]
    pool = frame[frame["workload"] == "pool"].set_index("config")
    assert list(pool["kind"]) == ["group of 2"] * 2
    pooled = result.pooled()  # the group's claim: the same computation over both members' prompts
    best = pooled.best().set_index("workload").loc["pool"]
    assert pool.loc["ngram-b8", "speedup"] == pytest.approx(pooled.table().set_index("config")
                                                         .loc["ngram-b8", "speedup"])
    assert pool.loc[best["best"], "place"] in ("best", "leader")
    assert int(pool.loc["ngram-b8", "requests_n"]) == 4  # two members' two requests, paired
    shown = result.categories()
    assert "pool" in shown.text() and "Results by category" in shown.html()
    # readable answers: a few per category, cut, from the cells' first measured requests
    assert set(shown.samples) == {"sb-writing", "sb-translation", "sb-summarization"}
    for texts in shown.samples.values():
        assert 1 <= len(texts) <= 3 and all(t.startswith(("auto: ", "ngram-b8: ")) for t in texts)
    cell = result.cells[0]
    assert [r.output_text is not None for r in cell.measured] == [True, True]
    assert all(len(r.output_text or "") <= 600 for r in cell.requests)
    # a fixed plan writes answer.json too, from the budgeted run's builder (one look at 95 %)
    answer = read_answer(result.run_dir)
    assert answer is not None and answer.budget_s is None and answer.stopped == "complete"
    assert len(answer.panels) == 3 and all(p.alpha == 0.05 for p in answer.panels)
    assert {p.panel.workload for p in answer.panels} == {
        "sb-writing", "sb-translation", "sb-summarization"}
    assert sb.answer_of(result).text().startswith("answer: the best config of 3 panels (fixed plan")
    figures = result.figures()
    assert "by_category" in figures
    ticks = [t.get_text() for t in figures["by_category"].axes[1].get_xticklabels()]
    assert ticks == ["sb-writing", "sb-translation", "sb-summarization", "pool"]


def plan_of(groups: dict[str, list[str]] | None = None, **workload: object) -> SweepParams:
    return SweepParams(phase="t", configs=[{"name": "auto", "method": "auto"}], contexts=[256],
                       concurrency=[1], groups=groups or {},
                       workloads=[{"name": "sb", "source": "spec_bench", "path": str(SPEC_BENCH),
                                   **workload}])


def test_the_turn_is_in_cell_ids_rows_and_labels_and_two_turns_selects_categories() -> None:
    params = plan_of(categories="two_turns", turn=2)
    assert [w.name for w in params.workloads] == ["sb-writing"]
    cells = build_plan(params, source=SPEC_BENCH).cells
    assert [c.cell_id for c in cells] == ["auto__sb-writing__ctx256__c1__turn2"]
    assert cells[0].row()["turn"] == 2
    one = build_plan(plan_of(categories=["writing"]), source=SPEC_BENCH).cells
    assert one[0].cell_id == "auto__sb-writing__ctx256__c1" and one[0].turn == 1
    with pytest.raises(ValidationError) as refused:  # every one-turn category named, and the fix
        plan_of(categories="all", turn=2)
    text = str(refused.value)
    assert all(c in text for c in ("translation", "summarization", "math_reasoning"))
    assert "two_turns" in text and "'writing'" in text


def test_groups_name_workloads_of_the_plan_once_each() -> None:
    with pytest.raises(ValidationError, match="no workloads of the plan"):
        plan_of(categories="all", groups={"g": ["sb-nope"]})
    with pytest.raises(ValidationError, match="in both"):
        plan_of(categories="all", groups={"a": ["sb-writing"], "b": ["sb-writing"]})
    assert plan_of(categories="all", groups={"mt_bench": ["sb-writing"]}).groups


def test_colours_and_markers_stay_distinct_for_any_number_of_workloads() -> None:
    from specbench_lib.report.figurekit import marker, palette

    for n in (3, 10, 13, 20, 31):
        colours = palette(n)
        assert len({tuple(round(v, 3) for v in c) for c in colours}) == n
    assert len({(marker(i), tuple(palette(13)[i])) for i in range(13)}) == 13
