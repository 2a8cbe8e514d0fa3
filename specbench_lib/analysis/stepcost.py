"""The decoding speedup split into acceptance and step cost, paired per prompt (docs/uncertainty.md).

**Per request** r of a config (after its first token: the prefill is no drafter's):
decode time t = last token's time − first token's, decode tokens n = completion tokens − 1,
decode steps m = verify steps − 1 (the verify steps of :mod:`.specmetrics`, the prefill's
step among them; ``auto`` drafts nothing, so its steps are its tokens). Then tokens per step
τ = n / m and step time s = t / m, and exactly **decode rate = n / t = τ / s**.

**Against the baseline** (``auto``), per prompt (the same (repeat, request index) in both):
log(rate_c / rate_auto) = log(τ_c / τ_auto) − log(s_c / s_auto), so the decoding speedup is the
**acceptance gain** τ_c / τ_auto times the inverse of the **step-cost ratio** s_c / s_auto, per
prompt and (the means being linear) in the paired means too. Each of the three is estimated as
:mod:`.units` compares configs (:func:`~.units.paired_logs`: the blocks' means, the prompts
with one block) with a two-sided interval at the panel's claim's level
(:func:`~.claim.quantile_level`: Bonferroni over its configs).

**Counters.** Where the engine counts each request's steps (llama.cpp's ``timings``,
SGLang's ``meta_info``) the split is per request (``counters`` "per request"); where it counts
only the server's totals (vLLM's ``/metrics``: the cell's counter deltas) each cell's τ is its
totals' and every prompt of the cell has it (``counters`` "cell"; the step cost per prompt is
then τ over the prompt's decode rate, so the identity still holds per prompt). With cell
counters and one block τ has no spread to estimate: no interval for it or the gain.

**The break-even**: a config whose step costs s× the baseline's pays above s · τ_auto tokens a
step (τ_auto is 1: ``auto`` makes one token a step); "ngram-b16's step costs 1.20× auto's, so it
pays above 1.20 tokens a step; it reached 1.30 (decoding 1.08× [...])".
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..model.records import CellRecord, RequestRecord
from .claim import panel_of_cell, quantile_level, t_quantile
from .specmetrics import request_spec_metrics, spec_metrics
from .units import paired_logs

COUNTERS = ("per request", "cell")
FACTORS = ("tokens_per_step", "acceptance_gain", "step_cost", "decoding_speedup")


@dataclass(frozen=True)
class Steps:
    """One config's decode phase per prompt: its (repeat, request index), τ and step time, and
    where τ came from (``counters``: "per request", "cell", or None: no drafts, τ is 1)."""

    ids: tuple[tuple[int, int], ...]
    tau: tuple[float, ...]
    step_s: tuple[float, ...]
    counters: str | None


@dataclass(frozen=True)
class Factor:
    """A ratio and its interval (NaN where there is none)."""

    value: float
    lo: float
    hi: float


@dataclass(frozen=True)
class Split:
    """A config's decoding speedup vs the baseline, split (see the module)."""

    config: str
    counters: str | None
    prompts: int
    blocks: int
    tokens_per_step: Factor  # τ reached (geometric mean of the prompts, paired block means)
    baseline_tokens_per_step: float
    acceptance_gain: Factor  # τ_c / τ_auto
    step_cost: Factor  # s_c / s_auto
    decoding_speedup: Factor  # (τ_c / τ_auto) · (s_auto / s_c)

    @property
    def break_even(self) -> float:
        """The tokens a step above which this config's steps pay: s · τ_auto."""
        return self.step_cost.value * self.baseline_tokens_per_step


def _decode(rec: RequestRecord) -> tuple[int, float] | None:
    """A request's decode tokens and decode time (None: fewer than two tokens, or no time)."""
    final = rec.final
    tokens = int(final.completion_tokens or 0) if final else 0
    if len(rec.token_times) < 2 or tokens < 2:
        return None
    seconds = rec.token_times[-1] - rec.token_times[0]
    return (tokens - 1, seconds) if seconds > 0 else None


def _request_steps(rec: RequestRecord, drafts: bool) -> int | None:
    """A request's verify steps, its prefill's included: its own count (as :mod:`.specmetrics`
    reads it), its tokens where nothing was drafted, None where only the cell counted."""
    assert rec.final is not None
    tokens = int(rec.final.completion_tokens or 0)
    own = request_spec_metrics([rec], tokens)["verify_steps"]
    if own is not None:
        return int(own)
    return None if drafts else tokens


