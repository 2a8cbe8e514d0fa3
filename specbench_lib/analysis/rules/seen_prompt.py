"""``seen_prompt``: a cell whose server had answered one of its prompts, or a document they
were built from, before (the server's history, :class:`~specbench_lib.model.served.ServedBefore`)."""

from __future__ import annotations

from collections.abc import Sequence

from ...model.catalogue import C, Threshold
from ...model.served import PromptRecord, ServedBefore
from ...model.sources import documents_of
from ...model.verdict import Reason, Verdict
from ..rule import Judged, Rule


class SeenPrompt(Rule):
    code = "seen_prompt"
    protects = ("a cell whose server had already answered one of its prompts, or text one of "
                "them contains (an earlier cell's, or the warmup's), without the plan asking for "
                "it (prompt_reuse): an engine that learns across requests (llama.cpp ngram-mod, "
                "SGLang NGRAM, a prefix cache) then measures its memory, not the config")
    thresholds = (Threshold("prompt_reuse", False),)
    order = 60

    def judge(self, verdict: Verdict, cell: Judged) -> Verdict:
        return judge_history(verdict, cell.facts.served_before, cell.prompts,
                             bool(self.limit(cell, "prompt_reuse")))


def judge_history(verdict: Verdict, served: ServedBefore | None, prompts: Sequence[PromptRecord],
                  allowed: bool) -> Verdict:
    """An ok or invalid cell whose server had served one of its prompts, or a document one of
    them was built from, becomes ``invalid`` with ``seen_prompt`` (unless ``allowed``)."""
    if served is None or allowed or verdict.status not in ("ok", "invalid"):
        return verdict
    shas, docs = set(served.prompts), set(served.documents)
    same = sum(p.sha in shas for p in prompts)
    shared = sum(bool(docs.intersection(documents_of(p.sources))) for p in prompts)
    if not same and not shared:
        return verdict
    reason = Reason(C.seen_prompt, (
        f"{same} of {len(prompts)} prompts were answered before by this server, {shared} share a "
        f"document with what it answered before ({len(served.cells)} earlier cells, "
        f"{served.requests} requests, warmup included); the cell measured what the server "
        f"remembers. Give each cell fresh prompts (the default), or set prompt_reuse: true to "
        f"study a warm server"))
    return Verdict("invalid", (*verdict.reasons, reason), verdict.failed)
