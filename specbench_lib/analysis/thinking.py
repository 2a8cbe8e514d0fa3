"""A reasoning model's answer split in two: its thinking and its answer, by the model's
end-of-thinking token (Qwen3's ``</think>``, for instance), read from what was measured.

Each measured request of an ok cell keeps its output ids and every token's receive time. The
tokens up to and including the first occurrence of ``end_ids`` are the reasoning segment, the
rest the answer (a request whose output never holds it is all reasoning, counted apart in
``unsplit``: it ran out of tokens while thinking). Per segment: its tokens, its deliveries
(:func:`~.latency.deliveries`: tokens received together, one target step's worth when the engine
streams a step at a time), so tokens per delivery, the speculative step's size as the client
sees it; and its decoding rate (tokens after the segment's first over the time since its
first). Acceptance counters are the server's per request or per cell and cannot be split by
position, so tokens per delivery stands for tokens per step in each segment. It is a reading:
nothing is measured for it and it changes no fingerprint (``result.categories(thinking_end=…)``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..core.errors import ParamsError
from ..model.records import CellRecord, RequestRecord
from .latency import deliveries

THINKING_COLUMNS = ["reasoning_tokens", "answer_tokens_after", "reasoning_tokens_per_delivery",
                    "answer_tokens_per_delivery", "reasoning_tok_s", "answer_tok_s", "unsplit"]


@dataclass
class Segment:
    """Tokens, deliveries and decoding seconds of one segment, summed over requests."""

    tokens: int = 0
    deliveries: int = 0
    seconds: float = 0.0
    paced: int = 0  # tokens after each segment's first (the decoding rate's numerator)

    def add(self, times: Sequence[float]) -> None:
        if not times:
            return
        self.tokens += len(times)
        self.deliveries += len(deliveries(times))
        self.seconds += times[-1] - times[0]
        self.paced += len(times) - 1

    def per_delivery(self) -> float:
        return self.tokens / self.deliveries if self.deliveries else float("nan")

    def rate(self) -> float:
        return self.paced / self.seconds if self.seconds > 0 else float("nan")


def thinking_ids(end_ids: object) -> tuple[int, ...]:
    """``thinking_end`` as token ids: a ParamsError naming it, the value and the fix for
    anything else (text such as ``"</think>"`` is no token id: it would match nothing and leave
    every answer unsplit, said nowhere)."""
    listed = end_ids if isinstance(end_ids, list | tuple) else None
    if not listed or not all(isinstance(i, int) and not isinstance(i, bool) and i >= 0
                             for i in listed):
        raise ParamsError(f"thinking_end {end_ids!r} is not a list of token ids: give the "
                          f"model's end-of-thinking ids, e.g. [151668] for Qwen3's </think> "
                          f"(the ids of /tokenize of the text, with parse_special)",
                          key="thinking_end", value=end_ids)
    return tuple(listed)


def end_of_thinking(ids: Sequence[int], end_ids: Sequence[int]) -> int | None:
    """The index just past the first ``end_ids`` in ``ids`` (None: not there)."""
    k = len(end_ids)
    return next((i + k for i in range(len(ids) - k + 1) if list(ids[i:i + k]) == list(end_ids)),
                None)


def split(rec: RequestRecord, end_ids: Sequence[int]) -> tuple[list[float], list[float]] | None:
    """A request's token receive times as (reasoning, answer); None when its output never ends
    its thinking (or its ids and times do not line up)."""
    if len(rec.output_ids) != len(rec.token_times):
        return None
    cut = end_of_thinking(rec.output_ids, end_ids)
    return None if cut is None else (rec.token_times[:cut], rec.token_times[cut:])


def thinking_table(cells: Sequence[CellRecord], end_ids: Sequence[int]) -> Any:
    """Per workload × turn × config: the two segments' tokens (mean per split request), tokens
    per delivery and decoding rates, and the requests that never ended their thinking."""
    import pandas as pd

    end_ids = thinking_ids(end_ids)
    by: dict[tuple[str, int, str], tuple[Segment, Segment, list[int]]] = {}
    for cell in cells:
        if not cell.verdict.ok:
            continue
        key = (cell.spec.workload, cell.spec.turn, cell.spec.config)
        think, answer, counts = by.setdefault(key, (Segment(), Segment(), [0, 0]))
        for rec in cell.measured:
            found = split(rec, end_ids)
            if found is None:
                counts[1] += 1
                continue
            counts[0] += 1
            think.add(found[0])
            answer.add(found[1])
    rows = [{"workload": w, "turn": t, "config": c,
             "reasoning_tokens": think.tokens / n if (n := counts[0]) else float("nan"),
             "answer_tokens_after": answer.tokens / n if n else float("nan"),
             "reasoning_tokens_per_delivery": think.per_delivery(),
             "answer_tokens_per_delivery": answer.per_delivery(),
             "reasoning_tok_s": think.rate(), "answer_tok_s": answer.rate(),
             "unsplit": counts[1]}
            for (w, t, c), (think, answer, counts) in by.items()]
    return pd.DataFrame(rows, columns=["workload", "turn", "config", *THINKING_COLUMNS])
