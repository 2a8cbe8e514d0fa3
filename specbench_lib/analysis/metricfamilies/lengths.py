"""Lengths: the token-weighted TPOT (answers of different lengths weigh by their tokens) and the
distributions of the answers' and the prompts' lengths (questions sent at their own length vary;
prompts cut to a context do not)."""

from __future__ import annotations

import statistics

from ..latency import quantile
from ..metric import Computed, Family, Metric, Requests

_LENGTH = {"output_tokens": "the answers' lengths (they vary when `stop` is eos)",
           "prompt_tokens": "the prompts' planned lengths (they vary for conversations)"}
_PCT = {"mean": "mean", "p10": "10th percentile", "p50": "median", "p90": "90th percentile"}


def _lengths(cell: Requests) -> Computed:
    recs = cell.measured
    spans = [(r.token_times[-1] - r.token_times[0], len(r.token_times) - 1) for r in recs
             if len(r.token_times) >= 2]
    tokens = sum(k for _, k in spans)
    found: Computed = {"tpot_weighted_s": sum(t for t, _ in spans) / tokens if tokens else None}
    values = {"output_tokens": [float(r.final.completion_tokens or 0) for r in recs if r.final],
              "prompt_tokens": [float(r.prompt_tokens_planned) for r in recs]}
    for name, lengths in values.items():
        found[f"{name}_mean"] = statistics.fmean(lengths) if lengths else None
        for q in (10, 50, 90):
            found[f"{name}_p{q}"] = quantile(lengths, q / 100)
    return found


FAMILY = Family(60, (
    Metric("tpot_weighted_s", "s", "decode time over decode tokens, summed over the requests "
           "(answers of different lengths weigh by their tokens)"),
    *(Metric(f"{m}_{s}", "tokens", f"{what}; {_PCT[s]} over the cell's requests")
      for m, what in _LENGTH.items() for s in _PCT),
), requests=_lengths)
