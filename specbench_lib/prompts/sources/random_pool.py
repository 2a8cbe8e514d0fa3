"""``source: random``: random token ids as ``vllm bench serve``'s random dataset sends them
(:mod:`~specbench_lib.prompts.randomtokens`), request ``i`` of a pool of :data:`RANDOM_POOL` a
document of the prompt book (``random:<i>``), so the book's freshness rules hold as for any
corpus."""

from __future__ import annotations

from ...model.workloadparams import WorkloadParams
from .base import Document, Source

RANDOM_POOL = 10_000  # the requests of its pool, each a document


class RandomPool(Source):
    def documents(self, workload: WorkloadParams) -> list[Document]:
        return [(f"random:{i}", f"random:{i}") for i in range(RANDOM_POOL)]

    def corpus(self, workload: WorkloadParams, index: int) -> str:
        return f"random:{workload.vocab_size}"


SOURCE = RandomPool("random")
