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
