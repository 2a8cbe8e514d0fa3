"""How ``ignore_eos`` and the chat template move n-gram acceptance on the embedded engine
(issue 30).

    .venv/bin/python benchmarks/eos_acceptance.py [--requests N] [--output-tokens N]
        [--templates raw,chat] [--stops length,eos] [--temperatures 0,1] [--workloads code,chat]

One sweep per template × stop on llama.cpp with SmolLM2-135M (auto and ngram-mod at budget 8;
the plans differ only in each workload's ``template`` and ``stop``, so the same documents feed
every one of them): raw prompts (documents cut mid-text) or the model's chat template around
them (``template: chat``, the template's tokens counted in the context); answers of exactly
``output_tokens`` (``stop: length``, ``ignore_eos``) or ending at the model's end of sequence
(``stop: eos``, ``output_tokens`` a cap); each temperature of ``--temperatures`` an axis of the
plan. Prints, per workload, template, stop and temperature, the n-gram config's tokens per step,
its speedup over auto and the answers' lengths, with the host's load average; the run
directories are kept under outputs/runs. Each sweep can be run alone (one template and one stop)
to keep a run short on a shared machine.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path
from typing import Any

import specbench_lib as sb

PLAN = """phase: eos_acceptance
description: ignore_eos against EOS-ended answers, n-gram drafting on the embedded engine
engine: {{kind: llamacpp, port: 8097, context: 2048, ready_timeout_s: 120}}
configs:
  - {{name: auto, method: auto}}
  - {{name: ngram, method: ngram, budgets: [8], options: {{n_match: 8, n_min: 8}}}}
workloads:
{workloads}contexts: [256]
concurrency: [1]
output_tokens: {output}
temperature: [{temperatures}]
requests_per_cell: {requests}
warmup_requests: 1
host: {{max_other_cpu_cores: null}}
"""
SOURCES = {"code": "humaneval", "chat": "sharegpt", "copyedit": "copyedit"}


def sweep(template: str, stop: str, *, requests: int, output: int, workloads: list[str],
          temperatures: list[float], folder: Path) -> sb.SweepResult:
    path = folder / f"{template}-{stop}.yaml"
    listed = "".join(f"  - {{name: {w}, source: {SOURCES[w]}, template: {template}, "
                     f"stop: {stop}}}\n" for w in workloads)
    path.write_text(PLAN.format(stop=stop, requests=requests, output=output, workloads=listed,
                                temperatures=", ".join(f"{t:g}" for t in temperatures)))
    return sb.run_sweep(sb.load_plan(path), progress=False)


def _rows(result: sb.SweepResult, template: str, stop: str) -> list[tuple[Any, ...]]:
    cells = {(c.spec.config, c.spec.workload, c.spec.temperature): c
             for c in result.cells if c.verdict.ok}
    rows: list[tuple[Any, ...]] = []
    for (config, workload, temp), ngram in sorted(cells.items()):
        auto = cells.get(("auto", workload, temp))
        if config != "ngram-b8" or auto is None:
            continue
        m = ngram.metrics
        rows.append((workload, template, stop, temp, m.get("tokens_per_step"),
                     m["output_tok_s"] / auto.metrics["output_tok_s"],
                     m.get("output_tokens_mean"), auto.metrics.get("output_tokens_mean")))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=6)
    parser.add_argument("--output-tokens", type=int, default=128)
    parser.add_argument("--templates", default="raw,chat")
    parser.add_argument("--stops", default="length,eos")
    parser.add_argument("--temperatures", default="0")
    parser.add_argument("--workloads", default="code,chat,copyedit")
    args = parser.parse_args()
    temperatures = [float(t) for t in args.temperatures.split(",")]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for template in args.templates.split(","):
            for stop in args.stops.split(","):
                load = os.getloadavg()[0]
                result = sweep(template, stop, requests=args.requests,
                               output=args.output_tokens, workloads=args.workloads.split(","),
                               temperatures=temperatures, folder=Path(tmp))
                print(f"{template} + {stop}: {result.counts()}  load average before {load:.2f}, "
                      f"after {os.getloadavg()[0]:.2f}  run {result.run_dir.name}")
                rows += _rows(result, template, stop)
    print(f"\n{'workload':<10}{'template':<9}{'stop':<8}{'T':>3}{'tok/step':>9}{'speedup':>9}"
          f"{'len ngram':>10}{'len auto':>9}")
    for workload, template, stop, temp, *numbers in rows:
        cols = [f"{v:.2f}" if isinstance(v, float) else "-" for v in numbers]
        print(f"{workload:<10}{template:<9}{stop:<8}{temp:>3g}{cols[0]:>9}{cols[1]:>9}"
              f"{cols[2]:>10}{cols[3]:>9}")


if __name__ == "__main__":
    main()
