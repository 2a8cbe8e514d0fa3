"""Rules over request records and server state → a cell's verdict with its reasons: each
request's problems here, then the cell rules, one object each in ``rules/`` (:mod:`~.ruleset`).

A failure is never a number: a cell is ``ok`` only when every measured request returned the
planned prompt and output token counts, by the server's own report, with no error.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from ..model.catalogue import C
from ..model.judging import SCHEMA3_THRESHOLDS
from ..model.records import CellFacts, FinalStats, JudgeInputs, RequestRecord
from ..model.served import PromptRecord
from ..model.verdict import STATUSES, Reason, Status, Verdict
from . import ruleset
from .rule import Judged
from .rules.busy_host import judge_host
from .rules.coalesced_reads import coalesced_reads
from .rules.rate_not_reached import judge_rate
from .rules.seen_prompt import judge_history
from .rules.spec_counters import judge_counters

__all__ = ["STATUSES", "Reason", "Status", "Verdict", "coalesced_reads", "context_guard",
           "judge", "judge_cell", "judge_counters", "judge_history", "judge_host", "judge_inputs",
           "judge_rate", "judge_requests", "request_problems"]


def judge(records: Sequence[RequestRecord], facts: CellFacts, inputs: JudgeInputs, *,
          target_rate: float | None = None, prompts: Sequence[PromptRecord] = ()) -> Verdict:
    """The verdict of a cell: its requests' problems (:func:`request_problems`), then every
    cell rule of :data:`~.ruleset.RULES` in order, on the stored requests, facts and judge
    inputs (its open-loop rate and prompts for ``rate_not_reached`` and ``seen_prompt``). A
    verdict decided while measuring (``facts.decided``) stays as it is, unless it says ``ok``
    (nothing decides a cell ok before its requests: a hand-edited record is judged by them); a
    crashed server's cell (``facts.server_alive``, ``facts.crash_line``) is ``crashed``, judged
    by no cell rule."""
    if facts.decided is not None and not facts.decided.ok:
        return facts.decided
    records = list(records)
    speculative = inputs.speculative and inputs.spec_stats == "per_request"
    if not facts.server_alive or facts.crash_line:
        return _crashed(records, facts, speculative=speculative, prefix_cache=inputs.prefix_cache)
    verdict, warm_bad = _requests_verdict(records, speculative=speculative,
                                          prefix_cache=inputs.prefix_cache)
    cell = Judged(tuple(records), facts, inputs, target_rate, tuple(prompts), warm_bad)
    for rule in ruleset.RULES:
        verdict = rule.judge(verdict, cell) if verdict.status in ("ok", "invalid") else verdict
    return verdict


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
    impossible = _impossible_counts(final, completion, ignore_eos=rec.stop == "length")
    if impossible:
        problems.append(Reason(C.impossible_spec_stats, impossible))
    return problems


def _impossible_counts(final: FinalStats, completion: int, *, ignore_eos: bool) -> str | None:
    """What a request's speculative counters claim that its own stream rules out: more drafts
    accepted than drafted or, where only the limit ends an answer, accepted drafts that leave
    less than one verify step (each step yields a token of its own, and its draft is cut to the
    tokens left: llama.cpp ``get_n_draft_max``). At an end of sequence a step may accept drafts
    past it, which llama.cpp counts: not judged there."""
    accepted, drafted, steps = final.accepted_tokens, final.draft_tokens, final.verify_steps
    if accepted is not None and drafted is not None and accepted > drafted:
        return f"{accepted} drafts accepted of {drafted} drafted"
    if ignore_eos and steps is not None and completion and steps < 1:
        return (f"{accepted} drafts accepted for {completion} tokens: less than one verify step "
                f"left (each step yields one token of its own)")
    return None


def judge_cell(records: list[RequestRecord], *, server_alive: bool = True,
               crash_line: str | None = None, planned: int | None = None,
               **inputs: Any) -> Verdict:
    """:func:`judge` with the facts and inputs as keywords (``planned`` defaults to the
    measured records given; ``inputs`` are :class:`~specbench_lib.model.records.JudgeInputs`
    fields, or thresholds by their schema-3 names: ``max_failed_fraction=0.1``)."""
    planned = sum(not r.warmup for r in records) if planned is None else planned
    return judge(records, CellFacts(server_alive=server_alive, crash_line=crash_line),
                 judge_inputs(planned, **inputs))


def judge_inputs(planned: int, **named: Any) -> JudgeInputs:
    """Judge inputs from keywords: ``JudgeInputs`` fields, or thresholds by their schema-3 names
    (``max_other_cpu_cores=0.5`` is ``host.max_other_cpu_cores``)."""
    fields = {k: named.pop(k) for k in list(named) if k in JudgeInputs.__dataclass_fields__}
    thresholds = {SCHEMA3_THRESHOLDS[k][0]: v for k, v in named.items()}
    return JudgeInputs(planned=planned, **fields,
                       thresholds={**fields.pop("thresholds", {}), **thresholds})


def judge_requests(records: list[RequestRecord], facts: CellFacts,
                   inputs: JudgeInputs) -> Verdict:
    """:func:`judge` without an open-loop rate or prompts."""
    return judge(records, facts, inputs)


def _requests_verdict(records: list[RequestRecord], *, speculative: bool,
                      prefix_cache: bool) -> tuple[Verdict, bool]:
    """Every request's problems, counted (warmup and measured: a failed warmup request taints
    the cell): ``invalid`` with the failed measured requests' indices when there is one, and
    whether a warmup request failed. The cell rules judge on from it (``failed_fraction`` may
    tolerate the failures)."""
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
    counted = tuple(r.counted(n) for r, n in reasons.items())
    return Verdict("invalid" if counted else "ok", counted, tuple(failed)), warm_bad


def _crashed(records: list[RequestRecord], facts: CellFacts, *, speculative: bool,
             prefix_cache: bool) -> Verdict:
    """``crashed``: the server died (or its log shows a crash line), with every request's
    problems counted after it."""
    when = "the cell"
    if records and all(r.warmup for r in records):  # nothing timed was sent
        when = ("a conversation's turn 1, sent first" if any(r.turn == 1 for r in records)
                else "its warmup")
    first = ((Reason(C.server_died, f"the server process exited, or stopped answering its "
                     f"health endpoint, during {when}"),) if not facts.server_alive else ())
    line = facts.crash_line
    log = ((Reason(C.log if first else C.crash_signature, line),) if line else ())
    seen = Counter(p for rec in records for p in _problems(
        rec, speculative=speculative, prefix_cache=prefix_cache))
    return Verdict("crashed", (*first, *log, *(r.counted(n) for r, n in seen.items())))


def _problems(rec: RequestRecord, *, speculative: bool, prefix_cache: bool) -> list[Reason]:
    """A request's problems; a warmup request's say so (they taint every cell of the server)."""
    found = request_problems(rec, speculative=speculative, prefix_cache=prefix_cache)
    if rec.warmup:  # a conversation's turn 1 is sent before its cell, as a warmup is
        where = "a conversation's turn 1, sent first" if rec.turn == 1 else "the server's warmup"
        return [Reason(p.code, f"in {where}: {p.detail}") for p in found]
    return found


def kv_guard(*, prompt_tokens: int, output_tokens: int, concurrency: int,
             kv_tokens: int | None, closed: bool = True) -> Verdict | None:
    """A ``skipped`` verdict when the server's KV pool (``kv_tokens``; None: not reported) cannot
    hold a closed-loop cell's ``concurrency`` requests of prompt + output tokens at once, else
    None: measured, the cell would run fewer in flight than its label (``concurrency_not_held``).
    An open-loop cell (``closed`` False) is measured: its server queues what it cannot hold."""
    per = prompt_tokens + output_tokens
    if kv_tokens is None or not closed or concurrency * per <= kv_tokens:
        return None
    return Verdict("skipped", (Reason(
        C.kv_pool_too_small, f"the server's KV pool holds {kv_tokens} tokens, the cell needs "
        f"{concurrency} × ({prompt_tokens} + {output_tokens}) = {concurrency * per}: at most "
        f"{kv_tokens // per} requests in flight; lower its concurrency (concurrency_cap: "
        f"{{{prompt_tokens}: {kv_tokens // per}}}) or the context, or raise engine.mem_fraction"),))


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

