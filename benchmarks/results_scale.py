"""Scale of the results layer: table, plots and results files from 10,000 synthetic cells.

    .venv/bin/python benchmarks/results_scale.py [--cells 10000] [--requests 100] [--tokens 32]

Writes a synthetic run directory (temporary) of cell files as the sweep writes them
(``CellRecord.to_dict``: requests with per-token timestamps, chunk sizes and output ids,
indented JSON) plus a manifest whose plan fingerprints match, then, in a fresh process, times
each step of what a notebook does with a run and records the peak memory (``ru_maxrss`` after
each step; ``tracemalloc`` peak of the load in a second pass): SweepResult (read and analyse
every cell from its requests), verdicts(), table(), write_results() (CSV + parquet) and the
standard plots. Results: benchmarks/results/results_scale.json.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

from _common import load_note, table, write_results

from specbench_lib.model.cellspec import CellSpec
from specbench_lib.model.records import SCHEMA_VERSION, CellRecord, FinalStats, JudgeInputs, RequestRecord
from specbench_lib.model.served import PromptRecord
from specbench_lib.model.verdict import Verdict

SERIES = (
    [("auto", "auto", None)] + [("ngram", "ngram", b) for b in (4, 8, 16, 32, 64)] + [("draft", "draft", 4)]
)


def _records(rng: random.Random, n: int, tokens: int) -> list[RequestRecord]:
    out = []
    for i in range(n):
        start = i * 0.05
        times, t = [], start + 0.03
        sizes = []
        while len(times) < tokens:
            k = min(rng.choice((1, 2, 3, 4)), tokens - len(times))
            t += 0.01 * k
            times += [t] * k
            sizes.append(k)
        out.append(
            RequestRecord(
                i,
                False,
                256,
                tokens,
                status=200,
                start=start,
                end=t,
                token_times=times,
                chunk_sizes=sizes,
                final=FinalStats(256, tokens, "length", False, None, tokens - len(sizes), len(sizes)),
                text_sha="0123456789abcdef",
                output_ids=list(range(1000, 1000 + tokens)),
            )
        )
    return out


def _stretched(rec: RequestRecord, factor: float) -> RequestRecord:
    copy = RequestRecord.from_dict(rec.to_dict())
    copy.start, copy.end = rec.start / factor, rec.end / factor
    copy.token_times = [t / factor for t in rec.token_times]
    return copy


def synthesize(root: Path, cells: int, requests: int, tokens: int) -> Path:
    """A run directory of ``cells`` cell files, each with its own timestamps (throughput varies)."""
    rng = random.Random(0)
    run = root / "runs" / "20260101T000000Z_scale_000000"
    (run / "cells").mkdir(parents=True)
    records = _records(rng, requests, tokens)
    prompts = tuple(PromptRecord(f"{i:016x}", 256, ("HumanEval/0",)) for i in range(requests))
    fingerprints = {}
    i = 0
    repeat = 0
    while i < cells:
        for workload in ("code", "chat"):
            for context in (256, 512, 1024, 2048, 4096):
                for concurrency in (1, 2, 4, 8, 16, 32, 64, 128):
                    for series, method, budget in SERIES:
                        if i >= cells:
                            break
                        label = series if budget is None else f"{series}-b{budget}"
                        spec = CellSpec(label, series, method, budget, workload, context,
                                        concurrency, repeat, repeats=cells)
                        fp = f"{i:020x}"
                        fingerprints[spec.cell_id] = fp
                        # spread throughput: every request's timestamps stretched per cell
                        stretch = rng.uniform(0.8, 1.6)
                        cell_records = [_stretched(r, stretch) for r in records]
                        cell = CellRecord(
                            run_id=run.name, spec=spec, fingerprint=fp, server_label=label,
                            server_argv=("llama-server",), verdict=Verdict("ok"),
                            judge=JudgeInputs(planned=requests, speculative=method != "auto"),
                            prompts=prompts,
                            timing={"prompts_s": 0.01, "dispatch_s": 1.0, "window_s": 1.0})
                        data = cell.to_dict()
                        data["requests"] = "__REQUESTS__"
                        requests_json = json.dumps([r.to_dict() for r in cell_records], indent=2)
                        text = json.dumps(data, indent=2).replace('"__REQUESTS__"', requests_json)
                        (run / "cells" / f"{spec.cell_id}.json").write_text(text)
                        i += 1
        repeat += 1
    manifest = {
        "schema_version": SCHEMA_VERSION,
        "run_id": run.name,
        "phase": "scale",
        "status": "complete",
        "params": {"unstable_cv": 0.1},
        "plan_fingerprints": fingerprints,
        "servers": {},
        "engine": {"kind": "llamacpp", "version": "synthetic"},
        "model": {"path": "synthetic.gguf"},
    }
    (run / "manifest.json").write_text(json.dumps(manifest, indent=2))
    return run


def _maxrss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measure(run: Path) -> dict[str, Any]:
    """Time and peak memory of each step (run in a fresh process)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    import specbench_lib as sb
    from specbench_lib.report.outcome import SweepResult

    steps: list[dict[str, Any]] = [{"step": "python + imports", "seconds": 0.0, "maxrss_mb": _maxrss_mb()}]

    def step(name: str, fn: Any) -> Any:
        began = time.perf_counter()
        value = fn()
        steps.append({"step": name, "seconds": time.perf_counter() - began, "maxrss_mb": _maxrss_mb()})
        return value

    result = step("SweepResult (read cells)", lambda: SweepResult(run))
    step("verdicts()", result.verdicts)
    frame = step("table()", result.table)
    step("write_results() csv+parquet", result.write_results)
    standard = getattr(sb.plots, "standard", None)
    if standard is not None:
        figures = step("plots.standard()", lambda: standard(result))
        if hasattr(result, "save_figures"):
            step("save_figures()", lambda: result.save_figures(figures))
    else:
        step("plots.throughput_vs_budget()", lambda: sb.plots.throughput_vs_budget(result))
    plt.close("all")
    return {"steps": steps, "table_rows": len(frame), "cells": len(result.cells)}


