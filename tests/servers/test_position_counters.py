"""llama.cpp's acceptance by draft position from its /metrics (issue 48): the labelled series
``llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position="k"}`` appear only after a
server's first draft, so a cell's first snapshot lacks them (absent is 0). The figures are the
real server's (b11434, ``--spec-synth-len 2.5``, 200 tokens: tests/PROTOCOLS.md). Before, the
llama.cpp adapter read no per-position counter and a cell had no ``position_acceptance_rate``."""

from __future__ import annotations

import pytest

from specbench_lib.servers.engines import prometheus
from specbench_lib.servers.engines.llamacpp import LlamaCppAdapter

AFTER = """# TYPE llamacpp:spec_decode_num_draft_tokens_total counter
llamacpp:spec_decode_num_draft_tokens_total 324
llamacpp:spec_decode_num_accepted_tokens_total 114
llamacpp:spec_decode_num_drafts_total 81
llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position="0"} 52
llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position="1"} 30
llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position="2"} 19
llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position="3"} 13
"""
BEFORE = """llamacpp:spec_decode_num_draft_tokens_total 0
llamacpp:spec_decode_num_accepted_tokens_total 0
llamacpp:spec_decode_num_drafts_total 0
"""


def snapshot(text: str) -> dict[str, float]:
    names = tuple("llamacpp:" + n for n in prometheus.SPEC_COUNTERS)
    return {**prometheus.parse_counters(text, names), **prometheus.per_position(text, "llamacpp:")}


def test_llamacpp_gives_the_acceptance_by_position_of_a_cell() -> None:
    stats = LlamaCppAdapter().cell_spec_stats(snapshot(BEFORE), snapshot(AFTER))
    assert (stats["drafts"], stats["draft_tokens"], stats["accepted_tokens"]) == (81, 324, 114)
    assert stats["accepted_per_position"] == [52, 30, 19, 13]
    assert stats["position_acceptance_rate"] == pytest.approx([52 / 81, 30 / 81, 19 / 81, 13 / 81])
    # drafts with exactly k accepted, k = 0..4: a draft's k-th token only after the first k - 1
    assert stats["acceptance_histogram"] == [29, 22, 11, 6, 13]
    assert sum(stats["acceptance_histogram"]) == 81
