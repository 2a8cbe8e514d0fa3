"""Losslessness: do a speculative config's greedy outputs equal the ``auto`` baseline's?

A greedy request (temperature 0) of a lossless speculative decoder returns the same tokens as
plain decoding for the same prompt. Batch-dependent numerics make a few differences normal (see
docs/engine-facts.md), hence two figures rather than a pass/fail: the fraction of identical
outputs and the mean length, in tokens, of the common prefix.

At temperature > 0 the check does not apply, and a sampled cell is never compared: a lossless
sampler keeps the output *distribution*, not the tokens, and speculative sampling (rejection
sampling of the draft) may consume the random stream differently from plain sampling (it
depends on the engine and the method), so the same seed may give other tokens from a correct
decoder: a difference is no evidence of a loss. Its ``lossless_*`` figures are empty
(``lossless_n`` 0), never a loss; comparing distributions would need many samples per prompt,
which a throughput cell does not draw. :func:`~specbench_lib.analysis.metrics.results_table`
reads them (:func:`losslessness`).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from ...model.records import CellRecord
from ..metric import Family, Metric

BASELINE = "auto"
_KEYS = ("workload", "context", "output_tokens", "concurrency", "load", "temperature")
NOT_APPLICABLE: dict[str, float | None] = {"lossless_identical": None,
                                           "lossless_prefix_tokens": None, "lossless_n": 0}


def common_prefix(a: list[int], b: list[int]) -> int:
    """The number of leading tokens ``a`` and ``b`` share."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def compare_cells(cell: CellRecord, baseline: CellRecord) -> dict[str, float | None]:
    """Compare the measured outputs of two cells request by request (same prompt sha only).

    Returns ``lossless_identical`` (fraction of identical outputs), ``lossless_prefix_tokens``
    (mean common prefix in tokens; None without token ids) and ``lossless_n`` (pairs compared);
    :data:`NOT_APPLICABLE` for sampled cells (temperature > 0, see the module).
    """
    if cell.spec.temperature > 0 or baseline.spec.temperature > 0:
        return dict(NOT_APPLICABLE)
    pairs = []
    ours, theirs = _outputs(cell), _outputs(baseline)
    for sha, out in ours.items():
        if sha in theirs:
            pairs.append((out, theirs[sha]))
    if not pairs:
        return {"lossless_identical": None, "lossless_prefix_tokens": None, "lossless_n": 0}
    identical = [a == b for a, b in pairs]
    prefixes = [common_prefix(a[0], b[0]) for a, b in pairs if a[0] and b[0]]
    return {"lossless_identical": sum(identical) / len(pairs),
            "lossless_prefix_tokens": statistics.fmean(prefixes) if prefixes else None,
            "lossless_n": len(pairs)}


def losslessness(cells: Sequence[CellRecord]) -> dict[str, dict[str, float | None]]:
    """For each ok speculative cell (by cell id), its comparison with the ok ``auto`` cell of the
    same workload, context, concurrency and repeat."""
    ok = [c for c in cells if c.verdict.ok and c.requests]
    base = {_key(c): c for c in ok if c.spec.method == BASELINE}
    found = {}
    for cell in ok:
        if cell.spec.method == BASELINE or _key(cell) not in base:
            continue
        found[cell.cell_id] = compare_cells(cell, base[_key(cell)])
    return found


def _key(cell: CellRecord) -> tuple[Any, ...]:
    spec = cell.spec
    return (*(getattr(spec, k) for k in _KEYS), spec.repeat)


def _outputs(cell: CellRecord) -> dict[str, tuple[list[int], str]]:
    """Prompt sha → (output token ids, text sha) of the cell's measured, error-free requests."""
    found = {}
    for i, req in enumerate(cell.measured):
        if req.error_kind or i >= len(cell.prompts):
            continue
        found[cell.prompts[i].sha] = (list(req.output_ids), req.text_sha)
    return found


FAMILY = Family(70, (
    Metric("lossless_identical", "fraction", "greedy outputs identical to `auto`'s, per prompt",
           "lossless", summary=10),
    Metric("lossless_prefix_tokens", "tokens", "tokens in common with `auto`'s output before "
           "the first difference", "lossless"),
    Metric("lossless_n", "prompts", "prompts compared with `auto`'s", "lossless"),
))
