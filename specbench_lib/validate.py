"""Rules over request records and server state → a cell's verdict with its reasons.

A failure is never a number: a cell is ``ok`` only when every measured request returned the
planned prompt and output token counts, by the server's own report, with no error.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any, Literal

from .records import STATUSES, Reason, RequestRecord, Status, Verdict

__all__ = ["RULES", "STATUSES", "Reason", "Rule", "Status", "Verdict", "context_guard",
           "judge_cell", "judge_counters", "request_problems"]


@dataclass(frozen=True)
class Rule:
    """A named check; ``name`` is the prefix of the reasons it gives."""

    name: str
    scope: Literal["request", "cell"]
    protects: str


RULES: tuple[Rule, ...] = (
    Rule("http_<status>", "request", "an HTTP error answer (e.g. http_400 for a prompt over the "
         "context) counted as a fast, empty request"),
    Rule("error_in_stream", "request", "an error event inside an HTTP-200 stream (SGLang sends "
         "errors this way) counted as a success"),
    Rule("timeout", "request", "a hung server or stalled stream (connect, first token, between "
         "tokens, whole request) waiting forever or pulling the averages"),
    Rule("connection_error", "request", "a server that died or dropped the connection mid-stream"),
    Rule("incomplete_stream", "request", "a stream that ended without the server's final "
         "statistics, so its token counts are unknown"),
    Rule("empty_output", "request", "an empty stream counted as a successful request"),
    Rule("short_output", "request", "fewer tokens than requested with ignore_eos (a silent "
         "clamp), which inflates per-token speed and deflates throughput"),
    Rule("long_output", "request", "more tokens than requested: the request was not the one planned"),
    Rule("truncated", "request", "output cut by the context (llama.cpp answers 200 with "
         "truncated: true)"),
    Rule("prompt_mismatch", "request", "a prompt of another length than planned (client "
         "re-tokenization drift, special tokens, a cached prefix)"),
    Rule("prefix_cache_hit", "request", "prompt tokens served from the server's prefix cache "
         "(the same prompts recur across cells of one server), so TTFT and throughput skip the "
         "prefill; allowed with engine.prefix_cache"),
    Rule("token_count_mismatch", "request", "streamed tokens that differ from the server's count "
         "(chunks counted as tokens, lost events), which corrupts ITL and TPOT"),
    Rule("missing_spec_stats", "request", "a speculative config whose server reports no "
         "speculative statistics, so acceptance length would be invented"),
    Rule("server_died", "cell", "numbers from a server that crashed during the cell"),
    Rule("crash_signature", "cell", "numbers from a server whose log shows a fatal error "
         "(CUDA error, assertion, out of memory) even if the process lingers"),
    Rule("too_few_completed", "cell", "a cell averaged over fewer requests than planned "
         "(failed requests silently dropped)"),
    Rule("failed_fraction", "cell", "more failed requests than max_failed_fraction allows"),
    Rule("rate_not_reached", "cell", "an open-loop cell whose requests went out slower than "
         "scheduled (client or concurrency cap): its latencies belong to another load than the "
         "one asked for, so the cell is invalid (achieved_rate_rps and the note stay)"),
    Rule("context_overflow", "cell", "a prompt + output + speculative reserve that cannot fit the "
         "context, refused before any request is sent (never measured as a fast failure)"),
)


def request_problems(rec: RequestRecord, *, speculative: bool = False,
                     prefix_cache: bool = False) -> list[Reason]:
    """Every reason that applies to one request; empty when it is valid.

    A transport or server error (HTTP status, stream error, timeout, dropped connection) is the
    only reason given for its request: the missing output follows from it.
    """
    if rec.error_kind is not None:
        return [Reason(rec.error_kind, (rec.error or "")[:300 - len(rec.error_kind) - 2])]
    final = rec.final
    if final is None:
        return [Reason("incomplete_stream", "the stream ended without final statistics")]
    problems = []
    completion = final.completion_tokens or 0
    if completion == 0:
        problems.append(Reason("empty_output", "the server reported 0 completion tokens"))
    elif completion < rec.max_tokens:
        note = " (truncated by the context)" if final.truncated else ""
        problems.append(Reason("short_output", f"{completion} of {rec.max_tokens} tokens{note}"))
    elif completion > rec.max_tokens:
        problems.append(Reason("long_output", f"{completion} tokens for a limit of {rec.max_tokens}"))
    if final.truncated:
        problems.append(Reason("truncated", "the server reports the output truncated"))
    if final.prompt_tokens is not None and final.prompt_tokens != rec.prompt_tokens_planned:
        problems.append(Reason("prompt_mismatch", f"server counted {final.prompt_tokens} prompt "
                               f"tokens, planned {rec.prompt_tokens_planned}"))
    if completion and len(rec.token_times) != completion:
        problems.append(Reason("token_count_mismatch", f"{len(rec.token_times)} tokens streamed, "
                               f"server reported {completion}"))
    if not prefix_cache and final.cached_tokens:
        problems.append(Reason("prefix_cache_hit", f"the server took {final.cached_tokens} prompt "
                               f"tokens from its cache; the prefill was not measured (set "
                               f"engine.prefix_cache to allow it)"))
    if speculative and final.verify_steps is None:
        problems.append(Reason("missing_spec_stats", "a speculative config, but the server "
                               "reported no verify-step count for the request"))
    return problems


def judge_cell(records: list[RequestRecord], *, server_alive: bool, crash_line: str | None = None,
               planned: int | None = None, speculative: bool = False,
               max_failed_fraction: float = 0.0, prefix_cache: bool = False) -> Verdict:
    """The verdict of a cell from its request records and the server's state at its end.

    Args:
        records: warmup and measured requests (a failed warmup request taints the cell).
        server_alive: the server answered its health check after the last request.
        crash_line: a crash signature found in the server log during the cell.
        planned: measured requests planned (default: the measured records given).
        speculative: the cell's config drafts (every method but ``auto``); its requests must
            carry speculative statistics.
        max_failed_fraction: measured requests that may fail, as a fraction of ``planned``;
            tolerated failures leave the cell ``ok`` with ``tolerated:`` reasons.
        prefix_cache: prompt tokens served from the server's cache are allowed.
    """
    if not server_alive or crash_line:
        when = "its warmup" if records and all(r.warmup for r in records) else "the cell"
        first = ((Reason("server_died", f"the server process exited, or stopped answering its "
                         f"health endpoint, during {when}"),) if not server_alive else ())
        log = ((Reason("log" if first else "crash_signature", crash_line),) if crash_line else ())
        seen = Counter(p for rec in records for p in _problems(
            rec, speculative=speculative, prefix_cache=prefix_cache))
        return Verdict("crashed", (*first, *log, *(r.counted(n) for r, n in seen.items())))
    measured = [r for r in records if not r.warmup]
    planned = len(measured) if planned is None else planned
    reasons: Counter[Reason] = Counter()
    warm_bad, failed = False, []
    for rec in records:
        problems = _problems(rec, speculative=speculative, prefix_cache=prefix_cache)
        for problem in problems:
            reasons[problem] += 1
        if problems and rec.warmup:
            warm_bad = True
        elif problems:
            failed.append(rec.index)
    counted = [r.counted(n) for r, n in reasons.items()]
    cell: list[Reason] = []
    if len(measured) < planned:
        cell.append(Reason("too_few_completed", f"{len(measured)} of {planned} planned requests "
                           f"were sent"))
    allowed = int(max_failed_fraction * planned + 1e-9)
    missing = max(planned - len(measured), 0)
    if max_failed_fraction > 0 and len(failed) + missing > allowed:
        cell.append(Reason("failed_fraction", f"{len(failed) + missing} of {planned} requests "
                           f"failed, max_failed_fraction {max_failed_fraction:g} allows {allowed}"))
    if cell or warm_bad or len(failed) > allowed:
        return Verdict("invalid", (*counted, *cell), tuple(failed))
    return Verdict("ok", tuple(r.as_tolerated() for r in counted), tuple(failed))


def _problems(rec: RequestRecord, *, speculative: bool, prefix_cache: bool) -> list[Reason]:
    """A request's problems; a warmup request's say so (they taint every cell of the server)."""
    found = request_problems(rec, speculative=speculative, prefix_cache=prefix_cache)
    if rec.warmup:
        return [Reason(p.code, f"in the server's warmup: {p.detail}") for p in found]
    return found


def judge_counters(verdict: Verdict, counters: dict[str, Any]) -> Verdict:
    """For engines whose speculative statistics are server counters (vLLM ``/metrics``): an ok
    speculative cell whose counters are missing or did not move becomes ``invalid``."""
    if counters.get("drafts"):
        return verdict
    why = counters.get("error") or ("no speculative counters" if not counters
                                    else "the draft counters did not move during the cell")
    return Verdict("invalid", (*verdict.reasons, Reason("missing_spec_stats", why)), verdict.failed)


def context_guard(*, prompt_tokens: int, output_tokens: int, reserve: int,
                  context: int) -> Verdict | None:
    """An ``invalid`` verdict when a request cannot fit the server's context, else None."""
    need = prompt_tokens + output_tokens + reserve
    if need <= context - 1:
        return None
    return Verdict("invalid", (Reason(
        "context_overflow", f"prompt {prompt_tokens} + output {output_tokens} + speculative "
        f"reserve {reserve} = {need} tokens > context {context} - 1; lower the context or "
        f"output tokens, or start the server with a larger context"),))
