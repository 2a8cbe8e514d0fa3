"""A task frame around corpus material (``copyedit``, ``grounded``): an instruction, material
cut to fit, and the opening of the answer; code from HumanEval for even requests, text from
ShareGPT for odd ones (each request starts at its own document of a seeded shuffle)."""

from __future__ import annotations

from ...model.workloadparams import WorkloadParams
from .base import Document, PackageSource, Source

Frame = tuple[str, str, str]  # kind (code, text), instruction, answer opening


class FrameSource(Source):
    """A frame source: its two frames (code, text) and the corpus of each."""

    def __init__(self, name: str, frames: tuple[Frame, Frame], *, code: PackageSource,
                 text: PackageSource) -> None:
        super().__init__(name)
        self.frames = frames
        self.material = {"code": code, "text": text}

    def frame(self, index: int) -> Frame:
        """Prompt ``index``'s frame: code for even prompts, text for odd."""
        return self.frames[index % 2]

    def documents(self, workload: WorkloadParams | None = None) -> list[Document]:
        return self.material["code"].documents() + self.material["text"].documents()

    def corpus(self, workload: WorkloadParams, index: int) -> str:
        return self.material[self.frame(index)[0]].name

    def corpus_documents(self, workload: WorkloadParams, corpus: str) -> list[Document]:
        found = [s for s in self.material.values() if s.name == corpus]
        return found[0].documents()
