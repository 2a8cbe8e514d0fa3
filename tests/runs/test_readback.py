"""Every file read back goes through one typed reader (:mod:`specbench_lib.readback`): an
``answer.json``, a manifest or a cell of another shape (or cut in half) is one line naming the
file and what to do, through every entry point (``answer_of``, ``specbench report``,
``specbench runs``, resume), never a traceback, and it never blocks the rest of the report.
Stray temporary files of an atomic write are removed on resume."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from fuzzing import FUZZ
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_hostile_record import JSON, a_cell_dict, paths_of, with_picks
from test_record_integrity import recorded_run

import specbench_lib as sb
from specbench_lib import cli
from specbench_lib.analysis.answer import answer_lines
from specbench_lib.model.answerfile import ANSWER_FILE, AnswerDoc
from specbench_lib.report import export as report
from specbench_lib.runs.run import Run, list_runs

PANEL = {"panel": {"workload": "code", "context": 128, "output_tokens": 64, "concurrency": 1,
                   "load": ""},
         "decided": True, "decision": "decided", "best": "auto", "confidence_set": ["auto"],
         "speedup": None, "speedup_lo": None, "speedup_hi": None, "baseline": "auto",
         "requests": {"auto": 8}, "eliminated": {}, "out": {}, "decided_s": 3.2,
         "decided_round": 2, "more_requests": None}
ANSWER = {"seconds": 12.5, "budget_s": 30.0, "rounds": 2, "stopped": "decided", "alpha": 0.05,
          "looks": 1, "panels": [PANEL]}


@pytest.fixture(scope="module")
def base_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any, dict[str, str]]:
    """A finished run of two ok cells with an answer, written as the sweep writes them."""
    tmp = tmp_path_factory.mktemp("readback")
    plan, fingerprints, run_dir = recorded_run(tmp)
    (run_dir.path / ANSWER_FILE).write_text(json.dumps(ANSWER))
    assert answer_lines(AnswerDoc.from_dict(ANSWER))[0].startswith("answer: 1/1 panels decided")
    return tmp, plan, fingerprints


def copy_of(base: tuple[Path, Any, dict[str, str]], into: Path) -> Path:
    """A fresh copy of the base run's outputs folder (each example damages its own)."""
    out = into / "out"
    shutil.copytree(base[0] / "out", out)
    return out


def read_every_way(out: Path, monkeypatch: pytest.MonkeyPatch,
                   capsys: pytest.CaptureFixture[str]) -> dict[str, str]:
    """Read the run through every entry point; each must read it or name a file in one line."""
    run_dir = out / "runs" / "r1"
    seen: dict[str, str] = {}
    try:
        result = sb.SweepResult(run_dir)
    except sb.StoreError as exc:
        seen["result"] = str(exc)
    else:
        answer = sb.answer_of(result)
        seen["answer"] = answer.text()
        answer.html()
    [listed] = list_runs(out)
    seen["runs"] = str(listed["error"])
    monkeypatch.setenv("SPECBENCH_OUTPUTS", str(out))
    capsys.readouterr()
    for argv in (["runs"], ["report", "r1"]):
        code = cli.main(argv)
        both = capsys.readouterr()
        assert code in (0, 2), (argv, both)
        assert "Traceback" not in both.err + both.out, (argv, both.err)
        # a refusal or a skipped run: a line each, specbench's
        assert all(line.startswith("specbench: ") for line in both.err.strip().splitlines()), \
            both.err
        seen[argv[0]] = both.err.strip()
    return seen


@pytest.fixture
def figures_unrendered(monkeypatch: pytest.MonkeyPatch) -> None:
    """The report's figures built but their files not rendered (an empty file each): with an
    answer that cannot be read, nothing a figure draws depends on it (its claims are those of the
    undamaged run, at α), and the fuzz tests below render every figure they build."""
    from matplotlib.figure import Figure

    monkeypatch.setattr(Figure, "savefig", lambda self, path, **_: Path(path).write_bytes(b""))


ANSWER_DAMAGES: list[tuple[str, Any]] = [
    ("a list", [1, 2]),
    ("panels a string", {**ANSWER, "panels": "x"}),
    ("a panel a number", {**ANSWER, "panels": [3]}),
    ("panel key a string", {**ANSWER, "panels": [{**PANEL, "panel": "code"}]}),
    ("rounds a string", {**ANSWER, "rounds": "two"}),
    ("no seconds", {k: v for k, v in ANSWER.items() if k != "seconds"}),
    ("eliminated a list", {**ANSWER, "panels": [{**PANEL, "eliminated": ["a"]}]}),
]


@pytest.mark.parametrize(("what", "bad"), ANSWER_DAMAGES, ids=[w for w, _ in ANSWER_DAMAGES])
def test_an_answer_of_another_shape_is_one_line_and_the_report_goes_on(
        base_run: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str], what: str, bad: Any, figures_unrendered: None) -> None:
    out = copy_of(base_run, tmp_path)
    (out / "runs" / "r1" / ANSWER_FILE).write_text(json.dumps(bad))
    seen = read_every_way(out, monkeypatch, capsys)
    assert seen["answer"].startswith("no answer: answer is not of its shape"), seen
    assert "answer.json" in seen["answer"] and "--resume" in seen["answer"]
    page = (out / "report" / "results.html").read_text()  # the report was written anyway
    assert "answer is not of its shape" in page
    summary = json.loads((out / "report" / "comparison.json").read_text())
    assert "not of its shape" in summary["answers"]["r1"]["damaged"]


