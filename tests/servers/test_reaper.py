"""A server's processes that leave its process group (issue 24): found by their mark, ended."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from cellfactory import not_ok
from fakeparams import fake_argv
from paramsfiles import argv_of, fake_plan, write_params
from ports import free_port
from procs import pids_with

import specbench_lib as sb
from specbench_lib.servers import reaper

# a launcher whose child calls setsid() (as a daemonizing server does) and lives on; the
# child ignores SIGTERM when asked to, as a hung server would
ESCAPE = """
import os, signal, sys, time
pid = os.fork()
if pid == 0:
    os.setsid()
    if sys.argv[1] == "stubborn":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    print(os.getpid(), flush=True)
    time.sleep(60)
    os._exit(0)
time.sleep(60)
"""


def launch(mode: str, mark: str) -> tuple[subprocess.Popen[str], int]:
    proc = subprocess.Popen([sys.executable, "-c", ESCAPE, mode], stdout=subprocess.PIPE,
                            text=True, start_new_session=True, env=reaper.marked_env(mark))
    assert proc.stdout is not None
    child = int(proc.stdout.readline())
    return proc, child


def kill_group(proc: subprocess.Popen[str]) -> None:
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return False


def test_a_process_that_left_the_group_survives_the_group_kill_and_is_ended_by_its_mark() -> None:
    mark = reaper.new_mark()
    proc, child = launch("polite", mark)
    assert reaper.marked(mark) == sorted([proc.pid, child])
    kill_group(proc)
    assert _alive(child), "setsid took the child out of the group: killpg did not reach it"
    assert reaper.marked(mark) == [child]
    ended = reaper.end_marked(mark)
    assert [(e.pid, e.signal) for e in ended] == [(child, "SIGTERM")]
    assert ended[0].argv.startswith(f"{sys.executable} -c")
    deadline = time.monotonic() + 5
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child) and reaper.marked(mark) == []


def test_a_child_that_ignores_term_is_killed_and_says_so() -> None:
    mark = reaper.new_mark()
    proc, child = launch("stubborn", mark)
    kill_group(proc)
    time.sleep(0.2)
    ended = reaper.end_marked(mark, grace_s=0.5)
    assert [(e.pid, e.signal) for e in ended] == [(child, "SIGKILL")]
    time.sleep(0.3)
    assert not _alive(child)


def test_other_marks_and_unmarked_processes_are_left_alone() -> None:
    mine, other = reaper.new_mark(), reaper.new_mark()
    proc, child = launch("polite", other)
    try:
        assert reaper.end_marked(mine) == []
        assert _alive(child) and proc.poll() is None
    finally:
        kill_group(proc)
        reaper.end_marked(other)


def test_a_sweep_ends_the_server_that_left_its_group_and_names_it(tmp_path: Path) -> None:
    """``--mode setsid``: the launcher's server calls setsid() and keeps the port. Without the
    mark it would outlive the sweep and hold the port against the next config's server."""
    port = free_port()  # the kernel's pick: a fixed one lay inside test_jupyterlab.py's range
    path = write_params(tmp_path, fake_plan(
        port, argv=fake_argv("--mode", "ok"), phase="escape", engine={"ready_timeout_s": 10},
        configs=[{"name": "escape", "method": "ngram", "budgets": [4],
                  "argv": argv_of("--mode", "setsid", budget=True)},
                 {"name": "auto", "method": "auto"}],
        contexts=[32], output_tokens=4, warmup_requests=1), name="escape.yaml")
    run = sb.run_sweep(sb.load_plan(path), outputs=tmp_path / "out", progress=False)
    assert run.counts()["ok"] == 2, not_ok(run)
    servers = run.manifest["servers"]
    ended = servers["escape-b4"]["ended_after_stop"]
    assert len(ended) == 1 and "--mode setsid" in ended[0]["argv"]
    assert ended[0]["signal"] == "SIGTERM"
    assert "ended_after_stop" not in servers["auto"]
    assert pids_with("fake_server.py", "--port\0" + str(port)) == []
