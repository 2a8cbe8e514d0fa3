"""A cell's verdict and metrics, concluded from what was measured: the stored requests and facts.

Tables, plots and reports read cells through :func:`analyse`, so a fix to a metric or to an
analysis-time rule applies to every run already on disk, with no request sent again. What only
the measurement could observe (the server died, a log signature, spec counters, a verdict
reached before any request) comes from the cell's :class:`~specbench_lib.model.records.CellFacts` as stored.
"""

from __future__ import annotations

from typing import Any

from ..model.records import CellRecord, Verdict
from .energy import gpu_metrics
from .metrics import CellMetrics, cell_metrics
from .specmetrics import spec_metrics
from .validate import judge as judge_all


def verdict_of(cell: CellRecord) -> Verdict:
    """The verdict the rules give the cell's stored requests and facts."""
    return judge_all(cell.records, cell.facts, cell.judge, target_rate=cell.target_rate,
                     prompts=cell.prompts)


def measure(cell: CellRecord, verdict: Verdict) -> CellMetrics | None:
    """The metrics of an ok cell (None otherwise); the speculative statistics from the server's
    counters when the requests carry none, by the same definitions (:func:`~.specmetrics.spec_metrics`)."""
    if not verdict.ok:
        return None
    metrics: dict[str, Any] = dict(cell_metrics(cell, exclude=verdict.failed))
    counters = cell.facts.spec_counters
    if metrics.get("verify_steps") is None and counters.get("drafts"):  # vLLM: only counters
        metrics.update(spec_metrics(
            int(metrics["completion_tokens"]), int(metrics["n_requests"]),
            accepted=counters.get("accepted_tokens") or 0,
            drafted_tokens=counters.get("draft_tokens"), drafted_steps=counters.get("drafts")))
    if (metrics.get("acceptance_length_drafted") is None and counters.get("drafts")
            and counters.get("accepted_tokens") == metrics.get("accepted_tokens")):
        # llama.cpp: the requests' own counts carry no drafted steps; its counters agree on
        # the accepted drafts, so their drafted steps are the same requests'
        metrics["acceptance_length_drafted"] = 1 + counters["accepted_tokens"] / counters["drafts"]
    for key in ("position_acceptance_rate", "acceptance_histogram"):  # vLLM's, llama.cpp's
        if metrics.get(key) is None and counters.get(key) is not None:
            metrics[key] = counters[key]
    if cell.spec.method == "tree" and "draft_acceptance_rate" in metrics:
        # a tree's drafted tokens are its nodes (verify × budget): not a chain's rate
        metrics["tree_node_acceptance_rate"] = metrics["draft_acceptance_rate"]
        metrics["draft_acceptance_rate"] = None
    metrics.update(gpu_metrics(cell.facts.host, int(metrics.get("completion_tokens") or 0)))
    return metrics


def analyse(cell: CellRecord) -> CellRecord:
    """The cell with the verdict and metrics that this specbench concludes from it now."""
    verdict = verdict_of(cell)
    return cell.with_analysis(verdict, measure(cell, verdict))
