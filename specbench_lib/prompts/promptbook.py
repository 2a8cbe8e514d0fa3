"""Which prompts each cell sends: fresh documents for every cell and repeat, never text its
server has already answered, and the same prompts in every config of a panel.

A server can remember what it served: llama.cpp's ngram-mod keeps one n-gram pool for all
requests, SGLang's n-gram cache and every prefix cache too. Cells that resend earlier prompts
(or text an earlier prompt contained) measure that memory, not the config. So every document of
a corpus (HumanEval, ShareGPT, a JSONL file) is used by at most one prompt of a run: one seeded
shuffle per corpus, consumed in a fixed order by the warmup and then by every cell key (workload
× context × output length × load point × repeat, sorted by value, so the order of the params'
lists does not matter). A cell's prompts depend on its key alone, so every config of a panel
sends the same prompts (paired comparisons) and a resumed cell sends what it would have sent.
``prompt_reuse: true`` (a cache-warm study) keeps the old scheme: prompts by workload ×
context × repeat, shared by the load points.

With a time budget the repeats are the sweep's rounds (:mod:`~.rounds`): the book draws round by
round (every key of round 0, then of round 1, ...) and keeps the whole rounds the corpus can
feed, at least two (``rounds_fed``); the sweep never plans a round past them.
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Callable, Sequence
from typing import Any

from ..core.errors import EngineError, PreflightError
from ..model.params import CellSpec, SweepParams
from ..model.sections import WorkloadParams
from .workload import COPYEDIT, MIN_MATERIAL, Prompt, build_prompts, corpus_documents, documents

Tokenize = Callable[[str], list[int]]
_WARMUP = ("", -1, -1, -1, -1.0, -1, -1)  # the warmup's key sorts first


def cell_key(spec: CellSpec) -> tuple[Any, ...]:
    """The part of a cell's spec that decides its prompts (not the config: configs pair)."""
    return (spec.workload, spec.context, spec.output_tokens, spec.concurrency,
            -1.0 if spec.rate is None else spec.rate,
            -1 if spec.profile_point is None else spec.profile_point, spec.repeat)


class PromptBook:
    """The prompts of a plan, built once per sweep with the first server's tokenizer."""

    def __init__(self, params: SweepParams, cells: Sequence[CellSpec]) -> None:
        self.params = params
        counts: dict[tuple[Any, ...], int] = {}
        for cell in cells:
            counts[cell_key(cell)] = params.requests_for(cell)
        self.layout = sorted(counts.items())  # (key, requests) in the order prompts are drawn
        self.budgeted = params.time_budget_s is not None and not params.prompt_reuse
        if self.budgeted:  # round by round: a short corpus cuts the last rounds, not a panel
            self.layout.sort(key=lambda item: (item[0][-1], item[0]))
        self.rounds_fed = params.repeats  # whole rounds with prompts (fewer: the corpus ran out)
        self._built: dict[tuple[Any, ...], list[Prompt]] | None = None
        self._probe: tuple[str, list[int]] = ("", [])  # a text and its ids as built
        self._workloads = {w.name: w for w in params.workloads}
        self._corpora: _Corpora | None = None
        self._retries: dict[tuple[Any, ...], list[Prompt]] = {}

    def warmup(self, tokenize: Tokenize) -> list[Prompt]:
        """The warmup requests' prompts (sent before a server's first cell, never measured)."""
        params = self.params
        if params.warmup_requests == 0:
            return []
        if params.prompt_reuse:
            return build_prompts(params.workloads[0], n=params.warmup_requests,
                                 tokens=min(params.contexts), seed=params.seed, salt="warmup",
                                 tokenize=tokenize)
        return self._book(tokenize)[_WARMUP]

    def for_cell(self, cell: CellSpec, tokenize: Tokenize) -> list[Prompt]:
        params = self.params
        if params.prompt_reuse:
            workload = self._workloads[cell.workload]
            return build_prompts(workload, n=params.requests_for(cell), tokens=cell.context,
                                 seed=params.seed, salt=f"r{cell.repeat}" if cell.repeat else "",
                                 tokenize=tokenize)
        return self._book(tokenize)[cell_key(cell)]

    def retry(self, cell: CellSpec, attempt: int, tokenize: Tokenize) -> list[Prompt] | None:
        """Fresh prompts for attempt ``attempt`` (≥ 1) of ``cell``, measured again because the
        client host spoiled the earlier one: documents no prompt of the run used, drawn after
        the book's (the same in every config that asks, for pairing); None when the corpus has
        no more (the cell keeps its verdict)."""
        params = self.params
        if params.prompt_reuse:
            workload = self._workloads[cell.workload]
            return build_prompts(workload, n=params.requests_for(cell), tokens=cell.context,
                                 seed=params.seed, salt=f"r{cell.repeat}a{attempt}",
                                 tokenize=tokenize)
        self._book(tokenize)
        key = (*cell_key(cell), attempt)
        if key not in self._retries:
            assert self._corpora is not None
            # this server's tokenizer: the first server's (its client) may be gone by now
            self._corpora.tokenize = tokenize
            workload = self._workloads[cell.workload]
            n = params.requests_for(cell)
            try:
                self._retries[key] = [self._corpora.prompt(workload, cell.context, i, n)
                                      for i in range(n)]
            except PreflightError:
                return None
        return self._retries[key]

    def check(self, tokenize: Tokenize, *, url: str) -> None:
        """Make sure a server tokenizes as the one the prompts were built with did (every server
        of a plan serves one model): a server's first control call, built or not; a mismatch is
        an :class:`EngineError`, a config-level ``bad_answer``."""
        if self.params.prompt_reuse:
            return
        if self._built is None:
            self._book(tokenize)
            return
        text, ids = self._probe
        if tokenize(text) != ids:
            raise EngineError("the server tokenizes differently from the server the run's prompts "
                              "were built with (another model or tokenizer?): its prompts would "
                              "not be the planned token counts", url=url)

    def _book(self, tokenize: Tokenize) -> dict[tuple[Any, ...], list[Prompt]]:
        if self._built is None:
            corpora = _Corpora(self.params.seed, tokenize)
            self._built = self._build(corpora)
            self._probe = corpora.probe
            self._corpora = corpora  # what is left of it feeds the cells measured again
        return self._built

    def _build(self, corpora: _Corpora) -> dict[tuple[Any, ...], list[Prompt]]:
        params = self.params
        total = params.warmup_requests + sum(n for _, n in self.layout)
        first = params.workloads[0]
        book = {_WARMUP: [corpora.prompt(first, min(params.contexts), i, total)
                          for i in range(params.warmup_requests)]}
        for key, n in self.layout:
            workload = self._workloads[key[0]]
            try:
                book[key] = [corpora.prompt(workload, key[1], i, total) for i in range(n)]
            except PreflightError:
                if not self.budgeted or key[-1] < 2:
                    raise
                self.rounds_fed = key[-1]  # rounds 0 .. key[-1] - 1 are whole
                return {k: v for k, v in book.items() if k == _WARMUP or k[-1] < key[-1]}
        return book


