"""What a cell counted: its requests, their tokens, and how the server framed them (tokens per
stream event, per delivery)."""

from __future__ import annotations

import statistics
from collections import Counter

from ..metric import Computed, Family, Metric, Requests


def _counts(cell: Requests) -> Computed:
    chunks = [size for r in cell.measured for size in r.chunk_sizes]
    sizes = [float(k) for found in cell.deliveries for _, k in found]
    return {"tokens_per_chunk": cell.total / len(chunks) if chunks else None,
            "tokens_per_delivery": statistics.fmean(sizes) if sizes else None,
            "chunk_size_counts": {str(k): v for k, v in sorted(Counter(chunks).items())},
            "n_requests": len(cell.measured), "n_failed": cell.failed,
            "completion_tokens": cell.total}


FAMILY = Family(40, (
    Metric("tokens_per_chunk", "tokens", "completion tokens per stream event as the server "
           "framed them"),
    Metric("tokens_per_delivery", "tokens", "mean tokens per delivery (a chunk, or a burst of "
           "events less than 0.5 ms after its first)"),
    Metric("n_requests", "requests", "measured requests averaged (failed tolerated ones left out)"),
    Metric("n_failed", "requests", "measured requests a tolerant verdict let through, left out"),
    Metric("completion_tokens", "tokens", "completion tokens of the cell's measured requests"),
    # only in the cell file: a mapping per cell
    Metric("chunk_size_counts", "counts", "stream events by their number of tokens", column=False),
), requests=_counts)
