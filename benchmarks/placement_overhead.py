"""Placement overhead: a sweep's wall time run sequentially vs placed on Ray, on the same plan.

    .venv/bin/python benchmarks/placement_overhead.py [--repeats 3] [--configs 4] [--interval 0.02]
        [--nodes 1] [--gpus-per-node 4]

The plan: ``--configs`` server configs (auto + ngram budgets) of tests/support/fake_server.py with fixed
timing (``--interval`` s before each token; 2 contexts x 1 concurrency, 4 requests x 16 tokens a
cell), on ports 8240-8259, into a temporary outputs folder. A private Ray head with 4 logical
GPUs is started once (its start-up is reported apart); with ``--nodes N`` (N > 1) a Ray cluster
of N worker raylets instead, each its own node with ``--gpus-per-node`` logical GPUs, and a head
without GPUs (tests/support/raynodes.py: the multi-node code path on this one machine); then sequential
and placed sweeps alternate, ``--repeats`` times each.

Reported: the wall time of each (median, min, max over n), their ratio; Ray's overhead per config,
from the placed runs: ``queue_s`` (driver's submission to the task's first event, from the
manifest's placement record) and ``overhead_s`` = placed wall - the longest config's own time
(start, warmup, its cells, from the manifest's timing) - the sequential run's time outside
configs (preflight, run directory, results), the latency placement adds to a sweep whose configs
all fit at once; and the machine's load (``uptime``) with the figures.
Results: benchmarks/results/placement_overhead.json.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import ROOT, load_note, spread, table, write_results

sys.path.insert(0, str(ROOT / "tests" / "support"))
from fakeparams import LENIENT_HOST, fake_argv, fake_engine  # noqa: E402
from raynodes import ray_nodes  # noqa: E402

PORT = 8240


def params_file(folder: Path, *, engine: str, configs: int, interval: float) -> Path:
    budgets = [4 * 2**i for i in range(configs - 1)]
    path = folder / f"{engine}.yaml"
    ngram = fake_argv(interval=interval, budget=True)
    path.write_text(f"""phase: placement_overhead
{fake_engine(PORT, fake_argv(interval=interval))}configs:
  - {{name: auto, method: auto}}
  - {{name: ngram, method: ngram, budgets: {budgets}, argv: {ngram}}}
workloads:
  - {{name: code, source: humaneval}}
