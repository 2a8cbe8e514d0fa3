"""The manifest's read model: what the run store writes, read back as typed values."""

from __future__ import annotations

import json
from pathlib import Path

from paramsfiles import write_params

import specbench_lib as sb
from specbench_lib.runs.manifest import Attempt, Manifest, ServerEntry, ServerRecord
from specbench_lib.runs.run import Run, RunDir

EMBEDDED = Path(__file__).resolve().parents[2] / "params" / "embedded.yaml"


def test_a_written_manifest_reads_back_as_its_model(tmp_path: Path) -> None:
    plan = sb.load_plan(write_params(
        tmp_path, EMBEDDED, name="small.yaml", phase="small",
        configs=[{"name": "auto", "method": "auto"}],
        workloads=[{"name": "code", "source": "humaneval"}], contexts=[128], concurrency=[1]))
    fingerprints = {c.cell_id: "fp" for c in plan.cells}
    run = Run.start(plan, fingerprints, run_id="r1", outputs=tmp_path / "out")
    run.store_server("auto", ServerRecord(
        {"mode": "shared"}, controlled=True, argv=["llama-server", "--port", "8080"], pid=12,
        starts=1, placement={"engine": "ray", "mode": "packed", "gpus": ["0"]}))
    run.finish("complete", elapsed_s=1.25, counts={"ok": 1})
    raw = RunDir.at("r1", root=tmp_path / "out").manifest()
    manifest = RunDir.at("r1", root=tmp_path / "out").read_manifest()
    assert manifest.raw == raw  # the JSON on disk is what it was; the model is a view of it
    assert (manifest.run_id, manifest.phase, manifest.status) == ("r1", "small", "complete")
    assert manifest.plan_fingerprints == fingerprints and manifest.verdict_counts == {"ok": 1}
    assert manifest.elapsed_s == round(1.25, 1) == raw["elapsed_s"]
    (attempt,) = manifest.attempts
    assert attempt.n == 1 and attempt.status == "complete" and attempt.pid is not None
    assert attempt.git == raw["attempts"][0]["environment"].get("git", {})
    server = manifest.servers["auto"]
    assert server.argv == ("llama-server", "--port", "8080") and server.starts == 1
    assert server.placement is not None and server.placement.gpus == ("0",)


def test_an_older_manifest_reads_with_its_gaps_empty() -> None:
    manifest = Manifest.from_dict({"phase": "tp1", "attempts": [{"status": "interrupted"}, {}]})
    assert manifest.plan_fingerprints is None and manifest.verdict_counts is None
    assert [a.n for a in manifest.attempts] == [1, 2]  # numbered by place when they name none
    assert manifest.attempts[0] == Attempt(n=1, status="interrupted")
    assert manifest.last_attempt == Attempt(n=2) and manifest.git == {}
    assert Manifest.from_dict({}) == Manifest()
    assert ServerEntry.from_dict("a", {"controlled": False, "url": "http://x"}).placement is None


def test_the_server_entry_is_written_typed_with_the_json_it_always_had() -> None:
    """The sweep builds a server's entry as a ServerRecord; its JSON is the dict the sweep built
    before (issue 31): a manifest an older specbench wrote round-trips byte for byte, and each
    path of a server's life gives the keys, in the order, the dict writer gave them (as 1d4f366
    wrote them for a launched, a failed, an attached and an attached-down server)."""
    old = next((Path(__file__).parents[1] / "data" / "old_run").glob("*/manifest.json"))
    for entry in json.loads(old.read_text())["servers"].values():
        assert json.dumps(ServerRecord.from_dict(entry).to_dict()) == json.dumps(entry)

    record = ServerRecord({"mode": "shared"})
    record.order += ["auto__code__ctx128__c1"]
    assert record.to_dict() == {"isolation": {"mode": "shared"}, "starts": 0,
                                "order": ["auto__code__ctx128__c1"]}
    record.cpus, record.controlled, record.argv = {"server": None}, True, ["llama-server"]
    record.log, record.timing = "logs/auto.log", {"cells": {}}
    record.pid, record.starts, record.ready_s = 12, 1, 0.5
    record.context_per_request, record.reported_version, record.effective = 2048, None, {}
    launched = ["isolation", "starts", "order", "cpus", "controlled", "argv", "log", "timing",
                "pid", "ready_s", "context_per_request", "reported_version", "effective"]
    assert list(record.to_dict()) == launched  # reported_version None: asked, not reported
    record.error, record.returncode = "EngineError: no /tokenize", None
    assert list(record.to_dict()) == [*launched, "error", "returncode"]
    record.error, record.warmup = None, {"errors": []}
    record.ended_after_stop += [{"pid": 7}]
    record.late_crash = {"line": "CUDA error"}
    data = record.to_dict()
    assert list(data) == [*launched, "warmup", "ended_after_stop", "late_crash"]
    entry = ServerEntry.from_dict("auto", data)  # what the readers see
    assert (entry.controlled, entry.argv, entry.pid, entry.starts, entry.late_crash) == (
        True, ("llama-server",), 12, 1, "CUDA error")

    down = ServerRecord({"mode": "shared"}, cpus={}, controlled=False, url="http://h:1",
                        log="logs/down.log", starts=1, error="ServerError: unit failed")
    assert list(down.to_dict()) == ["isolation", "starts", "order", "cpus", "controlled", "url",
                                    "unit", "log", "timing", "pid", "error", "returncode"]
    placed = ServerRecord.from_dict(json.loads(json.dumps(down.to_dict())))  # a Ray worker's
    placed.placement = {"engine": "ray", "mode": "packed", "gpus": ["0"]}
    assert placed.to_dict() == {**down.to_dict(), "placement": placed.placement}
    assert ServerEntry.from_dict("down", placed.to_dict()).placement is not None
