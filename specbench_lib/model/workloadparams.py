"""A workload of the params (:class:`WorkloadParams`, one entry of ``workloads``): its source
(:mod:`~.sources`: each one's needs as data), file, lengths, stop, template, turns and
categories; validated as the other sections are (:mod:`~.sections`).
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field, model_validator

from .sections import Strict
from .sources import CONVERSATION_SOURCES, SOURCES, SourceName, meanings
from .valuechecks import check_template_options, check_vocabulary


class WorkloadParams(Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")  # the workload's label in cell ids and tables
    source: SourceName = Field(description=meanings())  # model/sources.py: each one's needs
    # the JSONL file (jsonl; spec_bench: its question.jsonl; speed_bench: prepare_data.py's folder),
    # relative to the params file as extends is (else to the working directory, the project root)
    path: str | None = None
    field: str = "text"  # the JSONL field holding each document's text
    # the longest of the plan's contexts this workload runs at (its corpus holds no more text
    # than that: HumanEval is about 26k tokens); the plan's longer contexts leave it out
    max_context: int | None = Field(None, ge=1)
    # length: every answer exactly output_tokens long (the end of sequence ignored, ignore_eos);
    # eos: answers end where the model ends them, output_tokens only a cap (docs/workloads.md)
    stop: Literal["length", "eos"] = "length"
    # raw: the document's tokens as they are; chat: the document sent as the user's turn in the
    # model's own chat template, with the generation prompt (the answer is the assistant's
    # turn); the template's tokens count in the prompt's planned length (docs/workloads.md)
    template: Literal["raw", "chat"] = "raw"
    # the chat template's options in every render, e.g. {enable_thinking: false} (Qwen3)
    chat_template_kwargs: dict[str, Any] = Field(default_factory=dict)
    # conversations (sources mtbench, spec_bench, speed_bench; docs/workloads.md) send questions
    # at their own length, the cell's context their cap. turn 1: the first question timed; 2: each
    # conversation's turn 1 sent first (untimed, same server), the second question timed with
    # the model's own answer in its prompt
    turn: Literal[1, 2] = 1
    # one workload per category, named name-category, e.g. mt-math (all: every category of the
    # source; two_turns: those with a second turn), so panels, tables and figures are per category
    categories: tuple[str, ...] | Literal["all", "two_turns"] | None = None
    category: str | None = None  # the one category of questions it runs (None: every one)
    # natural: one document a prompt at its own length, not cut or padded, the cell's context its
    # cap (the smallest of the plan's); exact: documents joined and cut to each context. None:
    # exact, natural for conversations (which are natural only)
    length: Literal["exact", "natural"] | None = None
    # source random: the model's vocabulary size and special ids (never sent), as vLLM's
    # random dataset reads them from the tokenizer (docs/workloads.md)
    vocab_size: int | None = Field(None, ge=2)
    special_ids: tuple[int, ...] = ()  # source random: the tokenizer's special ids, never sent

    @property
    def conversational(self) -> bool:
        """Whether prompts are conversations (questions at their own length, turns)."""
        return SOURCES[self.source].conversational

    @property
    def thinking(self) -> bool:
        """Whether the plan asks for answers that reason first (``enable_thinking: true``)."""
        return self.chat_template_kwargs.get("enable_thinking") is True

    @property
    def natural(self) -> bool:
        """Whether prompts are sent at their own length (the cell's context their cap)."""
        return self.conversational or self.length == "natural"

    def runs_at(self, context: int) -> bool:
        return self.max_context is None or context <= self.max_context

    @model_validator(mode="after")
    def _path_for_jsonl(self) -> WorkloadParams:
        spec = SOURCES[self.source]
        if spec.path and not self.path:
            raise ValueError(f"source {self.source!r} needs 'path' ({spec.path})")
        if not self.conversational and (self.turn != 1 or self.categories or self.category):
            raise ValueError(f"'turn', 'categories' and 'category' are for the conversation "
                             f"sources {list(CONVERSATION_SOURCES)}, not {self.source!r}")
        if spec.vocab != (self.vocab_size is not None):
            takes = [s for s, found in SOURCES.items() if found.vocab]
            raise ValueError(f"source {takes[0]!r} needs vocab_size (the model's vocabulary "
                             f"size), and only it takes one" if len(takes) == 1 else
                             f"only the sources {takes} take vocab_size, and they need one")
        if self.conversational and self.length == "exact":
            raise ValueError(f"source {self.source!r} sends questions at their own length: "
                             f"length 'natural' (or none), not 'exact'")
        if self.chat_template_kwargs and self.template != "chat":
            raise ValueError("chat_template_kwargs need template: chat")
        check_template_options(self.chat_template_kwargs)
        check_vocabulary(self.vocab_size, self.special_ids)
        if self.categories is not None and self.category is not None:
            raise ValueError("give 'categories' (one workload each) or 'category', not both")
        wanted = () if self.categories in (None, "all", "two_turns") else tuple(self.categories)
        picked = wanted + ((self.category,) if self.category else ())
        fixed = spec.categories
        unknown = [c for c in picked if fixed is not None and c not in fixed]
        if unknown or not all(picked) or len(set(wanted)) < len(wanted):
            raise ValueError("categories must be distinct names"
                             + (f"; {spec.title}'s are {list(fixed or ())}, not {unknown}"
                                if unknown else f", got {list(picked)}"))
        return self

    def per_category(self, found: tuple[str, ...] = ()) -> tuple[WorkloadParams, ...]:
        """The workloads ``categories`` expands into (itself when it has none): one per
        category, named ``<name>-<category>``; ``all`` takes the source's fixed categories
        (MT-Bench's eight), or ``found`` (the categories of its file, in order)."""
        if self.categories is None:
            return (self,)
        fixed = SOURCES[self.source].categories
        names = (self.categories if self.categories not in ("all", "two_turns") else
                 fixed if fixed is not None else found)
        return tuple(self.model_copy(update={
            "name": f"{self.name}-{re.sub(r'[^A-Za-z0-9_.-]', '_', c)}", "categories": None,
            "category": c}) for c in names)
