"""``specbench run`` as a user meets it: parameters checked before any kernel starts, a run that
never began leaves no run folder, a damaged manifest is named before resuming, and Ctrl-C ends
with one line naming the exact resume command and exit status 130."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from fakeparams import FAKE
from paramsfiles import fake_plan, write_params
from ports import free_port
from procs import pids_with

from specbench_lib import cli, kernelrun
from specbench_lib.runs.run import RunDir

ROOT = Path(__file__).resolve().parents[2]
EMBEDDED = ROOT / "params" / "embedded.yaml"


@pytest.fixture
def no_kernel(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """papermill replaced: records what it would run and writes a manifest as a sweep would."""
    import papermill

    calls: list[dict[str, Any]] = []

    def execute(source: str, out: str, **kw: Any) -> None:
        calls.append({"source": source, "out": out, **kw})
        if "run_id" in kw["parameters"] or "resume" in kw["parameters"]:
            (Path(out).parent / "manifest.json").write_text(json.dumps({"phase": "x"}))

    monkeypatch.setattr(papermill, "execute_notebook", execute)
    return calls


def test_an_undeclared_parameter_is_refused_with_the_close_match(
        outputs: Path, no_kernel: list[dict[str, Any]], capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["run", "tp1", "-p", "budgt", "16"]) == 2
    err = capsys.readouterr().err
    assert "unknown notebook parameter 'budgt' (did you mean 'budget'?)" in err
    assert "the notebook takes: params_file, budget, run_id, resume" in err
    assert no_kernel == [] and not (outputs / "runs").exists()

    assert cli.main(["run", "report", "--params", str(EMBEDDED)]) == 2
    assert "--params sets the notebook parameter 'params_file'" in capsys.readouterr().err
    assert cli.main(["run", "tp1", "-p", "budget", "[unclosed"]) == 2
    assert "-p budget '[unclosed' is not a YAML value" in capsys.readouterr().err
    assert no_kernel == []


def test_dry_run_as_a_parameter_plans_without_a_kernel(
        outputs: Path, no_kernel: list[dict[str, Any]], capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["run", "tp1", "-p", "dry_run", "true", "-p", "budget", "16"]) == 0
    assert "ngram-b16" in capsys.readouterr().out
    assert no_kernel == [] and not (outputs / "runs").exists()


def test_a_report_notebook_runs_beside_the_report_not_as_a_run(
        outputs: Path, no_kernel: list[dict[str, Any]]) -> None:
    assert cli.main(["run", "report", "-p", "runs", "a,b"]) == 0
    [call] = no_kernel
    assert call["out"] == str(outputs / "report" / "report.ipynb")
    assert call["parameters"] == {"runs": "a,b", "PAPERMILL_OUTPUT_PATH": call["out"]}
    assert not (outputs / "runs").exists()


def test_resume_takes_the_runs_own_params_and_a_damaged_manifest_is_named_first(
        outputs: Path, no_kernel: list[dict[str, Any]], capsys: pytest.CaptureFixture[str]) -> None:
    run = RunDir.at("r1", root=outputs)
    run.update_manifest(phase="tiny", params_file="/somewhere/tiny.yaml")
    assert cli.main(["run", "tp1", "--resume", "r1"]) == 0
    parameters = no_kernel[0]["parameters"]
    assert parameters["params_file"] == "/somewhere/tiny.yaml" and parameters["resume"] == "r1"
    assert no_kernel[0]["out"] == str(run.path / "tp1.attempt1.ipynb")

    run.manifest_path.write_text('{"phase": "ti')
    assert cli.main(["run", "tp1", "--resume", "r1"]) == 2
    err = capsys.readouterr().err
    assert "cannot resume run r1: its manifest cannot be read" in err and "manifest.json" in err
    assert "reuse" in err and len(no_kernel) == 1 and not (run.path / ".lock").exists()


def test_an_existing_run_id_is_refused(outputs: Path, no_kernel: list[dict[str, Any]],
                                       capsys: pytest.CaptureFixture[str]) -> None:
    (outputs / "runs" / "mine").mkdir(parents=True)
    assert cli.main(["run", "tp1", "-p", "run_id", "mine"]) == 2
    assert "--resume mine" in capsys.readouterr().err and no_kernel == []


def test_a_preflight_failure_leaves_no_run_folder(tmp_path: Path, outputs: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    params = write_params(tmp_path, EMBEDDED, phase="pf", engine={"binary": str(tmp_path / "nope")})
    assert cli.main(["run", "tp1", "-f", str(params), "-p", "run_id", "pf1"]) == 1
    err = capsys.readouterr().err
    assert "PreflightError" in err and "no run was recorded" in err
    assert not (outputs / "runs" / "pf1").exists()
    kept = outputs / "failed" / "pf1.ipynb"
    assert kept.is_file() and (outputs / "failed" / "pf1.html").is_file()
    assert str(kept) in err
    assert "binary" in json.dumps(json.loads(kept.read_text())["cells"])  # the audit trail


def slow_params(tmp_path: Path, port: int) -> Path:
    """auto answers at once; the `slow` config's server never sends a token (3 s timeout). The
    client host is not judged (these tests are about the CLI, not the host)."""
    def argv(mode: str, *budget: str) -> str:
        return json.dumps(["{binary}", str(FAKE), "--port", "{port}", "--mode", mode,
                           "--hang-s", "30", *budget])
    path = write_params(tmp_path, fake_plan(
        port, argv=argv("ok"), phase="slow", engine={"ready_timeout_s": 10},
        configs=[{"name": "auto", "method": "auto"},
                 {"name": "slow", "method": "ngram", "budgets": [4],
                  "argv": json.loads(argv("hang", "--budget", "{budget}"))}],
        output_tokens=4, timeouts={"first_token_s": 3, "between_tokens_s": 2, "request_s": 6},
        cell_order="fixed"),  # auto first, then the slow config (not a block's drawn order)
        name="slow.yaml")
    return path


def fake_servers(port: int) -> list[int]:
    return pids_with("fake_server.py", "--port\0" + str(port))


def interrupt_run(params: Path, port: int, outputs: Path, run_id: str) -> tuple[int, str]:
    """``specbench run tp1`` of ``params`` in a child process, Ctrl-C'd while the slow config's
    first request waits for its first token: its exit status and output."""
    # Ctrl-C's KeyboardInterrupt even where this suite runs with SIGINT ignored (a background job)
    script = ("import signal, sys\n"
              "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
              "from specbench_lib.cli import main\n"
              f"sys.exit(main(['run', 'tp1', '-f', {str(params)!r}, '-p', 'run_id', {run_id!r}]))\n")
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, cwd=ROOT,
                             env={**os.environ, "SPECBENCH_OUTPUTS": str(outputs)})
    try:
        deadline = time.monotonic() + 120
        slow_log = outputs / "runs" / run_id / "logs" / "slow-b4.log"
        while not slow_log.exists() and time.monotonic() < deadline and child.poll() is None:
            time.sleep(0.05)
        assert slow_log.exists(), child.communicate()[0]
        time.sleep(1.5)  # the slow cell's first request is waiting for its first token
        child.send_signal(signal.SIGINT)
        output = child.communicate(timeout=90)[0]
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        for pid in fake_servers(port):
            os.kill(pid, signal.SIGKILL)
    return child.returncode, output


@pytest.fixture(scope="module")
def interrupted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, int, int, str]:
    """One ``specbench run`` Ctrl-C'd while the slow config waits (:func:`interrupt_run`), made
    once for the module: its outputs folder, params, port, exit status and output. The tests
    read it, or resume a copy of it."""
    tmp = tmp_path_factory.mktemp("interrupted")
    port = free_port()
    params = slow_params(tmp, port)
    returncode, output = interrupt_run(params, port, tmp / "outputs", "c1")
    return tmp / "outputs", params, port, returncode, output


def test_ctrl_c_prints_one_line_with_the_resume_command_and_exits_130(
        interrupted: tuple[Path, Path, int, int, str]) -> None:
    outputs, params, port, returncode, output = interrupted
    run_dir = outputs / "runs" / "c1"
    assert returncode == 130, output
    command = f"specbench run tp1 --resume c1 --params {params}"  # run_id is the resume's
    lines = [line for line in output.splitlines() if line.startswith("specbench: run c1")]
    assert lines == [f"specbench: run c1 interrupted; resume with: {command}"], output
    assert "Traceback" not in output and "run c1: interrupted, ok 1" in output  # the sweep's
    assert "Traceback" not in output and "KeyboardInterrupt" not in output, output
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "interrupted" and manifest["attempts"][-1]["status"] == "interrupted"
    assert not (run_dir / ".lock").exists()
    assert fake_servers(port) == []
    assert (run_dir / "cells" / "auto__code__ctx16__c1.json").exists()
    assert not (run_dir / "cells" / "slow-b4__code__ctx16__c1.json").exists()  # cancelled
    assert (run_dir / "tp1.ipynb").is_file() and (run_dir / "tp1.html").is_file()


def test_a_resumed_run_shows_its_complete_attempt_and_names_the_interrupted_one(
        interrupted: tuple[Path, Path, int, int, str], outputs: Path) -> None:
    made, _, port, returncode, output = interrupted
    assert returncode == 130, output
    shutil.copytree(made, outputs)  # this test's own copy of the interrupted run, resumed
    run_dir = outputs / "runs" / "c1"
    try:
        assert cli.main(["run", "tp1", "--resume", "c1"]) == 0
    finally:
        for pid in fake_servers(port):
            os.kill(pid, signal.SIGKILL)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "complete" and manifest["notebook"] == "tp1.ipynb"
    assert [(a["n"], a["status"], a["notebook"]) for a in manifest["attempts"]] == [
        (1, "interrupted", "tp1.attempt1.ipynb"), (2, "complete", "tp1.ipynb")]
    assert sorted(p.name for p in run_dir.glob("tp1*")) == [
        "tp1.attempt1.html", "tp1.attempt1.ipynb", "tp1.html", "tp1.ipynb"]

    def errors(notebook: Path) -> list[str]:
        cells = json.loads(notebook.read_text())["cells"]
        return [o.get("ename") for c in cells for o in c.get("outputs", [])
                if o.get("output_type") == "error"]

    assert errors(run_dir / "tp1.ipynb") == []  # the complete attempt
    assert errors(run_dir / "tp1.attempt1.ipynb") == ["KeyboardInterrupt"]
    assert "KeyboardInterrupt" not in (run_dir / "tp1.html").read_text()
    index = (outputs / "index.html").read_text()
    assert "tp1.attempt1.html: attempt 1 (interrupted)" in index
    assert "tp1.html: attempt 2 (complete)" in index


def quiet_params(tmp_path: Path, port: int) -> Path:
    from fakeparams import fake_argv

    path = write_params(tmp_path, fake_plan(port, argv=fake_argv(), phase="quiet",
                                            output_tokens=4), name="quiet.yaml")
    return path


def test_a_run_prints_no_kernel_transport_warning(tmp_path: Path, outputs: Path) -> None:
    """The kernel talks over Unix sockets, so ipykernel has no TCP to warn about."""
    port = free_port()
    params = quiet_params(tmp_path, port)
    try:
        done = subprocess.run([sys.executable, "-m", "specbench_lib.cli", "run", "tp1", "-f",
                               str(params), "-p", "run_id", "q1"], capture_output=True,
                              text=True, cwd=ROOT, timeout=300,
                              env={**os.environ, "SPECBENCH_OUTPUTS": str(outputs)})
    finally:
        for pid in fake_servers(port):
            os.kill(pid, signal.SIGKILL)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "run q1: complete" in done.stdout + done.stderr  # the sweep ran and said so
    assert "IPKernelApp" not in done.stderr and "without encryption" not in done.stderr, done.stderr
    assert not list(ROOT.glob("kernel*ipc*"))  # the sockets lived in a private folder
    # no Ctrl-C, no interrupt: jupyter_client's shutdown interrupts an idle kernel first, and
    # ipykernel then printed "KeyboardInterrupt caught in kernel" (issue 42)
    assert "KeyboardInterrupt" not in done.stdout + done.stderr, done.stdout + done.stderr


def test_the_kernel_manager_asks_for_unix_sockets_in_its_folder(tmp_path: Path) -> None:
    manager = kernelrun.interrupting_kernel_manager(tmp_path)()
    assert manager.transport == "ipc" and manager.ip == str(tmp_path / "kernel")


def test_lab_opens_a_copy_of_the_phase_notebook_and_keeps_the_researchers_copy(
        outputs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from specbench_lib import lab

    launched: list[list[str]] = []
    monkeypatch.setattr(lab, "run_jupyter", lambda argv: launched.append(list(argv)) or 0)
    committed = ROOT / "notebooks" / "tp1.ipynb"
    before = committed.read_bytes()
    assert cli.main(["lab"]) == 0  # tp1 by default
    copy = outputs / "lab" / "tp1.ipynb"
    assert copy.read_bytes() == before
    assert launched == [[sys.executable, "-m", "jupyterlab", f"--ServerApp.root_dir={outputs}",
                         str(copy)]]
    copy.write_text(copy.read_text().replace("Phase TP1", "Phase TP1 (my edit)"))
    assert cli.main(["lab", "tp1"]) == 0  # the copy there is opened as it is
    assert "(my edit)" in copy.read_text() and len(launched) == 2
    assert cli.main(["lab", "tp1", "--fresh"]) == 0  # a new copy; the old one kept beside it
    assert copy.read_bytes() == before and "(my edit)" in (outputs / "lab" / "tp1.1.ipynb").read_text()
    assert committed.read_bytes() == before
    assert cli.main(["lab", "tp4", "--jupyter=--no-browser", "--jupyter=--port=8899"]) == 0
    assert launched[-1][4:] == ["--no-browser", "--port=8899", str(outputs / "lab" / "tp4.ipynb")]
    assert cli.main(["lab", "nope"]) == 2 and len(launched) == 4  # no such phase: nothing starts


def test_a_full_disk_when_the_notebook_is_saved_is_one_line_not_a_traceback(
        tmp_path: Path, outputs: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 42: the sweep recorded its run (closed ``interrupted``: a cell could not be written,
    its own one line said so), then papermill cannot save the executed notebook on the same full
    disk. Before, papermill's ``OSError`` traceback followed; now one line says where the run's
    record is."""
    import errno

    import papermill

    def execute(source: str, out: str, **kw: Any) -> None:
        (Path(out).parent / "manifest.json").write_text(json.dumps(
            {"phase": "x", "status": "interrupted"}))
        raise OSError(errno.ENOSPC, "No space left on device", out)

    monkeypatch.setattr(papermill, "execute_notebook", execute)
    params = write_params(tmp_path, EMBEDDED, phase="full")
    assert cli.main(["run", "tp1", "-f", str(params), "-p", "run_id", "full1"]) == 1
    said = capsys.readouterr()
    run = outputs / "runs" / "full1"
    assert [line for line in said.err.splitlines() if line.strip()] == [
        f"specbench: cannot save the executed notebook {run / 'tp1.ipynb'} (No space left on "
        f"device): free disk space; the run's record is in {run} (interrupted; 'specbench "
        f"runs' lists it)"], said.err
    assert "Traceback" not in said.out + said.err


def test_ctrl_c_after_the_run_was_closed_complete_asks_no_resume(
        tmp_path: Path, outputs: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 42: a SIGINT while the executed notebook was being saved, after the run was
    closed ``complete``, exited 130 and printed a resume command for a run with nothing left."""
    import papermill

    def execute(source: str, out: str, **kw: Any) -> None:
        (Path(out).parent / "manifest.json").write_text(json.dumps(
            {"phase": "x", "status": "complete"}))
        raise KeyboardInterrupt

    monkeypatch.setattr(papermill, "execute_notebook", execute)
    params = write_params(tmp_path, EMBEDDED, phase="done")
    assert cli.main(["run", "tp1", "-f", str(params), "-p", "run_id", "done1"]) == 0
    err = capsys.readouterr().err
    assert "run done1 was complete when it was interrupted: nothing to resume" in err
    assert "resume with" not in err and "Traceback" not in err
