"""The workload sources, each named once with what it sends: a corpus's documents, a task frame
around corpus material, conversations, or a file of one's own.

``engine``-free and import-free below ``model``: params validate a workload's ``source`` and its
keys by the kind here, the prompt builders (``prompts/``) pick documents by it, and a cell rule
(``seen_prompt``) reads a frame's tag by it. A new source is its reader in ``prompts/`` plus
one line here (and its name in ``WorkloadParams.source``, which ``tests/house/test_one_definition.py``
holds equal to this table).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

SourceKind = Literal["corpus", "frame", "conversation", "file", "tokens"]
# corpus: an installed dataset package's documents; frame: an instruction and an answer opening
# around corpus material (HumanEval for even requests, ShareGPT for odd); conversation: questions
# at their own length, turn by turn; file: a JSONL file of one's own (its ``path`` and ``field``);
# tokens: random token ids as vLLM's random dataset sends them (prompts/randomtokens.py)
SOURCES: dict[str, SourceKind] = {
    "humaneval": "corpus",
    "sharegpt": "corpus",
    "copyedit": "frame",
    "grounded": "frame",
    "jsonl": "file",
    "mtbench": "conversation",
    "spec_bench": "conversation",
    "random": "tokens",
    "speed_bench": "conversation",
}
NEEDS_PATH = ("jsonl", "spec_bench", "speed_bench")  # a file (folder) named by ``path``
CONVERSATION_SOURCES = tuple(s for s, kind in SOURCES.items() if kind == "conversation")
FRAME_SOURCES = tuple(s for s, kind in SOURCES.items() if kind == "frame")
# a framed prompt's ``sources`` name its frame as "<source>:<kind>" beside its documents
_FRAME_TAGS = tuple(f"{s}:" for s in FRAME_SOURCES)


def frame_tag(source: str, kind: str) -> str:
    """The tag a framed prompt's ``sources`` carry for its frame (``copyedit:code``)."""
    return f"{source}:{kind}"


def documents_of(sources: Iterable[str]) -> list[str]:
    """A prompt's documents: its ``sources`` without a frame's tag (a frame is no document)."""
    return [d for d in sources if not d.startswith(_FRAME_TAGS)]
