"""The manifest's read model: what the run store writes, read back as typed values."""

from __future__ import annotations

from pathlib import Path

import specbench_lib as sb
from specbench_lib.runs.manifest import Attempt, Manifest, ServerEntry
from specbench_lib.runs.run import Run, RunDir

EMBEDDED = Path(__file__).resolve().parent.parent / "params" / "embedded.yaml"


def test_a_written_manifest_reads_back_as_its_model(tmp_path: Path) -> None:
    path = tmp_path / "small.yaml"
    path.write_text(f"extends: {EMBEDDED}\nphase: small\nconfigs: [{{name: auto, method: auto}}]\n"
                    "workloads: [{name: code, source: humaneval}]\ncontexts: [128]\n"
                    "concurrency: [1]\n")
    plan = sb.load_plan(path)
    fingerprints = {c.cell_id: "fp" for c in plan.cells}
    run = Run.start(plan, fingerprints, run_id="r1", outputs=tmp_path / "out")
    run.store_server("auto", {"controlled": True, "argv": ["llama-server", "--port", "8080"],
                              "pid": 12, "starts": 1,
                              "placement": {"engine": "ray", "mode": "packed", "gpus": ["0"]}})
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
