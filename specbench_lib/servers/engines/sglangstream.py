"""SGLang's native ``/generate`` stream read chunk by chunk (:class:`SGLangStream`): text and
``completion_tokens`` cumulative, the ids each chunk brought (``output_ids``: cumulative, or a
delta with ``--incremental-streaming-output``), an abort as an error, and the finished chunk's
counts with acceptance as on every engine."""

from __future__ import annotations

from typing import Any

from ...model.records import FinalStats
from .base import BadLine, StreamEvent, StreamParser, field_dict, field_ids, int_list, opt_int, opt_str


class SGLangStream(StreamParser):
    """One ``/generate`` stream: text and ``completion_tokens`` are cumulative, so keep the last.

    The tokens a chunk brought are the ids that arrived in it (``output_ids``), never the
    server's ``completion_tokens``: a server whose count disagrees with what it streamed is then
    caught by ``token_count_mismatch`` instead of inflating throughput. Only a stream without
    ``output_ids`` is counted by the server's count."""

    def __init__(self, *, incremental: bool = False) -> None:
        self.text = ""
        self.completion = 0
        self.n_ids = 0
        self.incremental = incremental

    def parse(self, data: dict[str, Any]) -> StreamEvent:
        meta = field_dict(data, "meta_info")
        text = data.get("text", "")
        if not isinstance(text, str):
            raise BadLine("stream field 'text' is not a string")
        new_text = text[len(self.text):] if text.startswith(self.text) else text
        self.text = text
        completion = opt_int(meta.get("completion_tokens"))
        ids = self._new_ids(data)
        if ids is not None:
            n_tokens = len(ids)
        else:
            n_tokens = 0 if completion is None else max(0, completion - self.completion)
        if completion is not None:
            self.completion = completion
        event = StreamEvent(n_tokens=n_tokens, text=new_text, token_ids=ids or [])
        finish = meta.get("finish_reason")
        if finish:
            kind = opt_str(finish.get("type")) if isinstance(finish, dict) else str(finish)
            if kind == "abort":
                message = finish.get("message", "") if isinstance(finish, dict) else ""
                return StreamEvent(error=f"abort: {message}"[:500])
            event.final = _final_stats(meta, completion, kind)
        return event

    def _new_ids(self, data: dict[str, Any]) -> list[int] | None:
        """The ids this chunk brought (None without ``output_ids``): cumulative by default, a
        delta with ``--incremental-streaming-output``; a cumulative list shorter than before is a
        bad line."""
        ids = field_ids(data, "output_ids")
        if ids is None:
            return None
        if self.incremental or not ids:  # an empty list brings none (then counted as none)
            new = ids
        elif len(ids) < self.n_ids:
            raise BadLine(f"stream field 'output_ids' shrank from {self.n_ids} to {len(ids)} "
                          "ids (cumulative unless the server runs with --incremental-streaming-output)")
        else:
            new = ids[self.n_ids:]
        self.n_ids += len(new)
        return new


def _final_stats(meta: dict[str, Any], completion: int | None, finish: str | None) -> FinalStats:
    """The finished chunk's counts, acceptance as on every engine (docs/engines.md,
    "Acceptance"): ``verify_steps`` counts every forward step that made tokens, the prefill's
    included; SGLang's ``spec_verify_ct`` counts verify passes only (scheduler_components/
    batch_result_processor.py:832), so one more. ``accepted_tokens`` = completion − steps, from
    ``spec_verify_ct`` alone: SGLang's own ``spec_num_correct_drafts`` also counts drafts the
    last step accepted past EOS or the length cap (batch_result_processor.py:785-788), tokens
    the client never received. ``draft_tokens`` is ``spec_num_proposed_drafts``, the histogram
    ``spec_correct_drafts_histogram`` (steps by drafts accepted), ``retractions`` the times the
    scheduler took the request out of its batch (``num_retractions``: the KV pool was full)."""
    verify = opt_int(meta.get("spec_verify_ct"))
    steps = verify + 1 if verify is not None and verify > 0 else None
    accepted = completion - steps if steps is not None and completion is not None else None
    histogram = int_list(meta.get("spec_correct_drafts_histogram"))
    return FinalStats(
        prompt_tokens=opt_int(meta.get("prompt_tokens")), completion_tokens=completion,
        finish_reason=finish, truncated=False, verify_steps=steps,
        cached_tokens=opt_int(meta.get("cached_tokens")), accepted_tokens=accepted,
        draft_tokens=opt_int(meta.get("spec_num_proposed_drafts")) if steps is not None else None,
        accepted_histogram=histogram if steps is not None and histogram else None,
        retractions=opt_int(meta.get("num_retractions")))
