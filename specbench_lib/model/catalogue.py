"""The one catalogue of verdict reasons: every code a verdict can carry, at every level.

A reason's ``code`` names an entry here (:func:`codes`); building a
:class:`~specbench_lib.model.verdict.Reason` with any other code is a programming error
(:class:`~specbench_lib.core.errors.UnknownReason`). Each entry says its level (a ``request``'s
problem, a ``cell``'s rule, a ``config``'s server, a ``panel``'s claim, the ``run``'s plan or
workers), what it
protects against, and the params keys of its thresholds with their defaults.

:data:`CATALOGUE` lists the codes minted where they are found (a request's problems, a server's
failure, the plan's skips). A cell rule is one object in its own module of
``analysis/rules/`` (:mod:`~specbench_lib.analysis.ruleset` discovers them) with its code,
level, what it protects against, thresholds and judge; the registry adds each
rule's entry here, so a new rule with a threshold is one file and its test. The defaults of the
thresholds that are params fields of their own (``max_failed_fraction``, ``host.…``) are defined
here once, for params and the rules; a new rule's threshold lives in its file and in params'
``thresholds`` mapping.

This module is a leaf: it imports nothing of specbench but :mod:`~specbench_lib.core.errors`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from ..core.errors import UnknownReason

Level = Literal["request", "cell", "config", "panel", "run"]
LEVELS: tuple[Level, ...] = ("request", "cell", "config", "panel", "run")

# thresholds' defaults (their params keys are named by the entries below)
DEFAULT_MAX_FAILED_FRACTION = 0.0
# measured tokens, and first tokens, whose receive time a client stall made late by more than
# 10 % of what it times (coalesced_reads): past 5 % of the tokens an ITL p95 is read from wrong
# times, past 1 % of the first tokens a TTFT p99 (on a 2-core host whose server takes both
# cores, 2-5 ms stalls touch a token or two of every few hundred: not a reason to drop a cell)
DEFAULT_MAX_COALESCED_FRACTION = 0.05
DEFAULT_MAX_COALESCED_FIRST_FRACTION = 0.01
RATE_TOLERANCE = 0.05  # achieved send rate may fall this fraction below the schedule's

# a request's transport or server error: ``http_<status>`` stands for every HTTP status
HTTP_STATUS = re.compile(r"http_\d+")


@dataclass(frozen=True)
class Threshold:
    """A number a rule compares against: its params key (dotted) and its default.

    A cell stores the value it was measured with (``JudgeInputs.thresholds``); one that lacks
    it (a rule newer than the cell) reads as the default, or, with ``judged_when_absent`` False,
    as None: not judged."""

    key: str
    default: float | str | bool | None
    judged_when_absent: bool = True

    @property
    def in_params(self) -> bool:
        """Whether params has the key (a tolerance in parentheses is the rule's own)."""
        return not self.key.startswith("(")


@dataclass(frozen=True)
class Code:
    """One reason code: its level, what it protects against, its thresholds; ``host_side``: a
    rule that judges the client host, not the config under test (a cell invalid for such rules
    alone is measured again at once, params ``retries``, with fresh prompts)."""

    name: str
    level: Level
    protects: str
    thresholds: tuple[Threshold, ...] = ()
    host_side: bool = False


def _c(name: str, level: Level, protects: str, *thresholds: Threshold) -> Code:
    return Code(name, level, protects, thresholds)


CATALOGUE: tuple[Code, ...] = (
    # request: one request's problem (its record), counted over the cell's requests
    _c("http_<status>", "request", "an HTTP error answer (e.g. http_400 for a prompt over the "
       "context) counted as a fast, empty request"),
    _c("error_in_stream", "request", "an error event inside an HTTP-200 stream (SGLang sends "
       "errors this way) counted as a success"),
    _c("timeout", "request", "a hung server or stalled stream (connect, first token, between "
       "tokens, whole request) waiting forever or pulling the averages"),
    _c("connection_error", "request", "a server that died or dropped the connection mid-stream"),
    _c("incomplete_stream", "request", "a stream that ended without the server's final "
       "statistics, so its token counts are unknown"),
    _c("empty_output", "request", "an empty stream counted as a successful request"),
    _c("short_output", "request", "fewer tokens than requested with ignore_eos (a silent "
       "clamp), which inflates per-token speed and deflates throughput"),
    _c("long_output", "request", "more tokens than requested: the request was not the one planned"),
    _c("truncated", "request", "output cut by the context (llama.cpp answers 200 with "
       "truncated: true)"),
    _c("prompt_mismatch", "request", "a prompt of another length than planned (client "
       "re-tokenization drift, special tokens, a cached prefix)"),
    _c("prefix_cache_hit", "request", "prompt tokens served from the server's prefix cache "
       "(the same prompts recur across cells of one server), so TTFT and throughput skip the "
       "prefill; allowed with engine.prefix_cache"),
    _c("token_count_mismatch", "request", "streamed tokens that differ from the server's count "
       "(chunks counted as tokens, lost events, a server that claims more than it sent), which "
       "corrupts ITL, TPOT and throughput; the tokens are counted as the ids that arrived"),
    _c("missing_spec_stats", "request", "a speculative config whose server reports no "
       "speculative statistics (per request, or counters that did not move), so acceptance "
       "length would be invented"),
    _c("impossible_spec_stats", "request", "speculative counters that the request's own stream "
       "rules out (more drafts accepted than drafted, or than its tokens leave room for), "
       "which would publish an acceptance length that was never measured (clipped to the "
       "largest possible)"),
    # cell: the crash evidence and the refusals decided before requests (the cell rules over the
    # requests and facts are analysis/rules/'s objects, registered here by analysis/ruleset.py)
    _c("server_died", "cell", "numbers from a server that crashed during the cell"),
    _c("crash_signature", "cell", "numbers from a server whose log shows a fatal error "
       "(CUDA error, assertion, out of memory) even if the process lingers"),
    _c("log", "cell", "evidence, not a rule: the server log's crash line given with "
       "server_died or server_failed"),
    _c("returncode", "cell", "evidence, not a rule: the exit status of a server that failed"),
    _c("context_overflow", "cell", "a prompt + output + speculative reserve that cannot fit the "
       "context, refused before any request is sent (never measured as a fast failure)"),
    _c("kv_pool_too_small", "cell", "a cell whose concurrency × (prompt + output) the started "
       "server's KV pool (SGLang's max_total_num_tokens) cannot hold: skipped before any request "
       "is sent, since the server would run fewer in flight than its label (concurrency_not_held) "
       "and spend its requests on a lighter load; the pool, the need and the concurrency that "
       "fits named (the doctor estimates it before any start: sweep/kvpool.py)"),
    _c("no_profile_rate", "cell", "a rate-profile point whose synchronous or saturated anchor "
       "cell is not ok, so it has no rate to run at: skipped, naming the anchor"),
    # config: the server of a config (its launch, its control endpoints, its history)
    _c("server_failed", "config", "a server that could not be started or answered its control "
       "calls wrongly: the config's cells crashed, the sweep goes on with the next config"),
    _c("server_died_earlier", "config", "numbers from a server that crashed in an earlier cell "
       "of its config: the later cells are not measured"),
    _c("control_timeout", "config", "a control call (server info, tokenize) with no complete "
       "answer within engine.control_timeout_s (a trickling endpoint), the limit named"),
    _c("missing_endpoint", "config", "a server that lacks an endpoint specbench needs "
       "(/tokenize, server info): invalid with the fix, not a crash"),
    _c("bad_answer", "config", "a control answer (server info, tokenize) its adapter cannot "
       "read, with the server's words; the sweep goes on with the next config"),
    _c("spec_mismatch", "config", "a started server whose speculative settings, read back "
       "from it (SGLang /server_info, vLLM's config line), differ from what its config asked "
       "for (a fork that rewrites a budget, a flag it ignores): both values named, no cell "
       "measured"),
    _c("tree_mask_ignored", "config", "a tree config (DDTree) whose server verifies with an "
       "attention backend that ignores the tree mask (FA3 with top-k 1, SGLang's default on "
       "Hopper): every node would attend to every earlier node of the flattened tree, so "
       "acceptance is wrong and greedy output lossy; refused before any server starts when the "
       "argv says so, and after start from the resolved /server_info; no cell measured"),
    _c("crashed_after_cells", "config", "a server whose log shows a crash signature after its "
       "config's last cell ended (it died while idle or at shutdown): its cells keep their "
       "verdicts, but the run reports the config crashed at this budget, with the line, and the "
       "known_bad entry that would skip it"),
    _c("write_failed", "config", "a cell whose record could not be written (a full disk, a "
       "folder made read-only mid-sweep), and the cells of its config after it: crashed with "
       "the error, never missing; the run ends interrupted and a resume measures them again"),
    _c("known_bad", "config", "a config listed under known_bad for this GPU and engine version: "
       "skipped, never started"),
    # panel: a panel's claim, judged on read over its configs' cells (analysis/drift.py)
    _c("drift", "panel", "a claimed effect that the machine's own change of speed could explain: "
       "the same prompts' prefill (work every config does alike) ran at speeds as far apart in "
       "the leader's and the baseline's stretches of time as the claimed speedup (at least half "
       "of it, log scale, and 3 %); the panel's answer and statement carry it, never a quiet "
       "number", Threshold("(drift share 0.5, floor 0.03)", 0.5)),
    # run: the plan and the workers that carry it out
    _c("enough_repeats", "run", "a repeat the adaptive plan did not need (every speedup "
       "interval already narrow enough): skipped by design, not a failure",
       Threshold("repeat_until_half_width", None)),
    _c("eliminated", "run", "a time-budgeted round a config was not measured in: it had left "
       "the panel's confidence set for the best (multiple comparisons with the best, at the "
       "error its look spent), so the budget went to the configs still in contention; skipped "
       "by design"),
    _c("decided", "run", "a time-budgeted round not measured because its panel was decided (its "
       "leader was shown the best, or within equivalence of it); skipped by design"),
    _c("time_budget", "run", "a round the time budget could not afford (predicted from the "
       "measured server starts and cell costs): skipped by design, the answer says so",
       Threshold("time_budget_s", None)),
    _c("corpus_exhausted", "run", "a round past the ones the corpus can feed with fresh "
       "prompts (never a prompt a server already answered): skipped by design"),
    _c("config_out", "run", "a round of a config that was out of the panel for its own failure "
       "(crashed or skipped, invalid for a config-level reason, or no ok request, with its "
       "reason): not measured again; skipped by design"),
    _c("worker_lost", "run", "a placed config whose Ray worker or node was lost: its unfinished "
       "cells crashed, the rest of the run goes on"),
    _c("worker_error", "run", "a placed config whose Ray task raised: its unfinished cells "
       "crashed, with the error"),
)

BY_CODE: dict[str, Code] = {c.name: c for c in CATALOGUE}  # and the registered rules'


def register(code: Code) -> Code:
    """Add a cell rule's entry (:mod:`~specbench_lib.analysis.ruleset`); the same entry twice is
    one entry, another entry under a known code is a programming error."""
    known = BY_CODE.setdefault(code.name, code)
    if known != code:
        raise ValueError(f"reason code {code.name!r} is already in the catalogue as {known}")
    return code


def codes() -> frozenset[str]:
    """Every known code: the catalogue's and the registered rules'."""
    return frozenset(BY_CODE)


def entries() -> tuple[Code, ...]:
    """Every entry, by level, the catalogue's before the registered rules' (the rules page)."""
    return tuple(c for lv in LEVELS for c in BY_CODE.values() if c.level == lv)
# skipped reasons that are the plan's, not failures (adaptive repeats; a time budget's rounds)
BY_DESIGN = frozenset({"enough_repeats", "eliminated", "decided", "time_budget",
                       "corpus_exhausted", "config_out"})


def host_side() -> frozenset[str]:
    """The codes of the rules that judge the client host (:attr:`Code.host_side`)."""
    return frozenset(c.name for c in BY_CODE.values() if c.host_side)


def host_side_only(codes: frozenset[str] | set[str]) -> bool:
    """Whether every one of a verdict's ``codes`` is a host-side rule's (and there is one)."""
    return bool(codes) and codes <= host_side()


class _Names:
    """Each code as an attribute (``C.busy_host == "busy_host"``): a minting site names its
    entry, a mistyped name raises where it is named and the catalogue's test finds it."""

    def __getattr__(self, name: str) -> str:
        if name in BY_CODE:
            return name
        raise AttributeError(f"no reason code {name!r} in the catalogue")


C = _Names()


def http_status(status: int) -> str:
    """The request code of an HTTP error answer (``http_400``)."""
    return check(f"http_{status}")


def entry(code: str) -> Code:
    """The catalogue entry of ``code`` (``http_404`` → ``http_<status>``)."""
    if HTTP_STATUS.fullmatch(code):
        return BY_CODE["http_<status>"]
    try:
        return BY_CODE[code]
    except KeyError:
        raise UnknownReason(code) from None


def check(code: str) -> str:
    """``code`` when the catalogue has it; else :class:`UnknownReason`."""
    entry(code)
    return code


def level(code: str) -> Level:
    return entry(code).level


def default(key: str) -> float | str | bool | None:
    """The default of the threshold whose params key is ``key``."""
    for code in BY_CODE.values():
        for threshold in code.thresholds:
            if threshold.key == key:
                return threshold.default
    raise KeyError(key)
