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

With a time budget the repeats are the sweep's rounds (:mod:`~specbench_lib.analysis.rounds`): the book draws
round by round (every key of round 0, then of round 1, ...) and keeps the whole rounds the corpus can
feed, at least two (``rounds_fed``); the sweep never plans a round past them.

Fresh prompts are needed only within one server's memory (:class:`Lifetimes`, planned by
:mod:`~specbench_lib.sweep.lifetimes`). When every config's server forgets before each cell (isolation
``restart`` or ``flush``), a cell's prompts need fresh documents only among themselves: the
book then walks each corpus round and round (the warmup's documents set aside where a restart
warms up right before its cell), and every cell
of a workload × context × repeat sends the same prompts whatever its output length and load
point (paired across load points too), the first ``requests_for(cell)`` of them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..core.errors import EngineError, PreflightError
from ..model.cellspec import CellSpec
from ..model.params import SweepParams
from ..servers.engines.base import Isolation
from .chat import Render
from .conversations import reused_prompts
from .corpora import Corpora
from .workload import Prompt

Tokenize = Callable[[str], list[int]]
_WARMUP = ("", -1, -1, -1, -1.0, -1, -1.0, -1)  # the warmup's key sorts first


def cell_key(spec: CellSpec) -> tuple[Any, ...]:
    """The part of a cell's spec that decides its prompts (not the config: configs pair)."""
    return (spec.workload, spec.context, spec.output_tokens, spec.concurrency,
            -1.0 if spec.rate is None else spec.rate,
            -1 if spec.profile_point is None else spec.profile_point, spec.temperature,
            spec.repeat)


@dataclass(frozen=True)
class Lifetimes:
    """How long the plan's servers remember: ``per_cell`` when every config's server forgets
    before each cell (restarted or flushed), so prompts need to be fresh only within a cell;
    ``learns``: the text-learning state a config keeps (then no document repeats within a
    cell; None: distinct first documents suffice); each config's isolation as planned."""

    per_cell: bool = False
    learns: str | None = "not known"
    isolations: Mapping[str, Isolation] = field(default_factory=dict)
    why: str = "one server's memory for the whole run (the conservative default)"


def group_key(key: tuple[Any, ...]) -> tuple[Any, ...]:
    """The cells that send the same prompts when servers forget before each cell: one
    workload × context × repeat, whatever the output length and the load point."""
    return (key[0], key[1], key[-1])


def refused_everywhere(params: SweepParams, cell: CellSpec) -> bool:
    """Whether the context guard refuses ``cell`` in every config (launched servers share the
    plan's context), so it needs no prompts."""
    launched = not any(c.attach for c in params.configs)
    return launched and cell.context + cell.output_tokens > params.engine.context - 1


