"""The documents a prompt book hands out: one seeded shuffle per corpus, walked in order.

A walk either never returns to a document (a server that keeps its memory for the whole run
must never see text twice) or, once told to (:meth:`wrap`, the warmup's documents set aside where needed),
wraps around the rest (servers that forget before every cell: a document may come back in a
later cell, never within one). A group is one cell's prompts: documents disjoint within it
when a config learns from text (an n-gram pool), else, when the corpus is too short for
that, prompts spread over the corpus with distinct first documents (a prefix cache matches
only from a prompt's first token, so shared material later in a prompt is not remembered).
"""

from __future__ import annotations

import json
import random
import zlib
from collections.abc import Callable

from ..core.errors import PreflightError
from ..model.workloadparams import WorkloadParams
from .chat import ChatFrame, Render, with_options
from .conversations import first_turn, plain_render
from .randomtokens import random_prompt
from .sources import source_of
from .workload import MIN_MATERIAL, Prompt, frame_of, in_frame, task_frame, task_prompt

Tokenize = Callable[[str], list[int]]


def corpus_of(workload: WorkloadParams, index: int = 0) -> str:
    """The corpus prompt ``index`` of a workload draws from (workloads of one corpus share it)."""
    return source_of(workload.source).corpus(workload, index)


class Corpora:
    """Seeded, shuffled documents per corpus, handed out in order."""

    def __init__(self, seed: int, tokenize: Tokenize, *, count_only: bool = False,
                 render: Render | None = None) -> None:
        # the engine's chat render (messages → ids; None: conversations use plain_render)
        self.seed, self.tokenize, self.render = seed, tokenize, render
        # the chat template's frame per set of template options, once rendered
        self._frames: dict[str, ChatFrame | None] = {}
        self.count_only = count_only  # a feasibility check: documents walked, no ids kept
        self.orders: dict[str, list[tuple[str, str]]] = {}
        self.cursor: dict[str, int] = {}
        self.floor: dict[str, int] = {}  # documents before it are the warmup's (cyclic walks)
        self.cyclic = False
        self.walked: dict[str, int] = {}  # documents taken per corpus since the group began
        self._spread: dict[str, tuple[int, int, int]] = {}  # corpus → (start, step, next rank)
        self.made = 0
        self.probe: tuple[str, list[int]] = ("", [])  # the first document and its ids

    def wrap(self, *, set_aside: bool) -> None:
        """Walk round and round from now on, setting aside what was handed out so far (the
        warmup's documents) when ``set_aside``: a restarted server warms up before its cell."""
        self.floor, self.cyclic = (dict(self.cursor) if set_aside else {}), True

    def room(self, corpus: str) -> int:
        """The documents a cyclic walk of ``corpus`` goes over (the warmup's set aside)."""
        return len(self.orders[corpus]) - self.floor.get(corpus, 0)

    def prompt(self, workload: WorkloadParams, tokens: int, index: int, total: int) -> Prompt:
        """Prompt ``index`` of a cell: ``tokens`` tokens from the next documents of its corpus
        (with ``template: chat``, the template's frame around them, :mod:`.chat`)."""
        self.made += 1
        kind = source_of(workload.source).spec.kind
        if kind == "conversation":  # one question a prompt, at its own length (tokens: a cap)
            _, used = self._material(workload, corpus_of(workload), 1, total)
            return first_turn(workload, used[0], tokens, self.conversation_render(workload))
        if kind == "tokens":  # vLLM's random dataset: request i of its pool
            _, used = self._material(workload, corpus_of(workload), 1, total)
            return random_prompt(workload, used[0], tokens, self.seed)
        frame = self.frame(workload)
        inner = tokens - (frame.size if frame is not None else 0)
        if inner < MIN_MATERIAL:
            raise PreflightError(f"workload {workload.name!r}: the chat template takes "
                                 f"{tokens - inner} of a {tokens}-token prompt, leaving less than "
                                 f"{MIN_MATERIAL} for the document: raise the context",
                                 what="workload")
        found = (self._framed(workload, inner, index, total) if kind == "frame"
                 else self._document(workload, inner, total))
        return found if self.count_only else in_frame(frame, found, tokens, workload)

    def _document(self, workload: WorkloadParams, tokens: int, total: int) -> Prompt:
        """Documents joined and cut to ``tokens``; natural: one whole document (tokens: a cap)."""
        ids, used = self._material(workload, corpus_of(workload),
                                   1 if workload.natural else tokens, total)
        return Prompt(ids[:tokens], tuple(used))

    def _framed(self, workload: WorkloadParams, tokens: int, index: int, total: int) -> Prompt:
        """A task frame (copyedit, grounded) around material from the corpus: instruction +
        material + answer opening, the task text never cut."""
        kind, head_ids, tail_ids, room = task_frame(workload.source, index, tokens, self.tokenize)
        ids, used = self._material(workload, corpus_of(workload, index),
                                   1 if workload.natural else room, total)
        return task_prompt(workload.source, kind, head_ids, ids, tail_ids, room, used)

    def conversation_render(self, workload: WorkloadParams) -> Render:
        """How a conversation's messages become ids: the model's chat template with
        ``template: chat`` (where the engine's render is known), else the contents joined."""
        if workload.template == "chat" and self.render is not None:
            return with_options(self.render, workload.chat_template_kwargs)
        return plain_render(self.tokenize)

    def frame(self, workload: WorkloadParams) -> ChatFrame | None:
        """The chat frame of ``workload``'s prompts (None: raw). A feasibility check without a
        chat render counts the document as filling the whole prompt (more text than it needs:
        the conservative side)."""
        if workload.template == "raw" or (self.render is None and self.count_only):
            return None
        key = json.dumps(workload.chat_template_kwargs, sort_keys=True, default=str)
        if self._frames.get(key) is None:
            self._frames[key] = frame_of(workload, self.render, self.tokenize)
        return self._frames[key]

    def group(self, workload: WorkloadParams, tokens: int, n: int, total: int, *,
              learns: str | None, prefix_cache: bool) -> list[Prompt]:
        """One cell's ``n`` prompts on a cyclic walk: disjoint documents if the corpus holds
        them; else, when no config learns from text, prompts spread over the corpus (distinct
        first documents when the servers keep a prefix cache; without one a server remembers
        nothing between requests, and prompts may repeat); else a :class:`PreflightError`
        naming the numbers and the fixes."""
        mark = dict(self.cursor)
        self.walked = {}
        prompts = [self.prompt(workload, tokens, i, total) for i in range(n)]
        over = {c: k for c, k in self.walked.items() if k > self.room(c)}
        if not over:
            return prompts
        corpus, need = next(iter(over.items()))
        if learns is not None:
            room = self.room(corpus)
            fit = max(1, n * room // need) if room else 0
            raise PreflightError(
                f"workload {workload.name!r}: one cell's {n} prompts of "
                f"{_size(workload, f'{tokens} tokens')} need "
                f"{need} documents of {corpus}, which has {room} (after the warmup's "
                f"{self.floor.get(corpus, 0)}); a config keeps state that learns from text "
                f"({learns}), so no document may repeat within a cell: lower requests_per_cell "
                f"to {fit} or the context, or use a larger dataset", what="workload")
        self.cursor = mark
        counts: dict[str, int] = {}
        for i in range(n):
            counts[corpus_of(workload, i)] = counts.get(corpus_of(workload, i), 0) + 1
        for c, k in counts.items():
            if prefix_cache and k > self.room(c):
                raise PreflightError(
                    f"workload {workload.name!r}: one cell's {k} prompts need distinct first "
                    f"documents of {c}, which has {self.room(c)} (after the warmup's "
                    f"{self.floor.get(c, 0)}), as the servers keep a prefix cache "
                    f"(engine.prefix_cache: true): lower requests_per_cell (or the load "
                    f"points, with requests_scale: per_concurrency) to {self.room(c)} a cell, "
                    f"turn the prefix cache off, or use a larger dataset", what="workload")
            self._spread[c] = (mark[c], max(1, self.room(c) // k), 0)
        try:
            return [self.prompt(workload, tokens, i, total) for i in range(n)]
        finally:
            for c, k in counts.items():
                self.cursor[c] = self._at(c, mark[c] + k)
            self._spread = {}

    def _at(self, corpus: str, position: int) -> int:
        floor = self.floor.get(corpus, 0)
        return floor + (position - floor) % self.room(corpus)

    def _material(self, workload: WorkloadParams, corpus: str, tokens: int,
                  total: int) -> tuple[list[int], list[str]]:
        docs = self._order(workload, corpus)
        at = self.cursor[corpus]
        if corpus in self._spread:  # a spread group: this prompt's own first document
            start, step, rank = self._spread[corpus]
            at = self._at(corpus, start + rank * step)
            self._spread[corpus] = (start, step, rank + 1)
        ids: list[int] = []
        used: list[str] = []
        counted = 0
        while counted < tokens:
            if at >= len(docs) and self.cyclic:
                at = self.floor.get(corpus, 0)
            if at >= len(docs) or (self.cyclic and len(used) >= self.room(corpus)):
                raise self._ran_out(workload, corpus, tokens, total, len(used))
            doc_id, text = docs[at]
            at += 1
            found = self.tokenize(text + "\n\n")
            if not self.probe[0]:
                self.probe = (text + "\n\n", list(found))
            counted += len(found)
            if not self.count_only:
                ids += found
            used.append(doc_id)
            if (self.cyclic and corpus not in self._spread
                    and self.walked.get(corpus, 0) + len(used) > self.room(corpus)):
                break  # a group past one lap of its corpus: it is spread instead (group)
        self.walked[corpus] = self.walked.get(corpus, 0) + len(used)
        if corpus not in self._spread:
            self.cursor[corpus] = at
        return ids, used

    def _ran_out(self, workload: WorkloadParams, corpus: str, tokens: int, total: int,
                 used: int) -> PreflightError:
        docs = len(self.orders[corpus])
        if self.cyclic:
            return PreflightError(
                f"workload {workload.name!r}: one {tokens}-token prompt needs more text than "
                f"the {self.room(corpus)} documents of {corpus} hold (after the warmup's "
                f"{self.floor.get(corpus, 0)}); lower the context, or use a larger dataset",
                what="workload")
        return PreflightError(
            f"workload {workload.name!r}: the {docs} documents of {corpus} ran out at prompt "
            f"{self.made} of the plan's {total} ({_size(workload, f'{tokens}-token material')}); "
            f"a server that keeps "
            f"its memory across cells (isolation none) needs fresh documents for every prompt "
            f"of the run, so this plan needs more text: let every cell's server forget before "
            f"it (engine.isolation: auto, flush or restart; then prompts need to be fresh only "
            f"within a cell), lower requests_per_cell, load points, contexts or repeats, use a "
            f"larger dataset, or set prompt_reuse: true (cells then share prompts)",
            what="workload")

    def _order(self, workload: WorkloadParams, corpus: str) -> list[tuple[str, str]]:
        if corpus not in self.orders:
            docs = list(source_of(workload.source).corpus_documents(workload, corpus))
            random.Random(zlib.crc32(f"{self.seed}:{corpus}".encode())).shuffle(docs)
            self.orders[corpus], self.cursor[corpus] = docs, 0
        return self.orders[corpus]


def _size(workload: WorkloadParams, size: str) -> str:
    """What one prompt of ``workload`` takes from its corpus, for a refusal: ``size``, or one
    document or question (prompts of natural length are one each)."""
    if workload.natural:
        return "one question each" if workload.conversational else "one whole document each"
    return size
