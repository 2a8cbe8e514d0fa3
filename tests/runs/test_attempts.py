"""A run's notebooks per attempt: the complete attempt's is ``<stem>.ipynb``; an earlier one is
renamed after its attempt and labelled with how it ended; nothing changes while no attempt is
complete, or when an execution recorded no attempt."""

from __future__ import annotations

from pathlib import Path

from specbench_lib.runs.attempts import attempt_labels, keep_attempt
from specbench_lib.runs.run import RunDir


def run_with(tmp_path: Path, statuses: list[str], run_status: str, notebooks: list[str]) -> RunDir:
    run = RunDir(tmp_path / "r")
    run.path.mkdir()
    attempts = [{"n": i + 1, "status": s} for i, s in enumerate(statuses)]
    for attempt, name in zip(attempts, notebooks, strict=False):
        attempt["notebook"] = name
    run.update_manifest(phase="tp1", status=run_status, attempts=attempts)
    return run


def write(run: RunDir, *names: str) -> None:
    for name in names:
        (run.path / name).write_text(name)


def test_the_complete_attempt_takes_the_phase_name_and_the_earlier_one_its_number(
        tmp_path: Path) -> None:
    run = run_with(tmp_path, ["interrupted", "complete"], "complete", ["tp1.ipynb"])
    write(run, "tp1.ipynb", "tp1.html", "tp1.attempt2.ipynb")
    kept = keep_attempt(run, run.path / "tp1.attempt2.ipynb", attempts_before=1)
    assert kept == run.path / "tp1.ipynb" and kept.read_text() == "tp1.attempt2.ipynb"
    assert (run.path / "tp1.attempt1.ipynb").read_text() == "tp1.ipynb"
    assert (run.path / "tp1.attempt1.html").read_text() == "tp1.html"  # its page moves with it
    assert not (run.path / "tp1.attempt2.ipynb").exists()
    manifest = run.manifest()
    assert [a["notebook"] for a in manifest["attempts"]] == ["tp1.attempt1.ipynb", "tp1.ipynb"]
    assert manifest["notebook"] == "tp1.ipynb"
    assert attempt_labels(run) == {"tp1.attempt1.ipynb": "attempt 1 (interrupted)",
                                   "tp1.attempt1.html": "attempt 1 (interrupted)",
                                   "tp1.ipynb": "attempt 2 (complete)",
                                   "tp1.html": "attempt 2 (complete)"}


def test_an_interrupted_resume_is_recorded_but_moves_nothing(tmp_path: Path) -> None:
    run = run_with(tmp_path, ["interrupted", "interrupted"], "interrupted", ["tp1.ipynb"])
    write(run, "tp1.ipynb", "tp1.attempt2.ipynb")
    kept = keep_attempt(run, run.path / "tp1.attempt2.ipynb", attempts_before=1)
    assert kept == run.path / "tp1.attempt2.ipynb" and kept.is_file()
    assert (run.path / "tp1.ipynb").read_text() == "tp1.ipynb"
    assert [a["notebook"] for a in run.manifest()["attempts"]] == ["tp1.ipynb",
                                                                   "tp1.attempt2.ipynb"]


def test_an_execution_that_recorded_no_attempt_changes_nothing(tmp_path: Path) -> None:
    run = run_with(tmp_path, ["interrupted"], "complete", ["tp1.ipynb"])
    write(run, "tp1.ipynb", "tp1.attempt2.ipynb")
    kept = keep_attempt(run, run.path / "tp1.attempt2.ipynb", attempts_before=1)
    assert kept == run.path / "tp1.attempt2.ipynb"
    assert (run.path / "tp1.ipynb").read_text() == "tp1.ipynb"


def test_an_older_run_is_labelled_by_file_name_and_one_attempt_not_at_all(tmp_path: Path) -> None:
    old = run_with(tmp_path, ["interrupted", "complete"], "complete", [])
    write(old, "tp1.ipynb", "tp1.attempt2.ipynb")
    assert attempt_labels(old) == {"tp1.ipynb": "attempt 1 (interrupted)",
                                   "tp1.html": "attempt 1 (interrupted)",
                                   "tp1.attempt2.ipynb": "attempt 2 (complete)",
                                   "tp1.attempt2.html": "attempt 2 (complete)"}
    single = RunDir(tmp_path / "s")
    single.path.mkdir()
    single.update_manifest(phase="tp1", status="complete", attempts=[{"n": 1, "status": "complete"}])
    write(single, "tp1.ipynb")
    assert attempt_labels(single) == {}
