"""Speculative statistics, one definition for every engine: acceptance length (tokens per verify
step), drafts accepted, and the acceptance histogram and by position, from a cell's requests'
own counts (:func:`request_spec_metrics`) or its server's counters (:func:`spec_metrics`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..model.records import RequestRecord

__all__ = ["SPEC_METRICS", "request_spec_metrics", "spec_metrics"]


def request_spec_metrics(recs: Sequence[RequestRecord], total: int) -> dict[str, Any]:
    """The speculative statistics from the requests' own counts (None each when the server
    counted no verify steps)."""
    finals = [r.final for r in recs if r.final]
    steps = sum((f.verify_steps or 0) for f in finals)
    if not steps:
        return {k: None for k in SPEC_METRICS}
    accepted = sum(f.accepted_tokens if f.accepted_tokens is not None else
                   max((f.completion_tokens or 0) - (f.verify_steps or 0), 0) if f.verify_steps
                   else 0 for f in finals)
    drafted = sum((f.draft_tokens or 0) for f in finals)
    return {**spec_metrics(total, len(recs), accepted=accepted, drafted_tokens=drafted),
            **_histogram([f.accepted_histogram for f in finals if f.accepted_histogram])}


def _histogram(found: list[list[int]]) -> dict[str, Any]:
    """The requests' own acceptance histograms (SGLang's: verify passes by drafts accepted)
    summed, and from them the acceptance by position, as vLLM's counters give it."""
    if not found:
        return {}
    hist = [sum(h[k] for h in found if k < len(h)) for k in range(max(map(len, found)))]
    passes = sum(hist)
    return {"acceptance_histogram": hist, "position_acceptance_rate": [
        sum(hist[k + 1:]) / passes for k in range(len(hist) - 1)] if passes else None}


def spec_metrics(tokens: int, requests: int, *, accepted: float, drafted_tokens: float | None,
                 drafted_steps: float | None = None) -> dict[str, Any]:
    """The speculative statistics of a cell, one definition for every engine.

    Only tokens the client received count: accepted drafts are capped at ``tokens - requests``
    (a request's first token is never a draft; a server may count drafts it accepted past a
    request's token limit, which vLLM's counters do). Then ``verify_steps`` = tokens − accepted
    (every forward step, the prefill's included on every engine, yields one token plus drafts);
    ``acceptance_length`` = ``tokens_per_step`` = tokens / verify steps, over **all** steps
    (the project's τ: the papers' is ``tau_verify``); ``acceptance_length_drafted`` = 1 + accepted /
    drafted steps, over the steps that carried a draft, where the engine counts those (vLLM's
    and llama.cpp's ``num_drafts``; None otherwise); ``draft_acceptance_rate`` = accepted /
    drafted tokens.

    The papers count verify passes only, the prefill's step out (``verify_steps`` −
    ``requests``): ``tau_verify`` = (tokens − requests) / passes, the mean of accepted + 1 over
    verify passes (z-lab's τ in the DFlash and DDTree papers); ``spec_accept_length`` = tokens /
    passes (SGLang's ``spec_accept_length``, completion / ``spec_verify_ct``, which z-lab's
    SGLang benchmark reports). Both are above ``acceptance_length`` by the prefill's step:
    2-8 % for 60-256-token answers.
    """
    got = max(min(float(accepted), float(tokens - requests)), 0.0)
    steps = tokens - got
    return {
        "acceptance_length": tokens / steps if steps > 0 else None,
        "tokens_per_step": tokens / steps if steps > 0 else None,
        "acceptance_length_drafted": 1 + got / drafted_steps if drafted_steps else None,
        "draft_acceptance_rate": got / drafted_tokens if drafted_tokens else None,
        "verify_steps": int(round(steps)),
        "accepted_tokens": int(round(got)),
        "tau_verify": (tokens - requests) / passes if (passes := steps - requests) > 0 else None,
        "spec_accept_length": tokens / passes if passes > 0 else None,
    }


SPEC_METRICS = tuple(spec_metrics(2, 1, accepted=0, drafted_tokens=None))  # the keys it gives
