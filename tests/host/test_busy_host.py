"""A busy host, in a real sweep: another process's CPU makes a cell invalid (busy_host); the
server's own CPU and the sweep's own do not; preflight warns before anything starts.

The server is tests/support/busy_server.py (the fake llama.cpp server, slowed so a cell lasts long enough
to judge) launched through the argv-template engine: its own process group, as a real one.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from hogs import child_hog, cpu_rate, other_hog
from paramsfiles import DROP, fake_plan, write_params
from procs import pids_with

import specbench_lib as sb
from specbench_lib.host import load as hostload
from specbench_lib.model import hostfacts
from specbench_lib.sweep import cellmeasure, preflight

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").is_file(), reason="needs Linux /proc")


def params(tmp_path: Path, port: int, *, max_cores: float | None, burn: bool = False) -> Path:
    argv = json.dumps(["{binary}", str(ROOT / "tests" / "support" / "busy_server.py"), "--port", "{port}",
                       "--token-delay-s", "0.1", *(["--burn"] if burn else [])])
    # the host judged as a plan judges it by default (the fake base leaves it unjudged)
    path = write_params(tmp_path, fake_plan(
        port, argv=argv, phase="busy", host={"max_other_cpu_cores": max_cores},
        max_coalesced_fraction=DROP, max_coalesced_first_fraction=DROP,
        timeouts={"first_token_s": 10, "between_tokens_s": 10, "request_s": 20}), name="busy.yaml")
    return path


def servers(port: int) -> list[int]:
    """The busy server of ``port`` and its burner child (their command lines name the port)."""
    return sorted({*pids_with("busy_server.py", f"--port\0{port}"),
                   *pids_with("specbench-hog", f"server-burner-{port}")})


def test_another_process_burning_a_core_makes_the_cell_invalid(tmp_path: Path) -> None:
    log = tmp_path / "hog.log"
    with other_hog(log) as hog:
        result = sb.run_sweep(sb.load_plan(params(tmp_path, 8221, max_cores=0.5)),
                              outputs=tmp_path / "out", progress=False)
        reference = cpu_rate(log)  # the hog's own CPU clock over its life
    cell = result.cells[0]
    # (on a crowded machine the client may also stall: coalesced_reads, another rule's business)
    assert cell.status == "invalid" and "busy_host" in cell.verdict.codes, cell.verdict
    detail = next(r.detail for r in cell.verdict.reasons if r.code == "busy_host")
    assert f"(pid {hog})" in detail and "host.max_other_cpu_cores 0.5" in detail
    host = cell.facts.host
    assert host is not None and host.window_s >= hostfacts.MIN_JUDGED_WINDOW_S and host.samples >= 3
    seen = {p.pid: p.cores for p in host.top}
    assert seen[hog] == pytest.approx(reference, abs=0.25) and seen[hog] <= 1.05, (host, reference)
    assert host.other_cpu_cores >= seen[hog] - 0.01
    assert host.server_cpu_cores < 0.5  # the slow server mostly sleeps
    # preflight saw it too: a warning, printed and kept in the manifest, not a refusal
    assert any("host is busy" in w and f"(pid {hog})" in w for w in result.manifest["warnings"])
    stored = json.loads(next((result.run_dir / "cells").glob("*.json")).read_text())
    assert stored["facts"]["host"]["top"][0]["pid"] in seen
    assert stored["judge"]["thresholds"]["host.max_other_cpu_cores"] == 0.5
    assert servers(8221) == []


def test_the_servers_own_cpu_and_the_sweeps_own_are_not_counted(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Measured over a controlled set of processes (other developers' CPU on a shared machine
    would make any threshold flaky): this process, its child, the server and its burner."""
    with child_hog() as own_child:
        class Watched(hostload.HostSampler):  # the sweep's sampler, over these processes
            def __init__(self, **options: Any) -> None:
                super().__init__(watch=lambda: [os.getpid(), own_child, *servers(8222)],
                                 **options)

        monkeypatch.setattr(cellmeasure, "HostSampler", Watched)
        result = sb.run_sweep(sb.load_plan(params(tmp_path, 8222, max_cores=0.1, burn=True)),
                              outputs=tmp_path / "out", progress=False)
    cell = result.cells[0]
    host = cell.facts.host
    assert host is not None and host.window_s >= hostfacts.MIN_JUDGED_WINDOW_S
    # each would be over the threshold if it were counted (their share depends on the machine's
    # other work: a spinning thread and child in the server, a spinning child of this process)
    assert host.server_cpu_cores > 0.2, host
    assert host.own_cpu_cores > 0.15, host
    assert host.other_cpu_cores == 0.0 and host.top == (), host
    assert "busy_host" not in cell.verdict.codes, cell.verdict  # (a stalled client: coalesced_reads)
    assert servers(8222) == []


def test_doctor_warns_about_a_busy_host_and_names_the_process(tmp_path: Path) -> None:
    plan = sb.load_plan(params(tmp_path, 8223, max_cores=0.5))
    with other_hog() as hog:
        check = next(c for c in preflight.doctor(plan, outputs=tmp_path / "out")
                     if c.name == "host load")
    assert check.ok and "host is busy" in check.warning and f"(pid {hog})" in check.warning
    assert "busy_host" in check.warning and "WARNING" in str(check)
    off = sb.load_plan(params(tmp_path, 8223, max_cores=None))
    check = next(c for c in preflight.doctor(off, outputs=tmp_path / "out") if c.name == "host load")
    assert check.ok and not check.warning and "not checked" in check.detail
