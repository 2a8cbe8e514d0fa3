"""The verify step's cost against acceptance, the drafted length and the concurrency, on the
embedded engine with synthetic acceptance (issue 48), and the decoding speedup it predicts.

    .venv/bin/python benchmarks/verify_step_cost.py [--output-tokens N] [--requests N]
        [--concurrency 1,2] [--drafts 2,4]

llama.cpp's ``--spec-synth-len L`` makes verification accept as told whatever the draft
(common/speculative.cpp:2480-2518), so a config's tokens per drafted step is L by construction
and its step cost can be measured apart from any drafter's quality. draft-simple (SmolLM2
drafting for itself, p-min 0, n-min = n-max: the full draft every step) at each drafted length
n and each L of the profile, ``auto`` beside it at each concurrency. Per cell: decode tokens per
step τ and the decode step time s (after the first token, :mod:`specbench_lib.analysis.stepcost`'s
definitions), the step cost s / s_auto. The profile's step cost at (n, c) is the mean over its
L's (their spread says whether the cost moves with acceptance); the prediction for a held-out
L is τ / step cost with τ the L asked, checked against the held-out cell's measured decoding
speedup (its requests' mean decode rate over auto's). Prints the tables and the host's load.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
from pathlib import Path

from _common import ROOT

import specbench_lib as sb

# per drafted length: the L's of the profile and the held-out one (L <= n + 1)
LENGTHS = {2: ((1.5, 2.75), 2.25), 4: ((1.5, 4.0), 2.75)}
PLAN = """extends: {root}/params/embedded.yaml
phase: verify_step_cost
description: the verify step's cost under synthetic acceptance (benchmarks/verify_step_cost.py)
engine: {{port: 8099}}
configs:
  - {{name: auto, method: auto}}
{configs}workloads:
  - {{name: code, source: humaneval}}
contexts: [128]
concurrency: [{concurrency}]
output_tokens: {output}
requests_per_cell: {requests}
requests_scale: fixed
warmup_requests: 1
request_timeout_s: 600
cell_order: fixed
host: {{max_other_cpu_cores: null}}
max_coalesced_fraction: 0.5
max_coalesced_first_fraction: 0.5
"""


def label(n: int, length: float) -> str:
    return f"n{n}l{str(length).replace('.', '')}"


def plan_text(drafts: list[int], concurrency: list[int], output: int, requests: int) -> str:
    configs = "".join(
        f"  - {{name: {label(n, length)}, method: draft, budgets: [{n}], options: {{n_min: {n}}}, "
        f"extra_args: [--spec-draft-p-min, '0', --spec-synth-len, '{length}']}}\n"
        for n in drafts for length in (*LENGTHS[n][0], LENGTHS[n][1]))
    return PLAN.format(root=ROOT, configs=configs, output=output, requests=requests,
                       concurrency=", ".join(map(str, concurrency)))


def decode(cell: sb.CellRecord) -> tuple[float, float, float]:
    """The cell's decode tokens per step, decode step time (s) and mean decode rate (tok/s)."""
    tokens = steps = seconds = 0.0
    rates = []
    for rec in cell.requests:
        if rec.warmup or rec.final is None or len(rec.token_times) < 2:
            continue
        n = (rec.final.completion_tokens or 0) - 1
        m = ((rec.final.verify_steps or 0) - 1) if rec.final.verify_steps else n
        t = rec.token_times[-1] - rec.token_times[0]
        tokens, steps, seconds = tokens + n, steps + m, seconds + t
        rates.append(n / t)
    return tokens / steps, seconds / steps, statistics.fmean(rates)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output-tokens", type=int, default=64)
    parser.add_argument("--requests", type=int, default=4)
    parser.add_argument("--concurrency", default="1,2")
    parser.add_argument("--drafts", default="2,4")
    args = parser.parse_args()
    drafts = [int(x) for x in args.drafts.split(",")]
    concurrency = [int(x) for x in args.concurrency.split(",")]
    print(f"load before: {os.getloadavg()}")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "verify_step_cost.yaml"
        path.write_text(plan_text(drafts, concurrency, args.output_tokens, args.requests))
        result = sb.run_sweep(sb.load_plan(path), progress=False)
    print(f"load after: {os.getloadavg()}  (run {result.run_dir})")
    cells = {(c.spec.config.split("-b")[0], c.spec.concurrency): c for c in result.cells}
    bad = sorted(f"{k}: {c.status}" for k, c in cells.items() if not c.verdict.ok)
    if bad:
        print("not ok:", ", ".join(bad))
    print(f"\n{'config':>8} {'c':>2} {'L asked':>7} {'tau':>6} {'step ms':>8} {'step cost':>9} "
          f"{'predicted':>9} {'measured':>9}")
    for c in concurrency:
        _, base_s, base_rate = decode(cells[("auto", c)])
        print(f"{'auto':>8} {c:>2} {'':>7} {1.0:>6.2f} {1000 * base_s:>8.1f} {1.0:>9.2f}")
        for n in drafts:
            profile, held = LENGTHS[n]
            costs = []
            for length in profile:
                tau, s, rate = decode(cells[(label(n, length), c)])
                costs.append(s / base_s)
                print(f"{label(n, length):>8} {c:>2} {length:>7} {tau:>6.2f} {1000 * s:>8.1f} "
                      f"{s / base_s:>9.2f} {'':>9} {rate / base_rate:>9.2f}")
            cost = statistics.fmean(costs)
            tau, s, rate = decode(cells[(label(n, held), c)])
            print(f"{label(n, held):>8} {c:>2} {held:>7} {tau:>6.2f} {1000 * s:>8.1f} "
                  f"{s / base_s:>9.2f} {held / cost:>9.2f} {rate / base_rate:>9.2f}   "
                  f"(profile step cost {cost:.2f}, spread over L {max(costs) - min(costs):.2f})")


if __name__ == "__main__":
    main()
