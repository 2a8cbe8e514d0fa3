"""``source: speed_bench`` (issue 41): NVIDIA's SPEED-Bench read from the files its harness's
``prepare_data.py`` writes (tests/data/speed_bench: that format, made by its make_fixture.py);
the qualitative categories, and the throughput buckets × entropy tiers, as workloads with no
analysis of their own; the target tokenizer's prompt length beside the o200k_base bucket. One
sweep on a fake server (about 6 s)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from cellfactory import not_ok
from fakeparams import fake_argv
from paramsfiles import fake_plan, write_params
from ports import free_port
from pydantic import ValidationError

import specbench_lib as sb
from specbench_lib.core.errors import PreflightError
from specbench_lib.model.params import SweepParams
from specbench_lib.model.sources import bucket_tokens
from specbench_lib.model.workloadparams import WorkloadParams
from specbench_lib.prompts.sources.speed_bench import PLACEHOLDER
from specbench_lib.prompts.workload import questions

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "speed_bench"


def workloads(**more: object) -> list[str]:
    params = SweepParams(phase="t", configs=[{"name": "auto", "method": "auto"}], contexts=[512],
                         concurrency=[1], workloads=[{"name": "speed", "source": "speed_bench",
                                                      **more}])
    return [w.name for w in params.workloads]


def test_categories_buckets_and_tiers_become_workloads() -> None:
    assert workloads(path=str(DATA), categories="all") == [
        "speed-qualitative_coding", "speed-qualitative_writing", "speed-throughput_1k_low_entropy",
        "speed-throughput_1k_mixed", "speed-throughput_1k_high_entropy"]
    assert workloads(path=str(DATA / "qualitative"), categories="all") == [
        "speed-coding", "speed-writing"]
    assert workloads(path=str(DATA / "qualitative"), categories="two_turns", turn=2) == [
        "speed-writing"]
    found = questions(WorkloadParams(name="s", source="speed_bench", path=str(DATA),
                                     category="throughput_1k/mixed"))
    assert list(found) == ["throughput_1k/mixed:tm0", "throughput_1k/mixed:tm1"]
    assert all(t[0].startswith("Summarize the following text.") for t in found.values())
    assert bucket_tokens("speed-throughput_16k_mixed") == 16000 and bucket_tokens("x") is None


def test_unprepared_or_missing_data_is_refused_with_the_fix(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="prepare_data.py"):
        workloads(path=str(tmp_path / "none"), categories="all")
    folder = tmp_path / "qualitative"
    folder.mkdir()
    pq.write_table(pa.Table.from_pylist([{"question_id": "1", "category": "qa",
                                          "turns": [f"{PLACEHOLDER}\n\n{{article}}"]}]),
                   folder / "test.parquet")
    with pytest.raises(PreflightError, match="not resolved: run prepare_data.py"):
        questions(WorkloadParams(name="s", source="speed_bench", path=str(folder)))


def test_a_sweep_states_each_bucket_and_tier_with_the_target_tokenizers_count(
        tmp_path: Path) -> None:
    path = write_params(tmp_path, fake_plan(
        free_port(), argv=fake_argv(interval=0.002), phase="speed",
        engine={"ready_timeout_s": 10},
        workloads=[{"name": "sp", "source": "speed_bench", "path": str(DATA / "throughput_1k"),
                    "categories": "all"}],
        contexts=[512]), name="speed.yaml")
    result = sb.run_sweep(sb.load_plan(path), outputs=tmp_path / "out", progress=False)
    assert result.counts()["ok"] == 3, not_ok(result)
    frame = result.categories().frame
    assert list(frame["workload"]) == ["sp-throughput_1k_low_entropy", "sp-throughput_1k_mixed",
                                       "sp-throughput_1k_high_entropy"]
    # the nominal o200k_base size beside the target tokenizer's count (the fake server's words)
    assert list(frame["bucket_o200k"]) == [1000] * 3
    assert (frame["prompt_tokens"] > 100).all() and (frame["prompt_tokens"] < 400).all()
    assert "bucket_o200k" in result.categories().text()


def _parquet(folder: Path, rows: list[dict[str, object]]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    schema = pa.schema([("question_id", pa.string()), ("category", pa.string()),
                        ("turns", pa.list_(pa.string()))])
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), folder / "test.parquet")
    return folder


def test_an_empty_parquet_is_refused_by_name_not_as_no_category(tmp_path: Path) -> None:
    folder = _parquet(tmp_path / "qualitative", [])
    with pytest.raises(ValidationError, match=r"holds no question row .*prepare_data.py") as said:
        workloads(path=str(folder), categories="all")
    assert "None" not in str(said.value) and "['a', 'l', 'l']" not in str(said.value)
    with pytest.raises(PreflightError, match="holds no question row"):
        questions(WorkloadParams(name="s", source="speed_bench", path=str(folder)))


def test_a_repeated_question_id_is_refused_as_spec_bench_refuses_it(tmp_path: Path) -> None:
    row = {"question_id": "7", "category": "qa", "turns": ["What is a seam?"]}
    folder = _parquet(tmp_path / "qualitative", [row, {**row, "turns": ["Another?"]}])
    with pytest.raises(PreflightError, match=r"test.parquet: question_id '7' repeats .* 'qa'"):
        questions(WorkloadParams(name="s", source="speed_bench", path=str(folder)))
    # the same id in two categories is two questions
    other = _parquet(tmp_path / "other" / "qualitative", [row, {**row, "category": "rag"}])
    assert workloads(path=str(other), categories="all") == ["speed-qa", "speed-rag"]


def test_all_that_names_no_category_says_all_not_its_letters() -> None:
    from specbench_lib.model.categories import per_category

    class NoneFound(WorkloadParams):
        def per_category(self, found: tuple[str, ...] = ()) -> tuple[WorkloadParams, ...]:
            return ()

    empty = NoneFound(name="s", source="mtbench", categories="all")
    with pytest.raises(ValueError, match="categories all names no category") as said:
        per_category((empty,))
    assert "'a', 'l'" not in str(said.value)


def test_two_categories_that_become_one_name_are_named_both(tmp_path: Path) -> None:
    folder = _parquet(tmp_path / "qualitative", [
        {"question_id": "1", "category": "a/b", "turns": ["One?"]},
        {"question_id": "2", "category": "a_b", "turns": ["Two?"]}])
    with pytest.raises(ValidationError, match=r"categories 'a/b' and 'a_b' both become "
                                              r"workload 'speed-a_b'"):
        workloads(path=str(folder), categories="all")
    with pytest.raises(ValidationError, match=r"categories 'a/b' and 'a_b' both become"):
        workloads(path=str(folder), categories=["a/b", "a_b"])
