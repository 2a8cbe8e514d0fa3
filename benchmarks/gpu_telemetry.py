"""GPU telemetry on a real GPU: the per-cell sampler (specbench_lib.host.gpus) against nvidia-smi.

    .venv/bin/python benchmarks/gpu_telemetry.py [--gpu 0] [--seconds 20] [--params FILE]

On a machine without a GPU (no ``nvidia-smi``, or it lists none) it says so and exits 0:
nothing sampled, nothing claimed.

With ``--params``: a real GPU engine's sweep (e.g. a copy of params/tp1.yaml trimmed to a few
cells) run with ``CUDA_VISIBLE_DEVICES=--gpu``; printed per ok cell: energy per output token with
its interval, mean power, peak memory, mean utilisation, samples, and any ``busy_gpu`` reason.

Without it: a CUDA workload (torch matrix products for ``--seconds`` s, in a process of its own)
is sampled by a ``HostSampler`` of that GPU, while a reference ``nvidia-smi --query-gpu=...
-lms 100`` logs the same GPU 10x as often. Printed: the sampler's mean power, peak memory and
energy beside the reference's (and NVML's energy counter, ``nvmlDeviceGetTotalEnergyConsumption``,
where nvidia-ml-py imports and the GPU has one), their differences, the sampler's own CPU cost
and whether it saw the workload as a foreign process (``busy_gpu``: it runs detached, as another
job's would). Results: benchmarks/results/gpu_telemetry.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import load_note, write_results

WORKLOAD = """import sys, time, torch
x = torch.randn(8192, 8192, device="cuda")
end = time.monotonic() + float(sys.argv[1])
while time.monotonic() < end:
    y = x @ x
    torch.cuda.synchronize()
