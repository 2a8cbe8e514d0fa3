"""Acceptance length against a known truth: llama.cpp's synthetic acceptance rates.

``--spec-synth-rates p0,p1,p2,p3`` accepts draft position k with unconditional probability p_k
(one prefix per step; counters per position confirm it), so a verify step yields on average
1 + sum(p_k) tokens. With rates 0.8, 0.6, 0.4, 0.2 that is L = 3.0. Each request's first token
comes from the prompt pass without a draft, so n tokens take 1 + (n − 1) / L steps and the
token-weighted mean is n / (1 + (n − 1) / L) = 2.977 for n = 256. The sampling spread over
3 × 256 tokens is about ±0.09 (one sigma); measured values were 2.81–2.98, so the test allows
±0.3 — far from the 2.51 a conditional (product) reading of the rates would give.
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SYNTH = ROOT / "tests" / "data" / "synth.yaml"
RATES = (0.8, 0.6, 0.4, 0.2)


def implied_acceptance(rates: tuple[float, ...], n_tokens: int) -> float:
    length = 1 + sum(rates)
    return n_tokens / (1 + (n_tokens - 1) / length)


@pytest.mark.engine
def test_synthetic_rates_give_the_implied_acceptance_length(engine, outputs: Path) -> None:
    import specbench_lib as sb

    result = sb.run_sweep(sb.load_plan(SYNTH), progress=False)
    cells = {c.spec.config: c for c in result.cells}
    assert {k: c.status for k, c in cells.items()} == {"auto": "ok", "synth-b4": "ok"}
    synth = cells["synth-b4"]
    for req in synth.requests:
        final = req.final
        assert final.completion_tokens == 256 == len(req.token_times)
        assert final.prompt_tokens == 128
        assert final.draft_tokens > 0
    measured = synth.metrics["acceptance_length"]
    expected = implied_acceptance(RATES, 256)
    print(f"acceptance length: measured {measured:.3f}, implied {expected:.3f}")
    assert measured == pytest.approx(expected, abs=0.3)
    assert cells["auto"].metrics["acceptance_length"] == pytest.approx(1.0)
    table = result.table()
    row = table[table["config"] == "synth-b4"].iloc[0]
    assert row["lossless_n"] == 3 and 0 <= row["lossless_identical"] <= 1
    print(f"synth vs auto: identical {row['lossless_identical']:.2f}, "
          f"common prefix {row['lossless_prefix_tokens']:.1f} tokens")


SYNTH_LEN = ROOT / "tests" / "data" / "synth_len.yaml"
ASKED = {"l15-b4": 1.5, "l25-b4": 2.5, "l40-b4": 4.0}


def synth_rates(length: float, n_max: int = 4) -> list[float]:
    """llama.cpp's unconditional rates for ``--spec-synth-len``: p, p², … with
    ``sum(p^k, k = 1..n_max) = length − 1`` (common/speculative.cpp:2480-2518, by bisection)."""
    low, high = 0.0, 1.0
    for _ in range(60):
        p = (low + high) / 2
        low, high = (p, high) if sum(p ** k for k in range(1, n_max + 1)) < length - 1 else (low, p)
    return [p ** k for k in range(1, n_max + 1)]


@pytest.mark.engine
def test_synthetic_length_comes_out_as_told(engine, outputs: Path) -> None:
    """At each L asked, the project's figures as the server was told: tokens per drafted verify
    step L (``acceptance_length_drafted``), accepted drafts = tokens − verify steps and equal
    to the server's counters, the acceptance by position p^(k+1). Tolerances: about 3.5 sampling
    sigmas over 3 × 160 tokens (±0.4 tokens a step, ±0.12 a position; at L 4 it came out 0.28
    low: a drafted end-of-generation token is never accepted, server-context.cpp:103)."""
    import specbench_lib as sb

    result = sb.run_sweep(sb.load_plan(SYNTH_LEN), progress=False)
    cells = {c.spec.config: c for c in result.cells}
    assert {k: c.status for k, c in cells.items()} == dict.fromkeys(["auto", *ASKED], "ok")
    for label, asked in ASKED.items():
        cell, metrics = cells[label], cells[label].metrics
        tokens = sum(r.final.completion_tokens for r in cell.requests)
        assert metrics["accepted_tokens"] + metrics["verify_steps"] == tokens
        assert metrics["accepted_tokens"] == cell.facts.spec_counters["accepted_tokens"]
        measured = metrics["acceptance_length_drafted"]
        rates = metrics["position_acceptance_rate"]
        print(f"L asked {asked}: tokens per drafted step {measured:.3f}, per step (prefill in) "
              f"{metrics['tokens_per_step']:.3f}, papers' tau {metrics['tau_verify']:.3f}; "
              f"by position {[round(r, 3) for r in rates]} vs {[round(r, 3) for r in synth_rates(asked)]}")
        assert measured == pytest.approx(asked, abs=0.4)
        assert rates == pytest.approx(synth_rates(asked), abs=0.12)
