"""Honest staleness and the run's record: each fingerprint component, resume, attempts."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from fakeparams import FAKE, fake_argv
from paramsfiles import DROP, compose, fake_plan, write_params

import specbench_lib as sb
from specbench_lib.model.fingerprint import Components, cell_fingerprints
from specbench_lib.model.plan import build_plan, load_plan
from specbench_lib.model.records import CellRecord
from specbench_lib.runs import provenance

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "tests" / "data" / "tiny.yaml"
PORT = 8197  # the resume sweeps' stand-ins: one port for the module's params (no other test's)
BASE = Components(engine={"kind": "llamacpp", "version": "11434", "sha256": "a" * 64,
                          "package": None, "package_version": None, "commit": None},
                  model="m" * 20, code="c" * 20,
                  request={"n_predict": 64, "cache_prompt": False, "temperature": 0.0})


def prints(plan=None, components: Components = BASE, argv: list[str] | None = None) -> dict:
    plan = plan or load_plan(TINY)
    launch = argv or ["llama-server", "--port", "8191", "-c", "4096"]
    return cell_fingerprints(plan, {s.label: launch for s in plan.servers}, components)


def engine(**changed) -> Components:
    return replace(BASE, engine={**BASE.engine, **changed})


@pytest.mark.parametrize("name", [
    "measured params", "workload", "request body", "server argv", "binary sha256",
    "engine version", "python package version", "fork commit", "model", "measurement code"])
def test_each_component_changed_alone_makes_every_cell_stale(name: str) -> None:
    plan = load_plan(TINY)
    params = plan.params
    changed = {
        "measured params": lambda: prints(build_plan(params.model_copy(update={"output_tokens": 65}),
                                                     source=plan.source)),
        "workload": lambda: prints(build_plan(params.model_copy(update={"workloads": (
            params.workloads[0].model_copy(update={"field": "prompt"}),)}), source=plan.source)),
        "request body": lambda: prints(components=replace(
            BASE, request={**BASE.request, "cache_prompt": True})),
        "server argv": lambda: prints(argv=["llama-server", "--port", "8191", "-c", "8192"]),
        "binary sha256": lambda: prints(components=engine(sha256="b" * 64)),
        "engine version": lambda: prints(components=engine(version="11435")),
        "python package version": lambda: prints(components=engine(package="sglang",
                                                                    package_version="0.5.5")),
        "fork commit": lambda: prints(components=engine(commit="deadbeef")),
        "model": lambda: prints(components=replace(BASE, model="n" * 20)),
        "measurement code": lambda: prints(components=replace(BASE, code="d" * 20)),
    }[name]()
    before = prints()
    assert set(before) == set(changed)
    assert all(before[c] != changed[c] for c in before), name
    assert prints() == before  # and nothing else moves them


def test_the_cell_spec_and_the_port_alone() -> None:
    before = prints()
    assert len(set(before.values())) == len(before)  # every cell spec its own fingerprint
    assert prints(argv=["llama-server", "--port", "8191", "-c", "4096"]) == before
    moved = load_plan(TINY).params.model_copy(update={"engine": load_plan(TINY).params.engine
                                                      .model_copy(update={"port": 9000})})
    assert prints(build_plan(moved, source=TINY),
                  argv=["llama-server", "--port", "9000", "-c", "4096"]) == before


def fake_params(tmp_path: Path, **overrides: Any) -> Path:
    def argv(mode: str) -> list[str]:
        return ["{binary}", str(FAKE), "--port", "{port}", "--mode", mode, "--hang-s", "5",
                "--budget", "{budget}"]
    path = write_params(tmp_path, compose(fake_plan(
        PORT, argv=fake_argv("--mode", "ok"), phase="resume", engine={"ready_timeout_s": 4},
        configs=[{"name": "auto", "method": "auto"},
                 {"name": "fine", "method": "ngram", "budgets": [4], "argv": argv("ok")},
                 {"name": "empty", "method": "ngram", "budgets": [2], "argv": argv("empty")},
                 {"name": "cuda", "method": "ngram", "budgets": [8], "argv": argv("cuda_crash")}],
        output_tokens=4, warmup_requests=1,
        timeouts={"first_token_s": 3, "between_tokens_s": 2, "request_s": 6},
        max_coalesced_fraction=DROP, max_coalesced_first_fraction=DROP, host=DROP), **overrides),
        name="resume.yaml")
    return path


def test_resume_keeps_only_matching_ok_cells_and_each_attempt_is_recorded(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plan = sb.load_plan(fake_params(tmp_path))
    outputs = tmp_path / "out"
    first = sb.run_sweep(plan, outputs=outputs, progress=False)
    status = {c.spec.config: c.status for c in first.cells}
    assert status == {"auto": "ok", "fine-b4": "ok", "empty-b2": "invalid", "cuda-b8": "crashed"}
    fine = first.dir.cell_path("fine-b4__code__ctx16__c1")
    stale = json.loads(fine.read_text())
    stale["fingerprint"] = "0" * 20  # measured under another plan, engine or code
    fine.write_text(json.dumps(stale))

    again = sb.run_sweep(plan, resume=first.run_id, outputs=outputs, progress=False)
    by = {c.spec.config: c for c in again.cells}
    assert {k: c.provenance.attempt for k, c in by.items()} == {
        "auto": 1, "fine-b4": 2, "empty-b2": 2, "cuda-b8": 2}  # the invalid cell was not kept
    assert by["fine-b4"].status == "ok" and by["empty-b2"].status == "invalid"
    history = sorted(p.name.split("__")[0] for p in (again.run_dir / "cells" / "history").iterdir())
    assert history == ["cuda-b8", "empty-b2", "fine-b4"]
    manifest = again.manifest
    assert [a["n"] for a in manifest["attempts"]] == [1, 2]
    assert manifest["attempts"][1]["kept_cells"] == ["auto__code__ctx16__c1"]
    assert all(a["environment"]["git"] == manifest["environment"]["git"]
               for a in manifest["attempts"])
    assert manifest["environment"] == manifest["attempts"][0]["environment"]
    assert by["auto"].provenance.commit == manifest["attempts"][0]["environment"]["git"]["commit"]
    assert manifest["fingerprint_components"]["code"] == provenance.measurement_code_hash()

    monkeypatch.setattr("specbench_lib.sweep.driver.measurement_code_hash", lambda: "e" * 20)
    third = sb.run_sweep(plan, resume=first.run_id, outputs=outputs, progress=False)
    assert third.manifest["attempts"][2]["kept_cells"] == []  # new measuring code: nothing fresh
    assert {c.provenance.attempt for c in third.cells} == {3}
    assert third.stale == [] and len(third.cells) == 4


def test_resume_measures_damaged_cell_files_again_and_names_them(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = fake_params(tmp_path, configs=[{"name": "auto", "method": "auto"}])
    plan = sb.load_plan(path)
    outputs = tmp_path / "out"
    first = sb.run_sweep(plan, outputs=outputs, progress=False)
    cell = first.dir.cell_path("auto__code__ctx16__c1")
    cell.write_text(cell.read_text()[:50])  # a torn write from another tool
    again = sb.run_sweep(plan, resume=first.run_id, outputs=outputs, progress=False)
    assert "damaged" in capsys.readouterr().out
    assert [c.status for c in again.cells] == ["ok"] and again.damaged == []
    assert isinstance(again.cells[0], CellRecord) and again.cells[0].provenance.attempt == 2


def test_an_attached_servers_reported_version_alone_makes_its_cells_stale() -> None:
    plan = load_plan(TINY)
    attached = {s.label: {"url": "http://127.0.0.1:30000", "unit": None, "version": "0.5.5",
                          "settings": {"context_length": 4096}} for s in plan.servers}
    before = cell_fingerprints(plan, {s.label: [] for s in plan.servers}, BASE, attached)
    upgraded = {k: {**v, "version": "0.5.6"} for k, v in attached.items()}
    after = cell_fingerprints(plan, {s.label: [] for s in plan.servers}, BASE, upgraded)
    assert all(before[c] != after[c] for c in before)


def test_each_document_is_tokenized_once_per_server(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from specbench_lib.servers.engines.llamacpp import LlamaCppAdapter

    path = fake_params(tmp_path, configs=[{"name": "auto", "method": "auto"}],
                       concurrency=[1, 2])  # the same prompts
    seen: list[str] = []
    real = LlamaCppAdapter.tokenize

    def counting(self, client, text):  # noqa: ANN001
        seen.append(text)
        return real(self, client, text)

    monkeypatch.setattr(LlamaCppAdapter, "tokenize", counting)
    result = sb.run_sweep(sb.load_plan(path), outputs=tmp_path / "out", progress=False)
    assert [c.status for c in result.cells] == ["ok"] * 2
    assert seen and len(seen) == len(set(seen))  # 2 cells and the warmup, no document twice
