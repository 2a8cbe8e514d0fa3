"""``source: random``: token ids as ``vllm bench serve``'s default random dataset sends them.

vLLM's ``RandomDataset`` (``vllm/benchmarks/datasets``; file and lines in tests/PROTOCOLS.md)
draws, from ``numpy.random.default_rng(seed)`` (seed 0 by default), each request's input and
output length (the same value at its default ``range_ratio`` 0: such a draw takes nothing from
the generator) and then an ``offset`` per request, ``rng.integers(0, vocab_size)``. Request
``i``'s ids are ``allowed[(offset_i + i + arange(input_len)) % len(allowed)]``, ``allowed``
being every id below the vocabulary size but the tokenizer's special ones: a run of
consecutive vocabulary ids, no word of any language, no repeated n-gram. vLLM then decodes the
ids to text and the server tokenizes it again (a few ids merge); here the ids are sent as
they are, so a prompt is exactly the cell's context.

Request ``i`` is the ``i``-th of a pool of ``sources.random_pool.RANDOM_POOL``, a document of
the prompt book (its source ``random:<i>``), so the book's freshness rules hold as for any
corpus.
"""

from __future__ import annotations

from functools import lru_cache

from ..core.errors import PreflightError
from ..model.workloadparams import WorkloadParams
from .sources.random_pool import RANDOM_POOL
from .workload import Prompt


@lru_cache(maxsize=4)
def _offsets(vocab_size: int, seed: int) -> tuple[int, ...]:
    import numpy as np

    return tuple(int(v) for v in np.random.default_rng(seed).integers(0, vocab_size, size=RANDOM_POOL))


def _allowed_at(k: int, special: tuple[int, ...]) -> int:
    """The ``k``-th id of the vocabulary without the ``special`` ids (sorted, distinct, inside
    it): counted past the special ids at or below it, never a list of every id."""
    for s in special:
        if s > k:
            break
        k += 1
    return k


def random_ids(workload: WorkloadParams, index: int, length: int, seed: int) -> list[int]:
    """Request ``index``'s ``length`` ids (see the module)."""
    if workload.vocab_size is None:
        raise PreflightError(f"workload {workload.name!r}: source random needs vocab_size (the "
                             f"model's vocabulary, e.g. n_vocab of llama-server's /v1/models)",
                             what="workload")
    special = tuple(sorted({i for i in workload.special_ids if 0 <= i < workload.vocab_size}))
    allowed = workload.vocab_size - len(special)  # params refuse a vocabulary none is left of
    offset = _offsets(workload.vocab_size, seed)[index]
    return [_allowed_at((offset + index + j) % allowed, special) for j in range(length)]


def random_prompt(workload: WorkloadParams, source: str, tokens: int, seed: int) -> Prompt:
    """The prompt of pool document ``source`` (``random:<i>``), ``tokens`` ids long."""
    index = int(source.rsplit(":", 1)[-1])
    return Prompt(random_ids(workload, index, tokens, seed), (source,))
