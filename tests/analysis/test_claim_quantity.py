"""Issue 39: a claim on the quantity a drafter changes. Known truth: cells whose prefill (TTFT)
and decoding are set apart, a drafter that decodes 1.25× faster at 1.5 tokens a step and
prefills like ``auto``. The decode-rate claim finds the 1.25×, the end-to-end claim the diluted
gain the arithmetic gives, the TTFT claim no effect, the acceptance claim 1.5 tokens a step;
an engine that counts verify steps only per cell pairs blocks; every reader states the plan's
quantity."""

from __future__ import annotations

import math
import random
from dataclasses import replace
from pathlib import Path

import pytest
from cellfactory import make_cell, spread_cell
from paramsfiles import write_params

import specbench_lib as sb
from specbench_lib.analysis.analyse import analyse
from specbench_lib.analysis.answer import answer_lines, answer_of
from specbench_lib.analysis.answerbuild import fixed_answer
from specbench_lib.analysis.best import verdict_words
from specbench_lib.analysis.claim import panel_claims
from specbench_lib.analysis.units import units_of
from specbench_lib.core.errors import ParamsError
from specbench_lib.model.layering import load_params
from specbench_lib.model.records import FinalStats, RequestRecord
from specbench_lib.model.served import PromptRecord
from specbench_lib.report.comparison import Comparison
from specbench_lib.report.latex import write_latex
from specbench_lib.runs.run import RunDir

TOKENS, PREFILL, AUTO_DECODE = 64, 1.5, 60.0  # tokens out, seconds to the first token, tok/s
SPEEDUP, TAU = 1.25, 1.5  # the drafter's decode speedup and tokens per verify step


def _request(index: int, ttft: float, decode_s: float, steps: int | None) -> RequestRecord:
    times = [ttft + decode_s * k / (TOKENS - 1) for k in range(TOKENS)]
    rec = RequestRecord(index=index, warmup=False, prompt_tokens_planned=256, max_tokens=TOKENS,
                        status=200, start=0.0, end=times[-1], token_times=times,
                        chunk_sizes=[1] * TOKENS)
    rec.final = FinalStats(prompt_tokens=256, completion_tokens=TOKENS, verify_steps=steps)
    return rec


def _cells(seed: int, *, blocks: int = 6, per_block: int = 4, per_request: bool = True) -> list:
    """auto and a drafter, ``blocks`` rounds of ``per_block`` prompts each; a prompt's prefill
    is its own (±20 %, the same in both configs) with 3 % noise a request, decoding with 3 %."""
    rng = random.Random(seed)
    cells = []
    for block in range(blocks):
        prompts = [PREFILL * math.exp(rng.gauss(0, 0.2)) for _ in range(per_block)]
        for config, method, rate, steps in (("auto", "auto", AUTO_DECODE, TOKENS),
                                            ("ngram-b8", "ngram", AUTO_DECODE * SPEEDUP,
                                             round(TOKENS / TAU))):
            reqs = []
            clock = 0.0
            for i, prefill in enumerate(prompts):
                rec = _request(i, prefill * math.exp(rng.gauss(0, 0.03)),
                               (TOKENS - 1) / rate * math.exp(rng.gauss(0, 0.03)),
                               steps if per_request or method == "auto" else None)
                shift = clock
                rec.start, rec.end = rec.start + shift, rec.end + shift
                rec.token_times = [t + shift for t in rec.token_times]
                clock = rec.end
                reqs.append(rec)
            base = make_cell(config, method, 8 if method != "auto" else None, repeat=block,
                             repeats=blocks, tokens=TOKENS)
            facts = base.facts if per_request or method == "auto" else replace(
                base.facts, spec_counters={"drafts": 40, "draft_tokens": 200,
                                           "accepted_tokens": per_block * (TOKENS - round(
                                               TOKENS / TAU))})
            cells.append(analyse(replace(
                base, requests=tuple(reqs), judge=replace(
                    base.judge, planned=per_block,
                    spec_stats="per_request" if per_request else "counters"),
                facts=facts, prompts=tuple(PromptRecord(f"p{block}-{i}", 256)
                                           for i in range(per_block)))))
    return cells


def _claim(cells: list, quantity: str):  # type: ignore[no-untyped-def]
    (found,) = panel_claims(cells, quantity=quantity).values()
    return found


def test_each_quantity_finds_its_own_truth() -> None:
    cells = _cells(1)
    decode, e2e = _claim(cells, "decode_rate"), _claim(cells, "output_rate")
    ttft, accept = _claim(cells, "ttft"), _claim(cells, "acceptance")
    assert decode.quantity == "decode_rate" and decode.leader == "ngram-b8"
    assert decode.decision == "decided"
    assert decode.speedup_lo < SPEEDUP < decode.speedup_hi
    assert decode.speedup == pytest.approx(SPEEDUP, rel=0.03)
    # end to end the same decoding gain is diluted by the prefill no drafter shortens
    decode_s = (TOKENS - 1) / AUTO_DECODE
    diluted = (PREFILL + decode_s) / (PREFILL + decode_s / SPEEDUP)
    assert e2e.speedup == pytest.approx(diluted, rel=0.04) and e2e.speedup < decode.speedup - 0.1
    assert ttft.rows["ngram-b8"].speedup_lo < 1 < ttft.rows["ngram-b8"].speedup_hi
    assert accept.leader == "ngram-b8"
    assert accept.rows["ngram-b8"].tok_s == pytest.approx(TAU, rel=0.02)
    assert accept.rows["auto"].tok_s == pytest.approx(1.0)


