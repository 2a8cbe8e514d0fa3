"""ITL and TPOT against a server whose token timing is known exactly (tests/support/reference_server.py).

The reference server runs in its own process and emits token i at start + (i + 1) × 20 ms, one
or four tokens to a chunk. The per-token attribution is checked exactly; the timing within the
issue's 2 % (absolute emission times keep the truth exact; on a loaded machine the measured
error stayed under 0.2 %, see benchmarks/itl_truth.py).
"""

from __future__ import annotations

import pytest
from reference_server import ReferenceServer, expected_itl_mean, expected_tpot_mean

from specbench_lib.analysis.metrics import cell_metrics
from specbench_lib.analysis.validate import judge_cell
from specbench_lib.client.dispatch import dispatch_cell
from specbench_lib.servers.engines.llamacpp import LlamaCppAdapter

INTERVAL, TOKENS = 0.02, 32


@pytest.mark.parametrize("chunk", [1, 4])
@pytest.mark.parametrize("concurrency", [1, 16])
def test_per_token_itl_matches_the_truth(chunk: int, concurrency: int) -> None:
    requests = max(4, concurrency)
    with ReferenceServer(interval=INTERVAL, tokens_per_chunk=chunk) as server:
        result = dispatch_cell(LlamaCppAdapter(), server.url, [[1, 2, 3]] * (requests + 1),
                               warmup=1, concurrency=concurrency, max_tokens=TOKENS, timeout_s=30)
    assert judge_cell(result.records, server_alive=True).ok
    for rec in result.measured:
        assert len(rec.token_times) == TOKENS
        assert rec.chunk_sizes == [chunk] * (TOKENS // chunk)
        assert rec.output_ids == list(range(TOKENS))
        gaps = [b - a for a, b in zip(rec.token_times, rec.token_times[1:], strict=False)]
        assert sum(g == 0 for g in gaps) == TOKENS - TOKENS // chunk
        between = [g for g in gaps if g > 0]
        assert len(between) == TOKENS // chunk - 1
        assert all(abs(g - chunk * INTERVAL) < chunk * INTERVAL for g in between)
    m = cell_metrics(result)
    assert m["n_requests"] == requests
    assert m["itl_mean_s"] == pytest.approx(expected_itl_mean(TOKENS, INTERVAL, chunk), rel=0.02)
    assert m["tpot_mean_s"] == pytest.approx(expected_tpot_mean(TOKENS, INTERVAL, chunk), rel=0.02)
    assert m["itl_p50_s"] == pytest.approx(INTERVAL, rel=0.05)  # a latency, never 0
    assert m["delivery_gap_p50_s"] == pytest.approx(chunk * INTERVAL, rel=0.05)
    assert m["tokens_per_chunk"] == chunk and m["tokens_per_delivery"] == chunk
    assert m["chunk_size_counts"] == {str(chunk): requests * TOKENS // chunk}
    if chunk > 1:
        assert m["acceptance_length"] == pytest.approx(chunk)
