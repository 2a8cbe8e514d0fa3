"""Sweep overhead: where the embedded sweep's wall time goes, and what papermill adds.

    .venv/bin/python benchmarks/sweep_overhead.py [--full] [--params FILE] [--skip-papermill]

Runs the embedded sweep (real llama-server, binary and model from specbench_lib.core.paths) on port
8195 into a temporary outputs folder. By default a reduced plan derived from params/embedded.yaml
(auto and ngram budget 8, one workload, context 256, concurrency 1 and 2, 64 output tokens, 3
requests a cell: about a minute); ``--full`` runs params/embedded.yaml itself, ``--params`` any
file. The split comes from the per-server ``timing`` record the sweep stores in the manifest
(start_s, warmup_s, stop_s, per cell prompts_s, dispatch_s, window_s, validate_s, store_s); the
plots are timed here. Overhead = (sweep wall + plotting) / (start-up + measurement windows);
goal <= 1.05. Then papermill: notebooks/tp1.ipynb with a one-cell params file through papermill
vs the same library calls made directly, twice each. Results: benchmarks/results/sweep_overhead.json.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml
from _common import RESULTS, ROOT, load_note, spread, table, write_results

PORT = 8195


def _params_file(source: Path, name: str, change: dict[str, Any]) -> Path:
    data = yaml.safe_load(source.read_text())
    for key, value in change.items():
        if key == "engine":
            data["engine"] = {**data["engine"], **value}
        else:
            data[key] = value
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def reduced_params() -> Path:
    return _params_file(
        ROOT / "params/embedded.yaml",
        "sweep_overhead_reduced",
        {
            "engine": {"port": PORT},
            "configs": [
                {"name": "auto", "method": "auto"},
                {"name": "ngram", "method": "ngram", "budgets": [8], "options": {"n_match": 8, "n_min": 8}},
            ],
            "workloads": [{"name": "code", "source": "humaneval"}],
            "contexts": [256],
            "concurrency": [1, 2],
            "output_tokens": 64,
            "requests_per_cell": 3,
        },
    )


def tiny_params() -> Path:
    return _params_file(
        ROOT / "params/embedded.yaml",
        "sweep_overhead_tiny",
        {
            "engine": {"port": PORT},
            "configs": [{"name": "auto", "method": "auto"}],
            "workloads": [{"name": "code", "source": "humaneval"}],
            "contexts": [64],
            "concurrency": [1],
            "output_tokens": 16,
            "requests_per_cell": 2,
            "warmup_requests": 1,
        },
    )


def _figures(sb: Any, result: Any) -> None:
    standard = getattr(sb.plots, "standard", None)
    if standard is not None and hasattr(result, "save_figures"):
        result.save_figures(standard(result))
    else:
        result.save_figure(sb.plots.throughput_vs_budget(result), "throughput")


def library_run(params: Path) -> dict[str, Any]:
    """What the notebook does, called directly; returns the wall-time split."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    import specbench_lib as sb

    began = time.perf_counter()
    plan = sb.load_plan(str(params))
    result = sb.run_sweep(plan, progress=False)
    sweep_s = time.perf_counter() - began
    t = time.perf_counter()
    result.require_valid()
    _figures(sb, result)
    plt.close("all")
    plot_s = time.perf_counter() - t
    t = time.perf_counter()
    result.summary()
    result.write_results()
    results_s = time.perf_counter() - t
    servers = result.manifest["servers"]
    split = {
        "start_s": 0.0,
        "warmup_s": 0.0,
        "stop_s": 0.0,
        "prompts_s": 0.0,
        "window_s": 0.0,
        "dispatch_other_s": 0.0,
        "validate_s": 0.0,
        "store_s": 0.0,
    }
    for record in servers.values():
        timing = record.get("timing", {})
        for key in ("start_s", "warmup_s", "stop_s"):
            split[key] += timing.get(key, 0.0)
        for cell in timing.get("cells", {}).values():
            split["prompts_s"] += cell.get("prompts_s", 0.0)
            split["window_s"] += cell.get("window_s", 0.0)
            split["dispatch_other_s"] += cell.get("dispatch_s", 0.0) - cell.get("window_s", 0.0)
            split["validate_s"] += cell.get("validate_s", 0.0)
            split["store_s"] += cell.get("store_s", 0.0)
    split["sweep_other_s"] = sweep_s - sum(split.values())
    split.update(
        sweep_s=sweep_s,
        plot_s=plot_s,
        results_s=results_s,
        wall_s=sweep_s + plot_s + results_s,
        cells=len(plan.cells),
        servers=len(servers),
        counts=result.counts(),
    )
    split["overhead"] = split["wall_s"] / (split["start_s"] + split["window_s"])
    return split


