"""Prometheus text format: the few counters an adapter reads from ``/metrics``."""

from __future__ import annotations

import math
import re
from typing import Any

import httpx

from .control import DEFAULT_CONTROL_TIMEOUT_S, request

_SAMPLE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(\{[^}]*\})?\s+(\S+)")
SPEC_COUNTERS = ("spec_decode_num_drafts_total", "spec_decode_num_draft_tokens_total",
                 "spec_decode_num_accepted_tokens_total")
# accepted tokens per draft position, labelled position="k" (llama.cpp b11434 and vLLM 0.32.0)
PER_POSITION = "spec_decode_num_accepted_tokens_per_pos_total"
_POSITION = re.compile(r'position="(\d+)"')


def parse_counters(text: str, names: tuple[str, ...]) -> dict[str, float]:
    """The value of each named metric, summed over its label sets (e.g. several engines)."""
    wanted = set(names)
    values: dict[str, float] = {}
    for line in text.splitlines():
        match = _SAMPLE.match(line)
        if not match or match.group(1) not in wanted:
            continue
        try:
            value = float(match.group(3))
        except ValueError:
            continue
        if math.isfinite(value):
            values[match.group(1)] = values.get(match.group(1), 0.0) + value
    return values


def snapshot(client: httpx.Client, prefix: str, *,
             limit_s: float = DEFAULT_CONTROL_TIMEOUT_S) -> dict[str, float]:
    """The ``prefix``-named speculative counters of ``GET /metrics``; empty if unavailable.

    It never raises: counters are an optional cross-check, and a server that is down, answers
    nonsense or gives no complete answer within ``limit_s`` has none.
    """
    try:
        resp = request(client, "GET", "/metrics", limit_s=limit_s)
        if resp.status_code != 200:
            return {}
        text = resp.content.decode("utf-8", errors="replace")
        return {**parse_counters(text, tuple(prefix + name for name in SPEC_COUNTERS)),
                **per_position(text, prefix)}
    except Exception:  # EngineError (httpx errors, the deadline, a closed client), odd text
        return {}


def position_key(prefix: str, position: int) -> str:
    """A snapshot's key for the accepted tokens at draft position ``position`` (from 0)."""
    return f'{prefix}{PER_POSITION}{{position="{position}"}}'


def per_position(text: str, prefix: str) -> dict[str, float]:
    """The accepted tokens at each draft position (keys :func:`position_key`), summed over the
    other labels."""
    values: dict[str, float] = {}
    for line in text.splitlines():
        match = _SAMPLE.match(line)
        if not match or match.group(1) != prefix + PER_POSITION or not match.group(2):
            continue
        position = _POSITION.search(match.group(2))
        try:
            value = float(match.group(3))
        except ValueError:
            continue
        if position is not None and math.isfinite(value):
            key = position_key(prefix, int(position.group(1)))
            values[key] = values.get(key, 0.0) + value
    return values


def spec_deltas(before: dict[str, float], after: dict[str, float], prefix: str) -> dict[str, Any]:
    """Drafts (verify steps), drafted and accepted tokens of a cell, and the mean acceptance
    length ``1 + accepted / drafts``; empty when a snapshot misses a counter."""
    keys = [prefix + name for name in SPEC_COUNTERS]
    if not all(k in before and k in after for k in keys):
        return {}
    drafts, drafted, accepted = (after[k] - before[k] for k in keys)
    if min(drafts, drafted, accepted) < 0:
        return {"error": "a counter went down during the cell (server restarted or cache flushed)"}
    stats: dict[str, Any] = {"source": "/metrics", "drafts": int(drafts),
                             "draft_tokens": int(drafted), "accepted_tokens": int(accepted)}
    stats["acceptance_length"] = 1 + accepted / drafts if drafts else None
    return {**stats, **_positions(before, after, prefix, int(drafts))}


def _positions(before: dict[str, float], after: dict[str, float], prefix: str,
               drafts: int) -> dict[str, Any]:
    """Per draft position k: the drafts whose k-th token was accepted, that over drafts, and the
    drafts with exactly k tokens accepted (k = 0 .. positions); empty without the series."""
    per, k = [], 0
    while (key := position_key(prefix, k)) in after:  # a labelled series appears at its first
        per.append(int(after[key] - before.get(key, 0.0)))  # draft: absent before is 0
        k += 1
    if not per or not drafts:
        return {}
    return {"accepted_per_position": per, "position_acceptance_rate": [n / drafts for n in per],
            "acceptance_histogram": [int(a - b) for a, b in zip([drafts, *per], [*per, 0],
                                                                strict=True)]}
