"""The decoding speedup split into acceptance and step cost (analysis/stepcost.py), on cells whose
known truth is set: a stand-in's requests emit τ tokens a verify step, one step every set step
time, and report their steps per request (llama.cpp's ``timings``) or only as the cell's counter
deltas (vLLM's ``/metrics``)."""

from __future__ import annotations

import json
import math
import random
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
from budgetparams import free_port
from cellfactory import not_ok
from fakeparams import fake_argv
from paramsfiles import DROP, fake_plan, write_params

from specbench_lib.analysis.analyse import analyse
from specbench_lib.analysis.answer import answer_lines
from specbench_lib.analysis.answerbuild import fixed_answer
from specbench_lib.analysis.best import best_configs, time_words
from specbench_lib.analysis.metrics import GROUP, results_table
from specbench_lib.analysis.stepcost import (
    break_even_words,
    panel_split,
    split_doc,
    split_words,
    steps_of,
)
from specbench_lib.model.cellspec import CellSpec
from specbench_lib.model.records import CellFacts, CellRecord, FinalStats, JudgeInputs, RequestRecord
from specbench_lib.model.served import PromptRecord
from specbench_lib.model.verdict import Verdict
from specbench_lib.report.stepplots import step_cost_figure, step_points

DECODE = 64  # decode tokens a request (65 in all: the prefill's token first)
PREFILL_S = 0.5


