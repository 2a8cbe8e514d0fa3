"""Speculative statistics, one definition for every engine (:mod:`~..specmetrics`): from the
cell's requests' own counts, else on read from the server's counters by the same definitions."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...model.records import CellRecord
from ..metric import Computed, Family, Metric, Requests
from ..specmetrics import request_spec_metrics, spec_metrics


def _from_requests(cell: Requests) -> Computed:
    return request_spec_metrics(cell.measured, cell.total)


def _from_counters(cell: CellRecord, metrics: Mapping[str, Any]) -> Computed:
    """The server's counters where the requests carry none (vLLM's, llama.cpp's), and a tree's
    drafted tokens as its nodes."""
    found: Computed = {}
    counters = cell.facts.spec_counters
    if metrics.get("verify_steps") is None and counters.get("drafts"):  # vLLM: only counters
        found.update(spec_metrics(
            int(metrics["completion_tokens"]), int(metrics["n_requests"]),
            accepted=counters.get("accepted_tokens") or 0,
            drafted_tokens=counters.get("draft_tokens"), drafted_steps=counters.get("drafts")))
    now = {**metrics, **found}
    if (now.get("acceptance_length_drafted") is None and counters.get("drafts")
            and counters.get("accepted_tokens") == now.get("accepted_tokens")):
        # llama.cpp: the requests' own counts carry no drafted steps; its counters agree on
        # the accepted drafts, so their drafted steps are the same requests'
        found["acceptance_length_drafted"] = 1 + counters["accepted_tokens"] / counters["drafts"]
    for key in ("position_acceptance_rate", "acceptance_histogram"):  # vLLM's, llama.cpp's
        if now.get(key) is None and counters.get(key) is not None:
            found[key] = counters[key]
    if cell.spec.method == "tree" and "draft_acceptance_rate" in now:
        # a tree's drafted tokens are its nodes (verify × budget): not a chain's rate
        found["tree_node_acceptance_rate"] = now["draft_acceptance_rate"]
        found["draft_acceptance_rate"] = None
    return found


FAMILY = Family(30, (
    Metric("acceptance_length", "tokens/step", "tokens received over the target's forward "
           "steps, the prefill's included: the project's τ, one definition for every engine "
           "(the papers' τ counts verify passes only: `tau_verify`)", "spec",
           header="acceptance length", form="{:.2f}", lead=4, diff=5, summary=11),
    Metric("tokens_per_step", "tokens/step", "the same figure as `acceptance_length`", "spec"),
    Metric("draft_acceptance_rate", "fraction", "accepted / drafted tokens of a chain (None for "
           "a tree config: `tree_node_acceptance_rate`)", "spec"),
    Metric("acceptance_length_drafted", "tokens/step", "1 + accepted / drafted steps, over the "
           "steps that carried a draft, where the engine counts those; None otherwise", "spec"),
    Metric("verify_steps", "steps", "the target's forward steps: tokens − accepted drafts",
           "spec"),
    Metric("accepted_tokens", "tokens", "accepted draft tokens, capped at tokens − requests",
           "spec"),
    Metric("tau_verify", "tokens/step", "the papers' τ (z-lab's DFlash and DDTree): the mean of "
           "accepted drafts + 1 over verify passes, the prefill's step out: (tokens − requests) "
           "/ (verify steps − requests)", "spec", header="τ (papers')", form="{:.2f}"),
    Metric("spec_accept_length", "tokens/step", "SGLang's spec_accept_length, reported by "
           "z-lab's SGLang benchmark: tokens / verify passes (completion / spec_verify_ct)",
           "spec"),
    Metric("tree_node_acceptance_rate", "fraction", "a tree config's accepted drafts over the "
           "tree nodes it verified (verify × budget): not comparable with a chain's "
           "`draft_acceptance_rate`", "spec"),
    # only in the cell file: a list per cell
    Metric("position_acceptance_rate", "list", "per draft position k, the fraction of drafts "
           "whose k-th token was accepted (vLLM's /metrics)", "spec", column=False),
    Metric("acceptance_histogram", "list", "the drafts with exactly k tokens accepted, "
           "k = 0 … budget (vLLM's /metrics)", "spec", column=False),
), requests=_from_requests, stored=_from_counters)
