"""Crash evidence and the server's port, through the real sweep and server control.

Each sweep here starts tests/support/fake_server.py (a llama.cpp-protocol stand-in) as a real process
through the argv-template engine, wrapped when a test needs a start-up line or a missing endpoint.
"""

from __future__ import annotations

import http.server
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from fakeparams import FAKE
from paramsfiles import DROP, fake_plan, write_params

import specbench_lib as sb
from specbench_lib.host.sources import listener_pids
from specbench_lib.servers.health import http_status
from specbench_lib.servers.process import ServerProcess, port_lease

ROOT = Path(__file__).resolve().parents[2]
PORT = 8198


def params(tmp_path: Path, argv: list[str]) -> Path:
    path = write_params(tmp_path, fake_plan(
        PORT, argv=argv, phase="evidence", engine={"ready_timeout_s": 5}, contexts=[16, 32],
        output_tokens=4, warmup_requests=1,
        timeouts={"first_token_s": 3, "between_tokens_s": 2, "request_s": 6},
        max_coalesced_fraction=DROP, max_coalesced_first_fraction=DROP, host=DROP))
    return path


def wrapped(before: str) -> list[str]:
    """The fake server started by a script that first runs ``before`` (Python)."""
    script = (f"import sys\nsys.path.insert(0, {str(FAKE.parent)!r})\nimport fake_server\n"
              f"{before}\nsys.argv = ['fake_server', '--port', sys.argv[1], '--mode', 'ok']\n"
              f"fake_server.main()\n")
    return ["{binary}", "-c", script, "{port}"]


def sweep(tmp_path: Path, argv: list[str]) -> sb.SweepResult:
    result = sb.run_sweep(sb.load_plan(params(tmp_path, argv)), outputs=tmp_path / "out",
                          progress=False)
    assert isinstance(result, sb.SweepResult)
    return result


def test_a_fatal_line_at_start_up_taints_every_cell_and_names_its_phase(tmp_path: Path) -> None:
    oom = "print('torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB', flush=True)"
    result = sweep(tmp_path, wrapped(oom))
    assert [c.status for c in result.cells] == ["crashed", "crashed"]
    for cell in result.cells:
        assert cell.verdict.reasons[0] == ("crash_signature: torch.OutOfMemoryError: CUDA out of "
                                           "memory. Tried to allocate 2.00 GiB (in the server log "
                                           "during start-up)"), cell.verdict
        assert cell.metrics is None and cell.measured == []
    assert len(result.table()) == 0


def test_a_failed_warmup_makes_the_configs_cells_invalid(tmp_path: Path) -> None:
    argv = ["{binary}", str(FAKE), "--port", "{port}", "--mode", "http400"]
    result = sweep(tmp_path, argv)
    for cell in result.cells:
        assert cell.status == "invalid"
        warm = [r for r in cell.verdict.reasons if "in the server's warmup" in r.detail]
        assert [r.code for r in warm] == ["http_400"], cell.verdict.reasons
    assert all(any(r.warmup for r in c.requests) for c in result.cells)


def test_a_server_without_tokenize_is_invalid_with_the_fix_not_crashed(tmp_path: Path) -> None:
    drop = ("real = fake_server._Handler.do_POST\n"
            "def do_POST(self):\n"
            "    if self.path == '/tokenize':\n"
            "        self.rfile.read(int(self.headers['Content-Length']))\n"
            "        return self._json(404, {'error': 'Not Found'})\n"
            "    return real(self)\n"
            "fake_server._Handler.do_POST = do_POST\n")
    result = sweep(tmp_path, wrapped(drop))
    for cell in result.cells:
        assert cell.status == "invalid" and cell.verdict.codes == {"missing_endpoint"}
        detail = cell.verdict.reasons[0].detail
        assert "/tokenize" in detail and "status 404" in detail and "engine.tokenizer" in detail


