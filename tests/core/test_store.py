"""Run directories: atomic cells, the lock, stale cells, known-bad rules, preflight restaging."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cellfactory import make_cell

from specbench_lib import PreflightError, StoreError, SweepResult
from specbench_lib.core.store import write_json_atomic
from specbench_lib.model.cellspec import ServerConfig
from specbench_lib.model.params import KnownBad
from specbench_lib.model.records import CellRecord
from specbench_lib.model.sections import EngineParams
from specbench_lib.runs.provenance import file_identity
from specbench_lib.runs.run import RunDir, list_runs
from specbench_lib.servers.files import engine_files


def test_a_write_killed_halfway_leaves_the_previous_file(tmp_path: Path) -> None:
    target = tmp_path / "cells" / "c.json"
    write_json_atomic(target, {"v": 1})
    script = (
        "import json, os, sys\n"
        "from pathlib import Path\n"
        "from specbench_lib.core import store\n"
        "real = json.dump\n"
        "def dying(obj, fh, **kw):\n"
        "    fh.write('{\"v\": 2, \"partial\": ')\n"
        "    fh.flush()\n"
        "    os._exit(9)\n"
        "store.json.dump = dying\n"
        f"store.write_json_atomic(Path({str(target)!r}), {{'v': 2}})\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 9, done.stderr
    assert json.loads(target.read_text()) == {"v": 1}
    assert [p.name for p in target.parent.glob("*.json")] == ["c.json"]


def test_second_writer_is_refused_and_a_dead_owner_is_taken_over(tmp_path: Path) -> None:
    run = RunDir.create("r1", root=tmp_path)
    run.update_manifest(phase="t")
    with pytest.raises(StoreError, match=f"being written by process {os.getpid()}"):
        RunDir.open("r1", root=tmp_path)
    run.release()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True).stdout.strip()
    (run.path / ".lock").write_text(dead)
    again = RunDir.open("r1", root=tmp_path)
    assert (again.path / ".lock").read_text() == str(os.getpid())
    with pytest.raises(StoreError, match="holds a run already"):
        RunDir.create("r1", root=tmp_path)


def test_resume_of_unknown_run_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="no run to resume"):
        RunDir.open("nope", root=tmp_path)


def test_archive_keeps_every_earlier_attempt(tmp_path: Path) -> None:
    run = RunDir.create("r", root=tmp_path)
    for n in (1, 2, 3):
        c = make_cell("c", "auto", None, fingerprint=f"fp{n}")
        run.archive_cell(c.cell_id)
        run.write_cell(c)
    history = sorted(p.name for p in (run.cells_dir / "history").iterdir())
    assert history == [f"{c.cell_id}.1.json", f"{c.cell_id}.2.json"]
    assert json.loads(run.cell_path(c.cell_id).read_text())["fingerprint"] == "fp3"
    assert [c.fingerprint for c in run.read_cells()[0]] == ["fp3"]


def cell(config: str, fp: str, status: str = "ok") -> CellRecord:
    return make_cell(config, "auto", None, status, 10.0, context=128, fingerprint=fp)


def test_stale_cells_never_reach_the_table(tmp_path: Path) -> None:
    run = RunDir.create("r", root=tmp_path)
    a, b, c, x = (cell(n, "").spec.cell_id for n in "abcx")
    run.update_manifest(plan_fingerprints={a: "fp-a", b: "fp-b", c: "fp-c"})
    run.write_cell(cell("a", "fp-a"))
    run.write_cell(cell("b", "fp-OLD"))
    run.write_cell(cell("x", "fp-x"))
    result = SweepResult(run.path)
    assert [c.cell_id for c in result.cells] == [a]
    assert sorted(c.cell_id for c in result.stale) == [b, x]
    assert result.missing == [b, c]
    assert len(result.table()) == 1
    assert "2 stale" in result._repr_mimebundle_()["text/html"]


def test_known_bad_matches_config_budget_engine_and_gpu() -> None:
    server = ServerConfig("tree", "tree", 8, {}, None, ())
    rule = KnownBad(config="tree", budgets=(8, 12), reason="illegal instruction",
                    engine_version="0.5", gpu="RTX 5090")
    assert rule.applies(server, engine_version="sglang 0.5.4", gpus=["NVIDIA GeForce RTX 5090"])
    assert not rule.applies(server, engine_version="sglang 0.5.4", gpus=["NVIDIA H200"])
    assert not rule.applies(server, engine_version="0.4.9", gpus=["NVIDIA GeForce RTX 5090"])
    other = ServerConfig("tree", "tree", 16, {}, None, ())
    assert not rule.applies(other, engine_version="0.5", gpus=["RTX 5090"])
    assert KnownBad(config="tree", reason="r").applies(other, engine_version="", gpus=[])


def test_known_bad_matches_a_gpu_architecture_by_compute_capability() -> None:
    """SM120 is one architecture under several names: a name substring ("5090") missed the RTX
    PRO 6000 Blackwell that crashed the same way; the compute capability catches both."""
    server = ServerConfig("tree", "tree", 8, {}, None, ())
    rule = KnownBad(config="tree", reason="illegal instruction (SM120)", compute_cap="12.0")
    for name in ("NVIDIA GeForce RTX 5090", "NVIDIA RTX PRO 6000 Blackwell Workstation Edition"):
        assert rule.applies(server, engine_version="x", gpus=[f"{name}, 575.51, 97887 MiB, 12.0"])
    assert not rule.applies(server, engine_version="x", gpus=["NVIDIA H200, 570.1, 143771 MiB, 9.0"])
    assert not rule.applies(server, engine_version="x", gpus=["NVIDIA GeForce RTX 5090, 570.1, 32 MiB"])
    assert not rule.applies(server, engine_version="x", gpus=[])  # no GPU: nothing to match
    assert not KnownBad(config="tree", reason="r", gpu="5090").applies(
        server, engine_version="x", gpus=["NVIDIA RTX PRO 6000 Blackwell, 575.51, 97887 MiB, 12.0"])
    with pytest.raises(ValueError, match="compute_cap"):
        KnownBad(config="tree", reason="r", compute_cap="sm120")


def fake_binary(tmp_path: Path) -> Path:
    binary = tmp_path / "llama-server"
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    return binary


def test_missing_model_names_path_and_fix(tmp_path: Path) -> None:
    engine = EngineParams(binary=str(fake_binary(tmp_path)), model=str(tmp_path / "shm" / "m.gguf"))
    with pytest.raises(PreflightError) as err:
        engine_files(engine)
    assert err.value.what == "model" and err.value.path == str(tmp_path / "shm" / "m.gguf")
    assert "tmpfs" in str(err.value) and "model_cache" in str(err.value)


def test_missing_model_is_restaged_from_the_cache(tmp_path: Path) -> None:
    cache = tmp_path / "disk" / "model"
    (cache / "sub").mkdir(parents=True)
    (cache / "config.json").write_text("{}")
    (cache / "sub" / "weights.bin").write_bytes(os.urandom(3 << 20))
    target = tmp_path / "shm" / "model"
    target.parent.mkdir()
    engine = EngineParams(binary=str(fake_binary(tmp_path)), model=str(target), model_cache=str(cache))
    _, model = engine_files(engine)
    assert model == target
    assert (target / "sub" / "weights.bin").read_bytes() == (cache / "sub" / "weights.bin").read_bytes()
    assert file_identity(target)["fingerprint"] == file_identity(cache)["fingerprint"]
    assert file_identity(target)["files"] == 2


def test_list_runs_summarises_manifests(tmp_path: Path) -> None:
    run = RunDir.create("20260101T000000Z_tp1_abc", root=tmp_path)
    run.update_manifest(phase="tp1", status="complete", verdict_counts={"ok": 3},
                        environment={"git": {"commit": "0123456789abcdef", "dirty": True}})
    [row] = list_runs(tmp_path)
    assert row["run_id"] == "20260101T000000Z_tp1_abc" and row["status"] == "complete"
    assert row["commit"] == "0123456789" and row["dirty"] is True and row["counts"] == {"ok": 3}


def test_secrets_are_redacted_from_params_and_argv() -> None:
    from specbench_lib.core.store import REDACTED, redact

    params = {"engine": {"api_key": "sk-SECRET", "port": 1}, "configs": [{"name": "a"}]}
    assert redact(params) == {"engine": {"api_key": REDACTED, "port": 1}, "configs": [{"name": "a"}]}
    argv = ["serve", "--api-key", "sk-SECRET", "--hf-token=hf_SECRET", "--port", "80"]
    assert redact(argv) == ["serve", "--api-key", REDACTED, f"--hf-token={REDACTED}", "--port", "80"]


def test_model_identity_is_compared_with_the_last_run(tmp_path: Path, monkeypatch) -> None:
    from specbench_lib.sweep.preflightchecks import model_matches_last_run

    monkeypatch.setenv("SPECBENCH_OUTPUTS", str(tmp_path))
    model = tmp_path / "m.gguf"
    model.write_bytes(b"a" * 4096)
    assert "no earlier run" in model_matches_last_run(model)
    RunDir.create("r1", root=tmp_path).update_manifest(model=file_identity(model))
    assert "same as run r1" in model_matches_last_run(model)
    model.write_bytes(b"a" * 1000)
    with pytest.raises(PreflightError, match="differs from run r1: size 4096 → 1000"):
        model_matches_last_run(model)