class PromptBook:
    """The prompts of a plan, built once per sweep with the first server's tokenizer."""

    def __init__(self, params: SweepParams, cells: Sequence[CellSpec],
                 lifetimes: Lifetimes | None = None) -> None:
        self.params = params
        self.lifetimes = lifetimes or Lifetimes()
        counts: dict[tuple[Any, ...], int] = {}
        for cell in cells:
            if refused_everywhere(params, cell):
                continue  # the context guard refuses it in every config: it sends no prompt
            counts[cell_key(cell)] = params.requests_for(cell)
        self.layout = sorted(counts.items())  # (key, requests) in the order prompts are drawn
        self.budgeted = params.time_budget_s is not None and not params.prompt_reuse
        if self.budgeted:  # round by round: a short corpus cuts the last rounds, not a panel
            self.layout.sort(key=lambda item: (item[0][-1], item[0]))
        self.rounds_fed = params.repeats  # whole rounds with prompts (fewer: the corpus ran out)
        self._built: dict[tuple[Any, ...], list[Prompt]] | None = None
        self._probe: tuple[str, list[int]] = ("", [])  # a text and its ids as built
        self._workloads = {w.name: w for w in params.workloads}
        self._corpora: Corpora | None = None
        self._retries: dict[tuple[Any, ...], list[Prompt]] = {}

    def warmup(self, tokenize: Tokenize, render: Render | None = None) -> list[Prompt]:
        """The warmup requests' prompts (sent before a server's first cell, never measured).

        ``render``: the engine's chat template (:data:`~.chat.Render`), needed by workloads
        with ``template: chat``; passed like ``tokenize`` to every method that builds prompts.
        """
        params = self.params
        if params.warmup_requests == 0:
            return []
        if params.prompt_reuse:
            return reused_prompts(params.workloads[0], n=params.warmup_requests,
                                 tokens=min(params.contexts), seed=params.seed, salt="warmup",
                                 tokenize=tokenize, render=render)
        return self._book(tokenize, render)[_WARMUP]

    def for_cell(self, cell: CellSpec, tokenize: Tokenize,
                 render: Render | None = None) -> list[Prompt]:
        params = self.params
        if params.prompt_reuse:
            workload = self._workloads[cell.workload]
            return reused_prompts(workload, n=params.requests_for(cell), tokens=cell.context,
                                 seed=params.seed, salt=f"r{cell.repeat}" if cell.repeat else "",
                                 tokenize=tokenize, render=render)
        return self._book(tokenize, render)[cell_key(cell)]

    def retry(self, cell: CellSpec, attempt: int, tokenize: Tokenize,
              render: Render | None = None) -> list[Prompt] | None:
        """Fresh prompts for attempt ``attempt`` (≥ 1) of ``cell``, measured again because the
        client host spoiled the earlier one: documents no prompt of the run used, drawn after
        the book's (the same in every config that asks, for pairing); None when the corpus has
        no more (the cell keeps its verdict)."""
        params = self.params
        if params.prompt_reuse:
            workload = self._workloads[cell.workload]
            return reused_prompts(workload, n=params.requests_for(cell), tokens=cell.context,
                                 seed=params.seed, salt=f"r{cell.repeat}a{attempt}",
                                 tokenize=tokenize, render=render)
        self._book(tokenize, render)
        key = (*cell_key(cell), attempt)
        if key not in self._retries:
            assert self._corpora is not None
            # this server's tokenizer: the first server's (its client) may be gone by now
            self._corpora.tokenize, self._corpora.render = tokenize, render
            workload = self._workloads[cell.workload]
            n = params.requests_for(cell)
            try:
                self._retries[key] = (
                    self._corpora.group(workload, cell.context, n, n,
                                        learns=self.lifetimes.learns,
                                        prefix_cache=self.params.engine.prefix_cache)
                    if self.lifetimes.per_cell else
                    [self._corpora.prompt(workload, cell.context, i, n) for i in range(n)])
            except PreflightError:
                return None
        return self._retries[key]

    def check(self, tokenize: Tokenize, *, url: str, render: Render | None = None) -> None:
        """Make sure a server tokenizes as the one the prompts were built with did (every server
        of a plan serves one model): a server's first control call, built or not; a mismatch is
        an :class:`EngineError`, a config-level ``bad_answer``."""
        if self.params.prompt_reuse:
            return
        if self._built is None:
            self._book(tokenize, render)
            return
        text, ids = self._probe
        if tokenize(text) != ids:
            raise EngineError("the server tokenizes differently from the server the run's prompts "
                              "were built with (another model or tokenizer?): its prompts would "
                              "not be the planned token counts", url=url)

    def build(self, tokenize: Tokenize, render: Render | None = None) -> int:
        """Walk the corpora for every prompt of the plan, keeping no token ids (a dry run's and
        the doctor's check that the corpus feeds it: a :class:`PreflightError` naming the
        numbers when not); the number of prompts."""
        if self.params.prompt_reuse:
            return 0
        built = self._build(Corpora(self.params.seed, tokenize, count_only=True, render=render))
        return sum(len(v) for v in built.values())

    def _book(self, tokenize: Tokenize,
              render: Render | None = None) -> dict[tuple[Any, ...], list[Prompt]]:
        if self._built is None:
            corpora = Corpora(self.params.seed, tokenize, render=render)
            self._built = self._build(corpora)
            self._probe = corpora.probe
            self._corpora = corpora  # what is left of it feeds the cells measured again
        return self._built

    def _build(self, corpora: Corpora) -> dict[tuple[Any, ...], list[Prompt]]:
        params = self.params
        total = params.warmup_requests + sum(n for _, n in self.layout)
        first = params.workloads[0]
        book = {_WARMUP: [corpora.prompt(first, min(params.contexts), i, total)
                          for i in range(params.warmup_requests)]}
        if self.lifetimes.per_cell:
            # a restarted server warms up right before its cell: the warmup's documents never
            # come back then; a flush after the warmup forgets them
            corpora.wrap(set_aside=any(i.mode == "restart"
                                       for i in self.lifetimes.isolations.values()))
            return {**book, **self._groups(corpora, total)}
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

    def _groups(self, corpora: Corpora, total: int) -> dict[tuple[Any, ...], list[Prompt]]:
        """Servers that forget before each cell: one group of prompts per workload × context ×
        repeat (as many as its largest cell sends), each cell the first of them it needs."""
        sizes: dict[tuple[Any, ...], int] = {}
        for key, n in self.layout:
            sizes[group_key(key)] = max(n, sizes.get(group_key(key), 0))
        groups = {g: corpora.group(self._workloads[g[0]], g[1], n, total,
                                   learns=self.lifetimes.learns,
                                   prefix_cache=self.params.engine.prefix_cache)
                  for g, n in sorted(sizes.items())}
        return {key: groups[group_key(key)][:n] for key, n in self.layout}
