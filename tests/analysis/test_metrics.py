from __future__ import annotations

import math

import pytest
from cellfactory import make_cell

from specbench_lib.analysis.metrics import cell_metrics, results_table
from specbench_lib.model.records import CellDispatch, CellRecord, RequestRecord
from specbench_lib.servers.engines import FinalStats


def rec(times: list[float], *, start: float = 0.0, accepted: int = 0, drafted: int = 0,
        chunks: list[int] | None = None) -> RequestRecord:
    r = RequestRecord(index=0, warmup=False, prompt_tokens_planned=4, max_tokens=len(times))
    r.start, r.end, r.token_times = start, times[-1], times
    r.chunk_sizes = chunks or [1] * len(times)
    n = len(times)
    r.final = FinalStats(prompt_tokens=4, completion_tokens=n, draft_tokens=drafted,
                         accepted_tokens=accepted, verify_steps=n - accepted)
    return r


def test_itl_is_per_token_when_chunks_carry_several_tokens() -> None:
    # three chunks of 4 tokens at t=1, 2 and 4: the gaps 1 and 2 s are shared by their 4 tokens
    r = rec([1.0] * 4 + [2.0] * 4 + [4.0] * 4, chunks=[4, 4, 4], accepted=9, drafted=12)
    m = cell_metrics(CellDispatch([r], 0.0, 4.0))
    assert m["itl_p50_s"] == pytest.approx(0.375) and m["itl_mean_s"] == pytest.approx(0.375)
    assert m["itl_p99_s"] == pytest.approx(0.5) and m["itl_p90_s"] == pytest.approx(0.5)
    assert m["delivery_gap_mean_s"] == pytest.approx(1.5)
    assert m["delivery_gap_p99_s"] == pytest.approx(1.99)
    assert m["tokens_per_delivery"] == 4.0 and m["tokens_per_chunk"] == 4.0
    assert m["tpot_mean_s"] == pytest.approx(3 / 11)
    assert m["output_tok_s"] == pytest.approx(12 / 4.0)
    assert m["acceptance_length"] == pytest.approx(12 / 3)


def test_a_burst_of_events_microseconds_apart_is_one_delivery() -> None:
    # llama.cpp: each accepted draft token its own event (chunk of 1), 20 us apart, bursts 0.1 s
    # apart; counted per event, ITL p50 would be 20 us and p99 the burst gap
    times = [round(0.1 * b + 20e-6 * i, 9) for b in range(1, 6) for i in range(4)]
    r = rec(times, accepted=15, drafted=20)
    m = cell_metrics(CellDispatch([r], 0.0, 0.5))
    assert m["tokens_per_chunk"] == 1.0 and m["tokens_per_delivery"] == 4.0
    assert m["delivery_gap_p50_s"] == pytest.approx(0.1)
    assert m["itl_p50_s"] == pytest.approx(0.025) and m["itl_p99_s"] == pytest.approx(0.025)
    # events 0.4 ms apart for 2 ms do not chain into one delivery: 0.5 ms from its first token
    steady = rec([0.0004 * i for i in range(1, 6)])
    assert cell_metrics(CellDispatch([steady], 0.0, 1.0))["tokens_per_delivery"] == pytest.approx(5 / 3)


def test_old_per_event_itl_no_longer_reports_zero_latencies() -> None:
    r = rec([1.0] * 4 + [2.0] * 4, chunks=[4, 4], accepted=6, drafted=8)
    m = cell_metrics(CellDispatch([r], 0.0, 2.0))
    assert m["itl_p50_s"] == pytest.approx(0.25)  # not 0: no token waits 0 s
    assert m["tpot_mean_s"] == pytest.approx(1 / 7)
    assert m["tokens_per_chunk"] == 4.0
    assert m["output_tok_s"] == pytest.approx(8 / 2.0)
    assert m["ttft_mean_s"] == 1.0
    assert m["acceptance_length"] == pytest.approx(8 / 2)
    assert m["draft_acceptance_rate"] == pytest.approx(6 / 8)


def test_acceptance_weighted_by_tokens_and_warmup_excluded() -> None:
    a = rec([0.1 * i for i in range(1, 11)], accepted=5, drafted=5)   # 10 tokens, 5 steps
    b = rec([0.1 * i for i in range(1, 31)], accepted=0, drafted=0)   # 30 tokens, 30 steps
    warm = rec([0.5, 0.6], accepted=1, drafted=1)
    warm.warmup = True
    m = cell_metrics(CellDispatch([warm, a, b], 0.0, 3.0))
    assert m["n_requests"] == 2 and m["completion_tokens"] == 40
    assert m["acceptance_length"] == pytest.approx(40 / 35)


def cell(config: str, method: str, budget: int | None, status: str, tok_s: float | None,
         context: int = 256) -> CellRecord:
    return make_cell(config, method, budget, status, tok_s, context=context)


def test_table_has_only_ok_cells_and_speedup_vs_auto() -> None:
    cells = [cell("auto", "auto", None, "ok", 50.0), cell("ng-b8", "ngram", 8, "ok", 75.0),
             cell("ng-b4", "ngram", 4, "crashed", None), cell("ng-b16", "ngram", 16, "invalid", None),
             cell("ng-b8", "ngram", 8, "ok", 60.0, context=512)]
    table = results_table(cells)
    assert sorted(table["config"]) == ["auto", "ng-b8", "ng-b8"]
    assert not (table["output_tok_s"] == 0).any()
    row = table[(table["config"] == "ng-b8") & (table["context"] == 256)].iloc[0]
    assert row["speedup"] == pytest.approx(1.5)
    orphan = table[table["context"] == 512].iloc[0]
    assert math.isnan(orphan["speedup"])


def test_an_aa_pair_of_auto_configs_keeps_one_row_a_config() -> None:
    """Two `auto` configs in one plan (an A/A pair, the noise yardstick of
    benchmarks/params/sizing_aa.yaml): one row each, the speedup against the first; before, the
    merge on the panel doubled every row and the best table failed on a Series."""
    cells = [make_cell("auto", "auto", None, tok_s=10.0),
             make_cell("auto-aa", "auto", None, tok_s=12.0, series="auto-aa"),
             make_cell("ngram-b8", "ngram", 8, tok_s=15.0)]
    table = results_table(cells)
    assert sorted(table["config"]) == ["auto", "auto-aa", "ngram-b8"]
    speed = table.set_index("config")["speedup"]
    assert speed["ngram-b8"] == pytest.approx(1.5) and speed["auto-aa"] == pytest.approx(1.2)