def test_an_answer_cut_in_half_is_named_and_the_rest_of_the_report_is_written(
        base_run: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str], figures_unrendered: None) -> None:
    out = copy_of(base_run, tmp_path)
    path = out / "runs" / "r1" / ANSWER_FILE
    path.write_text(path.read_text()[:40])
    seen = read_every_way(out, monkeypatch, capsys)
    assert seen["answer"].startswith("no answer: cannot read JSON"), seen
    assert (out / "report" / "results.html").is_file()


ANSWER_PATHS = [(), *paths_of(ANSWER)]
# monkeypatch sets one variable to each example's folder; capsys is read out on every call
SCOPED = [HealthCheck.function_scoped_fixture]


@settings(FUZZ, max_examples=8, suppress_health_check=SCOPED)
@given(picks=st.lists(st.tuples(st.sampled_from(ANSWER_PATHS), st.booleans(), JSON), min_size=1,
                      max_size=3))
def test_fuzz_answer_json_is_read_or_named_through_every_entry_point(
        base_run: Any, tmp_path_factory: pytest.TempPathFactory,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        picks: list[tuple[tuple[Any, ...], bool, Any]]) -> None:
    out = copy_of(base_run, tmp_path_factory.mktemp("answer"))
    (out / "runs" / "r1" / ANSWER_FILE).write_text(json.dumps(with_picks(ANSWER, picks)))
    seen = read_every_way(out, monkeypatch, capsys)
    assert seen["answer"].startswith(("answer:", "no answer: answer is not of its shape")), seen


@pytest.fixture(scope="module")
def manifest_of(base_run: Any) -> dict[str, Any]:
    return json.loads((base_run[0] / "out" / "runs" / "r1" / "manifest.json").read_text())


# 8 examples, as the cell fuzz: each reads the run every way and resumes it (about 9 s)
@settings(FUZZ, max_examples=8, suppress_health_check=SCOPED)
@given(data=st.data())
def test_fuzz_a_manifest_is_read_or_named_by_every_reader_and_resume(
        base_run: Any, manifest_of: dict[str, Any], tmp_path_factory: pytest.TempPathFactory,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        data: st.DataObject) -> None:
    paths = [(), *paths_of(manifest_of)]
    picks = data.draw(st.lists(st.tuples(st.sampled_from(paths), st.booleans(), JSON),
                               min_size=1, max_size=3))
    out = copy_of(base_run, tmp_path_factory.mktemp("manifest"))
    run_dir = out / "runs" / "r1"
    (run_dir / "manifest.json").write_text(json.dumps(with_picks(manifest_of, picks)))
    seen = read_every_way(out, monkeypatch, capsys)
    if "result" in seen:  # unreadable: named by every reader, resume refuses in one line
        assert "manifest.json" in seen["result"] and seen["runs"] != "None"
    _, plan, fingerprints = base_run
    try:
        run = Run.start(plan, fingerprints, resume="r1", outputs=out)
    except sb.StoreError as exc:  # refused in one line that names the run
        assert "\n" not in str(exc) and str(run_dir) in str(exc), exc
        assert not (run_dir / ".lock").exists()
        return
    run.finish("interrupted", elapsed_s=0.0, counts={})


CELL = a_cell_dict()
CELL_PATHS = [(), *paths_of(CELL)]


@settings(FUZZ, max_examples=8, suppress_health_check=SCOPED)
@given(picks=st.lists(st.tuples(st.sampled_from(CELL_PATHS), st.booleans(), JSON), min_size=1,
                      max_size=3))
def test_fuzz_a_cell_is_read_or_named_through_every_entry_point(
        base_run: Any, tmp_path_factory: pytest.TempPathFactory,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        picks: list[tuple[tuple[Any, ...], bool, Any]]) -> None:
    out = copy_of(base_run, tmp_path_factory.mktemp("cell"))
    cell = out / "runs" / "r1" / "cells" / "auto__code__ctx128__c1.json"
    cell.write_text(json.dumps(with_picks(CELL, picks)))
    read_every_way(out, monkeypatch, capsys)


def test_resume_removes_the_temporary_files_of_interrupted_writes(
        base_run: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = copy_of(base_run, tmp_path)
    run_dir = out / "runs" / "r1"
    strays = [run_dir / f".answer.json.{os.getpid() + 1}.tmp", run_dir / ".manifest.json.7.tmp",
              run_dir / "cells" / ".auto__code__ctx128__c1.json.9.tmp"]
    for stray in strays:
        stray.write_text('{"half": ')
    keep = run_dir / "cells" / "notes.tmp"  # not an atomic write's: left alone
    keep.write_text("mine")
    _, plan, fingerprints = base_run
    run = Run.start(plan, fingerprints, resume="r1", outputs=out)
    assert not any(s.exists() for s in strays) and keep.exists()
    assert "temporary" in capsys.readouterr().out
    run.finish("interrupted", elapsed_s=0.0, counts={})
    report.compare("r1", root=out)
