"""Rules over request records and server state → a cell's verdict with its reasons.

A failure is never a number: a cell is ``ok`` only when every measured request returned the
planned prompt and output token counts, by the server's own report, with no error.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Literal

from .dispatch import RequestRecord

Status = Literal["ok", "invalid", "crashed", "skipped"]
STATUSES: tuple[Status, ...] = ("ok", "invalid", "crashed", "skipped")


@dataclass(frozen=True)
class Verdict:
    status: Status
    reasons: tuple[str, ...] = field(default_factory=tuple)

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def request_problems(rec: RequestRecord) -> list[str]:
    """Reason codes (with details) for one request; empty when the request is valid."""
    if rec.error_kind is not None:
        return [f"{rec.error_kind}: {rec.error or ''}".strip()[:300]]
    final = rec.final
    if final is None:
        return ["incomplete_stream: the stream ended without final statistics"]
    problems = []
    completion = final.completion_tokens or 0
    if completion == 0:
        problems.append("empty_output: the server reported 0 completion tokens")
    elif completion < rec.max_tokens:
        note = " (truncated by the context)" if final.truncated else ""
        problems.append(f"short_output: {completion} of {rec.max_tokens} tokens{note}")
    elif completion > rec.max_tokens:
        problems.append(f"long_output: {completion} tokens for a limit of {rec.max_tokens}")
    if final.prompt_tokens is not None and final.prompt_tokens != rec.prompt_tokens_planned:
        problems.append(f"prompt_mismatch: server counted {final.prompt_tokens} prompt tokens, "
                        f"planned {rec.prompt_tokens_planned}")
    if completion and len(rec.token_times) != completion:
        problems.append(f"token_count_mismatch: {len(rec.token_times)} tokens streamed, server "
                        f"reported {completion}")
    return problems


def judge_cell(records: list[RequestRecord], *, server_alive: bool,
               crash_line: str | None = None) -> Verdict:
    """The verdict of a measured cell; warmup requests are judged too (a bad warmup taints)."""
    if not server_alive:
        reason = "server_died: the server process exited during the cell"
        return Verdict("crashed", (reason, *((f"log: {crash_line}",) if crash_line else ())))
    if crash_line:
        return Verdict("crashed", (f"crash_signature: {crash_line}",))
    reasons: Counter[str] = Counter()
    for rec in records:
        for problem in request_problems(rec):
            reasons[problem] += 1
    if not reasons:
        return Verdict("ok")
    return Verdict("invalid", tuple(f"{text} (x{n})" if n > 1 else text
                                    for text, n in reasons.items()))


def context_guard(*, prompt_tokens: int, output_tokens: int, reserve: int,
                  context: int) -> Verdict | None:
    """An ``invalid`` verdict when a request cannot fit the server's context, else None."""
    need = prompt_tokens + output_tokens + reserve
    if need <= context - 1:
        return None
    return Verdict("invalid", (
        f"context_overflow: prompt {prompt_tokens} + output {output_tokens} + speculative "
        f"reserve {reserve} = {need} tokens > context {context} - 1; lower the context or "
        f"output tokens, or start the server with a larger context",))
