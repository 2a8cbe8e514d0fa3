"""Issue 49: a ``specbench run`` whose notebook kernel is killed mid-sweep (what the
out-of-memory killer does) ends in one line: the cells it wrote are safe, and the exact
``--resume`` command, which completes the run. Before, nbclient's ``DeadKernelError`` came out of
``specbench run`` as a traceback."""

from __future__ import annotations

import json
import os
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

from specbench_lib import cli

ROOT = Path(__file__).resolve().parents[2]


def test_a_dead_kernel_is_one_line_with_the_resume_command(
        tmp_path: Path, outputs: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    import papermill
    from nbclient.exceptions import DeadKernelError

    def execute(source: str, out: str, **kw: Any) -> None:
        (Path(out).parent / "manifest.json").write_text(json.dumps(
            {"phase": "x", "status": "running", "attempts": [{"n": 1}]}))
        raise DeadKernelError("Kernel died")

    monkeypatch.setattr(papermill, "execute_notebook", execute)
    params = write_params(tmp_path, ROOT / "params" / "embedded.yaml", phase="dk")
    assert cli.main(["run", "tp1", "-f", str(params), "-p", "run_id", "dk1"]) == 1
    said = capsys.readouterr()
    assert [line for line in said.err.splitlines() if line.strip()] == [
        f"specbench: run dk1 stopped: its notebook's kernel died (killed: out of memory?); the "
        f"cells it wrote are safe; resume with: specbench run tp1 --resume dk1 --params {params}"]
    assert "Traceback" not in said.out + said.err


def hang_params(tmp_path: Path, port: int) -> Path:
    """auto answers at once; the ``slow`` config's server never sends a token (3 s timeout)."""
    def argv(mode: str, *budget: str) -> str:
        return json.dumps(["{binary}", str(FAKE), "--port", "{port}", "--mode", mode,
                           "--hang-s", "30", *budget])
    slow = {"name": "slow", "method": "ngram", "budgets": [4],
            "argv": json.loads(argv("hang", "--budget", "{budget}"))}
    plan = fake_plan(port, argv=argv("ok"), engine={"ready_timeout_s": 10}, phase="dk",
                     configs=[{"name": "auto", "method": "auto"}, slow], output_tokens=4,
                     timeouts={"first_token_s": 3, "between_tokens_s": 2, "request_s": 6},
                     cell_order="fixed")
    return write_params(tmp_path, plan, name="dk.yaml")


def kernels_of(parent: int) -> list[int]:
    """The ipykernel processes whose parent is ``parent``."""
    found = []
    for pid in pids_with("ipykernel"):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == parent:
            found.append(pid)
    return found


def test_a_kernel_killed_mid_sweep_is_resumed_to_complete(tmp_path: Path, outputs: Path) -> None:
    port = free_port()
    params = hang_params(tmp_path, port)
    child = subprocess.Popen(
        [sys.executable, "-m", "specbench_lib.cli", "run", "tp1", "-f", str(params), "-p",
         "run_id", "dk2"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT,
        env={**os.environ, "SPECBENCH_OUTPUTS": str(outputs)})
    try:
        deadline = time.monotonic() + 120
        slow_log = outputs / "runs" / "dk2" / "logs" / "slow-b4.log"
        while not slow_log.exists() and time.monotonic() < deadline and child.poll() is None:
            time.sleep(0.05)
        assert slow_log.exists(), child.communicate()[0]
        time.sleep(1.0)  # the slow cell's first request waits for its first token
        (kernel,) = kernels_of(child.pid)
        os.kill(kernel, signal.SIGKILL)  # as the out-of-memory killer does
        output = child.communicate(timeout=120)[0]
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        for pid in pids_with("fake_server.py", "--port\0" + str(port)):
            os.kill(pid, signal.SIGKILL)
    assert child.returncode == 1, output
    assert "Traceback" not in output and "DeadKernelError" not in output, output
    lines = [line for line in output.splitlines() if line.startswith("specbench: run dk2")]
    assert lines == [f"specbench: run dk2 stopped: its notebook's kernel died (killed: out of "
                     f"memory?); the cells it wrote are safe; resume with: specbench run tp1 "
                     f"--resume dk2 --params {params}"], output
    run_dir = outputs / "runs" / "dk2"
    assert (run_dir / "cells" / "auto__code__ctx16__c1.json").exists()  # safe
    try:
        assert cli.main(["run", "tp1", "--resume", "dk2", "--params", str(params)]) == 0
    finally:
        for pid in pids_with("fake_server.py", "--port\0" + str(port)):
            os.kill(pid, signal.SIGKILL)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "complete"
    assert (run_dir / "cells" / "slow-b4__code__ctx16__c1.json").exists()
