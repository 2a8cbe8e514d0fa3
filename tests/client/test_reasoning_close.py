"""Issue 49: an answer that only closes a reasoning block (``</think>``, DeepSeek-R1's template
opens it in the generation prompt) reasoned, as one that opens it does: the plan did not ask
for it, so the cell is ``unplanned_reasoning``. Before, only ``<think>`` in an answer's first
64 characters was looked for, and such cells were ok. Read as the client reads a stream."""

from __future__ import annotations

import json

from specbench_lib.analysis.validate import judge_cell
from specbench_lib.client.streamread import Stream
from specbench_lib.model.records import RequestRecord
from specbench_lib.servers.engines.llamacpp import LlamaCppAdapter


def answer(pieces: list[str], index: int = 0) -> RequestRecord:
    """The record of a llama.cpp stream sending ``pieces``, one token each."""
    rec = RequestRecord(index=index, warmup=False, prompt_tokens_planned=4,
                        max_tokens=len(pieces))
    stream = Stream(LlamaCppAdapter().stream_parser())
    events = [{"content": text, "tokens": [i], "stop": False, "tokens_predicted": i + 1}
              for i, text in enumerate(pieces)]
    events.append({"content": "", "tokens": [], "stop": True, "tokens_predicted": len(pieces),
                   "tokens_evaluated": 4, "stop_type": "limit", "timings": {"prompt_n": 4}})
    for i, event in enumerate(events):
        stream.take_read(rec, [b"data: " + json.dumps(event).encode()], 0.01 * (i + 1), 0.0)
    rec.reasoning = stream.opened_reasoning()
    return rec


def test_an_answer_that_only_closes_the_reasoning_block_reasoned() -> None:
    long_thought = ["Okay, the user asks for a sum. "] * 4  # past the first 64 characters
    closed = answer([*long_thought, "So 4.</th", "ink>\n\n", "The answer is 4."])  # split
    plain = answer(["The answer ", "is 4, no </thinking> ", "tag."], index=1)
    assert closed.reasoning is True and plain.reasoning is False
    verdict = judge_cell([closed, plain])
    assert verdict.status == "invalid"
    assert verdict.reasons[0].startswith("unplanned_reasoning: 1 of 2 answers opened a reasoning "
                                         "block (<think>, or a </think> closing the one the "
                                         "prompt opened)"), verdict.reasons
    assert judge_cell([closed, plain], reasoning=True).ok  # asked for: a workload of its own
