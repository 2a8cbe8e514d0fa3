"""``source: random`` (issue 41): token ids as ``vllm bench serve``'s default random dataset
sends them (vllm/benchmarks/datasets, RandomDataset: tests/PROTOCOLS.md), each request a
document of the book so cells stay fresh. No server (under a second)."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from specbench_lib.model.workloadparams import WorkloadParams
from specbench_lib.prompts.corpora import Corpora
from specbench_lib.prompts.randomtokens import random_ids

SMOL = {"name": "rand", "source": "random", "vocab_size": 49152,
        "special_ids": list(range(17))}


def vllm_ids(vocab: int, special: set[int], index: int, length: int, seed: int = 0) -> list[int]:
    """vLLM's RandomDataset at range_ratio 0, written out: lengths drawn (nothing taken from the
    generator at a one-value range), then one offset per request, then consecutive allowed ids."""
    rng = np.random.default_rng(seed)
    rng.integers(length, length + 1, size=index + 1)  # input lengths
    rng.integers(128, 129, size=index + 1)  # output lengths
    offsets = rng.integers(0, vocab, size=index + 1)
    allowed = np.array(sorted(set(range(vocab)) - special))
    return allowed[(offsets[index] + index + np.arange(length)) % len(allowed)].tolist()


@pytest.mark.parametrize("index", [0, 1, 7, 999])
def test_ids_are_vllms_random_dataset(index: int) -> None:
    workload = WorkloadParams.model_validate(SMOL)
    assert random_ids(workload, index, 64, 0) == vllm_ids(49152, set(range(17)), index, 64)
    assert not set(random_ids(workload, index, 4096, 0)) & set(range(17))  # no special id


def test_the_book_hands_out_distinct_exact_prompts_of_the_pool() -> None:
    workload = WorkloadParams.model_validate(SMOL)
    corpora = Corpora(0, lambda text: [1])  # the text of a pool document is never sent
    prompts = [corpora.prompt(workload, 256, i, 8) for i in range(8)]
    assert all(len(p.tokens) == 256 for p in prompts)
    assert len({tuple(p.tokens) for p in prompts}) == 8
    assert all(p.sources[0].startswith("random:") for p in prompts)


def test_random_needs_the_vocabulary_size_and_only_it_takes_one() -> None:
    with pytest.raises(ValidationError, match="vocab_size"):
        WorkloadParams(name="r", source="random")
    with pytest.raises(ValidationError, match="vocab_size"):
        WorkloadParams(name="c", source="humaneval", vocab_size=10)
