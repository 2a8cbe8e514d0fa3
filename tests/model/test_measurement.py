"""Params for measurement (timeouts, rate, repeats), copy/edit prompts, repeats and losslessness."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from cellfactory import make_cell
from paramsfiles import write_params

from specbench_lib.analysis.metricfamilies.lossless import common_prefix, losslessness
from specbench_lib.analysis.metrics import cell_metrics, results_table
from specbench_lib.core.errors import ParamsError
from specbench_lib.model.plan import load_plan
from specbench_lib.model.records import CellDispatch, CellRecord, RequestRecord
from specbench_lib.model.workloadparams import WorkloadParams
from specbench_lib.prompts.workload import build_prompts
from specbench_lib.servers.engines import FinalStats

TINY = Path(__file__).resolve().parents[1] / "data" / "tiny.yaml"


def write(tmp_path: Path, text: str) -> Path:
    return write_params(tmp_path, text=text)


def test_timeouts_rate_and_repeats_from_params(tmp_path: Path) -> None:
    plan = load_plan(write(tmp_path, "timeouts: {first_token_s: 5, between_tokens_s: 2}\n"
                                     "request_rate: {per_s: 2.5, arrival: fixed}\nrepeats: 2\n"
                                     "max_failed_fraction: 0.2\nrequest_timeout_s: 30\n"))
    limits = plan.params.request_timeouts()
    assert (limits.connect_s, limits.first_token_s, limits.between_tokens_s, limits.request_s) == (
        10.0, 5.0, 2.0, 30.0)
    assert plan.params.request_rate is not None and plan.params.request_rate.per_s == 2.5
    assert len(plan.cells) == 2 * 3 * 2  # 3 servers x 2 contexts x 2 repeats
    ids = [c.cell_id for c in plan.cells]
    assert len(set(ids)) == len(ids) and ids[0] == "auto__code__ctx128__c2__q2.5__r0"  # the rate
    assert load_plan(TINY).cells[0].cell_id == "auto__code__ctx128__c2"
    with pytest.raises(ParamsError, match="timeouts.first_tokens"):
        load_plan(write(tmp_path, "timeouts: {first_tokens: 5}\n"))
    with pytest.raises(ParamsError, match="max_failed_fraction"):
        load_plan(write(tmp_path, "max_failed_fraction: 1.5\n"))


def char_tokens(text: str) -> list[int]:
    return [ord(c) for c in text]


def test_copyedit_prompts_are_exact_distinct_and_seeded() -> None:
    workload = WorkloadParams(name="ce", source="copyedit")
    prompts = build_prompts(workload, n=6, tokens=400, seed=0, tokenize=char_tokens)
    texts = ["".join(map(chr, p.tokens)) for p in prompts]
    assert all(len(p.tokens) == 400 for p in prompts)
    assert len({p.sha for p in prompts}) == 6
    assert [p.sources[0] for p in prompts] == ["copyedit:code", "copyedit:text"] * 3
    assert texts[0].startswith("Rewrite the following Python code") and texts[0].endswith("```python\n")
    assert texts[1].startswith("Rewrite the following conversation")
    again = build_prompts(workload, n=6, tokens=400, seed=0, tokenize=char_tokens)
    assert [p.sha for p in again] == [p.sha for p in prompts]
    other = build_prompts(workload, n=6, tokens=400, seed=1, tokenize=char_tokens)
    assert {p.sha for p in other}.isdisjoint(p.sha for p in prompts)


def rec(index: int, times: list[float], *, start: float = 0.0) -> RequestRecord:
    r = RequestRecord(index=index, warmup=False, prompt_tokens_planned=4, max_tokens=len(times))
    r.start, r.end, r.token_times, r.chunk_sizes = start, times[-1], times, [1] * len(times)
    r.final = FinalStats(prompt_tokens=4, completion_tokens=len(times), draft_tokens=0,
                         accepted_tokens=0, verify_steps=len(times))
    return r


def test_window_percentiles_and_excluded_failures() -> None:
    a = rec(0, [1.0 + 0.1 * i for i in range(11)], start=0.5)   # ttft 0.5, e2e 1.5
    b = rec(1, [2.0 + 0.1 * i for i in range(11)], start=1.0)   # ttft 1.0, e2e 2.0
    bad = rec(2, [0.1], start=0.0)
    m = cell_metrics(CellDispatch([a, b, bad], 0.0, 9.0), exclude=(2,))
    assert m["window_s"] == pytest.approx(3.0 - 0.5)   # first sent → last token, not 9 s
    assert m["output_tok_s"] == pytest.approx(22 / 2.5)
    assert m["request_throughput_rps"] == pytest.approx(2 / 2.5)
    assert m["n_requests"] == 2 and m["n_failed"] == 1
    assert m["ttft_p50_s"] == pytest.approx(0.75) and m["ttft_p99_s"] == pytest.approx(0.995)
    assert m["e2e_mean_s"] == pytest.approx(1.75)
    assert m["itl_p90_s"] == pytest.approx(0.1) and m["tpot_p99_s"] == pytest.approx(0.1)


def cell(config: str, method: str, tok_s: float, *, repeat: int = 0,
         outputs: list[list[int]] | None = None) -> CellRecord:
    return make_cell(config, method, None if method == "auto" else 8, "ok", tok_s, context=128,
                     repeat=repeat, repeats=2, outputs=outputs or [[1, 2, 3, 4]] * 2)


def test_repeats_give_mean_cv_and_unstable_flag() -> None:
    cells = [cell("auto", "auto", 50.0), cell("auto", "auto", 50.0, repeat=1),
             cell("ng-b8", "ngram", 60.0), cell("ng-b8", "ngram", 100.0, repeat=1)]
    table = results_table(cells, unstable_cv=0.2).set_index("config")
    assert table.loc["ng-b8", "output_tok_s"] == 80.0 and table.loc["ng-b8", "repeats_n"] == 2
    assert table.loc["ng-b8", "output_tok_s_cv"] == pytest.approx(28.2843 / 80, rel=1e-4)
    assert bool(table.loc["ng-b8", "unstable"]) and not bool(table.loc["auto", "unstable"])
    # the speedup is the panel's claim (issue 29): the geometric mean of the paired per-repeat
    # ratios, 60/50 and 100/50, not the ratio of the mean throughputs (80/50)
    assert table.loc["ng-b8", "speedup"] == pytest.approx((60 / 50 * 100 / 50) ** 0.5)
    single = results_table([cell("auto", "auto", 50.0)])
    assert math.isnan(single["output_tok_s_cv"].iloc[0]) and not single["unstable"].iloc[0]


def test_a_failed_repeat_is_shown_and_makes_the_row_unstable() -> None:
    """2 of 3 repeats failed: the row keeps its one ok repeat, says 2 failed, and is unstable."""
    failed = [make_cell("ng-b8", "ngram", 8, status, None, context=128, repeat=r, repeats=3)
              for r, status in ((1, "crashed"), (2, "invalid"))]
    cells = [cell("auto", "auto", 50.0), cell("ng-b8", "ngram", 60.0), *failed,
             make_cell("ng-b8", "ngram", 8, "crashed", None, context=256, repeats=3)]
    table = results_table(cells).set_index("config")
    assert table.loc["ng-b8", "repeats_n"] == 1 and table.loc["ng-b8", "repeats_failed"] == 2
    assert bool(table.loc["ng-b8", "unstable"])
    assert table.loc["auto", "repeats_failed"] == 0 and not bool(table.loc["auto", "unstable"])


def test_losslessness_against_auto_for_the_same_prompts() -> None:
    assert common_prefix([1, 2, 3], [1, 2, 4, 5]) == 2 and common_prefix([], [1]) == 0
    base = cell("auto", "auto", 50.0, outputs=[[1, 2, 3, 4], [5, 6, 7, 8]])
    same = cell("ng-b8", "ngram", 60.0, outputs=[[1, 2, 3, 4], [5, 6, 0, 0]])
    found = losslessness([base, same])
    assert found == {same.cell_id: {"lossless_identical": 0.5, "lossless_prefix_tokens": 3.0,
                                  "lossless_n": 2}}
    other_repeat = cell("ng-b8", "ngram", 60.0, repeat=1)
    assert losslessness([base, other_repeat]) == {}  # other prompts: nothing compared
    table = results_table([base, same]).set_index("config")
    assert table.loc["ng-b8", "lossless_identical"] == 0.5
    assert math.isnan(table.loc["auto", "lossless_identical"])


def test_a_malformed_line_in_a_users_jsonl_is_named_with_its_line(tmp_path: Path) -> None:
    from specbench_lib.core.errors import PreflightError
    from specbench_lib.prompts.workload import documents

    mine = tmp_path / "mine.jsonl"
    mine.write_text('{"text": "a question"}\n\n{"text": "cut short\n["a list"]\n')
    workload = WorkloadParams(name="mine", source="jsonl", path=str(mine))
    with pytest.raises(PreflightError, match=rf"{mine}:3: not a JSON object .*fix or remove"):
        documents(workload)
    mine.write_text('{"text": "a question"}\n["a list"]\n')
    with pytest.raises(PreflightError, match=rf"{mine}:2: a JSON list, not an object"):
        documents(workload)
    mine.write_bytes(b'{"text": "one"}\n{"text": "caf\xe9"}\n')
    with pytest.raises(PreflightError, match=rf"{mine}:2: not UTF-8"):
        documents(workload)
    mine.write_text('{"text": "one"}\n{"text": "two"}\n')
    assert [d[1] for d in documents(workload)] == ["one", "two"]
