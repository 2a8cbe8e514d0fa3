"""vLLM's completions stream read event by event (:class:`VllmStream`): the ids each chunk
carries (``return_token_ids``), the cumulative usage (``continuous_usage_stats``) where a chunk
has none, and the final usage with the per-request speculative record (:mod:`.vllmspec`)."""

from __future__ import annotations

import json
from typing import Any

from ...model.records import FinalStats
from . import vllmspec
from .base import BadLine, StreamEvent, StreamParser, field_ids, opt_int, opt_str


class VllmStream(StreamParser):
    """One completions stream: usage is cumulative (``continuous_usage_stats``); the last chunk
    before ``[DONE]`` has no choices and the final usage."""

    def __init__(self) -> None:
        self.completion = 0
        self.usage: dict[str, Any] | None = None
        self.finish: str | None = None
        self.final_sent = False
        self.spec: vllmspec.SpecRecord | None = None

    def end(self, event: StreamEvent) -> StreamEvent:
        if not self.final_sent and self.usage is not None:
            event.final = self._final()
        return event

    def parse(self, data: dict[str, Any]) -> StreamEvent:
        if data.get("object") == "error":  # an error object at the top level
            return StreamEvent(error=json.dumps(data)[:500])
        choices = data.get("choices") or []
        if not isinstance(choices, list) or not all(isinstance(c, dict) for c in choices):
            raise BadLine("stream field 'choices' is not a list of objects")
        usage = data.get("usage")
        usage = usage if isinstance(usage, dict) else None
        text, n_tokens, ids = "", 0, None
        if choices:
            choice = choices[0]
            raw_text = choice.get("text") or ""
            if not isinstance(raw_text, str):
                raise BadLine("stream field 'text' is not a string")
            text = raw_text
            self.finish = opt_str(choice.get("finish_reason")) or self.finish
            ids = field_ids(choice, "token_ids")
            completion = opt_int(usage.get("completion_tokens")) if usage is not None else None
            # the ids that arrived are the truth; the server's count is what token_count_mismatch
            # compares them with (a server that claims more than it sent is caught, not believed)
            if ids is not None:
                n_tokens = len(ids)
            elif completion is not None:
                n_tokens = max(0, completion - self.completion)
            else:
                n_tokens = 1 if text else 0
            self.completion = completion if completion is not None else self.completion + n_tokens
        if usage is not None:
            self.usage = usage
        self.spec = vllmspec.spec_record(data) or self.spec
        event = StreamEvent(n_tokens=n_tokens, text=text, token_ids=ids or [])
        if not choices and usage is not None:
            event.final = self._final()
        return event

    def _final(self) -> FinalStats:
        self.final_sent = True
        usage = self.usage or {}
        details = usage.get("prompt_tokens_details")  # with --enable-prompt-tokens-details
        completion = opt_int(usage.get("completion_tokens"))
        return FinalStats(prompt_tokens=opt_int(usage.get("prompt_tokens")),
                          completion_tokens=completion, finish_reason=self.finish,
                          truncated=False, cached_tokens=opt_int(details.get("cached_tokens"))
                          if isinstance(details, dict) else None,
                          **(self.spec.counts(completion) if self.spec else {}))


__all__ = ["VllmStream"]
