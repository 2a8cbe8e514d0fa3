"""Issue 49: a server kept up across blocks that is SIGKILLed while idle, between blocks (no cell
sees it, and a SIGKILL leaves no crash line in its log), is recorded and said: its return code
(-9) and signal in the manifest, one line in the run, and then it is started again (its config's
server lifetimes now differ from the others': docs/faults.md). Before, it was started again
without a word."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from paramsfiles import fake_plan, write_params
from ports import free_port

import specbench_lib as sb
from specbench_lib.sweep.serversweep import ServerSweep

ROOT = Path(__file__).resolve().parents[2]


def argv(interval: float, *extra: str) -> str:
    return json.dumps(["{binary}", str(ROOT / "tests" / "support" / "fake_server.py"), "--port",
                       "{port}", "--interval", str(interval), "--nodelay", *extra])


def test_a_kept_server_killed_between_blocks_is_recorded_and_said(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    ngram = {"name": "ngram", "method": "ngram", "budgets": [8],
             "argv": json.loads(argv(0.001, "--budget", "{budget}"))}
    plan = fake_plan(free_port(), argv=argv(0.002), engine={"ready_timeout_s": 10}, phase="kept",
                     configs=[{"name": "auto", "method": "auto"}, ngram], output_tokens=4,
                     repeats=2)
    path = write_params(tmp_path, plan, name="kept.yaml")
    resume = ServerSweep.resume
    killed: list[int] = []

    def kill_then_resume(self: ServerSweep, plan: Any, number: int) -> ServerSweep:
        if self.server.label == "ngram-b8" and self.live is not None and not killed:
            os.kill(self.live.proc.pid, signal.SIGKILL)  # idle, between the blocks
            killed.append(self.live.proc.pid)
            deadline = time.monotonic() + 10
            while self.live.proc.alive() and time.monotonic() < deadline:
                time.sleep(0.02)
        return resume(self, plan, number)

    monkeypatch.setattr(ServerSweep, "resume", kill_then_resume)
    result = sb.run_sweep(sb.load_plan(path), outputs=tmp_path / "out")
    out = capsys.readouterr().out
    assert killed and result.counts()["ok"] == 4
    servers = result.manifest["servers"]
    assert servers["ngram-b8"]["starts"] == 2 and servers["auto"]["starts"] == 1
    assert servers["ngram-b8"]["died_idle"] == [{"block": 2, "returncode": -9, "signal": "SIGKILL"}]
    assert "died_idle" not in servers["auto"]
    said = [line for line in out.splitlines() if "died while idle" in line]
    assert said == ["  server ngram-b8: died while idle before block 2 (return code -9, SIGKILL); "
                    "starting it again: this config's later cells run on a new server, its "
                    "server lifetimes differ from the others'"], out
