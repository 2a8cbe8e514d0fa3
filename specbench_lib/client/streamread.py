"""One response stream as it is read into its request's record: lines, events, token times.

Whatever a server sends ends in the record: a line that is not UTF-8, an error event or a token
count beyond twice the limit is ``error_in_stream``; a clean stream with no token, text or final
statistics reads as 0 completion tokens (``empty_output``). Each read that carried several token
events is kept (``RequestRecord.multi_reads``): :mod:`~specbench_lib.analysis.coalescing` decides on read
whether a client stall made their times late.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from ..model.catalogue import C
from ..model.records import FinalStats, RequestRecord
from ..servers.engines import StreamEvent

MAX_LINE = 16 * 1024 * 1024  # a stream line longer than this is not a stream line
_EMPTY_TEXT_SHA = hashlib.sha256().hexdigest()[:16]
_SSE_FIELDS = (b"data:", b":", b"event:", b"id:", b"retry:")
# how an answer opens a reasoning block (Qwen3's template: <think>), looked for in its first
# HEAD_CHARS characters; and how one ends (</think>), looked for anywhere in it: DeepSeek-R1's
# template opens the block in the generation prompt, so its answers only close it
REASONING_OPENERS = ("<think>",)
REASONING_CLOSER = "</think>"
HEAD_CHARS = 64


@dataclass
class Stream:
    """One response stream as it is read: its parser, its text's digest, where it stands."""

    parse: Any  # the adapter's parser for this stream (some engines send cumulative counts)
    digest: Any = field(default_factory=hashlib.sha256)
    ended: float | None = None  # the final event's time (the rest is read to the body's end)
    sse_only: bool = True  # every non-blank line so far was a server-sent-events line
    text: list[str] | None = None  # the answer's text pieces, where kept (a conversation's turn 1)
    head: str = ""  # the answer's first characters
    closed: bool = False  # the answer ended a reasoning block (:data:`REASONING_CLOSER`)
    tail: str = ""  # the last characters read, where a closing tag split over events begins

    def opened_reasoning(self) -> bool:
        """Whether the answer reasoned: it began with a reasoning block
        (:data:`REASONING_OPENERS`), or closed one the prompt opened (an answer holding
        :data:`REASONING_CLOSER` with no opener before it)."""
        return any(opener in self.head for opener in REASONING_OPENERS) or self.closed

    def _take(self, event: StreamEvent | None, rec: RequestRecord, now: float) -> bool:
        if event is not None and event.text:
            if len(self.head) < HEAD_CHARS:
                self.head += event.text[:HEAD_CHARS]
            if not self.closed:
                seen = self.tail + event.text
                self.closed = REASONING_CLOSER in seen
                self.tail = seen[-(len(REASONING_CLOSER) - 1):]
        return take_event(event, rec, self.digest, now, self.text)

    def take_read(self, rec: RequestRecord, lines: list[bytes], now: float,
                  read_at: float) -> bool:
        """Take one read's complete lines (received at ``now``, the read made at ``read_at``);
        True when the request failed in them (its record says why).

        A blank line (an event separator) never reaches the parser: every parser reads it as
        nothing, and half a stream's lines are blank.
        """
        if self.ended is not None:
            return False
        times = rec.token_times
        first = last = len(times)  # tokens before this read, before its last token event
        events = 0  # the token events in this read
        for line in lines:
            if not line or line == b"\r":
                continue
            if self.sse_only and not times:
                self.sse_only = _is_sse(line)
            before = len(times)
            done = self._take(parse_line(self.parse, line), rec, now)
            if len(times) > before:
                events, last = events + 1, before
            if done:
                if rec.error_kind is not None:
                    return True
                self.ended = now
                break
        if events > 1 and rec.multi_reads is not None:  # one stamp for several events
            rec.multi_reads.append((read_at, last - first, first == 0))
        return False

    def take_rest(self, rec: RequestRecord, pending: bytes, now: float) -> None:
        """The body's last line without a line break; an empty clean stream: 0 tokens."""
        if self.ended is None and pending.strip():
            self.sse_only = self.sse_only and _is_sse(pending)
            self._take(parse_line(self.parse, pending), rec, now)
        if (rec.error_kind is None and rec.final is None and not rec.token_times and self.sse_only
                and self.digest.hexdigest()[:16] == _EMPTY_TEXT_SHA):
            rec.final = FinalStats(completion_tokens=0)  # an empty stream: empty_output


def _is_sse(line: bytes) -> bool:
    line = line.strip()
    return not line or line.startswith(_SSE_FIELDS)


def parse_line(parse: Any, line: bytes) -> StreamEvent | None:
    """One stream line through the adapter's parser; a line that is not UTF-8 is an error event."""
    try:
        text = line.rstrip(b"\r").decode()
    except UnicodeDecodeError as exc:
        return StreamEvent(error=f"stream line is not UTF-8 ({exc.reason} at byte {exc.start}): "
                                 f"{line[:200]!r}")
    return parse(text)


def take_event(event: StreamEvent | None, rec: RequestRecord, digest: Any, now: float,
               text: list[str] | None = None) -> bool:
    """Record one parsed stream line received at ``now`` (its text into ``text`` where kept);
    True when the stream is over."""
    if event is None:
        return False
    if event.error is not None:
        rec.error, rec.error_kind = event.error, C.error_in_stream
        return True
    if event.n_tokens:
        if len(rec.token_times) + event.n_tokens > 2 * rec.max_tokens + 64:  # not long_output: bogus
            rec.error = (f"a stream event claims {event.n_tokens} tokens after "
                         f"{len(rec.token_times)}, for a limit of {rec.max_tokens}")
            rec.error_kind = C.error_in_stream
            return True
        rec.token_times.extend([now] * event.n_tokens)
        rec.chunk_sizes.append(event.n_tokens)
        rec.output_ids.extend(event.token_ids)
    if event.text:
        digest.update(event.text.encode("utf-8", "surrogatepass"))  # JSON escapes lone surrogates
        if text is not None:
            text.append(event.text)
    if event.final is not None:
        rec.final = event.final
    return event.done
