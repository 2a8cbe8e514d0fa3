"""How a request samples: greedy, or a temperature with top-p, top-k and a per-request seed drawn
from the plan's seed and the prompt (the same in every config of a panel: paired draws where the
engine decides them by the seed)."""

from __future__ import annotations

import zlib
from dataclasses import dataclass, replace
from typing import Any

__all__ = ["Sampling"]


@dataclass(frozen=True)
class Sampling:
    """How a request samples: greedy at ``temperature`` 0 (top-p, top-k and the seed are then not
    sent); ``top_k`` 0 is no top-k cut; ``seed`` the request's own seed, where the engine takes
    one (None: the engine's)."""

    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0
    seed: int | None = None

    @property
    def greedy(self) -> bool:
        return self.temperature == 0

    def fields(self, *, seed_key: str = "seed") -> dict[str, Any]:
        """A request body's sampling fields (none when greedy): the temperature, top-p, top-k
        where it cuts, and the seed under the engine's own name."""
        if self.greedy:
            return {}
        found: dict[str, Any] = {"temperature": self.temperature, "top_p": self.top_p}
        if self.top_k:
            found["top_k"] = self.top_k
        if self.seed is not None:
            found[seed_key] = self.seed
        return found

    def for_prompt(self, prompt: list[int]) -> Sampling:
        """This sampling with a seed drawn from ``seed`` and the prompt's ids: every config of a
        panel sends a prompt with the same seed (paired), different prompts different seeds."""
        if self.greedy:
            return self
        blob = f"{self.seed or 0}:{','.join(map(str, prompt))}".encode()
        return replace(self, seed=zlib.crc32(blob) & 0x7FFFFFFF)
