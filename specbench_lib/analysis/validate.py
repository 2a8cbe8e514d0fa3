"""Rules over request records and server state → a cell's verdict with its reasons.

A failure is never a number: a cell is ``ok`` only when every measured request returned the
planned prompt and output token counts, by the server's own report, with no error.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from typing import Any

from ..model.catalogue import DEFAULT_MAX_COALESCED_FIRST_FRACTION, C
from ..model.hostfacts import HostLoad
from ..model.records import STATUSES, CellFacts, JudgeInputs, Reason, RequestRecord, Status, Verdict
from ..model.served import PromptRecord, ServedBefore
from .coalescing import coalesced, late_firsts
from .energy import judge_gpu
from .metrics import rate_shortfall

__all__ = ["STATUSES", "Reason", "Status", "Verdict", "coalesced_reads", "context_guard",
           "judge", "judge_cell", "judge_counters", "judge_history", "judge_host", "judge_rate",
           "request_problems"]


def judge(records: Sequence[RequestRecord], facts: CellFacts, inputs: JudgeInputs, *,
          target_rate: float | None = None, prompts: Sequence[PromptRecord] = ()) -> Verdict:
    """The verdict every rule of :mod:`~.catalogue` gives a cell's requests, its stored facts
    and its judge inputs (its open-loop rate and prompts for ``rate_not_reached`` and
    ``seen_prompt``); a verdict decided while measuring (``facts.decided``) stays as it is."""
    if facts.decided is not None:
        return facts.decided
    verdict = judge_requests(list(records), facts, inputs)
    if verdict.ok and inputs.speculative and inputs.spec_stats == "counters":
        verdict = judge_counters(verdict, facts.spec_counters)
    if verdict.ok:
        verdict = judge_rate(verdict, list(records), target_rate)
    verdict = judge_history(verdict, facts.served_before, prompts, inputs.prompt_reuse)
    verdict = judge_host(verdict, facts.host, inputs.max_other_cpu_cores)  # others' CPU
    return judge_gpu(verdict, facts.host, inputs.max_other_gpu_mib)  # others' on its GPUs


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
        return [Reason(C.incomplete_stream, "the stream ended without final statistics")]
    problems = []
    completion = final.completion_tokens or 0
    if completion == 0:
        problems.append(Reason(C.empty_output, "the server reported 0 completion tokens"))
    elif completion < rec.max_tokens and rec.stop == "length":  # eos: the model ended it
        note = " (truncated by the context)" if final.truncated else ""
        problems.append(Reason(C.short_output, f"{completion} of {rec.max_tokens} tokens{note}"))
    elif completion > rec.max_tokens:
        problems.append(Reason(C.long_output, f"{completion} tokens for a limit of {rec.max_tokens}"))
    if final.truncated:
        problems.append(Reason(C.truncated, "the server reports the output truncated"))
    if final.prompt_tokens is not None and final.prompt_tokens != rec.prompt_tokens_planned:
        problems.append(Reason(C.prompt_mismatch, f"server counted {final.prompt_tokens} prompt "
                               f"tokens, planned {rec.prompt_tokens_planned}"))
    if completion and len(rec.token_times) != completion:
        problems.append(Reason(C.token_count_mismatch, f"{len(rec.token_times)} tokens streamed, "
                               f"server reported {completion}"))
    if not prefix_cache and final.cached_tokens:
        problems.append(Reason(C.prefix_cache_hit, f"the server took {final.cached_tokens} prompt "
                               f"tokens from its cache; the prefill was not measured (set "
                               f"engine.prefix_cache to allow it)"))
    if speculative and final.verify_steps is None:
        problems.append(Reason(C.missing_spec_stats, "a speculative config, but the server "
                               "reported no verify-step count for the request"))
    return problems


def judge_cell(records: list[RequestRecord], *, server_alive: bool = True,
               crash_line: str | None = None, planned: int | None = None,
               **inputs: Any) -> Verdict:
    """:func:`judge_requests` with the facts and inputs as keywords (``planned`` defaults to
    the measured records given; ``inputs`` are :class:`~specbench_lib.model.records.JudgeInputs` fields)."""
    planned = sum(not r.warmup for r in records) if planned is None else planned
    return judge_requests(records, CellFacts(server_alive=server_alive, crash_line=crash_line),
                          JudgeInputs(planned=planned, **inputs))


def judge_requests(records: list[RequestRecord], facts: CellFacts,
                   inputs: JudgeInputs) -> Verdict:
    """The verdict of a cell from its request records (warmup and measured: a failed warmup
    request taints the cell) and the server's state at its end (``facts.server_alive``,
    ``facts.crash_line``). Measured requests may fail up to ``inputs.max_failed_fraction`` of
    ``inputs.planned``: tolerated failures leave the cell ``ok`` with ``tolerated:`` reasons;
    a speculative config with per-request statistics must carry them (every method but auto);
    ``coalesced_reads`` judges the tokens a client stall made late."""
    speculative = inputs.speculative and inputs.spec_stats == "per_request"
    if not facts.server_alive or facts.crash_line:
        return _crashed(records, facts, speculative=speculative, prefix_cache=inputs.prefix_cache)
    measured = [r for r in records if not r.warmup]
    planned = inputs.planned
    reasons: Counter[Reason] = Counter()
    warm_bad, failed = False, []
    for rec in records:
        problems = _problems(rec, speculative=speculative, prefix_cache=inputs.prefix_cache)
        for problem in problems:
            reasons[problem] += 1
        if problems and rec.warmup:
            warm_bad = True
        elif problems:
            failed.append(rec.index)
    counted = [r.counted(n) for r, n in reasons.items()]
    cell: list[Reason] = []
    if len(measured) < planned:
        cell.append(Reason(C.too_few_completed, f"{len(measured)} of {planned} planned requests "
                           f"were sent"))
    fraction = inputs.max_failed_fraction
    allowed = int(fraction * planned + 1e-9)
    missing = max(planned - len(measured), 0)
    if fraction > 0 and len(failed) + missing > allowed:
        cell.append(Reason(C.failed_fraction, f"{len(failed) + missing} of {planned} requests "
                           f"failed, max_failed_fraction {fraction:g} allows {allowed}"))
    lost = coalesced_reads([r for r in measured if r.index not in failed],
                           inputs.max_coalesced_fraction, inputs.max_coalesced_first_fraction)
    if lost is not None:  # a server that ran on the client's core is the cause it names
        taken = facts.host.client_core_taken() if facts.host is not None else None
        cell.append(Reason(C.coalesced_reads, f"{lost.detail}; {taken}") if taken else lost)
    if cell or warm_bad or len(failed) > allowed:
        return Verdict("invalid", (*counted, *cell), tuple(failed))
    return Verdict("ok", tuple(r.as_tolerated() for r in counted), tuple(failed))


def _crashed(records: list[RequestRecord], facts: CellFacts, *, speculative: bool,
             prefix_cache: bool) -> Verdict:
    """``crashed``: the server died (or its log shows a crash line), with every request's
    problems counted after it."""
    when = "its warmup" if records and all(r.warmup for r in records) else "the cell"
    first = ((Reason(C.server_died, f"the server process exited, or stopped answering its "
                     f"health endpoint, during {when}"),) if not facts.server_alive else ())
    line = facts.crash_line
    log = ((Reason(C.log if first else C.crash_signature, line),) if line else ())
    seen = Counter(p for rec in records for p in _problems(
        rec, speculative=speculative, prefix_cache=prefix_cache))
    return Verdict("crashed", (*first, *log, *(r.counted(n) for r, n in seen.items())))


def judge_rate(verdict: Verdict, records: list[RequestRecord],
               target_rate: float | None) -> Verdict:
    """An ok open-loop cell whose requests went out slower than scheduled becomes ``invalid``
    with ``rate_not_reached``: its latencies are at another load than the one asked for."""
    late = rate_shortfall(records, target_rate)
    if not late.get("rate_not_reached"):
        return verdict
    note = str(late["rate_note"]).removeprefix("rate_not_reached: ")
    return Verdict("invalid", (*verdict.reasons, Reason(C.rate_not_reached, note)), verdict.failed)


def coalesced_reads(records: list[RequestRecord], limit: float,
                    first_limit: float = DEFAULT_MAX_COALESCED_FIRST_FRACTION) -> Reason | None:
    """``coalesced_reads`` when more than ``limit`` of the tokens, or ``first_limit`` of the
    first tokens, of ``records`` carry a time the client host took: read together with a later
    event right after the client stalled (their ITL gaps read 0, the gap before them or the
    TTFT holds the stall), or, for first tokens, stamped in one batch the kernel handed over
    late while the host starved the client (:func:`~specbench_lib.analysis.coalescing.late_firsts`)."""
    tokens = sum(len(r.token_times) for r in records)
    firsts = sum(1 for r in records if r.token_times)
    decided = [coalesced(r)[0] for r in records]  # from the stored reads and stalls
    late = late_firsts(records)
    lost = sum(decided)
    if not tokens or (lost <= limit * tokens and len(late) <= first_limit * firsts):
        return None
    affected = sum(1 for r, n in zip(records, decided, strict=True) if n or r.index in late)
    return Reason(C.coalesced_reads, (
        f"{lost} of {tokens} measured tokens ({lost / tokens:.1%}) and {len(late)} of {firsts} "
        f"first tokens ({len(late) / firsts:.1%}), in {affected} of {len(records)} requests, "
        f"carry a time the client host took, not their own{_causes(late)} "
        f"(max_coalesced_fraction {limit:g}, "
        f"max_coalesced_first_fraction {first_limit:g}: at this cell's size "
        f"{math.floor(limit * tokens) + 1} tokens or {math.floor(first_limit * firsts) + 1} "
        f"first tokens trip it); measure with fewer concurrent requests or on a "
        f"quieter client host"))


def _causes(late: dict[int, str]) -> str:
    """Which first tokens were late and why, for a reason's detail (the first 8 requests)."""
    parts = []
    for cause, why in (("coalesced", "read together with later events after a client stall"),
                       ("batched", "stamped in one batch the kernel delivered late while the "
                                   "host starved the client")):
        named = sorted(i for i, c in late.items() if c == cause)
        if named:
            more = f" and {len(named) - 8} more" if len(named) > 8 else ""
            parts.append(f"{len(named)} {why} (requests {', '.join(map(str, named[:8]))}{more})")
    return f": first tokens {'; '.join(parts)}" if parts else ""


