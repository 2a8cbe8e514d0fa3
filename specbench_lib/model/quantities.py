"""The quantities a claim can be made on, each defined once: a request's numerator and
denominator, so that a config's value is Σ numerator / Σ denominator over its units and two
configs compare by the paired log ratio of the units' values
(:mod:`~specbench_lib.analysis.units`, :mod:`~specbench_lib.analysis.claim`).

==============  ============================================  =================================
name            per request: numerator / denominator          what a speculative config changes
==============  ============================================  =================================
output_rate     tokens / (send to last token), a cell's        everything: prefill, queueing and
                overlap applied (the cell's output tok/s)     decoding, end to end
decode_rate     (tokens − 1) / (first to last token)          the decoding phase only: what
                (``request_decode_tok_s``, a user's rate)     drafting acts on
ttft            1 / (send to first token): a rate, so the     the prefill (a drafter's own
                claim's "faster" is the shorter TTFT          prefill; lower is better)
acceptance      tokens / verify steps (the engine's           acceptance length τ, over all
                counters; ``auto``: one token a step)         steps, the prefill's included
==============  ============================================  =================================

End to end, a request's prefill (60 % of it at 256 prompt tokens and 64 out on the embedded
engine) is untouched by drafting and dilutes its effect; the decode rate is the part drafting
acts on, as the papers and SGLang's speculative benchmark report it. A plan chooses its claim's
quantity (``claim_quantity``, :mod:`.params`): its answer, stopping rule and
headline are on it; every page states the others beside it, from the same computation.

Acceptance needs the engine's verify steps per request (llama.cpp's timings, SGLang's
``meta_info``); where an engine gives only counters for the whole cell (vLLM), a cell is one
unit and the comparison pairs blocks, not prompts (:func:`~specbench_lib.analysis.units.log_ratios`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from ..core.errors import ParamsError


class RequestRecord(Protocol):
    """What a quantity reads of a request (:class:`~specbench_lib.model.records.RequestRecord`,
    which imports the params this module's names are checked by)."""

    start: float
    token_times: list[float]
    final: Any

    @property
    def ttft(self) -> float | None: ...


Parts = Callable[[RequestRecord, bool], "tuple[float, float] | None"]  # (request, drafting)


@dataclass(frozen=True)
class Quantity:
    """A claim's quantity (see the module): how one request contributes, and its words."""

    name: str
    label: str  # the quantity in a heading: "decode rate (tok/s after the first token)"
    short: str  # in a line: "decode rate"
    parts: Parts  # a request's (numerator, denominator), None where it has none
    overlap: bool = False  # a unit's denominator is its share of the cell's window
    better: str = "fastest"  # the leader's word
    worse: str = "slower"  # "at most 2 % slower than the best"
    lower_is_better: bool = False  # the value shown is 1 / rate (TTFT in seconds)
    min_tokens: int = 1  # the answer length a request needs to have the quantity at all


def _output(r: RequestRecord, drafting: bool) -> tuple[float, float] | None:
    busy = r.token_times[-1] - r.start
    return (float(r.final.completion_tokens or 0), busy) if r.final and busy > 0 else None


def _decode(r: RequestRecord, drafting: bool) -> tuple[float, float] | None:
    times = r.token_times
    return ((len(times) - 1), times[-1] - times[0]) if len(times) >= 2 and times[-1] > times[0] \
        else None


def _ttft(r: RequestRecord, drafting: bool) -> tuple[float, float] | None:
    first = r.ttft
    return (1.0, first) if first is not None and first > 0 else None


def _acceptance(r: RequestRecord, drafting: bool) -> tuple[float, float] | None:
    if not r.final or not r.final.completion_tokens:
        return None
    steps = r.final.verify_steps if drafting else r.final.completion_tokens  # auto: 1 a step
    return (float(r.final.completion_tokens), float(steps)) if steps else None


OUTPUT_RATE = Quantity("output_rate", "output tok/s (end to end)", "output rate", _output,
                       overlap=True)
DECODE_RATE = Quantity("decode_rate", "decode rate (a request's tok/s after its first token)",
                       "decode rate", _decode, min_tokens=2)
TTFT = Quantity("ttft", "time to first token (shorter is better)", "TTFT", _ttft,
                better="soonest first token", worse="later", lower_is_better=True)
ACCEPTANCE = Quantity("acceptance", "acceptance length (tokens per verify step)", "acceptance",
                      _acceptance, better="highest acceptance", worse="lower", min_tokens=2)

QUANTITIES: dict[str, Quantity] = {q.name: q for q in (OUTPUT_RATE, DECODE_RATE, TTFT,
                                                          ACCEPTANCE)}


def quantity(name: str | Quantity) -> Quantity:
    """The quantity called ``name`` (a clear error naming the choices otherwise)."""
    if isinstance(name, Quantity):
        return name
    try:
        return QUANTITIES[name]
    except KeyError:
        raise ParamsError(f"claim_quantity {name!r} is not a quantity a claim can be made on: "
                          f"use one of {', '.join(QUANTITIES)}", key="claim_quantity",
                          value=name) from None


def check_measurable(name: str, output_lengths: tuple[int, ...]) -> None:
    """A ValueError naming ``claim_quantity`` and ``output_tokens`` when an output length of the
    plan leaves its requests without the quantity: the decode rate and acceptance need a token
    after the first (the decode phase; a first token is never a draft)."""
    q = QUANTITIES[name]
    short = [n for n in output_lengths if n < q.min_tokens]
    if short:
        raise ValueError(f"claim_quantity {name} needs answers of {q.min_tokens} tokens or more "
                         f"(a token after the first: the decoding phase), but output_tokens "
                         f"has {short}; raise output_tokens or claim on output_rate")


def shown(q: Quantity, rate: float) -> str:
    """A config's value in words: "31.2 tok/s", "TTFT 1.52 s", "1.45 tokens a step"."""
    if rate != rate or rate <= 0:
        return "n/a"
    if q.lower_is_better:
        return f"TTFT {1 / rate:.3g} s"
    if q is ACCEPTANCE:
        return f"{rate:.2f} tokens a step"
    return f"{rate:.3g} tok/s"