def _cell_tau(cell: CellRecord, recs: Sequence[RequestRecord]) -> float | None:
    """The decode phase's tokens per step by the cell's counter deltas (vLLM's), the verify
    steps as :func:`~.specmetrics.spec_metrics` defines them."""
    counters = cell.facts.spec_counters
    tokens = sum(int(r.final.completion_tokens or 0) for r in recs if r.final)
    steps = spec_metrics(tokens, len(recs), accepted=counters.get("accepted_tokens") or 0,
                         drafted_tokens=counters.get("draft_tokens"))["verify_steps"]
    decode_steps = steps - len(recs)
    return (tokens - len(recs)) / decode_steps if decode_steps > 0 else None


def steps_of(cells: Sequence[CellRecord]) -> Steps | None:
    """One config's decode phase per prompt over its ok cells of one panel (see the module);
    None where a drafting config's steps were counted neither per request nor per cell."""
    ids: list[tuple[int, int]] = []
    taus: list[float] = []
    times: list[float] = []
    how: set[str | None] = set()
    for cell in sorted((c for c in cells if c.verdict.ok), key=lambda c: c.spec.repeat):
        skip = set(cell.verdict.failed)
        recs = [r for r in cell.measured if r.index not in skip and r.final]
        drafts = cell.spec.method != "auto" or bool(cell.facts.spec_counters.get("drafts"))
        own = {r.index: _request_steps(r, drafts) for r in recs}
        shared = _cell_tau(cell, recs) if None in own.values() else None
        if None in own.values() and (shared is None or not cell.facts.spec_counters.get("drafts")):
            return None  # a drafting config with no count of its steps: no split
        how.add("cell" if shared is not None else "per request" if drafts else None)
        for rec in recs:
            found, steps = _decode(rec), own[rec.index]
            if found is None:
                continue
            tau = shared if steps is None else (found[0] / (steps - 1) if steps > 1 else None)
            if tau is None or tau <= 0:
                continue
            ids.append((cell.spec.repeat, rec.index))
            taus.append(tau)
            times.append(found[1] * tau / found[0])  # s = t / m = t · τ / n
    counters = "cell" if "cell" in how else "per request" if "per request" in how else None
    return Steps(tuple(ids), tuple(taus), tuple(times), counters) if ids else None


def _factor(logs: Any, blocks: Sequence[int], level: float, *, spread: bool = True) -> Factor:
    found = paired_logs(logs, blocks)
    diff, se, n = found.values()
    if diff != diff:
        return Factor(math.nan, math.nan, math.nan)
    if not spread or se != se or n < 2:
        return Factor(math.exp(diff), math.nan, math.nan)
    reach = t_quantile(level, n - 1) * se  # an early look's level with two blocks: huge
    return Factor(math.exp(diff), _exp(diff - reach), _exp(diff + reach))


def _exp(value: float) -> float:
    """exp, infinite past a float's range (an interval with no bound on that side)."""
    return math.inf if value > 709 else math.exp(value)


def split(config: str, mine: Steps, base: Steps, level: float) -> Split | None:
    """``mine`` against ``base`` over the prompts both measured, each factor's interval at the
    t quantile's ``level`` (None where they share no prompt)."""
    import numpy as np

    where = {u: k for k, u in enumerate(base.ids)}
    pairs = [(k, where[u]) for k, u in enumerate(mine.ids) if u in where]
    if not pairs:
        return None
    tau_c = np.log([mine.tau[k] for k, _ in pairs])
    tau_a = np.log([base.tau[j] for _, j in pairs])
    step = np.log([mine.step_s[k] for k, _ in pairs]) - np.log([base.step_s[j] for _, j in pairs])
    blocks = [mine.ids[k][0] for k, _ in pairs]
    # one cell's counters give one τ for all its prompts: no spread to estimate it from
    spread = mine.counters != "cell" or len(set(blocks)) >= 2
    gain = tau_c - tau_a
    return Split(config, mine.counters, len(pairs), len(set(blocks)),
                 _factor(tau_c, blocks, level, spread=spread),
                 math.exp(paired_logs(tau_a, blocks).diff),
                 _factor(gain, blocks, level, spread=spread), _factor(step, blocks, level),
                 _factor(gain - step, blocks, level))