def _problems(rec: RequestRecord, *, speculative: bool, prefix_cache: bool) -> list[Reason]:
    """A request's problems; a warmup request's say so (they taint every cell of the server)."""
    found = request_problems(rec, speculative=speculative, prefix_cache=prefix_cache)
    if rec.warmup:  # a conversation's turn 1 is sent before its cell, as a warmup is
        where = "a conversation's turn 1, sent first" if rec.turn == 1 else "the server's warmup"
        return [Reason(p.code, f"in {where}: {p.detail}") for p in found]
    return found


def judge_counters(verdict: Verdict, counters: dict[str, Any]) -> Verdict:
    """For engines whose speculative statistics are server counters (vLLM ``/metrics``): an ok
    speculative cell whose counters are missing or did not move becomes ``invalid``."""
    if counters.get("drafts"):
        return verdict
    why = counters.get("error") or ("no speculative counters" if not counters
                                    else "the draft counters did not move during the cell")
    return Verdict("invalid", (*verdict.reasons, Reason(C.missing_spec_stats, why)), verdict.failed)


def judge_host(verdict: Verdict, host: HostLoad | None, max_other_cpu_cores: float | None) -> Verdict:
    """An ok or invalid cell measured on a busy host becomes ``invalid`` with ``busy_host``,
    naming the other CPU used, the threshold and the largest other processes. A cell without a
    judged load (not sampled, too short, an attached server not told apart) is left as it is."""
    if host is None or verdict.status not in ("ok", "invalid") or not host.busy(max_other_cpu_cores):
        return verdict
    stolen = host.steal_fraction or 0.0
    steal = (f" and the hypervisor stole {host.stolen_cores:.2f} ({stolen:.0%} of the CPU time)"
             if stolen >= 0.01 else "")
    load = f", load average {host.loadavg_1m_max:g}" if host.loadavg_1m_max is not None else ""
    reason = Reason(C.busy_host, (
        f"other processes used {host.other_cpu_cores:.2f} CPU cores on average{steal} during the "
        f"cell's {host.window_s:.1f} s, more than host.max_other_cpu_cores {max_other_cpu_cores:g} "
        f"({host.cpus} CPUs{load}): {host.top_text()}; the server ({host.server_cpu_cores:.2f} "
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
    shared = sum(bool(docs.intersection(d for d in p.sources
                                        if not d.startswith(("copyedit:", "grounded:"))))
                 for p in prompts)
    if not same and not shared:
        return verdict
    reason = Reason(C.seen_prompt, (
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
        C.context_overflow, f"prompt {prompt_tokens} + output {output_tokens} + speculative "
        f"reserve {reserve} = {need} tokens > context {context} - 1; lower the context or "
        f"output tokens, or start the server with a larger context"),))
