"""vLLM's per-request speculative record (``--per-request-spec-decode-metrics``) read into a
request's counts, in both shapes its field had (sources in tests/PROTOCOLS.md, "vLLM").

- 0.32.0 (PR #48915, merged): the final usage chunk's ``metrics.speculative_decoding`` with
  ``num_spec_steps``, ``num_accepted_draft_tokens``, ``num_draft_tokens`` and the dense
  ``acceptance_histogram`` (v1/metrics/stats.py:397-422, entrypoints/generate/base/protocol.py:
  100-119, openai/completion/serving.py:458-490);
- PR #47322 (closed in review): a top-level ``speculative_decoding_stats`` with
  ``num_draft_steps``, ``num_accepted_tokens``, ``num_drafted_tokens``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .base import int_list, opt_int

FLAG = ("--per-request-spec-decode-metrics", "summary")  # 0.32.0 config/observability.py:50


@dataclass(frozen=True)
class SpecRecord:
    """One request's drafted steps, accepted and drafted tokens, and steps by drafts accepted."""

    steps: int
    accepted: int
    drafted: int
    histogram: list[int] | None = None

    def counts(self, completion: int | None) -> dict[str, Any]:
        """``FinalStats`` fields: accepted drafts capped at what the tokens leave (vLLM counts
        drafts accepted past ``max_tokens``: a drafted step yields one token of its own, the
        prefill one), verify steps = completion − accepted, every step the prefill's included."""
        if completion is None:
            return {}
        accepted = max(min(self.accepted, completion - 1 - self.steps), 0)
        return {"accepted_tokens": accepted, "verify_steps": completion - accepted,
                "draft_tokens": self.drafted, "accepted_histogram": self.histogram}


def spec_record(data: dict[str, Any]) -> SpecRecord | None:
    """The chunk's per-request record, in either shape (None: the chunk has none)."""
    metrics = data.get("metrics")
    found = metrics.get("speculative_decoding") if isinstance(metrics, dict) else None
    if isinstance(found, dict):
        names = ("num_spec_steps", "num_accepted_draft_tokens", "num_draft_tokens")
        histogram = int_list(found.get("acceptance_histogram"))
    else:
        found = data.get("speculative_decoding_stats")
        names = ("num_draft_steps", "num_accepted_tokens", "num_drafted_tokens")
        histogram = None
    if not isinstance(found, dict):
        return None
    steps, accepted, drafted = (opt_int(found.get(n)) for n in names)
    if steps is None or accepted is None or drafted is None:
        return None
    return SpecRecord(steps, accepted, drafted, histogram)
