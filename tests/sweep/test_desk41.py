"""The small frictions of issue 41: a workload's ``path`` read from its params file's folder (as
``extends:``), a free port when the configured one is taken, ``specbench runs`` aligned for long
phase names, and pages without machine paths. No server (about 2 s)."""

from __future__ import annotations

import dataclasses
import socket
from pathlib import Path

import pytest
from cellfactory import make_cell
from paramsfiles import write_params

from specbench_lib import cli
from specbench_lib.model.layering import load_params
from specbench_lib.model.plan import build_plan
from specbench_lib.runs.run import RunDir
from specbench_lib.sweep.preflight import doctor
from specbench_lib.sweep.serverports import with_free_port

DATA = Path(__file__).resolve().parents[1] / "data"


def test_a_workload_path_is_read_from_the_params_files_folder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "study"
    folder.mkdir()
    (folder / "q.jsonl").write_text((DATA / "spec_bench_question.jsonl").read_text())
    (folder / "p.yaml").write_text(
        "phase: t\nconfigs: [{name: auto, method: auto}]\ncontexts: [256]\nconcurrency: [1]\n"
        "workloads: [{name: sb, source: spec_bench, path: q.jsonl, categories: all}]\n")
    monkeypatch.chdir(tmp_path)  # the working directory has no q.jsonl: the file's folder does
    params = load_params(folder / "p.yaml")
    assert params.workloads[0].path == str(folder / "q.jsonl")
    assert [w.name for w in params.workloads][:2] == ["sb-writing", "sb-translation"]


def taken_port() -> tuple[socket.socket, int]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    return sock, sock.getsockname()[1]


def test_a_taken_default_port_gives_the_next_free_one(tmp_path: Path) -> None:
    sock, port = taken_port()
    try:
        write_params(tmp_path, "minimal")
        default = build_plan(load_params(tmp_path / "p.yaml"), source=tmp_path / "p.yaml")
        engine = default.params.engine.model_copy()  # the default port, here one that is taken
        engine.__dict__["port"] = port
        plan = dataclasses.replace(default, params=default.params.model_copy(
            update={"engine": engine}))
        assert "port" not in plan.params.engine.model_fields_set
        moved = with_free_port(plan)
        assert moved.params.engine.port > port and moved.cells == plan.cells
        (check,) = [c for c in doctor(plan) if c.name == "port"]
        assert check.ok and f"the sweep will use {moved.params.engine.port}" in check.detail
    finally:
        sock.close()
    assert with_free_port(plan) is plan  # free again: kept
    sock, port = taken_port()
    try:  # a port the params set is that port, or the clear refusal it always was
        write_params(tmp_path, "minimal", name="q.yaml", engine={"port": port})
        named = build_plan(load_params(tmp_path / "q.yaml"), source=tmp_path / "q.yaml")
        assert with_free_port(named) is named
        (check,) = [c for c in doctor(named) if c.name == "port"]
        assert not check.ok and "in use" in check.detail
    finally:
        sock.close()


def test_runs_lists_columns_aligned_for_long_phase_names(
        outputs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for run_id, phase in (("20260101T000000Z_t", "t"),
                          ("20260102T000000Z_random_contrast_long", "random_contrast_long")):
        run = RunDir(outputs / "runs" / run_id)
        run.cells_dir.mkdir(parents=True)
        run.update_manifest(phase=phase, status="complete", params={"phase": phase})
        run.write_cell(make_cell("auto", "auto", None))
    assert cli.main(["runs"]) == 0
    lines = capsys.readouterr().out.splitlines()[:3]
    starts = {line.index(word) for line, word in zip(lines, ("status", "complete", "complete"),
                                                     strict=True)}
    assert len(starts) == 1, lines  # one column, however long the phase before it


def test_pages_show_no_library_warning_and_no_machine_path() -> None:
    from specbench_lib.core.paths import project_root
    from specbench_lib.report.pages import tidy_output

    warned = {"output_type": "stream", "name": "stderr", "text": (
        "/usr/lib/python3/site-packages/matplotlib/x.py:12: UserWarning: Glyph missing\n"
        "  fig.tight_layout()\nreal problem here\n")}
    assert tidy_output(warned)["text"] == "real problem here\n"
    only = {"output_type": "stream", "name": "stderr",
            "text": "/x/y.py:3: DeprecationWarning: old\n  call()\n"}
    assert tidy_output(only) is None
    shown = {"output_type": "execute_result", "data": {
        "text/plain": f"params {project_root()}/params/embedded.yaml in {Path.home()}/x"}}
    assert tidy_output(shown)["data"]["text/plain"] == "params ./params/embedded.yaml in ~/x"
