"""What one server has answered so far (its cells, prompts and documents): the evidence a cell
keeps of what came before it on its server (``served_before``, ``seen_prompt``)."""

from __future__ import annotations

from collections.abc import Sequence

from ..model.served import PromptRecord, ServedBefore
from ..model.sources import documents_of
from .workload import Prompt


class History:
    """What one server has answered so far: the cells, and the prompts and documents sent."""

    def __init__(self) -> None:
        self.cells: list[str] = []
        self.prompts: list[PromptRecord] = []

    def add(self, name: str, prompts: Sequence[PromptRecord]) -> None:
        self.cells.append(name)
        self.prompts += prompts

    def before(self) -> ServedBefore:
        docs = sorted({d for p in self.prompts for d in documents_of(p.sources)})
        return ServedBefore(cells=tuple(self.cells), requests=len(self.prompts),
                            prompts=tuple(p.sha for p in self.prompts), documents=tuple(docs))


def prompt_records(prompts: Sequence[Prompt]) -> tuple[PromptRecord, ...]:
    return tuple(PromptRecord(p.sha, len(p.tokens), tuple(p.sources)) for p in prompts)
