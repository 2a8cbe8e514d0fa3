"""Throughput: completion tokens and requests over the cell's window, and a request's decode
rate."""

from __future__ import annotations

import statistics

from ..metric import Computed, Family, Metric, Requests


def _throughput(cell: Requests) -> Computed:
    window = cell.window
    rates = [(len(t) - 1) / (t[-1] - t[0]) for r in cell.measured
             if len(t := r.token_times) >= 2 and t[-1] > t[0]]
    return {"output_tok_s": cell.total / window if window > 0 else None,
            "request_throughput_rps": len(cell.measured) / window if window > 0 else None,
            "request_decode_tok_s": statistics.fmean(rates) if rates else None}


FAMILY = Family(10, (
    Metric("output_tok_s", "tok/s", "completion tokens (the server's count) over the window: "
           "first request sent → last token received", header="output tok/s [95 %]",
           form="{:.1f}", interval=True, lead=1, diff=1, summary=1),
    Metric("request_throughput_rps", "requests/s", "measured requests over the window"),
    Metric("request_decode_tok_s", "tok/s", "a request's decode rate, (tokens − 1) / (last − "
           "first token), mean over the cell's requests"),
), requests=_throughput)