def test_acceptance_from_a_cells_counters_pairs_blocks() -> None:
    cells = _cells(2, per_request=False)
    units = units_of([c for c in cells if c.spec.config == "ngram-b8"], "acceptance")
    assert units.n == 6 and {key for _, key in units.ids} == {-1}  # one unit a cell
    found = _claim(cells, "acceptance")
    assert found.rows["ngram-b8"].speedup == pytest.approx(TAU, rel=0.02)
    assert found.rows["ngram-b8"].units_n == 6  # paired by block, not by prompt
    # the decode rate needs no counters: still per prompt
    assert units_of([c for c in cells if c.spec.config == "ngram-b8"], "decode_rate").n == 24


def test_the_answer_states_its_quantity() -> None:
    cells = _cells(3)
    answer = fixed_answer(cells, seconds=60.0, quantity="decode_rate")
    assert answer.quantity == "decode_rate"
    (panel,) = answer.panels
    assert panel.best == "ngram-b8" and panel.decision == "decided"
    head, line = answer_lines(answer)
    assert "claims are on the decode rate" in head
    assert "ngram-b8 best: every other config shown slower" in line
    e2e = answer_lines(fixed_answer(cells, seconds=60.0))
    assert "claims are on" not in e2e[0]  # the end-to-end claim keeps its words
    accept = answer_lines(fixed_answer(cells, seconds=60.0, quantity="acceptance"))[1]
    assert "shown lower" in accept and "slower" not in accept


def test_an_unknown_quantity_is_named_with_the_choices(tmp_path: Path) -> None:
    path = write_params(tmp_path, Path("params/embedded_budget.yaml").resolve(),
                        claim_quantity="decode")
    with pytest.raises(ParamsError) as err:
        load_params(path)
    message = str(err.value)
    assert "claim_quantity" in message and "'decode'" in message
    assert "decode_rate" in message and "acceptance" in message
    assert load_params(Path("params/embedded_budget.yaml")).claim_quantity in (
        "output_rate", "decode_rate", "ttft", "acceptance")



def test_every_reader_states_the_plans_quantity(tmp_path: Path) -> None:
    """A run whose plan claims on the decode rate: the summary, the answer, the table, the
    LaTeX caption and compare state that claim, and the end-to-end one beside it."""
    run = RunDir(tmp_path / "run")
    run.cells_dir.mkdir(parents=True)
    run.update_manifest(phase="t", model={"path": "/m/x.gguf"}, engine={"kind": "llamacpp"},
                        params={"equivalence": 0.05, "claim_quantity": "decode_rate"})
    for cell in _cells(4):
        run.write_cell(cell)
    result = sb.SweepResult(run.path)
    (row,) = result.best().to_dict("records")
    assert row["quantity"] == "decode_rate" and row["best"] == "ngram-b8"
    assert "(decode rate): ngram-b8 best" in row["statement"]
    (e2e,) = result.best("output_rate").to_dict("records")
    assert e2e["speedup"] < row["speedup"]
    claims = result.claims()
    assert list(claims["quantity"]) == ["decode_rate", "output_rate", "ttft", "acceptance"]
    summary = result.summary().text()
    assert row["statement"] in summary and e2e["statement"] in summary
    assert "on decode rate (a request's tok/s after its first token) (the run's claim" in summary
    leader = result.table().set_index("config").loc["ngram-b8"]
    assert (leader["decode_speedup"], leader["decode_speedup_lo"]) == (
        row["speedup"], row["speedup_lo"])
    assert leader["speedup"] == pytest.approx(e2e["speedup"])
    answer = answer_of(result).text()
    assert verdict_words(row, 0.05) in answer
    comparison = Comparison([result])
    assert "(on the decode rate)" in write_latex(comparison, tmp_path / "r.tex").read_text()


def test_the_answer_names_the_closest_call_that_sets_more_requests() -> None:
    """auto far behind, two n-gram budgets within 2 %: the requests still needed are set by
    the leader against its near-tie, not against auto, and the answer says so."""
    rng = random.Random(5)
    cells = [spread_cell(config, method, budget,
                         [rate * math.exp(rng.gauss(0, 0.08)) for _ in range(3)],
                         repeat=block, repeats=4)
             for block in range(4)
             for config, method, budget, rate in (("auto", "auto", None, 20.0),
                                                  ("ngram-b4", "ngram", 4, 30.0),
                                                  ("ngram-b8", "ngram", 8, 30.5))]
    answer = fixed_answer(cells, seconds=10.0)
    (panel,) = answer.panels
    assert panel.decision == "undecided" and panel.more_requests
    others = {"ngram-b4", "ngram-b8"} - {panel.best}
    assert panel.closest_call in others  # not auto, which is far behind
    line = answer_lines(answer)[1]
    assert f"(the closest call: {panel.best} vs {panel.closest_call})" in line