"""
FIELDS = "power.draw,memory.used,utilization.gpu"


def gpus_here() -> list[str]:
    """The GPUs ``nvidia-smi -L`` lists ([] without nvidia-smi or a GPU)."""
    binary = shutil.which("nvidia-smi")
    if binary is None:
        return []
    out = subprocess.run([binary, "-L"], capture_output=True, text=True, check=False, timeout=30)
    return [line for line in out.stdout.splitlines() if line.startswith("GPU ")]


def nvml_energy_mj(index: int) -> float | None:
    try:
        import pynvml

        pynvml.nvmlInit()
        return float(pynvml.nvmlDeviceGetTotalEnergyConsumption(
            pynvml.nvmlDeviceGetHandleByIndex(index)))
    except Exception:  # noqa: BLE001  (no nvidia-ml-py, or no energy counter on this GPU)
        return None


def sweep(params: Path, gpu: str, outputs: Path | None) -> dict[str, Any]:
    import specbench_lib as sb

    os.environ["CUDA_VISIBLE_DEVICES"] = gpu
    result = sb.run_sweep(sb.load_plan(params), progress=True,
                          **({"outputs": outputs} if outputs is not None else {}))
    rows = []
    for cell in result.cells:
        m = cell.metrics or {}
        reasons = [r.code for r in cell.verdict.reasons]
        rows.append({"cell": cell.cell_id, "status": cell.verdict.status, "reasons": reasons,
                     **{k: v for k, v in m.items() if k.startswith("gpu_")}})
        print(f"{cell.cell_id}: {cell.verdict.status} {reasons or ''} J/token "
              f"{m.get('gpu_j_per_token')} [{m.get('gpu_j_per_token_lo')}, "
              f"{m.get('gpu_j_per_token_hi')}], {m.get('gpu_power_mean_w')} W, peak "
              f"{m.get('gpu_memory_peak_mib')} MiB, util {m.get('gpu_util_mean_pct')} %, "
              f"{m.get('gpu_samples')} samples")
    return {"run": str(result.run_dir), "cells": rows}


def workload(gpu: str, seconds: float) -> dict[str, Any]:
    from specbench_lib.analysis.energy import foreign_processes
    from specbench_lib.analysis.metricfamilies.gpu import gpu_metrics
    from specbench_lib.host.load import HostSampler

    env = {**os.environ, "CUDA_VISIBLE_DEVICES": gpu}
    script = Path(tempfile.mkdtemp()) / "load.py"
    script.write_text(WORKLOAD)
    ref_log = script.with_name("reference.csv")
    with open(ref_log, "w") as fh:
        reference = subprocess.Popen(["nvidia-smi", "-i", gpu, f"--query-gpu={FIELDS}",
                                      "--format=csv,noheader,nounits", "-lms", "100"], stdout=fh)
    # detached (its parent exits at once): to the sampler another job's process, as on a shared GPU
    subprocess.run([sys.executable, "-c", "import subprocess, sys; subprocess.Popen(sys.argv[1:], "
                    "start_new_session=True)", sys.executable, str(script), str(seconds + 5)],
                   env=env, check=True)
    time.sleep(5.0)  # CUDA context up, clocks raised
    energy0, began = nvml_energy_mj(int(gpu)), time.monotonic()
    sampler = HostSampler(server=(), gpus=[gpu]).start()
    time.sleep(seconds)
    load = sampler.stop()
    window, energy1 = time.monotonic() - began, nvml_energy_mj(int(gpu))
    reference.terminate()
    reference.wait(10)
    rows = [[float(v) for v in line.split(",")] for line in ref_log.read_text().splitlines()
            if line.strip() and "N/A" not in line]
    ours = gpu_metrics(load, completion_tokens=0)
    ref_power = sum(r[0] for r in rows) / len(rows) if rows else None
    out = {"window_s": window, "samples": ours.get("gpu_samples"),
           "power_mean_w": ours.get("gpu_power_mean_w"), "reference_power_mean_w": ref_power,
           "reference_samples": len(rows), "energy_j": ours.get("gpu_energy_j"),
           "reference_energy_j": ref_power * window if ref_power is not None else None,
           "nvml_energy_j": (energy1 - energy0) / 1000 if energy0 and energy1 else None,
           "memory_peak_mib": ours.get("gpu_memory_peak_mib"),
           "reference_memory_peak_mib": max((r[1] for r in rows), default=None),
           "util_mean_pct": ours.get("gpu_util_mean_pct"),
           "sampler_cpu_s": load.sampler_cpu_s,
           "foreign": foreign_processes(load, 0.0)}
    for key in ("power_mean_w", "energy_j", "memory_peak_mib"):
        truth = out.get(f"reference_{key}")
        if out.get(key) is not None and truth:
            out[f"{key}_diff_pct"] = round(100 * (out[key] / truth - 1), 2)
    if out["nvml_energy_j"] and out["energy_j"] is not None:
        out["energy_vs_nvml_diff_pct"] = round(100 * (out["energy_j"] / out["nvml_energy_j"] - 1), 2)
    for key, value in out.items():
        print(f"{key:>28}: {value}")
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpu", default="0")
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--params", type=Path, default=None)
    parser.add_argument("--outputs", type=Path, default=None, help="the sweep's outputs folder")
    parser.add_argument("--results", type=Path, default=None,
                        help="where the JSON goes (default benchmarks/results/gpu_telemetry.json)")
    args = parser.parse_args()
    listed = gpus_here()
    if not listed:
        print("gpu_telemetry: no GPU on this machine (nvidia-smi is not on the PATH or lists no "
              "GPU): nothing sampled, nothing claimed; run this on a GPU machine")
        return 0
    print("\n".join(listed))
    if args.params is not None:
        found = {"mode": "sweep", **sweep(args.params, args.gpu, args.outputs)}
    else:
        try:
            import torch  # noqa: F401
        except ImportError:
            print("gpu_telemetry: torch does not import here, so there is no CUDA workload to "
                  "sample; pass --params with a GPU engine's plan instead")
            return 2
        found = {"mode": "cuda workload", **workload(args.gpu, args.seconds)}
    data = {"args": {k: str(v) for k, v in vars(args).items()}, "gpus": listed, **found,
            "load": load_note()}
    if args.results is None:
        print(f"→ {write_results('gpu_telemetry', data)}")
    else:
        args.results.write_text(json.dumps(data, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