def stepped_request(index: int, start: float, *, steps: int, step_s: float,
                    per_request: bool) -> RequestRecord:
    """A request of 1 + DECODE tokens: the first after the prefill, then DECODE tokens over
    ``steps`` verify steps, ``step_s`` apart (each step's tokens arrive together)."""
    per_step = [DECODE // steps + (k < DECODE % steps) for k in range(steps)]
    times = [start + PREFILL_S]
    for k, count in enumerate(per_step):
        times += [start + PREFILL_S + (k + 1) * step_s] * count
    accepted = DECODE - steps
    rec = RequestRecord(index=index, warmup=False, prompt_tokens_planned=4, max_tokens=DECODE + 1,
                        status=200, start=start, end=times[-1], token_times=times,
                        chunk_sizes=[1] * len(times))
    rec.final = FinalStats(prompt_tokens=4, completion_tokens=DECODE + 1,
                           draft_tokens=accepted + steps if per_request else None,
                           accepted_tokens=accepted if per_request else None,
                           verify_steps=steps + 1 if per_request else None)
    return rec


def stepped_cell(config: str, method: str, repeat: int, taus: list[float], step_s: list[float],
                 *, counters: bool = False) -> CellRecord:
    """One cell, its requests one after another: request i decodes at τ ``taus[i]`` (rounded
    to whole steps) with steps ``step_s[i]`` long; ``counters``: the steps only in the cell's
    counter deltas (vLLM)."""
    recs, t = [], 0.0
    for i, (tau, step) in enumerate(zip(taus, step_s, strict=True)):
        steps = max(1, round(DECODE / tau))
        recs.append(stepped_request(i, t, steps=steps, step_s=step, per_request=not counters))
        t = recs[-1].end + 0.01
    accepted = sum(DECODE + 1 - len({*r.token_times}) for r in recs)
    spec = CellSpec(config=config, series=config.split("-")[0], method=method,
                    budget=None if method == "auto" else 16, workload="chat", context=256,
                    concurrency=1, repeat=repeat, repeats=6, output_tokens=DECODE + 1)
    judge = JudgeInputs(planned=len(recs), speculative=method != "auto",
                        spec_stats="counters" if counters else "per_request")
    facts = CellFacts(spec_counters={"drafts": len(recs) * 40, "accepted_tokens": accepted,
                                     "draft_tokens": accepted * 2} if counters and method != "auto"
                      else {})
    cell = CellRecord("r", spec, f"fp-{config}-{repeat}", config, (), Verdict("ok"), judge, facts,
                      requests=tuple(recs),
                      prompts=tuple(PromptRecord(f"p{repeat}-{i}", 4) for i in range(len(recs))))
    return analyse(cell)


def known_truth(tau: float, cost: float, *, blocks: int = 6, prompts: int = 4, seed: int = 7,
                counters: bool = False, noise: float = 0.08) -> list[CellRecord]:
    """``auto`` and ``ngram-b16`` over ``blocks`` repeats: each prompt its own step time (common
    to both configs: prompts differ), ngram-b16's steps ``cost``× as long and its τ ``tau``
    (geometric), each with per-request noise; the machine's speed moves between blocks."""
    rng = random.Random(seed)
    cells = []
    for b in range(blocks):
        machine = math.exp(rng.gauss(0, 0.05))
        base = [0.015 * machine * math.exp(rng.gauss(0, 0.2)) for _ in range(prompts)]
        cells.append(stepped_cell("auto", "auto", b, [1.0] * prompts,
                                  [s * math.exp(rng.gauss(0, noise)) for s in base]))
        taus = [tau * math.exp(rng.gauss(0, noise)) for _ in range(prompts)]
        cells.append(stepped_cell("ngram-b16", "ngram", b, taus,
                                  [cost * s * math.exp(rng.gauss(0, noise)) for s in base],
                                  counters=counters))
    assert all(c.verdict.ok for c in cells), [c.verdict for c in cells if not c.verdict.ok]
    return cells


def _split(cells: list[CellRecord]) -> Any:
    return panel_split(cells, "auto", alpha=0.05, configs=2)["ngram-b16"]


def test_the_split_recovers_the_set_tokens_per_step_and_step_cost() -> None:
    found = _split(known_truth(1.6, 1.25))
    assert found.counters == "per request" and found.blocks == 6 and found.prompts == 24
    tau, cost, speed = found.tokens_per_step, found.step_cost, found.decoding_speedup
    assert tau.lo <= 1.6 <= tau.hi and tau.hi / tau.lo < 1.3, tau
    assert cost.lo <= 1.25 <= cost.hi and cost.hi / cost.lo < 1.3, cost
    assert speed.lo <= 1.6 / 1.25 <= speed.hi, speed
    assert found.baseline_tokens_per_step == 1.0 and found.break_even == cost.value


def test_the_speedup_is_acceptance_over_step_cost_per_prompt_and_in_the_means() -> None:
    cells = known_truth(1.4, 1.3)
    mine = steps_of([c for c in cells if c.spec.config == "ngram-b16"])
    base = steps_of([c for c in cells if c.spec.config == "auto"])
    assert mine is not None and base is not None and mine.ids == base.ids
    rates = {}
    for cell in cells:
        for r in cell.measured:
            rates[cell.spec.config, cell.spec.repeat, r.index] = DECODE / (r.token_times[-1]
                                                                           - r.token_times[0])
    for k, (repeat, index) in enumerate(mine.ids):
        product = (mine.tau[k] / base.tau[k]) * (base.step_s[k] / mine.step_s[k])
        truth = rates["ngram-b16", repeat, index] / rates["auto", repeat, index]
        assert math.isclose(product, truth, rel_tol=1e-12)
    found = _split(cells)
    assert math.isclose(found.decoding_speedup.value,
                        found.acceptance_gain.value / found.step_cost.value, rel_tol=1e-12)


def test_the_break_even_sentence_names_the_numbers() -> None:
    # no noise: τ 64/50 = 1.28 exactly, steps 1.20× auto's, so decoding 1.28 / 1.20 = 1.07×
    cells = known_truth(1.28, 1.2, noise=0.0)
    docs = split_doc(panel_split(cells, "auto", alpha=0.05, configs=2))
    words = break_even_words("ngram-b16", docs["ngram-b16"])
    assert re.match(r"ngram-b16's step costs 1\.20× \[1\.20, 1\.20\] auto's, so it pays above "
                    r"1\.20 tokens a step; it reached 1\.28 .*\(decoding 1\.07× .*per request "
                    r"counters\)$", words), words
    slow = split_doc(panel_split(known_truth(1.1, 1.2, noise=0.0), "auto", alpha=0.05, configs=2))
    assert "it reached only 1.10" in break_even_words("ngram-b16", slow["ngram-b16"])
    # the panel's line carries it: the leader's where it drafts
    assert split_words({"best": "ngram-b16", "split": docs}) == f" · {words}"
    assert time_words({"best": "auto", "split": docs, "blocks": 6}).endswith(words)


def test_the_answer_and_the_summary_state_the_same_split() -> None:
    cells = known_truth(1.5, 1.2)
    answer = fixed_answer(cells, seconds=10.0)
    split = answer.panels[0].split
    assert split is not None
    entry = split["ngram-b16"]
    assert entry["counters"] == "per request" and entry["break_even"] == entry["step_cost"]
    assert {"acceptance_gain_lo", "step_cost_hi", "decoding_speedup", "tokens_per_step"} <= set(entry)
    line = answer_lines(answer, more=True)[-1]  # the panel's last clause, one click away
    summary = best_configs(cells, results_table(cells), GROUP).iloc[0]["statement"]
    words = break_even_words("ngram-b16", entry)
    assert line.endswith(words) and summary.endswith(words), (line, summary)


def test_cell_counters_give_the_cells_tau_and_say_cell() -> None:
    cells = known_truth(1.6, 1.25, counters=True)
    assert all(c.requests[0].final.verify_steps is None for c in cells  # type: ignore[union-attr]
               if c.spec.config == "ngram-b16")
    found = _split(cells)
    assert found.counters == "cell"
    assert found.tokens_per_step.lo <= 1.6 <= found.tokens_per_step.hi
    assert found.step_cost.lo <= 1.25 <= found.step_cost.hi
    assert "cell counters" in break_even_words("ngram-b16", split_doc({"ngram-b16": found})[
        "ngram-b16"])
    # a drafting config with neither count has no split (never a τ of 1 made up)
    bare = [replace(c, facts=CellFacts()) if c.spec.config == "ngram-b16" else c for c in cells]
    assert panel_split(bare, "auto", alpha=0.05, configs=2) == {}


class _Result:
    """What the figure reads of a run: its claim rows, table, manifest and id."""

    def __init__(self, cells: list[CellRecord]) -> None:
        self._table = results_table(cells)
        self._best = best_configs(cells, self._table, GROUP)
        self.manifest: dict[str, Any] = {}
        self.run_id = "r"

    def best(self) -> Any:
        return self._best

    def table(self) -> Any:
        return self._table


def test_the_figure_is_written_with_a_point_per_config_and_load(tmp_path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    cells = known_truth(1.6, 1.25)
    cells += [replace(c, spec=replace(c.spec, concurrency=2)) for c in known_truth(1.3, 1.4, seed=3)]
    result: Any = _Result(cells)
    points = step_points(result)
    assert sorted(points["concurrency"]) == [1, 2] and set(points["config"]) == {"ngram-b16"}
    fig = step_cost_figure(result)
    drawn = [bars[0] for bars in fig.axes[0].containers if bars.get_label() == "ngram-b16"]
    assert len(drawn) == 1 and np.allclose(sorted(drawn[0].get_xdata()),
                                           sorted(points["tokens_per_step"]))
    path = tmp_path / "step_cost.png"
    fig.savefig(path)
    assert path.stat().st_size > 10_000


def stepped_params(folder: Path, port: int) -> Path:
    """auto (a token every 8 ms) and ngram-b4 on stand-ins whose τ (1.6) and step cost (1.25×:
    10 ms a step) are set (``fake_server.py --steps``), llama.cpp's per-request ``timings``.
    The client host is judged as in a real sweep (``coalesced_reads`` at its defaults, not
    fake_plan's lenient 0.5): a request whose stream a client stall took whole (one stamp, no
    decode time) was tolerated and the split silently measured 11 of 12 prompts; now its cell
    is measured again (``retries``)."""
    flags = ["--jitter", "0.05", "--prefill", "0.02"]
    spec = fake_argv("--steps", "4:1.6:1.25", *flags, interval=0.008, budget=True)
    base = fake_argv(*flags, interval=0.008)
    path = write_params(folder, fake_plan(
        port, argv=base, phase="stepped",
        configs=[{"name": "auto", "method": "auto", "argv": json.loads(base)},
                 {"name": "ngram", "method": "ngram", "budgets": [4], "argv": json.loads(spec)}],
        workloads=[{"name": "chat", "source": "sharegpt"}], contexts=[32], output_tokens=33,
        requests_per_cell=4, warmup_requests=1, repeats=3, seed=5,
        max_coalesced_fraction=DROP, max_coalesced_first_fraction=DROP), name="stepped.yaml")
    return path


def test_a_stand_in_servers_set_split_is_recovered_through_a_sweep(tmp_path: Path) -> None:
    """Through the llama.cpp protocol end to end: its ``timings.draft_n_accepted`` per request,
    the adapter's verify steps (the prefill's among them), the split of the stored cells."""
    import specbench_lib as sb

    result = sb.run_sweep(sb.load_plan(stepped_params(tmp_path, free_port())),
                          outputs=tmp_path / "out", progress=False)
    assert all(c.verdict.ok for c in result.cells), not_ok(result)
    found = panel_split(result.cells, "auto", alpha=0.05, configs=2)["ngram-b4"]
    assert found.counters == "per request" and found.prompts == 12 and found.blocks == 3
    # 32 decode tokens in steps of 1, 2, 2, 1, 2 tokens: 20 steps, τ 1.6 exactly
    assert math.isclose(found.tokens_per_step.value, 1.6, rel_tol=1e-9)
    cost = found.step_cost
    assert cost.lo <= 1.25 <= cost.hi and cost.hi / cost.lo < 1.5, cost
    row = result.best().iloc[0]
    assert "ngram-b4's step costs" in row["statement"] and row["split"]["ngram-b4"]["counters"] \
        == "per request"