class _Corpora:
    """Seeded, shuffled documents per corpus, each handed out once."""

    def __init__(self, seed: int, tokenize: Tokenize) -> None:
        self.seed, self.tokenize = seed, tokenize
        self.orders: dict[str, list[tuple[str, str]]] = {}
        self.cursor: dict[str, int] = {}
        self.made = 0
        self.probe: tuple[str, list[int]] = ("", [])  # the first document and its ids

    def prompt(self, workload: WorkloadParams, tokens: int, index: int, total: int) -> Prompt:
        """Prompt ``index`` of a cell: ``tokens`` tokens from documents no prompt used before."""
        self.made += 1
        if workload.source != "copyedit":
            ids, used = self._material(workload, _corpus(workload), tokens, total)
            return Prompt(ids[:tokens], tuple(used))
        kind, head, tail = COPYEDIT[index % 2]
        head_ids, tail_ids = self.tokenize(head), self.tokenize(tail)
        room = tokens - len(head_ids) - len(tail_ids)
        if room < MIN_MATERIAL:
            raise PreflightError(f"copyedit prompts need at least {tokens - room + MIN_MATERIAL} "
                                 f"tokens, got {tokens}", what="workload")
        corpus = "humaneval" if kind == "code" else "sharegpt"
        ids, used = self._material(workload, corpus, room, total)
        return Prompt(head_ids + ids[:room] + tail_ids, (f"copyedit:{kind}", *used))

    def _material(self, workload: WorkloadParams, corpus: str, tokens: int,
                  total: int) -> tuple[list[int], list[str]]:
        docs = self._order(workload, corpus)
        ids: list[int] = []
        used: list[str] = []
        while len(ids) < tokens:
            at = self.cursor[corpus]
            if at >= len(docs):
                raise PreflightError(
                    f"workload {workload.name!r}: the {len(docs)} documents of {corpus} ran out "
                    f"at prompt {self.made} of the plan's {total} ({tokens}-token material); "
                    f"every cell gets fresh documents, so this plan needs more text: lower "
                    f"requests_per_cell, load points, contexts or repeats, use a larger dataset, "
                    f"or set prompt_reuse: true (cells then share prompts)", what="workload")
            doc_id, text = docs[at]
            self.cursor[corpus] = at + 1
            found = self.tokenize(text + "\n\n")
            if not self.probe[0]:
                self.probe = (text + "\n\n", list(found))
            ids += found
            used.append(doc_id)
        return ids, used

    def _order(self, workload: WorkloadParams, corpus: str) -> list[tuple[str, str]]:
        if corpus not in self.orders:
            docs = list(corpus_documents(corpus) if corpus in ("humaneval", "sharegpt")
                        else documents(workload))
            random.Random(zlib.crc32(f"{self.seed}:{corpus}".encode())).shuffle(docs)
            self.orders[corpus], self.cursor[corpus] = docs, 0
        return self.orders[corpus]


def _corpus(workload: WorkloadParams) -> str:
    """The corpus a workload draws from (workloads of one corpus share its documents)."""
    if workload.source in ("humaneval", "sharegpt"):
        return workload.source
    return f"jsonl:{workload.path}:{workload.field}"
