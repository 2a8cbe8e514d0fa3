"""GPU telemetry per cell against a stand-in nvidia-smi the tests control (tests/support/nvsmi.py): known
power and utilisation on the cell's GPU, another GPU the cell does not see, and a foreign
compute process; sweeps of fake servers with fixed timing. Ports 8340-8349."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from fakeparams import fake_argv
from nvsmi import StandIn, app, gpu
from paramsfiles import fake_plan, write_params
from ports import free_port

import specbench_lib as sb
from specbench_lib.analysis.energy import foreign_processes
from specbench_lib.analysis.metricfamilies.gpu import gpu_metrics
from specbench_lib.model.hostfacts import HostLoad

POWER_W = 200.0  # the cell's GPU (0); GPU 1 draws 50 W and is not the cell's


def params(tmp_path: Path, name: str = "gpu.yaml", **overrides: Any) -> Path:
    path = write_params(tmp_path, fake_plan(
        free_port(), argv=fake_argv(interval=0.03), phase="gputel", output_tokens=16,
        requests_per_cell=3, warmup_requests=1, **overrides), name=name)
    return path


@pytest.fixture
def smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> StandIn:
    stand_in = StandIn(tmp_path / "bin", [gpu(0, power=POWER_W, util=90, memory=3000),
                                          gpu(1, power=50, util=5, memory=100)],
                       [app(9999, 1, "other-job", 700)])  # on GPU 1: not the cell's
    monkeypatch.setenv("PATH", f"{stand_in.folder}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")  # the server's GPU, as Ray sets it
    return stand_in


def only_cell(result: sb.SweepResult) -> dict:
    (path,) = (result.run_dir / "cells").glob("*.json")
    return json.loads(path.read_text())


def test_a_cell_stores_its_gpus_samples_and_reads_energy_per_token(
        tmp_path: Path, smi: StandIn) -> None:
    result = sb.run_sweep(sb.load_plan(params(tmp_path)), outputs=tmp_path / "out",
                          progress=False)
    cell = only_cell(result)
    assert cell["verdict"]["status"] == "ok", cell["verdict"]
    tel = cell["facts"]["host"]["gpu"]
    assert tel["visible"] == ["0"] and {s[1] for s in tel["samples"]} == {0}  # GPU 1 not read
    assert len(tel["samples"]) >= 2 and all(s[4] == POWER_W for s in tel["samples"])
    assert tel["other_processes"] == [] and any("--query-gpu=" in c for c in smi.called())
    m = cell["metrics"]
    window = tel["window_s"]
    assert m["gpu_power_mean_w"] == pytest.approx(POWER_W)
    assert m["gpu_energy_j"] == pytest.approx(POWER_W * window, rel=1e-3)
    assert m["gpu_j_per_token"] == pytest.approx(POWER_W * window / m["completion_tokens"],
                                                 rel=1e-3)
    assert m["gpu_memory_peak_mib"] == 3000 and m["gpu_util_mean_pct"] == 90
    row = result.table().iloc[0]  # the table shows them; read again from disk, the same
    assert row["gpu_j_per_token"] == pytest.approx(m["gpu_j_per_token"])
    assert sb.SweepResult(result.run_dir).table().iloc[0]["gpu_power_mean_w"] == pytest.approx(POWER_W)
    assert "GPU J/token [95 %]" in result.summary().html()  # the summary's table shows it
    figure = result.figures()["energy_vs_budget"]  # J/token vs budget, auto's as a band
    assert figure.axes[0].get_ylabel() == "GPU energy (J / output token)"


def test_a_foreign_process_on_the_cells_gpu_makes_it_busy_gpu(tmp_path: Path,
                                                              smi: StandIn) -> None:
    smi.set(apps=[app(9999, 0, "other-job", 700)])  # now on the cell's GPU
    result = sb.run_sweep(sb.load_plan(params(tmp_path)), outputs=tmp_path / "out",
                          progress=False)
    cell = only_cell(result)
    assert cell["verdict"]["status"] == "invalid"
    (reason,) = [r for r in cell["verdict"]["reasons"] if r["code"] == "busy_gpu"]
    assert "pid 9999 other-job on GPU 0 (700 MiB)" in reason["detail"]
    assert "host.max_other_gpu_mib 0" in reason["detail"] and "GPU 0 90 %" in reason["detail"]
    # the threshold, like busy_host's: above the process's memory, the cell is ok
    lenient = params(tmp_path, "lenient.yaml", host={"max_other_gpu_mib": 1024})
    ok = only_cell(sb.run_sweep(sb.load_plan(lenient), outputs=tmp_path / "out2", progress=False))
    assert ok["verdict"]["status"] == "ok"


def test_without_nvidia_smi_nothing_is_sampled_or_claimed(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no nvidia-smi (the sweep runs sys.executable)
    result = sb.run_sweep(sb.load_plan(params(tmp_path)), outputs=tmp_path / "out",
                          progress=False)
    cell = only_cell(result)
    assert cell["verdict"]["status"] == "ok"
    assert cell["facts"]["host"].get("gpu") is None
    assert not any(k.startswith("gpu_") for k in cell["metrics"])
    assert not any(c.startswith("gpu_") for c in result.table().columns)
    assert "energy_vs_budget" not in result.figures()
    assert "GPU" not in result.summary().html()


def test_energy_integrates_the_power_and_its_interval_widens_with_unsteady_power() -> None:
    fields = ["t_s", "index", "util_pct", "memory_mib", "power_w", "temp_c", "sm_mhz"]

    def load(powers: list[float]) -> HostLoad:  # a sample a second over a 4 s window
        samples = [[float(t), 0, 50.0, 100.0 * t, p, 60.0, 1500.0] for t, p in enumerate(powers)]
        return HostLoad(window_s=4.0, gpu={"fields": fields, "samples": samples})

    ramp = gpu_metrics(load([100, 200, 300, 400, 500]), completion_tokens=100)
    assert ramp["gpu_energy_j"] == pytest.approx(1200)  # trapezoids: 150+250+350+450
    assert ramp["gpu_j_per_token"] == pytest.approx(12.0) and ramp["gpu_power_mean_w"] == 300
    assert ramp["gpu_memory_peak_mib"] == 400 and ramp["gpu_samples"] == 5
    assert ramp["gpu_j_per_token_lo"] < 12.0 < ramp["gpu_j_per_token_hi"]
    steady = gpu_metrics(load([300] * 5), completion_tokens=100)
    assert steady["gpu_j_per_token_lo"] == steady["gpu_j_per_token_hi"] == 12.0
    held = gpu_metrics(HostLoad(window_s=4.0, gpu={"fields": fields, "samples": [
        [1.0, 0, 0, 0, 100.0, 0, 0], [3.0, 0, 0, 0, 100.0, 0, 0]]}), completion_tokens=0)
    assert held["gpu_energy_j"] == pytest.approx(400) and held["gpu_j_per_token"] is None
    assert gpu_metrics(HostLoad(), 10) == {}  # an older cell, or no GPU: nothing claimed
    assert gpu_metrics(HostLoad(gpu={"gpus": [], "other_processes": [], "note": ""}), 10) == {}


def test_the_gpu_script_says_there_is_no_gpu_and_exits_cleanly(tmp_path: Path) -> None:
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, str(root / "benchmarks" / "gpu_telemetry.py")],
                          env={**os.environ, "PATH": str(tmp_path)}, capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert "no GPU on this machine" in done.stdout and "nothing claimed" in done.stdout


def test_with_every_gpu_sampled_only_those_the_server_is_on_are_the_cells() -> None:
    fields = ["t_s", "index", "util_pct", "memory_mib", "power_w", "temp_c", "sm_mhz"]
    samples = [[float(t), i, 50.0, 10.0, 300.0 if i == 0 else 100.0, 60.0, 1500.0]
               for t in range(3) for i in (0, 1)]
    every = {"fields": fields, "samples": samples, "scope": "all"}  # CUDA_VISIBLE_DEVICES unset
    on_one = HostLoad(window_s=2.0, gpu={**every, "processes": [
        {"pid": 5, "gpu": "1", "kind": "server"}, {"pid": 6, "gpu": "0", "kind": "other"}]})
    assert gpu_metrics(on_one, 10)["gpu_power_mean_w"] == pytest.approx(100)  # GPU 1 alone
    assert foreign_processes(on_one, 0.0) == []  # another's process, but on GPU 0: not busy_gpu
    # a CPU engine on a GPU host: its server is on no GPU, so no GPU's energy is its
    assert gpu_metrics(HostLoad(window_s=2.0, gpu={**every, "processes": []}), 10) == {}
    named = HostLoad(window_s=2.0, gpu={**every, "scope": "CUDA_VISIBLE_DEVICES"})
    assert gpu_metrics(named, 10)["gpu_power_mean_w"] == pytest.approx(400)  # both, as named


def test_the_gpu_script_prints_each_cells_energy_from_a_sweep(tmp_path: Path, smi: StandIn) -> None:
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    out = tmp_path / "found.json"
    done = subprocess.run([sys.executable, str(root / "benchmarks" / "gpu_telemetry.py"),
                           "--params", str(params(tmp_path)), "--outputs", str(tmp_path / "out"),
                           "--results", str(out)], env={**os.environ, "PYTHONPATH": str(root)},
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "GPU 0: Stand-in GPU" in done.stdout and "auto__code__ctx16__c1: ok" in done.stdout
    (cell,) = json.loads(out.read_text())["cells"]
    assert cell["gpu_power_mean_w"] == pytest.approx(POWER_W) and cell["gpu_j_per_token"] > 0
