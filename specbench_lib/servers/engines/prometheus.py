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
        return parse_counters(text, tuple(prefix + name for name in SPEC_COUNTERS))
    except Exception:  # EngineError (httpx errors, the deadline, a closed client), odd text
        return {}


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
    return stats
