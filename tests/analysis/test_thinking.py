"""A reasoning model's thinking and answer, split by its end-of-thinking token (issue 41):
tokens, tokens per delivery and decoding rate per segment, from the stored output ids and
receive times. Synthetic records, no server (under a second)."""

from __future__ import annotations

import math
from dataclasses import replace

from cellfactory import make_cell

from specbench_lib.analysis.bycategory import ByCategory
from specbench_lib.analysis.thinking import end_of_thinking, split, thinking_table

END = [151667, 151668]  # an end-of-thinking marker of two ids


def cell_with(outputs: list[tuple[list[int], list[float]]]):
    base = make_cell("ngram-b8", "ngram", 8, outputs=[ids for ids, _ in outputs],
                     tokens=len(outputs[0][0]))
    requests = tuple(replace(rec, output_ids=ids, token_times=times, end=times[-1])
                     for rec, (ids, times) in zip(base.requests, outputs, strict=True))
    return replace(base, requests=requests)


def test_the_segments_are_cut_after_the_end_of_thinking() -> None:
    assert end_of_thinking([5, 6, *END, 9], END) == 4
    assert end_of_thinking([5, 6, 151667, 9], END) is None
    # thinking: 4 tokens one at a time (0.1 s apart); answer: 4 tokens two at a time
    thought = ([1, 2, *END, 7, 8, 9, 10], [0.1, 0.2, 0.3, 0.4, 0.6, 0.6, 0.8, 0.8])
    never = ([1, 2, 3, 4, 5, 6, 7, 8], [0.1 * k for k in range(1, 9)])
    cell = cell_with([thought, never])
    assert split(cell.requests[0], END) == (thought[1][:4], thought[1][4:])
    assert split(cell.requests[1], END) is None
    (row,) = thinking_table([cell], END).to_dict("records")
    assert (row["reasoning_tokens"], row["answer_tokens_after"], row["unsplit"]) == (4, 4, 1)
    assert row["reasoning_tokens_per_delivery"] == 1.0 and row["answer_tokens_per_delivery"] == 2.0
    assert math.isclose(row["reasoning_tok_s"], 3 / 0.3) and math.isclose(row["answer_tok_s"], 3 / 0.2)
    shown = ByCategory(thinking_table([cell], END).assign(
        kind="category", tokens_per_step=1.5, speedup=1.2, speedup_lo=1.1, speedup_hi=1.3,
        answer_tokens=8.0, prompt_tokens=4.0, bucket_o200k=None, decision="decided",
        place="best", requests_n=2))
    assert "reasoning_tokens_per_delivery" in shown.text()


def test_thinking_end_as_text_is_refused_naming_it() -> None:
    """Issue 49: ``thinking_end="</think>"`` (the text, not its ids) matched nothing and left
    every answer unsplit, said nowhere; anything but token ids is a ParamsError with the fix."""
    import pytest

    from specbench_lib.core.errors import ParamsError

    cell = cell_with([([1, 2, *END, 7], [0.1, 0.2, 0.3, 0.4, 0.5])])
    for bad in ("</think>", ["</think>"], [], [151668.0], [True]):
        with pytest.raises(ParamsError, match="is not a list of token ids: give the model's "
                           r"end-of-thinking ids, e.g. \[151668\]") as err:
            thinking_table([cell], bad)  # type: ignore[arg-type]
        assert err.value.key == "thinking_end" and err.value.value == bad
    (row,) = thinking_table([cell], tuple(END)).to_dict("records")
    assert row["unsplit"] == 0 and row["answer_tokens_after"] == 1
