"""A cell's verdict and metrics, concluded from what was measured: the stored requests and facts.

Tables, plots and reports read cells through :func:`analyse`, so a fix to a metric or to an
analysis-time rule applies to every run already on disk, with no request sent again. What only
the measurement could observe (the server died, a log signature, spec counters, a verdict
reached before any request) comes from the cell's :class:`~.records.CellFacts` as stored.
"""

from __future__ import annotations

from typing import Any

from .metrics import cell_metrics, rate_shortfall, spec_metrics
from .records import CellRecord, Reason, Verdict
from .validate import judge_cell, judge_counters, judge_history, judge_host


def judge(cell: CellRecord) -> Verdict:
    """The verdict the rules give the cell's stored requests and facts."""
    facts, inputs = cell.facts, cell.judge
    if facts.decided is not None:
        return facts.decided
    verdict = judge_cell(cell.records, server_alive=facts.server_alive,
                         crash_line=facts.crash_line, planned=inputs.planned,
                         speculative=inputs.speculative and inputs.spec_stats == "per_request",
                         max_failed_fraction=inputs.max_failed_fraction,
                         max_coalesced_fraction=inputs.max_coalesced_fraction,
                         max_coalesced_first_fraction=inputs.max_coalesced_first_fraction,
                         prefix_cache=inputs.prefix_cache)
    if verdict.ok and inputs.speculative and inputs.spec_stats == "counters":
        verdict = judge_counters(verdict, facts.spec_counters)
    if verdict.ok and cell.target_rate is not None:
        late = rate_shortfall(cell.records, cell.target_rate)
        if late.get("rate_not_reached"):  # latency at another load than the one asked for
            note = str(late["rate_note"]).removeprefix("rate_not_reached: ")
            verdict = Verdict("invalid", (*verdict.reasons, Reason("rate_not_reached", note)),
                              verdict.failed)
    verdict = judge_history(verdict, facts.served_before, cell.prompts, inputs.prompt_reuse)
    return judge_host(verdict, facts.host, inputs.max_other_cpu_cores)  # other processes' CPU


def measure(cell: CellRecord, verdict: Verdict) -> dict[str, Any] | None:
    """The metrics of an ok cell (None otherwise); the speculative statistics from the server's
    counters when the requests carry none, by the same definitions (:func:`.metrics.spec_metrics`)."""
    if not verdict.ok:
        return None
    metrics = cell_metrics(cell, exclude=verdict.failed)
    counters = cell.facts.spec_counters
    if metrics.get("verify_steps") is None and counters.get("drafts"):  # vLLM: only counters
        metrics.update(spec_metrics(
            int(metrics["completion_tokens"]), int(metrics["n_requests"]),
            accepted=counters.get("accepted_tokens") or 0,
            drafted_tokens=counters.get("draft_tokens"), drafted_steps=counters.get("drafts")))
        for key in ("position_acceptance_rate", "acceptance_histogram"):
            if counters.get(key) is not None:
                metrics[key] = counters[key]
    return metrics


def analyse(cell: CellRecord) -> CellRecord:
    """The cell with the verdict and metrics that this specbench concludes from it now."""
    verdict = judge(cell)
    return cell.with_analysis(verdict, measure(cell, verdict))
