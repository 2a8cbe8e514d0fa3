"""The fault matrix: each fault our users met, injected into a real sweep, gets the right verdict.

One sweep runs every config as its own server process through the argv-template engine: `auto`
on a healthy server and one fault per speculative config (tests/support/fake_server.py run as a program).
The sweep machinery under test is the real one: process groups, readiness, log scanning,
dispatch, validation, storage, the results table, the plots and the report.
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Any

import pytest
from paramsfiles import DROP, fake_plan, write_params
from ports import free_port
from procs import pids_with

import specbench_lib as sb
from specbench_lib.report import export as report

ROOT = Path(__file__).resolve().parents[2]
PORT = free_port()  # 8196 once, which test_engine_attach.py uses too

# config name → (budget, fake-server mode, expected verdict, expected first-reason prefix)
FAULTS = {
    "cuda": (8, "cuda_crash", "crashed", "server_died"),
    "startup": (12, "startup_crash", "crashed", "server_failed"),
    "notready": (16, "never_ready", "crashed", "server_failed"),
    "flaky": (32, "http500_some", "invalid", "http_500"),
    "errline": (4, "error_line", "invalid", "error_in_stream"),
    "empty": (2, "empty", "invalid", "empty_output"),
    "short": (64, "short", "invalid", "short_output"),
    "zombie": (3, "zombie", "crashed", "server_died"),
    "slow": (6, "slow_death", "crashed", "server_died"),
}


def argv(mode: str, *, budget: bool = True) -> str:
    return json.dumps(["{binary}", str(ROOT / "tests" / "support" / "fake_server.py"), "--port", "{port}",
                       "--mode", mode, "--hang-s", "30", *(["--budget", "{budget}"] if budget else [])])


def fault_params(tmp_path: Path, **overrides: Any) -> Path:
    faults = [{"name": name, "method": "ngram", "budgets": [budget], "argv": json.loads(argv(mode))}
              for name, (budget, mode, _, _) in FAULTS.items()]
    plan = fake_plan(PORT, argv=argv("ok", budget=False), engine={"ready_timeout_s": 4},
                     phase="faults", configs=[{"name": "auto", "method": "auto"}, *faults],
                     contexts=[16, 32], warmup_requests=1,
                     timeouts={"first_token_s": 3, "between_tokens_s": 2, "request_s": 8},
                     cell_order="fixed",  # faults by their place in the sweep
                     max_coalesced_fraction=DROP, max_coalesced_first_fraction=DROP, host=DROP)
    return write_params(tmp_path, plan, name="faults.yaml", **overrides)


def fake_servers() -> list[int]:
    return pids_with("fake_server.py", "--port\0" + str(PORT))


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory) -> sb.SweepResult:
    tmp = tmp_path_factory.mktemp("faults")
    result = sb.run_sweep(sb.load_plan(fault_params(tmp)), outputs=tmp / "outputs", progress=False)
    assert isinstance(result, sb.SweepResult)
    return result


def test_every_fault_gets_its_verdict_and_reason(swept: sb.SweepResult) -> None:
    cells = {c.cell_id: c for c in swept.cells}
    assert len(cells) == 2 * (1 + len(FAULTS))
    for ctx in (16, 32):
        assert cells[f"auto__code__ctx{ctx}__c1"].status == "ok"
    for name, (budget, _, status, prefix) in FAULTS.items():
        first = cells[f"{name}-b{budget}__code__ctx16__c1"]
        assert first.status == status, (name, first.verdict)
        assert first.verdict.reasons[0].startswith(prefix), (name, first.verdict)
        assert first.metrics is None


def test_crashes_keep_signature_return_code_and_log(swept: sb.SweepResult) -> None:
    cells = {c.cell_id: c for c in swept.cells}
    cuda = cells["cuda-b8__code__ctx16__c1"]
    assert any("CUDA error: an illegal instruction" in r for r in cuda.verdict.reasons)
    assert cuda.facts.returncode == 134 and "Scheduler hit an exception" in cuda.facts.log_excerpt
    after = cells["cuda-b8__code__ctx32__c1"]
    assert after.verdict.reasons[0].startswith("server_died_earlier")
    startup = cells["startup-b12__code__ctx16__c1"].verdict.reasons
    assert "returncode: 1" in startup and any("Capture cuda graph failed" in r for r in startup)
    notready = cells["notready-b16__code__ctx16__c1"].verdict.reasons[0]
    assert "not ready within 4 s" in notready
    slow = cells["slow-b6__code__ctx16__c1"]  # health failed before the exit status existed
    assert slow.facts.returncode == -9 and not slow.facts.server_alive
    zombie = cells["zombie-b3__code__ctx16__c1"].verdict.reasons
    assert any(r.code == "timeout" and "between_tokens limit of 2" in r.detail for r in zombie), zombie


def test_no_failure_is_ever_a_number(swept: sb.SweepResult) -> None:
    with open(swept.run_dir / "results.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert sorted(r["config"] for r in rows) == ["auto", "auto"]
    assert all(float(r["output_tok_s"]) > 0 for r in rows)
    table = swept.table()
    assert set(table["config"]) == {"auto"} and (table["output_tok_s"] > 0).all()
    comparison = report.Comparison([swept])
    assert (comparison.table()["output_tok_s"] > 0).all()
    assert len(comparison.failures()) == 2 * len(FAULTS)
    fig = sb.plots.throughput_vs_budget(swept)
    for ax in fig.axes:
        for container in ax.containers:
            values = list(container.lines[0].get_ydata())
            assert values and all(v > 0 and not math.isnan(v) for v in values)
        crosses = {tuple(line.get_xdata()) for line in ax.get_lines() if line.get_marker() == "x"}
        assert crosses == {(b,) for b, *_ in FAULTS.values()}


def test_nothing_is_left_running_and_the_run_completed(swept: sb.SweepResult) -> None:
    assert fake_servers() == []
    assert swept.manifest["status"] == "complete"
    assert not (swept.run_dir / ".lock").exists()
    assert not (swept.run_dir / "cells" / "history").exists()


def test_disk_write_failure_is_a_clear_error_and_keeps_earlier_cells(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import errno

    from specbench_lib.runs import rundir

    real = rundir.write_json_atomic
    written: list[Path] = []

    def full_disk(path: Path, data: object) -> None:
        if path.parent.name == "cells" and len(written) == 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        real(path, data)
        if path.parent.name == "cells":
            written.append(path)

    monkeypatch.setattr(rundir, "write_json_atomic", full_disk)
    plan = sb.load_plan(fault_params(tmp_path), budget=2)
    with pytest.raises(sb.StoreError) as err:
        sb.run_sweep(plan, outputs=tmp_path / "out", progress=False)
    assert "cannot write cell" in str(err.value) and "No space left" in str(err.value)
    assert "intact" in str(err.value)
    run_dir = written[0].parent.parent
    assert sorted(p.name for p in (run_dir / "cells").glob("*.json")) == sorted(p.name for p in written)
    assert all(json.loads(p.read_text())["verdict"]["status"] == "ok" for p in written)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "interrupted" and not (run_dir / ".lock").exists()  # issue 32
    assert fake_servers() == []


def test_non_loopback_bind_is_warned_in_the_manifest(tmp_path: Path) -> None:
    params = fault_params(tmp_path, engine={"host": "0.0.0.0"})
    result = sb.run_sweep(sb.load_plan(params, budget=2), outputs=tmp_path / "out", progress=False)
    assert any("non-loopback" in w for w in result.manifest["warnings"])
    assert fake_servers() == []
