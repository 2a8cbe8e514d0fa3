"""Issue 49: a llama.cpp request whose counters its own stream rules out is an invalid cell with
a named reason, never a number. Each stream is read as the client reads it (the adapter's
parser through :class:`~specbench_lib.client.streamread.Stream` into the request's record) and
judged as a cell is (:func:`~specbench_lib.analysis.validate.judge_cell`)."""

from __future__ import annotations

import json
from typing import Any

from specbench_lib.analysis.validate import judge_cell, request_problems
from specbench_lib.client.streamread import Stream
from specbench_lib.model.records import RequestRecord
from specbench_lib.servers.engines.llamacpp import LlamaCppAdapter


def read(events: list[dict[str, Any]], *, max_tokens: int = 8, stop: str = "length") -> RequestRecord:
    """The record of one llama.cpp stream of ``events`` (one read each, 10 ms apart)."""
    rec = RequestRecord(index=0, warmup=False, prompt_tokens_planned=4, max_tokens=max_tokens,
                        stop=stop)
    stream = Stream(LlamaCppAdapter().stream_parser())
    for i, event in enumerate(events):
        now = 0.01 * (i + 1)
        stream.take_read(rec, [b"data: " + json.dumps(event).encode()], now, now)
    return rec


def tokens(n: int) -> list[dict[str, Any]]:
    """n partial events, one id each, as llama-server 11434 sends them."""
    return [{"content": "x", "tokens": [i], "stop": False, "tokens_predicted": i + 1}
            for i in range(n)]


def final(predicted: int, stop_type: str, **timings: int) -> dict[str, Any]:
    return {"content": "", "tokens": [], "stop": True, "tokens_predicted": predicted,
            "tokens_evaluated": 4, "stop_type": stop_type,
            "timings": {"prompt_n": 4, "predicted_n": predicted, **timings}}


def test_phantom_tokens_at_the_end_of_sequence_are_a_count_lie() -> None:
    """Five tokens sent, then a final event at ``eos`` that claims 3 more with no text and no
    id. Before, they were counted as "a character the limit cut" (token times made for them),
    so ``token_count_mismatch`` compared the count with itself and the cell was ok, its
    answer 8 tokens long in the time of 5."""
    rec = read([*tokens(5), final(8, "eos")], stop="eos")
    assert len(rec.token_times) == 5
    verdict = judge_cell([rec])
    assert verdict.status == "invalid"
    assert verdict.reasons == ("token_count_mismatch: 5 tokens streamed, server reported 8",)
    # the limit ending the answer mid-character is what the held-back count is for: still ok
    cut = read([*tokens(5), final(8, "limit")])
    assert len(cut.token_times) == 8 and judge_cell([cut]).ok


def test_drafts_accepted_beyond_the_tokens_are_invalid_not_the_largest_tau() -> None:
    """8 tokens, ``draft_n_accepted`` 120 (``draft_n`` 122): before, verify steps were
    8 − 120 = −112 and the metrics clipped the count to publish τ 8.0, the largest possible,
    from an ok cell."""
    rec = read([*tokens(8), final(8, "limit", draft_n=122, draft_n_accepted=120)])
    verdict = judge_cell([rec], speculative=True)
    assert verdict.status == "invalid", verdict
    assert verdict.reasons == ("impossible_spec_stats: 120 drafts accepted for 8 tokens: less "
                               "than one verify step left (each step yields one token of its "
                               "own)",)
    more = read([*tokens(8), final(8, "limit", draft_n=3, draft_n_accepted=5)])
    assert [str(r) for r in request_problems(more, speculative=True)] == [
        "impossible_spec_stats: 5 drafts accepted of 3 drafted"]
    honest = read([*tokens(8), final(8, "limit", draft_n=10, draft_n_accepted=6)])
    assert judge_cell([honest], speculative=True).ok and honest.final is not None
    assert honest.final.verify_steps == 2
    # at an end of sequence, a step's drafts accepted past it are counted (llama.cpp): not judged
    eos = read([*tokens(3), final(3, "eos", draft_n=8, draft_n_accepted=7)], stop="eos")
    assert judge_cell([eos], speculative=True).ok


def test_a_final_event_without_timings_is_missing_spec_stats() -> None:
    """Before, a missing ``timings`` read as "nothing accepted": verify steps = tokens, τ 1.00
    measured. A real server keeps ``timings`` and omits only ``draft_n*`` when nothing was
    drafted (``server-common.cpp``), which still reads as nothing accepted."""
    bare = {"content": "", "tokens": [], "stop": True, "tokens_predicted": 8,
            "tokens_evaluated": 4, "stop_type": "limit"}
    rec = read([*tokens(8), bare])
    assert rec.final is not None and rec.final.verify_steps is None
    verdict = judge_cell([rec], speculative=True)
    assert verdict.status == "invalid"
    assert [r.split(":")[0] for r in verdict.reasons] == ["missing_spec_stats"]
    assert judge_cell([rec]).ok  # no drafter: nothing is missing
    undrafted = read([*tokens(8), final(8, "limit")])
    assert undrafted.final is not None and undrafted.final.verify_steps == 8
    assert judge_cell([undrafted], speculative=True).ok