def measure_tracemalloc(run: Path) -> dict[str, Any]:
    from specbench_lib.report.outcome import SweepResult

    tracemalloc.start()
    began = time.perf_counter()
    result = SweepResult(run)
    result.table()
    seconds = time.perf_counter() - began
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return {"load_and_table_s_traced": seconds, "tracemalloc_peak_mb": peak / 2**20}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cells", type=int, default=10000)
    parser.add_argument("--requests", type=int, default=100)
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--measure", help=argparse.SUPPRESS)
    parser.add_argument("--trace", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(Path(args.measure))))
        return
    if args.trace:
        print(json.dumps(measure_tracemalloc(Path(args.trace))))
        return
    with tempfile.TemporaryDirectory(prefix="specbench-scale-") as tmp:
        began = time.perf_counter()
        run = synthesize(Path(tmp), args.cells, args.requests, args.tokens)
        size = sum(p.stat().st_size for p in (run / "cells").glob("*.json"))
        print(
            f"{args.cells} cells x {args.requests} requests x {args.tokens} tokens: "
            f"{size / 2**30:.2f} GiB of "
            f"cell files, written in {time.perf_counter() - began:.0f} s; load {load_note()['loadavg']}",
            flush=True,
        )
        me = [sys.executable, str(Path(__file__).resolve())]
        out = json.loads(
            subprocess.run([*me, "--measure", str(run)], capture_output=True, text=True, check=True)
            .stdout.strip()
            .splitlines()[-1]
        )
        print(json.dumps(out["steps"]), flush=True)
        traced = json.loads(
            subprocess.run([*me, "--trace", str(run)], capture_output=True, text=True, check=True)
            .stdout.strip()
            .splitlines()[-1]
        )
    print(
        table(out["steps"], [("step", "step", 0), ("seconds", "seconds", 2), ("maxrss_mb", "peak RSS MB", 0)])
    )
    total = sum(s["seconds"] for s in out["steps"])
    print(
        f"total {total:.1f} s, peak RSS {out['steps'][-1]['maxrss_mb']:.0f} MB; "
        f"table rows {out['table_rows']}; "
        f"tracemalloc peak of load + table {traced['tracemalloc_peak_mb']:.0f} MB"
    )
    write_results(
        "results_scale",
        {
            "load": load_note(),
            "cells": args.cells,
            "requests": args.requests,
            "tokens": args.tokens,
            "bytes": size,
            **out,
            **traced,
            "total_s": total,
        },
    )


if __name__ == "__main__":
    main()
