"""Acceptance of a draft chain or tree, in closed form and drawn (tests and benchmarks only).

A drafter proposes, at each depth, candidates ranked by its confidence; the target accepts the
rank-1 candidate with probability α (the per-token acceptance of a chain: Leviathan et al.'s
model), otherwise the right token is the drafter's rank-k candidate with probability
(1 − α)·s·(1 − s)^(k−2): ``s`` is the share of a miss the drafter's next choice holds, the
tree's whole gain (s = 0: a tree is never better than its chain). A chain of block B is the
rank-1 path of depth B − 1 (B tokens verified, at most B gained a step); a tree of N nodes is the
N most probable paths (DDTree's best-first tree under a node budget), depth at most the drafter's
block − 1. Expected tokens a verify step (τ, the bonus token included) = 1 + the sum of the
tree's path probabilities.
"""

from __future__ import annotations

import heapq
import random
from functools import lru_cache

Path = tuple[int, ...]


def rank_prob(rank: int, alpha: float, share: float) -> float:
    """The probability the target's token is the drafter's ``rank``-th candidate."""
    if rank == 1:
        return alpha
    return (1.0 - alpha) * share * (1.0 - share) ** (rank - 2)


@lru_cache(maxsize=4096)
def tree_paths(nodes: int, depth: int, alpha: float, share: float) -> tuple[Path, ...]:
    """The ``nodes`` most probable paths of depth ≤ ``depth``, best first (each path a tuple of
    ranks; every prefix of a kept path is kept, since a child is never likelier than its parent)."""
    if nodes <= 0 or depth <= 0:
        return ()
    kept: list[Path] = []
    heap: list[tuple[float, Path]] = [(-rank_prob(1, alpha, share), (1,))]
    while heap and len(kept) < nodes:
        neg, path = heapq.heappop(heap)
        kept.append(path)
        prob = -neg
        if len(path) < depth:  # its first child
            heapq.heappush(heap, (-prob * rank_prob(1, alpha, share), (*path, 1)))
        if share > 0:  # its next sibling
            last = path[-1]
            sibling = prob / rank_prob(last, alpha, share) * rank_prob(last + 1, alpha, share)
            if sibling > 0:
                heapq.heappush(heap, (-sibling, (*path[:-1], last + 1)))
    return tuple(kept)


def chain_paths(block: int) -> tuple[Path, ...]:
    """A chain of block B: the rank-1 path, B − 1 drafted tokens."""
    return tuple((1,) * d for d in range(1, block))


def expected_tau(paths: tuple[Path, ...], alpha: float, share: float) -> float:
    """Expected tokens a verify step: 1 + Σ over the tree's paths of their probability under
    the target (α, share) — a request whose acceptance differs from the drafter's belief sees
    the same tree with other odds."""
    total = 1.0
    probs: dict[Path, float] = {(): 1.0}
    for path in sorted(paths, key=len):
        prob = probs[path[:-1]] * rank_prob(path[-1], alpha, share)
        probs[path] = prob
        total += prob
    return total


def chain_tau(block: int, alpha: float) -> float:
    """(1 − α^B) / (1 − α): the chain's τ in closed form."""
    if alpha >= 1.0:
        return float(block)
    return (1.0 - alpha**block) / (1.0 - alpha)


def solve_alpha(block: int, tau: float) -> float:
    """The α whose chain of ``block`` gives ``tau`` (bisection; τ rises with α)."""
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if chain_tau(block, mid) < tau else (lo, mid)
    return (lo + hi) / 2


class StepDraw:
    """Draws one request's accepted tokens a verify step: the target walks the tree, taking the
    drafter's rank-k candidate with :func:`rank_prob`, and stops at the first one not in it."""

    def __init__(self, paths: tuple[Path, ...], alpha: float, share: float, rng: random.Random) -> None:
        self.kept = frozenset(paths)
        self.alpha, self.share, self.rng = alpha, share, rng

    def _rank(self) -> int:
        if self.rng.random() < self.alpha:
            return 1
        if self.share <= 0:
            return 0  # a rank no tree holds
        rank = 2
        while self.rng.random() >= self.share:
            rank += 1
        return rank

    def accepted(self) -> int:
        """Drafted tokens accepted this step (the bonus token not counted)."""
        path: Path = ()
        while True:
            nxt = (*path, self._rank())
            if nxt not in self.kept:
                return len(path)
            path = nxt
