"""Simulated panels with a known truth, at the level of the claim's units (specbench_lib/claim.py).

The model (the issue's): k configs with true output tok/s ``rates``; each prompt has a speed
factor exp(``prompt_sd`` · z) shared by every config (the prompt book sends the same prompts to
all); each request adds noise exp(``noise_sd`` · e) of its own; every request asks for
``tokens`` tokens, so its time is tokens / (rate · factor · noise). A round sends
``per_round`` fresh prompts to each config it measures, one config after another, in an order
drawn afresh each round (``order`` "shuffled", as the sweep does) or in the plan's order
(``order`` "fixed", as it did before blocks). The machine's speed drifts over the run by
``drift`` (a fraction), the same for every config: ``shape`` "linear" from the first config's
stretch of round 1 to the last one's of the last round, or "step" at the half; every request of
a stretch runs at that stretch's speed. With ``effect_sd`` > 0 (prompt heterogeneity) each
prompt also has a true effect of its own in every config but the baseline: exp(``effect_sd`` ·
z), z standard normal, correlated ``effect_corr`` across the configs of one prompt (a prompt
that drafts well does for every budget: the measured tokens per step correlate 0.99 across
n-gram budgets, benchmarks/data/heterogeneity.json); the config's rate is its median over the
prompts, and the estimand is the mean per-prompt log ratio over the prompt population, the log
of the rates' ratio. The estimator is the claim's (ratio of sums, paired by
prompt, blocks by round), so the truth of a speedup is the ratio of the rates.

:func:`fixed` measures every config every round and makes one claim at α (a fixed plan);
:func:`sequential` is the budgeted sweep's contest (as :class:`specbench_lib.analysis.rounds.Contention`
runs it): after each round (from the first when it gives each config two requests), a claim
at the look's spent error over every config measured so far; the configs out of the set are
no longer measured (the baseline always is); it stops once the claim is decided, or after the
last round, whose look spends what is left.
Each slice of a round costs ``start_s`` plus its requests' decode time (:func:`cost`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from specbench_lib.analysis.claim import ALPHA, MIN_LOOK_ALPHA, Claim, claim, look_alpha
from specbench_lib.analysis.units import Units

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
    drift: float = 0.0  # the machine's speed over the run changes by this fraction
    shape: str = "linear"  # or "step"
    order: str = "shuffled"  # or "fixed": the plan's order in every round
    effect_sd: float = 0.0  # prompt heterogeneity: each prompt's own log effect vs the baseline
    effect_corr: float = 0.9  # its correlation across the configs of one prompt

    def speed(self, number: int, place: int) -> float:
        """The machine's speed in round ``number``'s ``place``-th stretch (1 at the start)."""
        stretches = max(1, self.rounds * len(self.rates) - 1)
        at = (number * len(self.rates) + place) / stretches
        if self.shape == "step":
            return 1.0 + self.drift * (at >= 0.5)
        return 1.0 + self.drift * at

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

    def measure(self, number: int, configs: list[str], requests: int | None = None) -> None:
        """Round ``number``: ``per_round`` fresh prompts (the first ``requests`` of them in a
        partial round) to each of ``configs``."""
        d = self.design
        factor = np.exp(d.prompt_sd * self.rng.standard_normal(d.per_round))[:requests]
        effects = self.effects(factor.size)
        order = list(configs)
        if d.order == "shuffled":
            self.rng.shuffle(order)
        for place, name in enumerate(order):
            noise = np.exp(d.noise_sd * self.rng.standard_normal(factor.size))
            took = d.tokens / (d.rate(name) * factor * effects.get(name, 1.0) * noise
                               * d.speed(number, place))
            self.data[name] += [((number, i), float(d.tokens), float(t))
                                for i, t in enumerate(took)]
            self.seconds += cost(d, float(took.sum()))

    def effects(self, size: int) -> dict[str, Any]:
        """Each config's per-prompt true effects (none without heterogeneity: no draws, so the
        random stream is the one of the model without it)."""
        d = self.design
        if d.effect_sd <= 0:
            return {}
        shared = self.rng.standard_normal(size)
        own = math.sqrt(max(0.0, 1 - d.effect_corr))
        return {n: np.exp(d.effect_sd * (math.sqrt(d.effect_corr) * shared
                                         + own * self.rng.standard_normal(size)))
                for n in d.names[1:]}

    def predict(self, configs: list[str], requests: int) -> float:
        """A round's expected seconds: ``requests`` a config of ``configs`` (the sweep predicts
        from the round before; here the truth's mean: E[1 / factor] = exp(σ² / 2))."""
        d = self.design
        mean = float(np.exp(d.prompt_sd ** 2 / 2 + d.noise_sd ** 2 / 2 + d.effect_sd ** 2 / 2))
        return sum(cost(d, requests * d.tokens / d.rate(c) * mean) for c in configs)

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
    """The budgeted contest (see the module), as :func:`specbench_lib.sweep.adaptive.budgeted_rounds`
    runs it: with ``budget_s`` a look is the last when not even the smallest next round (one
    request of the two cheapest configs still measured) would fit; the next round is planned with
    the configs in after the look, whole if it fits, else a partial last round (the leaders, fewer
    requests); ``kind``: the panel's wall clock."""
    panel = kind(design, rng)
    members, base = list(design.names), design.names[0]
    spent, found, partial = 0.0, None, None
    for number in range(design.rounds):
        active = [c for c in design.names if c in members or c == base]
        if budget_s is not None and number > 0 and (
                panel.seconds + panel.predict(active, design.per_round) > budget_s):
            partial = _partial(panel, [*members, *([base] if base not in members else [])],
                               budget_s)
            if partial is None:  # the look before becomes the last, on the same data
                if ALPHA - spent >= MIN_LOOK_ALPHA:
                    found = claim(panel.units(), design.names, base, alpha=ALPHA - spent,
                                  equivalence=equivalence)
                return Outcome(_made(found), number, panel.seconds, None)
            active = partial[0]
        panel.measure(number, active, None if partial is None else partial[1])
        cheap = sorted(active, key=lambda c: panel.predict([c], 1))[:2]
        last = partial is not None or number + 1 == design.rounds or (
            budget_s is not None and panel.seconds + panel.predict(cheap, 1) > budget_s)
        if number < 1 and not last:  # a look needs two blocks
            continue
        alpha = look_alpha(number + 1, design.rounds, spent, last=last, kind=spending)
        if alpha < MIN_LOOK_ALPHA:
            continue
        spent += alpha
        found = claim(panel.units(), design.names, base, alpha=alpha, equivalence=equivalence)
        members = list(found.members)
        if found.decision == "decided" or (found.decided and last):  # a tie goes on till last
            return Outcome(found, number + 1, panel.seconds, panel.seconds)
        if last:
            break
    return Outcome(_made(found), number + 1, panel.seconds, None)


def _made(found: Claim | None) -> Claim:
    assert found is not None
    return found


def _partial(panel: Panel, ranked: list[str], budget_s: float) -> tuple[list[str], int] | None:
    """The largest partial round that fits: the most leading configs (two at least), each with
    the most requests that fit."""
    for size in range(len(ranked), 1, -1):
        for requests in range(panel.design.per_round - 1, 0, -1):
            if panel.seconds + panel.predict(ranked[:size], requests) <= budget_s:
                return ranked[:size], requests
    return None
