"""Drift is not a speedup: a known truth. Stand-in servers whose speed grows with wall time, the
same for every config (``fake_server.py --drift``: the true speedup of every config is 1.00),
run in a fixed plan with repeats and in a budgeted sweep, with the host quiet. Each block
measures the configs in an order of its own and the claim counts blocks (analysis/units.py), so
no claimed speedup may exclude 1.00; before blocks, the config measured last in every round was
claimed faster (auto first, then b4, then b8, the prompts the sample: 4 of 4 runs here).
The answer also says how much the machine's speed moved, measured on the same prompts' prefill.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from fakeparams import LENIENT_HOST, fake_argv, fake_engine
from ports import free_port

import specbench_lib as sb
from specbench_lib.analysis.answer import answer_lines
from specbench_lib.analysis.drift import run_drift

DRIFT = 6.0  # the machine's speed grows by 600 % a minute: 10 % a second, ~50 % over a run


def drift_params(folder: Path, *, seed: int, budget: str | None) -> Path:
    """auto, ngram-b4 and ngram-b8 on drifting stand-ins whose configs are equally fast."""
    flags = ["--drift", str(DRIFT), "--epoch", f"{time.time():.3f}", "--jitter", "0.05",
             "--prefill", "0.03"]  # a prefill of 30 ms, the same work in every config
    spec = fake_argv("--speedups", "4:1,8:1", *flags, "--noise-seed", f"{seed}:{{budget}}",
                     interval=0.003, budget=True)
    base = fake_argv(*flags, "--noise-seed", f"{seed}:auto", interval=0.003)
    plan = (f"time_budget_s: {budget}\nmax_rounds: 8\n" if budget else "repeats: 5\n")
    path = folder / f"drift-{seed}-{budget}.yaml"
    path.write_text(f"""phase: drift
{fake_engine(free_port(), base)}configs:
  - {{name: auto, method: auto, argv: {base}}}
  - {{name: ngram, method: ngram, budgets: [4, 8], argv: {spec}}}
workloads:
  - {{name: chat, source: sharegpt}}
contexts: [32]
concurrency: [1]
output_tokens: 24
requests_per_cell: 3
warmup_requests: 1
seed: {seed}
{plan}{LENIENT_HOST}""")
    return path


@pytest.fixture(scope="module")
def drifted(tmp_path_factory: pytest.TempPathFactory) -> list[sb.SweepResult]:
    folder = tmp_path_factory.mktemp("drift")
    return [sb.run_sweep(sb.load_plan(drift_params(folder, seed=seed, budget=budget)),
                         outputs=folder / "out", progress=False)
            for seed, budget in ((1, None), (2, None), (1, "14s"), (2, "14s"))]


def test_no_claimed_speedup_excludes_one_under_drift(drifted: list[sb.SweepResult]) -> None:
    wrong = []
    for result in drifted:
        table = result.table()
        spec = table[table["method"] != "auto"]
        assert len(spec) == 2 and spec["speedup_lo"].notna().all()  # every config has its claim
        wrong += [f"{result.run_dir.name} {r['config']}: {r['speedup']:.2f}x "
                  f"[{r['speedup_lo']:.2f}, {r['speedup_hi']:.2f}]"
                  for r in spec.to_dict("records") if not r["speedup_lo"] <= 1 <= r["speedup_hi"]]
    # each interval holds the truth with 95 % (simultaneous over a panel's configs); four panels
    # of two: one miss is chance (≈ 5 %), two would be a design that lets drift through
    assert len(wrong) <= 1, wrong


def test_the_machines_drift_is_measured_and_said(drifted: list[sb.SweepResult]) -> None:
    for result in drifted:
        drift = run_drift(result.cells)
        assert drift.measured and drift.range > 0.15 and drift.trend > 1.0  # it sped up
    answer = json.loads((drifted[2].run_dir / "answer.json").read_text())
    assert "the machine's speed (prefill of the same prompts) moved" in answer_lines(answer)[0]
    assert answer["panels"][0]["blocks"] >= 2


def test_each_block_draws_its_own_order_and_keeps_its_servers(drifted: list[sb.SweepResult]
                                                             ) -> None:
    result = drifted[0]
    blocks = result.manifest["blocks"]  # the order each block measured its configs in
    assert sorted(blocks) == ["1", "2", "3", "4", "5"]
    assert all(sorted(order) == ["auto", "ngram-b4", "ngram-b8"] for order in blocks.values())
    assert len({order[0] for order in blocks.values()}) >= 2  # not auto first in every block
    servers = result.manifest["servers"]
    assert sorted(servers) == ["auto", "ngram-b4", "ngram-b8"]  # one server each, all blocks
    assert all(s["starts"] == 1 for s in servers.values())