contexts: [16, 32]
concurrency: [1]
output_tokens: 16
requests_per_cell: 4
warmup_requests: 1
{LENIENT_HOST}placement: {{engine: {engine}, gpus_per_server: 1, port_span: 19}}
""")
    return path


def _config_s(server: dict[str, Any]) -> float:
    """A config's own time: its server's start, warmup and cells (the manifest's timing)."""
    timing = server.get("timing") or {}
    cells = sum(sum(v for k, v in c.items() if k.endswith("_s") and k != "window_s"
                    and k != "client_stall_s") for c in (timing.get("cells") or {}).values())
    return float(timing.get("start_s", 0) + timing.get("warmup_s", 0) + cells)


def _seconds(a: str, b: str) -> float:
    return (dt.datetime.fromisoformat(b) - dt.datetime.fromisoformat(a)).total_seconds()


def one_run(plan_file: Path, outputs: Path) -> dict[str, Any]:
    import specbench_lib as sb

    began = time.monotonic()
    result = sb.run_sweep(sb.load_plan(plan_file), outputs=outputs, progress=False)
    wall = time.monotonic() - began
    servers = result.manifest["servers"]
    configs = {k: _config_s(s) for k, s in servers.items()}
    queue = [_seconds(s["placement"]["submitted"], s["placement"]["started"])
             for s in servers.values() if "placement" in s]
    nodes = {s["placement"]["node"] for s in servers.values() if "placement" in s}
    return {"wall_s": wall, "ok": result.counts()["ok"], "cells": sum(result.counts().values()),
            "config_s": configs, "queue_s": queue, "nodes": len(nodes)}


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


@contextlib.contextmanager
def _ray(nodes: int, gpus: int) -> Any:
    """One head with ``gpus`` logical GPUs, or ``nodes`` worker nodes of ``gpus`` each."""
    import ray

    if nodes <= 1:
        ray.init(address="local", num_gpus=gpus, num_cpus=4, include_dashboard=False,
                 log_to_driver=False, logging_level="WARNING")
        try:
            yield
        finally:
            ray.shutdown()
        return
    with ray_nodes(nodes, gpus=gpus, cpus=2):
        yield


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--configs", type=int, default=4)
    parser.add_argument("--interval", type=float, default=0.02)
    parser.add_argument("--nodes", type=int, default=1)
    parser.add_argument("--gpus-per-node", type=int, default=None)
    args = parser.parse_args()
    args.gpus_per_node = args.gpus_per_node or (4 if args.nodes <= 1 else 2)
    load_before = uptime()
    began = time.monotonic()
    runs: dict[str, list[dict[str, Any]]] = {"local": [], "ray": []}
    with _ray(args.nodes, args.gpus_per_node):
        ray_start_s = time.monotonic() - began
        with tempfile.TemporaryDirectory(prefix="placement-bench-") as tmp:
            folder = Path(tmp)
            files = {e: params_file(folder, engine=e, configs=args.configs, interval=args.interval)
                     for e in runs}
            cold = one_run(files["ray"], folder / "warm")  # the first starts Ray's workers
            for _ in range(args.repeats):
                for engine in ("local", "ray"):
                    runs[engine].append(one_run(files[engine], folder / "out"))
    load_after = uptime()
    local_walls = [r["wall_s"] for r in runs["local"]]
    ray_walls = [r["wall_s"] for r in runs["ray"]]
    outside = [r["wall_s"] - sum(r["config_s"].values()) for r in runs["local"]]
    outside_median = spread(outside)["median"] or 0.0
    overhead = [r["wall_s"] - max(r["config_s"].values()) - outside_median for r in runs["ray"]]
    queue = [q for r in runs["ray"] for q in r["queue_s"]]
    ratios = [a / b for a, b in zip(local_walls, ray_walls, strict=True)]
    rows = [
        {"what": "placed wall, first run: Ray starts its workers (s)", "n": 1,
         **spread([cold["wall_s"]])},
        {"what": "sequential wall (s)", "n": len(local_walls), **spread(local_walls)},
        {"what": "placed wall (s)", "n": len(ray_walls), **spread(ray_walls)},
        {"what": "ratio sequential / placed", "n": len(ratios), **spread(ratios)},
        {"what": "sequential time outside configs (s)", "n": len(outside), **spread(outside)},
        {"what": "Ray overhead per placed round (s)", "n": len(overhead), **spread(overhead)},
        {"what": "Ray queue per config: submit → start (s)", "n": len(queue), **spread(queue)},
    ]
    all_ok = all(r["ok"] == r["cells"] for v in runs.values() for r in v)
    nodes = [r["nodes"] for r in runs["ray"]]
    print(f"plan: {args.configs} configs x 2 cells (4 requests x 16 tokens, "
          f"{args.interval} s a token) on {max(args.nodes, 1)} Ray node(s) of "
          f"{args.gpus_per_node} logical GPUs (the placed runs used {min(nodes)}-{max(nodes)} "
          f"nodes); Ray start-up {ray_start_s:.1f} s "
          f"(once, not in the walls); every cell ok: {all_ok}")
    print(table(rows, [("what", "", 0), ("n", "n", 0), ("median", "median", 3),
                       ("min", "min", 3), ("max", "max", 3)]))
    print(f"load before: {load_before}\nload after:  {load_after}")
    write_results("placement_overhead" + (f"_{args.nodes}nodes" if args.nodes > 1 else ""), {
        "args": vars(args), "ray_start_s": ray_start_s, "rows": rows, "runs": runs, "cold": cold,
        "uptime_before": load_before, "uptime_after": load_after, "load": load_note()})


if __name__ == "__main__":
    main()