def test_the_most_specific_log_line_is_quoted(tmp_path: Path) -> None:
    log = tmp_path / "s.log"
    log.write_text("# argv: x\nready\n[TP0] Scheduler hit an exception: Traceback (most recent "
                   "call last):\n  File x\nRuntimeError: CUDA error: an illegal memory access was "
                   "encountered\nSIGQUIT received\n")
    from specbench_lib.servers.engines import get_adapter

    proc = ServerProcess(name="s", argv=["true"], base_url="http://127.0.0.1:1",
                         health_path="/health", log_path=log,
                         signatures=get_adapter("sglang").crash_signatures)
    assert proc.crash_signature() == ("RuntimeError: CUDA error: an illegal memory access was "
                                      "encountered")
    assert proc.crash_signature(0, log.read_text().index("RuntimeError")).startswith(
        "[TP0] Scheduler hit an exception")  # bounded to start-up: only the generic line
    assert proc.crash_signature(log.stat().st_size) is None


class _Trickle(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        for byte in b"HTTP/1.1 200 OK\r\n":
            self.wfile.write(bytes([byte]))
            self.wfile.flush()
            time.sleep(0.5)


def test_a_trickling_health_endpoint_cannot_outlast_the_ready_timeout() -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Trickle)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        began = time.monotonic()
        assert http_status(url, "/health", limit_s=1.0) is None
        assert time.monotonic() - began < 1.6
        sleeper = ServerProcess(name="s", argv=["sleep", "30"], base_url=url,
                                health_path="/health", log_path=Path("/dev/null"))
        with sleeper:
            began = time.monotonic()
            with pytest.raises(sb.ServerError, match="not ready within 2 s"):
                sleeper.wait_ready(2.0)
            assert time.monotonic() - began < 3.0
    finally:
        server.shutdown()


def test_readiness_refuses_a_server_this_run_did_not_start(tmp_path: Path) -> None:
    other = subprocess.Popen([sys.executable, str(FAKE), "--port", str(PORT), "--mode", "ok"],
                             stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while http_status(f"http://127.0.0.1:{PORT}", "/health") != 200:
            assert time.monotonic() < deadline
            time.sleep(0.1)
        assert listener_pids(PORT) == {other.pid}
        ours = ServerProcess(name="auto", argv=["sleep", "30"], base_url=f"http://127.0.0.1:{PORT}",
                             health_path="/health", log_path=tmp_path / "auto.log")
        with ours, pytest.raises(sb.ServerError, match=f"from process {other.pid}, not the server"):
            ours.wait_ready(5)
    finally:
        other.kill()
        other.wait()


def test_a_second_run_on_the_same_port_is_refused_before_it_starts(tmp_path: Path) -> None:
    plan = sb.load_plan(params(tmp_path, ["{binary}", str(FAKE), "--port", "{port}"]))
    with port_lease("127.0.0.1", PORT):
        with pytest.raises(sb.PreflightError, match="held by another specbench run"):
            sb.run_sweep(plan, outputs=tmp_path / "out", progress=False)
    assert not (tmp_path / "out" / "runs").exists()
    with socket.socket() as probe:  # the lease holds no socket: the servers can bind
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        probe.bind(("127.0.0.1", PORT))


def test_a_resume_is_not_marked_crashed_by_an_earlier_attempts_log(tmp_path: Path) -> None:
    """A config's log is appended to across attempts (and, with a fresh server per cell, across
    server starts); each server is scanned from where its own lines begin, so a crash line an
    earlier attempt left cannot mark a healthy retry crashed (issue 24's hidden probe)."""
    argv = ["{binary}", str(FAKE), "--port", "{port}"]
    first = sweep(tmp_path, argv)
    assert first.counts()["ok"] == 2
    run = first.run_dir
    (run / "cells" / "auto__code__ctx32__c1.json").unlink()  # measured again on resume
    with open(run / first.manifest["servers"]["auto"]["log"], "a") as log:
        log.write("CUDA error: an illegal instruction was encountered\n")  # the old attempt's
    again = sb.run_sweep(sb.load_plan(params(tmp_path, argv)), resume=first.run_id,
                         outputs=tmp_path / "out", progress=False)
    assert again.counts() == {"ok": 2, "invalid": 0, "crashed": 0, "skipped": 0}, [
        c.verdict for c in again.cells]
