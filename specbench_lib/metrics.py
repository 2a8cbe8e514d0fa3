"""Measured requests of ok cells → per-cell metrics → a tidy table with speedups."""

from __future__ import annotations

import statistics
from typing import Any

from .dispatch import CellDispatch

METRIC_COLUMNS = (
    "output_tok_s", "request_decode_tok_s", "ttft_mean_s", "ttft_p90_s", "tpot_mean_s",
    "itl_p50_s", "itl_p90_s", "e2e_mean_s", "acceptance_length", "draft_acceptance_rate",
    "tokens_per_chunk", "n_requests", "completion_tokens",
)


def cell_metrics(dispatch: CellDispatch) -> dict[str, Any]:
    """Metrics of one cell's measured requests, with token counts as the server reported them.

    ``output_tok_s`` is completion tokens over the measurement window; ITL is per token (a chunk
    of k tokens counts as k tokens at its arrival time); acceptance length is tokens per verify
    step, weighted by tokens: sum(tokens) / sum(tokens − accepted draft tokens).
    """
    recs = dispatch.measured
    completion = [r.final.completion_tokens or 0 for r in recs if r.final]
    total = sum(completion)
    window = dispatch.window_end - dispatch.window_start
    ttfts = [r.ttft for r in recs if r.ttft is not None]
    decode_rates, tpots, itls = [], [], []
    for r in recs:
        times = r.token_times
        if len(times) >= 2 and times[-1] > times[0]:
            tpots.append((times[-1] - times[0]) / (len(times) - 1))
            decode_rates.append((len(times) - 1) / (times[-1] - times[0]))
            itls.extend(b - a for a, b in zip(times, times[1:], strict=False))
    accepted = sum((r.final.accepted_tokens or 0) for r in recs if r.final)
    drafted = sum((r.final.draft_tokens or 0) for r in recs if r.final)
    steps = sum((r.final.verify_steps or 0) for r in recs if r.final)
    chunks = [size for r in recs for size in r.chunk_sizes]
    return {
        "output_tok_s": total / window if window > 0 else None,
        "request_decode_tok_s": _mean(decode_rates),
        "ttft_mean_s": _mean(ttfts),
        "ttft_p90_s": _quantile(ttfts, 0.9),
        "tpot_mean_s": _mean(tpots),
        "itl_p50_s": _quantile(itls, 0.5),
        "itl_p90_s": _quantile(itls, 0.9),
        "e2e_mean_s": _mean([r.e2e for r in recs]),
        "acceptance_length": total / steps if steps else None,
        "verify_steps": steps,
        "draft_acceptance_rate": accepted / drafted if drafted else None,
        "tokens_per_chunk": total / len(chunks) if chunks else None,
        "n_requests": len(recs),
        "completion_tokens": total,
        "window_s": window,
    }


def results_table(cells: list[dict[str, Any]]) -> Any:
    """A pandas DataFrame of ok cells, one row each, with ``speedup`` vs the ``auto`` baseline.

    The speedup compares output tok/s with the ``auto`` cell of the same workload, context and
    concurrency; it is missing (NaN) when that baseline is not ok.
    """
    import pandas as pd

    rows = [{**c["spec"], **c["metrics"]} for c in cells if c["verdict"]["status"] == "ok"]
    columns = ["config", "series", "method", "budget", "workload", "context", "concurrency",
               *METRIC_COLUMNS, "window_s"]
    table = pd.DataFrame(rows, columns=columns)
    keys = ["workload", "context", "concurrency"]
    base = table[table["method"] == "auto"][[*keys, "output_tok_s"]]
    base = base.rename(columns={"output_tok_s": "auto_tok_s"})
    table = table.merge(base, on=keys, how="left")
    table["speedup"] = table["output_tok_s"] / table["auto_tok_s"]
    return table.drop(columns=["auto_tok_s"])


def _mean(values: list[float]) -> float | None:
    return statistics.fmean(values) if values else None


def _quantile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    pos = q * (len(ordered) - 1)
    low = int(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)
