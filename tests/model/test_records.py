"""The record model: loss-free round trips, old schemas refused by name, analysis on read."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from cellfactory import make_cell

from specbench_lib import SchemaError, SweepResult
from specbench_lib.analysis import analyse as analysis
from specbench_lib.analysis import validate
from specbench_lib.model import catalogue
from specbench_lib.model.hostfacts import HostLoad, HostProcess
from specbench_lib.model.records import (
    CellFacts,
    CellRecord,
    FinalStats,
    JudgeInputs,
    Provenance,
    RequestRecord,
)
from specbench_lib.model.served import PromptRecord
from specbench_lib.model.verdict import Reason, Verdict
from specbench_lib.runs.run import RunDir


def through_json(data: dict) -> dict:
    return json.loads(json.dumps(data))


def full_cell() -> CellRecord:
    """A cell with every field set away from its default."""
    rec = RequestRecord(index=1, warmup=False, prompt_tokens_planned=8, max_tokens=3, status=200,
                        error=None, error_kind=None, start=0.25, end=1.5,
                        token_times=[0.5, 0.75, 1.5], chunk_sizes=[2, 1], text_sha="abc",
                        output_ids=[7, 8, 9], scheduled=0.2,
                        final=FinalStats(prompt_tokens=8, completion_tokens=3, finish_reason="limit",
                                         truncated=True, draft_tokens=4, accepted_tokens=2,
                                         verify_steps=1, cached_tokens=5))
    warm = RequestRecord(index=0, warmup=True, prompt_tokens_planned=8, max_tokens=3,
                         status=500, error="boom", error_kind="http_500")
    verdict = Verdict("invalid", (Reason("http_500", "boom", count=2),
                                  Reason("short_output", "1 of 3", tolerated=True)), (1, 2))
    return CellRecord(
        run_id="r", spec=replace(make_cell("ngram-b8", "ngram", 8).spec, output_tokens=3,
                                 outputs=2, rate=2.5), fingerprint="f" * 20,
        server_label="ngram-b8", server_argv=("llama-server", "--port", "{port}"),
        verdict=verdict,
        judge=JudgeInputs(planned=2, speculative=True, spec_stats="counters", prefix_cache=True,
                          thresholds={"max_failed_fraction": 0.5,
                                      "host.max_other_cpu_cores": 0.5}),
        facts=CellFacts(decided=Verdict("skipped", (Reason("known_bad", "sm120"),)),
                        server_alive=False, crash_line="CUDA error: x", returncode=-9,
                        log_excerpt="tail", spec_counters={"drafts": 3},
                        host=HostLoad(cpus=2, window_s=3.0, samples=7, other_cpu_cores=1.2,
                                      top=(HostProcess(42, "cc1 (x)", 1.1),), loadavg=(1.0, 2.0, 3.0),
                                      gpu={"gpus": [], "other_processes": [], "note": ""})),
        provenance=Provenance(attempt=2, commit="c0ffee", dirty=True, started="t0", ended="t1",
                              reused_from="other"),
        requests=(warm, rec), prompts=(PromptRecord("sha", 8, ("HumanEval/1",)),),
        target_rate=2.5, metrics={"output_tok_s": 1.0}, timing={"dispatch_s": 0.1})


def test_every_record_type_round_trips_through_json() -> None:
    cell = full_cell()
    again = CellRecord.from_dict(through_json(cell.to_dict()))
    assert again == cell
    assert again.requests[1].final == cell.requests[1].final
    assert again.verdict.reasons[0].count == 2 and again.verdict.reasons[1].tolerated
    assert again.facts.decided == cell.facts.decided
    for reason in cell.verdict.reasons:
        assert Reason.from_dict(through_json(reason.to_dict())) == reason
        assert Reason.from_dict(reason.to_dict()).code == reason.code
    assert PromptRecord.from_dict(through_json({"sha": "s", "tokens": 3, "sources": ["a"]})) == \
        PromptRecord("s", 3, ("a",))
    old = through_json(cell.to_dict())  # written before output length and load were in the spec
    for key in ("output_tokens", "outputs", "rate", "profile_point", "profile_points"):
        del old["spec"][key]
    spec = CellRecord.from_dict(old).spec
    assert spec.output_tokens == 3 and spec.load == "" and spec.cell_id == "ngram-b8__code__ctx256__c1"


def test_a_reason_is_a_code_and_a_detail_that_reads_as_text() -> None:
    reason = Reason("http_400", "context exceeded", count=3)
    assert (reason.code, reason.detail, reason.count) == ("http_400", "context exceeded", 3)
    assert reason == "http_400: context exceeded (x3)"
    assert reason.as_tolerated() == "tolerated: http_400: context exceeded (x3)"
    assert Verdict("invalid", (reason,)).codes == {"http_400"}
    detail_with_colons = Reason("error_in_stream", '{"message": "a: b"}')
    assert Reason.from_dict(detail_with_colons.to_dict()).detail == '{"message": "a: b"}'


def test_a_cell_written_before_typed_records_is_refused_by_its_schema_version(
        tmp_path: Path) -> None:
    v1 = {"schema_version": 1, "run_id": "r", "cell_id": "auto__code__ctx128__c1",
          "fingerprint": "x", "spec": {"config": "auto"},
          "verdict": {"status": "ok", "reasons": []}, "metrics": {"output_tok_s": 3.0}}
    with pytest.raises(SchemaError, match="schema_version 1.*reads 4") as err:
        CellRecord.from_dict(v1, path="c.json")
    assert err.value.version == 1 and err.value.path == "c.json"

    run = RunDir(tmp_path / "run")
    run.update_manifest(phase="t")
    run.write_cell(make_cell("auto", "auto", None))
    (run.cells_dir / "old.json").write_text(json.dumps(v1))
    (run.cells_dir / "cut.json").write_text('{"schema_version": 2, "run_')
    result = SweepResult(run.path)  # reads what it can, names what it cannot
    assert [c.cell_id for c in result.cells] == ["auto__code__ctx256__c1"]
    assert sorted(Path(e.path).name for e in result.damaged) == ["cut.json", "old.json"]
    assert "schema_version 1" in result.text() and "cut.json" in result.text()


def write_run(tmp_path: Path) -> Path:
    run = RunDir(tmp_path / "run")
    run.update_manifest(phase="t")
    run.write_cell(make_cell("auto", "auto", None, tok_s=10.0))
    run.write_cell(make_cell("ngram-b8", "ngram", 8, tok_s=15.0))
    return run.path


def test_a_changed_metric_definition_changes_an_existing_runs_table_on_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write_run(tmp_path)
    before = SweepResult(path).table().set_index("config")
    assert before.loc["ngram-b8", "output_tok_s"] == pytest.approx(15.0)
    assert before.loc["ngram-b8", "speedup"] == pytest.approx(1.5)
    files = {p: p.read_bytes() for p in (path / "cells").glob("*.json")}

    real = analysis.cell_metrics

    def per_request_window(cell, *, exclude=()):  # a new definition: tokens over e2e time
        metrics = real(cell, exclude=exclude)
        rec = cell.measured[0]
        metrics["output_tok_s"] = metrics["completion_tokens"] / (rec.end - rec.token_times[0])
        return metrics

    monkeypatch.setattr(analysis, "cell_metrics", per_request_window)
    after = SweepResult(path).table().set_index("config")
    assert after.loc["ngram-b8", "output_tok_s"] == pytest.approx(15.0 * 16 / 15)
    assert after.loc["auto", "output_tok_s"] == pytest.approx(10.0 * 16 / 15)
    assert {p: p.read_bytes() for p in files} == files  # nothing re-measured or rewritten


def test_a_changed_rule_changes_an_existing_runs_verdicts_on_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write_run(tmp_path)
    assert SweepResult(path).counts()["ok"] == 2
    real = validate.request_problems

    def stricter(rec, **kw):
        found = real(rec, **kw)
        if rec.token_times and rec.token_times[-1] > 1.5:
            found.append(Reason("too_slow", f"last token at {rec.token_times[-1]:.2f} s"))
        return found

    monkeypatch.setattr(validate, "request_problems", stricter)
    monkeypatch.setitem(catalogue.BY_CODE, "too_slow", catalogue.Code(  # a new rule: its entry
        "too_slow", "request", "a request slower than the test allows"))
    result = SweepResult(path)
    assert result.counts() == {"ok": 1, "invalid": 1, "crashed": 0, "skipped": 0}
    slow = result.cell("auto__code__ctx256__c1")
    assert slow.verdict.codes == {"too_slow"} and slow.metrics is None
    assert list(result.table()["config"]) == ["ngram-b8"]


def test_decided_verdicts_and_counter_stats_are_facts_not_rejudged() -> None:
    cell = make_cell("ngram-b8", "ngram", 8, tok_s=20.0)
    assert analysis.verdict_of(cell).ok
    counters = replace(cell, judge=replace(cell.judge, spec_stats="counters"))
    assert analysis.verdict_of(counters).codes == {"missing_spec_stats"}  # no counters were stored
    moved = replace(counters, facts=CellFacts(spec_counters={"drafts": 4, "acceptance_length": 2.5}))
    analysed = analysis.analyse(moved)
    assert analysed.verdict.ok and analysed.metrics["acceptance_length"] == pytest.approx(1.0)
    died = replace(cell, facts=CellFacts(server_alive=False, crash_line="CUDA error: boom"))
    assert analysis.verdict_of(died).status == "crashed"
    assert analysis.verdict_of(died).reasons[:2] == ("server_died: the server process exited, or "
                                                "stopped answering its health endpoint, during "
                                                "the cell", "log: CUDA error: boom")


def test_the_record_model_and_analysis_import_no_dispatcher_or_adapter() -> None:
    import subprocess
    import sys

    code = ("import sys, specbench_lib.analysis.analyse, specbench_lib.runs.results\n"
            "print(sorted(m for m in sys.modules if m.startswith('specbench_lib')))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True).stdout
    for heavy in ("http1", "dispatch", "sweep", "engines.llamacpp", "engines.sglang", "httpx"):
        assert f"specbench_lib.{heavy}'" not in loaded, loaded
