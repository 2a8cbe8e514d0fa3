"""The client's own stalls per cell, the CPUs shared vs split (issue 24).

    .venv/bin/python benchmarks/client_stalls.py [--sweeps 10] [--designs shared,split]

Each sweep is the embedded engine's smallest real plan (params/embedded_small.yaml: auto and
ngram-b8, code, context 128, concurrency 1 and 2, 3 requests of 64 tokens a cell: 4 cells) at
the default client-host thresholds and retries. Two designs, interleaved sweep by sweep (the
order reversed every other sweep, so a drift of the host falls on both): ``shared`` is the old
default (``engine.cpus: null``, ``threads: 2``: llama-server's threads on both cores, the client
among them) and ``split`` the new one (``cpus: auto``: the server on CPU 0 with one thread, the
client on CPU 1). Per design: the client's stall per cell (the sum of its event-loop stalls over
the cell's last attempt: median, p99, max), the longest single stall, the cells a client-host
rule made invalid at a first attempt, the cells still invalid after the retries, and auto's
decode rate (tok/s per request), with the machine's load. Results:
benchmarks/results/client_stalls.json.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import ROOT, load_note, quantile, table, write_results

import specbench_lib as sb

PLAN = """extends: {root}/params/embedded_small.yaml
phase: stalls_{design}
engine: {{port: 8194{engine}}}
seed: {seed}
"""
DESIGNS = {"shared": ", cpus: null, threads: 2", "split": ""}
COLUMNS = [("design", "design", 0), ("cells", "cells", 0), ("stall_ms_median", "stall ms median", 1),
           ("stall_ms_p99", "p99", 1), ("stall_ms_max", "max", 1),
           ("longest_single_stall_ms", "longest one", 1), ("remeasured_cells", "re-measured", 0),
           ("lost_cells", "lost", 0), ("auto_decode_tok_s", "auto tok/s", 1),
           ("server_cores_median", "server cores", 2)]


def one_sweep(design: str, seed: int, outputs: Path) -> list[dict[str, Any]]:
    path = outputs / f"{design}_{seed}.yaml"
    path.write_text(PLAN.format(root=ROOT, design=design, engine=DESIGNS[design], seed=seed))
    run = sb.run_sweep(sb.load_plan(path), outputs=outputs, progress=False)
    rows = []
    for cell in run.cells:
        stalls = [b - a for r in cell.requests for a, b in (r.stalls or ())]
        measured = [r for r in cell.requests if not r.warmup and r.token_times]
        rates = [(len(r.token_times) - 1) / (r.token_times[-1] - r.token_times[0])
                 for r in measured if len(r.token_times) > 1 and r.token_times[-1] > r.token_times[0]]
        rows.append({"design": design, "seed": seed, "cell": cell.cell_id, "status": cell.status,
                     "reasons": list(cell.verdict.reasons),
                     "attempts": 1 + len(cell.facts.remeasured),
                     "stall_s": float(cell.timing.get("client_stall_s") or 0.0),
                     "longest_stall_ms": 1e3 * max(stalls, default=0.0),
                     "decode_tok_s": statistics.median(rates) if rates else None,
                     "server_cores": cell.facts.host.server_cpu_cores if cell.facts.host else None})
    return rows


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    stall_ms = [1e3 * r["stall_s"] for r in rows]
    auto = [r["decode_tok_s"] for r in rows if r["cell"].startswith("auto") and r["decode_tok_s"]]
    return {"cells": len(rows), "stall_ms_median": statistics.median(stall_ms),
            "stall_ms_p99": quantile(stall_ms, 0.99), "stall_ms_max": max(stall_ms),
            "longest_single_stall_ms": max(r["longest_stall_ms"] for r in rows),
            "remeasured_cells": sum(r["attempts"] > 1 for r in rows),
            "lost_cells": sum(r["status"] != "ok" for r in rows),
            "auto_decode_tok_s": statistics.median(auto) if auto else None,
            "server_cores_median": statistics.median(
                [r["server_cores"] for r in rows if r["server_cores"] is not None] or [0.0])}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sweeps", type=int, default=10)
    parser.add_argument("--designs", default="shared,split")
    args = parser.parse_args()
    designs = args.designs.split(",")
    before, began = load_note(), time.monotonic()
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for seed in range(args.sweeps):
            for design in (designs if seed % 2 == 0 else designs[::-1]):
                rows += one_sweep(design, seed, Path(tmp))
                print(f"sweep {seed} {design}: done at {time.monotonic() - began:.0f} s", flush=True)
    figures = {d: summary([r for r in rows if r["design"] == d]) for d in designs}
    print(table([{"design": d, **f} for d, f in figures.items()], COLUMNS))
    for row in rows:
        if row["status"] != "ok" or row["attempts"] > 1:
            print(f"  {row['design']} seed {row['seed']} {row['cell']}: {row['status']} after "
                  f"{row['attempts']} attempts {row['reasons']}")
    write_results("client_stalls", {"load_before": before, "load_after": load_note(),
                                    "sweeps": args.sweeps, "figures": figures, "cells": rows})


if __name__ == "__main__":
    main()