def papermill_run(params: Path, out: Path) -> float:
    import papermill

    began = time.perf_counter()
    papermill.execute_notebook(
        str(ROOT / "notebooks/tp1.ipynb"),
        str(out),
        parameters={"params_file": str(params)},
        progress_bar=False,
        cwd=str(ROOT),
        log_output=False,
    )
    return time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--full", action="store_true", help="params/embedded.yaml (about 10 minutes)")
    parser.add_argument("--params", help="any params file (its port is used as is)")
    parser.add_argument("--skip-papermill", action="store_true")
    parser.add_argument(
        "--papermill-only", action="store_true", help="keep the sweep figures of the last run"
    )
    args = parser.parse_args()
    if args.params:
        params = Path(args.params)
    elif args.full:
        params = _params_file(
            ROOT / "params/embedded.yaml", "sweep_overhead_full", {"engine": {"port": PORT}}
        )
    else:
        params = reduced_params()
    with tempfile.TemporaryDirectory(prefix="specbench-bench-") as tmp:
        os.environ["SPECBENCH_OUTPUTS"] = tmp
        print(f"load {load_note()['loadavg']}; sweep of {params.name} into {tmp}", flush=True)
        if args.papermill_only:
            split = json.loads((RESULTS / "sweep_overhead.json").read_text())["split"]
        else:
            split = library_run(params)
        keys = [
            "start_s",
            "warmup_s",
            "window_s",
            "prompts_s",
            "dispatch_other_s",
            "validate_s",
            "store_s",
            "stop_s",
            "sweep_other_s",
            "plot_s",
            "results_s",
        ]
        rows = [
            {"part": k[:-2], "seconds": split[k], "share": 100 * split[k] / split["wall_s"]} for k in keys
        ]
        rows.append({"part": "wall", "seconds": split["wall_s"], "share": 100.0})
        print(f"{split['cells']} cells, {split['servers']} servers, verdicts {split['counts']}")
        print(table(rows, [("part", "part", 0), ("seconds", "seconds", 2), ("share", "% of wall", 1)]))
        print(
            f"overhead = wall / (start-up + measurement windows) = {split['overhead']:.3f} (goal <= 1.05); "
            f"without warmup requests counted as overhead: "
            f"{split['wall_s'] / (split['start_s'] + split['window_s'] + split['warmup_s']):.3f}"
        )
        paper: dict[str, Any] = {}
        if not args.skip_papermill:
            tiny = tiny_params()
            lib, pm = [], []
            for i in range(2):
                lib.append(library_run(tiny)["wall_s"])
                pm.append(papermill_run(tiny, Path(tmp) / f"tp1_{i}.ipynb"))
            paper = {
                "library_s": spread(lib),
                "papermill_s": spread(pm),
                "added_s": spread([b - a for a, b in zip(lib, pm, strict=True)]),
            }
            print(
                f"papermill (tiny plan, 1 cell): library {paper['library_s']['median']:.2f} s, "
                f"papermill {paper['papermill_s']['median']:.2f} s, added "
                f"{paper['added_s']['median']:.2f} s per notebook run (min {paper['added_s']['min']:.2f}, "
                f"max {paper['added_s']['max']:.2f})"
            )
    write_results(
        "sweep_overhead",
        {
            "load": load_note(),
            "params": str(params),
            "split": split,
            "papermill": paper,
            "goals": {"overhead_le_1.05": split["overhead"] <= 1.05},
        },
    )


if __name__ == "__main__":
    main()