def panel_split(cells: Sequence[CellRecord], baseline: str | None, *, alpha: float,
                configs: int) -> dict[str, Split]:
    """Every drafting config of one panel's ``cells`` against ``baseline``, at the level of the
    panel's claim of ``configs`` configs at ``alpha``."""
    if baseline is None:
        return {}
    by_config: dict[str, list[CellRecord]] = {}
    for cell in cells:
        by_config.setdefault(cell.spec.config, []).append(cell)
    base = steps_of(by_config.get(baseline, []))
    if base is None:
        return {}
    level = quantile_level(alpha, configs)
    found = {}
    for config, mine in by_config.items():
        steps = steps_of(mine) if config != baseline else None
        one = split(config, steps, base, level) if steps is not None else None
        if one is not None and steps is not None and steps.counters is not None:
            found[config] = one
    return found


def split_doc(splits: Mapping[str, Split]) -> dict[str, dict[str, Any]]:
    """The splits as ``answer.json`` and the best table hold them: per config its counters,
    prompts, blocks, each factor with ``_lo``/``_hi`` and the break-even (as computed: rounded
    only when shown; NaN null)."""
    def num(value: float) -> float | None:
        return None if value != value or math.isinf(value) else float(value)

    docs = {}
    for config, one in splits.items():
        entry: dict[str, Any] = {"counters": one.counters, "prompts": one.prompts,
                                 "blocks": one.blocks}
        for name in FACTORS:
            factor: Factor = getattr(one, name)
            entry.update({name: num(factor.value), f"{name}_lo": num(factor.lo),
                          f"{name}_hi": num(factor.hi)})
        entry["break_even"] = num(one.break_even)
        docs[config] = entry
    return docs


def panel_split_doc(cells: Sequence[CellRecord], baseline: str | None, *, alpha: float,
                    configs: int) -> dict[str, dict[str, Any]]:
    """:func:`split_doc` of :func:`panel_split`: what the answer and the summary carry."""
    return split_doc(panel_split(cells, baseline, alpha=alpha, configs=configs))


def run_split_docs(cells: Sequence[CellRecord], *, alpha: float = 0.05
                   ) -> dict[tuple[Any, ...], dict[str, dict[str, Any]]]:
    """Every panel's :func:`panel_split_doc` over a run's ``cells`` (its baseline the first
    ``auto`` config, the level the panel's configs' at ``alpha``)."""
    by_panel: dict[tuple[Any, ...], list[CellRecord]] = {}
    for cell in cells:
        by_panel.setdefault(panel_of_cell(cell), []).append(cell)
    found = {}
    for panel, mine in by_panel.items():
        baseline = next((c.spec.config for c in mine if c.spec.method == "auto"), None)
        configs = len({c.spec.config for c in mine if c.verdict.ok})
        found[panel] = panel_split_doc(mine, baseline, alpha=alpha, configs=configs)
    return found


def _span(entry: Mapping[str, Any], name: str) -> str:
    low, high = entry.get(f"{name}_lo"), entry.get(f"{name}_hi")
    return f" [{low:.2f}, {high:.2f}]" if low is not None and high is not None else ""


def break_even_words(config: str, entry: Mapping[str, Any], baseline: str = "auto") -> str:
    """"ngram-b16's step costs 1.20× auto's, so it pays above 1.20 tokens a step; it reached
    1.30 (decoding 1.08× [0.96, 1.22]; per request counters)", from a :func:`split_doc` entry."""
    cost, even, tau = entry.get("step_cost"), entry.get("break_even"), entry.get("tokens_per_step")
    speed = entry.get("decoding_speedup")
    if cost is None or even is None or tau is None or speed is None:
        return f"{config}: no split of its speedup"
    pays = "it reached" if tau >= even else "it reached only"
    return (f"{config}'s step costs {cost:.2f}×{_span(entry, 'step_cost')} {baseline}'s, so it "
            f"pays above {even:.2f} tokens a step; {pays} {tau:.2f}{_span(entry, 'tokens_per_step')}"
            f" (decoding {speed:.2f}×{_span(entry, 'decoding_speedup')}; "
            f"{entry.get('counters')} counters)")


def split_words(row: Mapping[str, Any]) -> str:
    """A panel's break-even in its line: the leader's where it drafts, else the drafting config
    that decodes fastest (why it did not win), as " · <sentence>"; "" with no split."""
    docs = row.get("split")
    if not isinstance(docs, Mapping) or not docs:
        return ""
    leader = row.get("best")
    config = leader if leader in docs else max(
        docs, key=lambda c: docs[c].get("decoding_speedup") or 0.0)
    return f" · {break_even_words(str(config), docs[config], str(row.get('baseline') or 'auto'))}"
