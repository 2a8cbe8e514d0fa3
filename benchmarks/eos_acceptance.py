"""How ``ignore_eos`` moves n-gram acceptance on the embedded engine (issue 30).

    .venv/bin/python benchmarks/eos_acceptance.py [--requests N] [--output-tokens N]

Two sweeps of one plan on llama.cpp with SmolLM2-135M (auto and ngram-mod at budget 8, raw
prompts, the same prompts in both: the plans differ only in each workload's ``stop``): answers
of exactly ``output_tokens`` (``stop: length``, ``ignore_eos``) and answers that end at the
model's end of sequence (``stop: eos``, ``output_tokens`` a cap). Prints, per workload and stop,
the n-gram config's tokens per step, its speedup over auto and the answers' lengths, with the
host's load average; the run directories are kept under outputs/runs.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

import specbench_lib as sb

PLAN = """phase: eos_acceptance
description: ignore_eos against EOS-ended answers, n-gram drafting on the embedded engine
engine: {{kind: llamacpp, port: 8097, context: 2048, ready_timeout_s: 120}}
configs:
  - {{name: auto, method: auto}}
  - {{name: ngram, method: ngram, budgets: [8], options: {{n_match: 8, n_min: 8}}}}
workloads:
  - {{name: code, source: humaneval, stop: {stop}}}
  - {{name: chat, source: sharegpt, stop: {stop}}}
  - {{name: copyedit, source: copyedit, stop: {stop}}}
contexts: [256]
concurrency: [1]
output_tokens: {output}
requests_per_cell: {requests}
warmup_requests: 1
host: {{max_other_cpu_cores: null}}
"""


def sweep(stop: str, *, requests: int, output: int, folder: Path) -> sb.SweepResult:
    path = folder / f"{stop}.yaml"
    path.write_text(PLAN.format(stop=stop, requests=requests, output=output))
    return sb.run_sweep(sb.load_plan(path), progress=False)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=6)
    parser.add_argument("--output-tokens", type=int, default=128)
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for stop in ("length", "eos"):
            load = os.getloadavg()[0]
            result = sweep(stop, requests=args.requests, output=args.output_tokens,
                           folder=Path(tmp))
            print(f"stop {stop}: {result.counts()}  load average before {load:.2f}, after "
                  f"{os.getloadavg()[0]:.2f}  run {result.run_dir.name}")
            cells = {(c.spec.config, c.spec.workload): c for c in result.cells if c.verdict.ok}
            for workload in ("code", "chat", "copyedit"):
                auto, ngram = cells.get(("auto", workload)), cells.get(("ngram-b8", workload))
                if auto is None or ngram is None:
                    rows.append((workload, stop, None, None, None, None))
                    continue
                m = ngram.metrics
                rows.append((workload, stop, m.get("tokens_per_step"),
                             m["output_tok_s"] / auto.metrics["output_tok_s"],
                             m.get("output_tokens_mean"), auto.metrics.get("output_tokens_mean")))
    print(f"\n{'workload':<10}{'stop':<8}{'tok/step':>9}{'speedup':>9}{'len ngram':>10}{'len auto':>9}")
    for workload, stop, tps, speedup, n_len, a_len in rows:
        cols = [f"{v:.2f}" if isinstance(v, float) else "-" for v in (tps, speedup, n_len, a_len)]
        print(f"{workload:<10}{stop:<8}{cols[0]:>9}{cols[1]:>9}{cols[2]:>10}{cols[3]:>9}")


if __name__ == "__main__":
    main()
