"""Simulated panels with a known truth, at the level of the claim's units (specbench_lib/claim.py).

The model (the issue's): k configs with true output tok/s ``rates``; each prompt has a speed
factor exp(``prompt_sd`` · z) shared by every config (the prompt book sends the same prompts to
all); each request adds noise exp(``noise_sd`` · e) of its own; every request asks for
``tokens`` tokens, so its time is tokens / (rate · factor · noise). A round sends
``per_round`` fresh prompts to each config it measures. The estimator is the claim's (ratio of
sums, paired by prompt), so the truth of a speedup is the ratio of the rates.

:func:`fixed` measures every config every round and makes one claim at α (a fixed plan);
:func:`sequential` is the budgeted sweep's contest (as :class:`specbench_lib.analysis.rounds.Contention`
runs it): after each round (from the first when it gives each config two requests), a claim
at the look's spent error over every config measured so far; the configs out of the set are
no longer measured (the baseline always is); it stops once the claim is decided, or after the
last round, whose look spends what is left.
Each slice of a round costs ``start_s`` plus its requests' decode time (:func:`cost`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from specbench_lib.analysis.claim import MIN_LOOK_ALPHA, Claim, Units, claim, look_alpha

ISSUE_RATES = {"auto": 31.8, "ngram-b4": 34.2, "ngram-b8": 33.4, "ngram-b16": 32.1,
               "ngram-b32": 29.5, "draft-b4": 15.9, "ngram-b2": 33.0, "ngram-b64": 28.0}


@dataclass(frozen=True)
class Design:
    """A simulated panel: true rates (the first is the baseline), requests a round, rounds."""

    rates: tuple[tuple[str, float], ...]
    per_round: int
    rounds: int
    prompt_sd: float = 0.25
    noise_sd: float = 0.10
    tokens: int = 64
    start_s: float = 5.0  # a config's server start, warmup and stop per slice

    @property
    def names(self) -> list[str]:
        return [n for n, _ in self.rates]

    @property
    def best(self) -> float:
        return max(r for _, r in self.rates)

    def rate(self, name: str) -> float:
        return dict(self.rates)[name]


def issue_design(k: int, per_round: int, rounds: int, **kw: Any) -> Design:
    """The issue's effect sizes: auto and the first k − 1 other configs of :data:`ISSUE_RATES`."""
    return Design(tuple(list(ISSUE_RATES.items())[:k]), per_round, rounds, **kw)


class Panel:
    """The units measured so far of one simulated panel."""

    def __init__(self, design: Design, rng: np.random.Generator) -> None:
        self.design, self.rng = design, rng
        self.data: dict[str, list[tuple[tuple[int, int], float, float]]] = {
            n: [] for n in design.names}
        self.seconds = 0.0

    def measure(self, number: int, configs: list[str]) -> None:
        """Round ``number``: ``per_round`` fresh prompts to each of ``configs``."""
        d = self.design
        factor = np.exp(d.prompt_sd * self.rng.standard_normal(d.per_round))
        for name in configs:
            noise = np.exp(d.noise_sd * self.rng.standard_normal(d.per_round))
            took = d.tokens / (d.rate(name) * factor * noise)
            self.data[name] += [((number, i), float(d.tokens), float(t))
                                for i, t in enumerate(took)]
            self.seconds += cost(d, float(took.sum()))

    def units(self) -> dict[str, Units]:
        found = {}
        for name, rows in self.data.items():
            if rows:
                ids, tokens, secs = zip(*rows, strict=True)
                found[name] = Units(tuple(ids), np.array(tokens), np.array(secs), len(rows))
        return found


def cost(design: Design, decode_s: float) -> float:
    """A slice's seconds: the server's start, warmup and stop, then its requests."""
    return design.start_s + decode_s


def fixed(design: Design, rng: np.random.Generator, *, equivalence: float = 0.05) -> Claim:
    """Every config every round, one claim at α (a fixed plan)."""
    panel = Panel(design, rng)
    for number in range(design.rounds):
        panel.measure(number, design.names)
    return claim(panel.units(), design.names, design.names[0], equivalence=equivalence)


@dataclass
class Outcome:
    claim: Claim
    rounds: int
    seconds: float
    decided_s: float | None


def sequential(design: Design, rng: np.random.Generator, *, equivalence: float = 0.05,
               spending: str = "obf", budget_s: float | None = None,
               kind: type[Panel] = Panel) -> Outcome:
    """The budgeted contest (see the module); with ``budget_s`` a round starts only while its
    predicted cost (the last round's) fits what is left (``kind``: the panel's wall clock)."""
    panel = kind(design, rng)
    members, base = list(design.names), design.names[0]
    spent, found, last_cost = 0.0, None, 0.0
    for number in range(design.rounds):
        active = [c for c in design.names if c in members or c == base]
        before = panel.seconds
        panel.measure(number, active)
        last_cost = panel.seconds - before
        last = number + 1 == design.rounds or (
            budget_s is not None and panel.seconds + last_cost > budget_s)
        if number < (0 if design.per_round >= 2 else 1) and not last:
            continue
        alpha = look_alpha(number + 1, design.rounds, spent, last=last, kind=spending)
        if alpha < MIN_LOOK_ALPHA:
            continue
        spent += alpha
        found = claim(panel.units(), design.names, base, alpha=alpha, equivalence=equivalence)
        members = list(found.members)
        if found.decided:
            return Outcome(found, number + 1, panel.seconds, panel.seconds)
        if last:
            break
    assert found is not None
    return Outcome(found, number + 1, panel.seconds, None)

