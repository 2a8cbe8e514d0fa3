"""Rules over request records and server state → a cell's verdict with its reasons.

A failure is never a number: a cell is ``ok`` only when every measured request returned the
planned prompt and output token counts, by the server's own report, with no error.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from .hostfacts import HostLoad
from .params import DEFAULT_MAX_COALESCED_FIRST_FRACTION, DEFAULT_MAX_COALESCED_FRACTION
from .records import (
    STATUSES,
    Reason,
    RequestRecord,
    Status,
    Verdict,
)
from .served import PromptRecord, ServedBefore

__all__ = ["RULES", "STATUSES", "Reason", "Rule", "Status", "Verdict", "coalesced_reads",
           "context_guard", "judge_cell", "judge_counters", "judge_history", "judge_host",
           "request_problems"]


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
    Rule("coalesced_reads", "cell", "token times lost to a client stall: events that queued in "
         "the socket while the client did not run are read at once and all carry the last one's "
         "kernel stamp (ITL gaps of 0, a late TTFT); more than max_coalesced_fraction of the "
         "tokens, or max_coalesced_first_fraction of the first tokens, so read makes the cell "
         "invalid"),
    Rule("busy_host", "cell", "numbers measured while other processes used the CPUs (a build, "
         "another benchmark, a spinning server): more than host.max_other_cpu_cores cores on "
         "average during the cell, the sweep and its server not counted, makes it invalid"),
    Rule("rate_not_reached", "cell", "an open-loop cell whose requests went out slower than "
         "scheduled (client or concurrency cap): its latencies belong to another load than the "
         "one asked for, so the cell is invalid (achieved_rate_rps and the note stay)"),
    Rule("seen_prompt", "cell", "a cell whose server had already answered one of its prompts, or "
         "text one of them contains (an earlier cell's, or the warmup's), without the plan asking "
         "for it (prompt_reuse): an engine that learns across requests (llama.cpp ngram-mod, "
         "SGLang NGRAM, a prefix cache) then measures its memory, not the config"),
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
               max_failed_fraction: float = 0.0, prefix_cache: bool = False,
               max_coalesced_fraction: float = DEFAULT_MAX_COALESCED_FRACTION,
               max_coalesced_first_fraction: float = DEFAULT_MAX_COALESCED_FIRST_FRACTION,
               ) -> Verdict:
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
        max_coalesced_fraction: measured tokens whose receive time a client stall took
            (``coalesced_reads``), as a fraction, above which the cell is invalid.
        max_coalesced_first_fraction: the same for first tokens (the requests' TTFTs).
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
    lost = coalesced_reads([r for r in measured if r.index not in failed], max_coalesced_fraction,
                           max_coalesced_first_fraction)
    if lost is not None:
        cell.append(lost)
    if cell or warm_bad or len(failed) > allowed:
        return Verdict("invalid", (*counted, *cell), tuple(failed))
    return Verdict("ok", tuple(r.as_tolerated() for r in counted), tuple(failed))


def coalesced_reads(records: list[RequestRecord], limit: float,
                    first_limit: float = DEFAULT_MAX_COALESCED_FIRST_FRACTION) -> Reason | None:
    """``coalesced_reads`` when more than ``limit`` of the tokens, or ``first_limit`` of the
    first tokens, of ``records`` were read together with a later event right after the client
    stalled: they carry that event's time, so their ITL gaps read 0 and the gap before them (or
    the TTFT) holds the stall."""
    tokens = sum(len(r.token_times) for r in records)
    firsts = sum(1 for r in records if r.token_times)
    lost = sum(min(r.coalesced_tokens, len(r.token_times)) for r in records)
    lost_first = sum(1 for r in records if r.first_token_coalesced and r.token_times)
    if not tokens or (lost <= limit * tokens and lost_first <= first_limit * firsts):
        return None
    return Reason("coalesced_reads", (
        f"{lost} of {tokens} measured tokens ({lost / tokens:.1%}) and {lost_first} of {firsts} "
        f"first tokens ({lost_first / firsts:.1%}) were read together with a later event right "
        f"after the client stalled, so they carry its time, not their own "
        f"(max_coalesced_fraction {limit:g}, max_coalesced_first_fraction {first_limit:g}); "
        f"measure with fewer concurrent requests or on a "
        f"quieter client host"))


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


def judge_host(verdict: Verdict, host: HostLoad | None, max_other_cpu_cores: float | None) -> Verdict:
    """An ok or invalid cell measured on a busy host becomes ``invalid`` with ``busy_host``,
    naming the other CPU used, the threshold and the largest other processes. A cell without a
    judged load (not sampled, too short, an attached server not told apart) is left as it is."""
    if host is None or verdict.status not in ("ok", "invalid") or not host.busy(max_other_cpu_cores):
        return verdict
    stolen = host.steal_fraction or 0.0
    steal = f", {stolen:.0%} of the CPU time stolen by the hypervisor" if stolen >= 0.01 else ""
    load = f", load average {host.loadavg_1m_max:g}" if host.loadavg_1m_max is not None else ""
    reason = Reason("busy_host", (
        f"other processes used {host.other_cpu_cores:.2f} CPU cores on average during the "
        f"cell's {host.window_s:.1f} s, more than host.max_other_cpu_cores {max_other_cpu_cores:g} "
        f"({host.cpus} CPUs{load}{steal}): {host.top_text()}; the server ({host.server_cpu_cores:.2f} "
        f"cores) and this sweep ({host.own_cpu_cores:.2f}) are not counted. Stop them, or measure "
        f"on a quiet host, and resume the run (invalid cells are measured again); or raise "
        f"host.max_other_cpu_cores (null: not judged)"))
    return Verdict("invalid", (*verdict.reasons, reason), verdict.failed)


def judge_history(verdict: Verdict, served: ServedBefore | None, prompts: Sequence[PromptRecord],
                  allowed: bool) -> Verdict:
    """An ok or invalid cell whose server had served one of its prompts, or a document one of
    them was built from, becomes ``invalid`` with ``seen_prompt`` (unless ``allowed``)."""
    if served is None or allowed or verdict.status not in ("ok", "invalid"):
        return verdict
    shas, docs = set(served.prompts), set(served.documents)
    same = sum(p.sha in shas for p in prompts)
    shared = sum(bool(docs.intersection(d for d in p.sources if not d.startswith("copyedit:")))
                 for p in prompts)
    if not same and not shared:
        return verdict
    reason = Reason("seen_prompt", (
        f"{same} of {len(prompts)} prompts were answered before by this server, {shared} share a "
        f"document with what it answered before ({len(served.cells)} earlier cells, "
        f"{served.requests} requests, warmup included); the cell measured what the server "
        f"remembers. Give each cell fresh prompts (the default), or set prompt_reuse: true to "
        f"study a warm server"))
    return Verdict("invalid", (*verdict.reasons, reason), verdict.failed)


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
