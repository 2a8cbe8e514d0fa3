"""The main job's plans simulated with the noise it has (issue 39): ``adaptive_sweep.py --measured``.

    python benchmarks/adaptive_sweep.py --measured [--sweeps 300] [--autos 18,24,32]
        [--plans 0,6] [--set copyedit:ngram-b4=1.0]

The plans of :data:`MEASURED_PLANS` (configs, workloads, requests a round, output tokens and the
claim's quantity), simulated with what benchmarks/data/heterogeneity.json holds instead of an
assumed noise: each config's effect against auto per workload (the mean per-prompt log ratio of
the runs there, for the plan's quantity), the prompts' heterogeneity (the median of the rows'
split) and the per-request noise (the pooled rows' two-request noise / √2: TTFT's paired sd
scaled by an A/A pair's ratio; acceptance: none) and the prompt effects' correlation across
configs (from the paired sd between two n-gram budgets: 0.98 for tokens per step, 0.96 decoding;
0.9 where there is no heterogeneity to correlate). The wall clock is the measured one: a request
of auto costs 64 / ``--auto`` seconds at 64 tokens, 59 % of it prefill (TTFT 1.40 of 2.36 s in
run 20261204T192320Z), the same in every config; the decode part scales with the output tokens
and shrinks by the config's measured decoding speedup; a cell costs 0.4 s (auto: one server kept
up) or 2.2 s (n-gram: a fresh server and warmup per cell), so that run's 54 cells of 150
requests took its 449 s. The panels share the budget as the sweep runs them (:func:`joint_run`:
a round across every open panel, a decided panel leaves the rounds). Prints, per plan and auto
tok/s, each panel's share decided or a tie (ε <= 5 %) within the budget, its wrong decisions
(the leader more than its ε behind the truth's best), its median time to end, and the share of
runs whose every panel ended so.
Writes ``benchmarks/results/adaptive_sweep_measured.json`` (``_set`` with ``--set``).
"""

from __future__ import annotations

import json
import math
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from _common import load_note, write_results  # noqa: E402
from claimsim import Design, Panel  # noqa: E402

from specbench_lib.analysis.claim import MIN_LOOK_ALPHA, claim, look_alpha  # noqa: E402

MIN_PROMPTS = 6  # a row with fewer paired prompts gives no effect (a loaded run's 3 pairs)
BUDGET_S = 450.0  # make run's time budget (params/embedded_budget.yaml)
HETEROGENEITY = ROOT / "benchmarks" / "data" / "heterogeneity.json"
PREFILL_SHARE = 0.59  # of auto's 64-token request: TTFT 1.40 of 2.36 s (run 20261204T192320Z)
DATA_KEYS = {"acceptance": "tokens_per_step"}  # the claim's quantity → the data file's
CELL_S = {"auto": 0.4, "ngram": 2.2}  # a cell's own cost: kept server / fresh server + warmup


@dataclass(frozen=True)
class MeasuredPlan:
    configs: tuple[str, ...]
    workloads: tuple[str, ...]
    per_round: int
    tokens: int = 64
    quantity: str = "output_rate"
    max_rounds: int = 40  # the plan's max_rounds: the looks' planned rounds are at most this


NGRAMS = ("auto", "ngram-b4", "ngram-b8", "ngram-b16")
CC = ("code", "chat")
MEASURED_PLANS = {
    "now: auto+b4/b8/b16, code+chat, 3 a round, output_rate": MeasuredPlan(
        NGRAMS, CC, 3, max_rounds=16),
    "auto+b4/b8/b16, code+chat, 3 a round, decode_rate": MeasuredPlan(
        NGRAMS, CC, 3, quantity="decode_rate"),
    "auto+b4/b8/b16, code+chat, 3 a round, acceptance": MeasuredPlan(
        NGRAMS, CC, 3, quantity="acceptance"),
    "auto+b4/b16, code+chat, 3 a round, output_rate": MeasuredPlan(
        ("auto", "ngram-b4", "ngram-b16"), CC, 3),
    "auto+b8, code+chat, 3 a round, output_rate": MeasuredPlan(("auto", "ngram-b8"), CC, 3),
    "auto+b4, code+chat, 2 a round, output_rate": MeasuredPlan(("auto", "ngram-b4"), CC, 2),
    "auto+b4, code+chat, 3 a round, output_rate": MeasuredPlan(("auto", "ngram-b4"), CC, 3),
    "auto+b4, code+chat, 4 a round, output_rate": MeasuredPlan(("auto", "ngram-b4"), CC, 4),
    "auto+b4, code+chat, 6 a round, output_rate": MeasuredPlan(("auto", "ngram-b4"), CC, 6),
    "auto+b8, code+chat, 3 a round, decode_rate": MeasuredPlan(
        ("auto", "ngram-b8"), CC, 3, quantity="decode_rate"),
    "auto+b4, code+chat, 3 a round, decode_rate": MeasuredPlan(
        ("auto", "ngram-b4"), CC, 3, quantity="decode_rate"),
    "auto+b8, code+chat+copyedit, 3 a round, output_rate": MeasuredPlan(
        ("auto", "ngram-b8"), (*CC, "copyedit"), 3),
    "auto+b8, code+chat+copyedit, 3 a round, decode_rate": MeasuredPlan(
        ("auto", "ngram-b8"), (*CC, "copyedit"), 3, quantity="decode_rate"),
    "auto+b4, code+chat+copyedit, 3 a round, output_rate": MeasuredPlan(
        ("auto", "ngram-b4"), (*CC, "copyedit"), 3),
    "auto+b4, chat+copyedit, 3 a round, output_rate": MeasuredPlan(
        ("auto", "ngram-b4"), ("chat", "copyedit"), 3),
    "auto+b8, chat+copyedit, 3 a round, decode_rate": MeasuredPlan(
        ("auto", "ngram-b8"), ("chat", "copyedit"), 3, quantity="decode_rate"),
    "auto+b4, chat+copyedit, 2 a round, output_rate": MeasuredPlan(
        ("auto", "ngram-b4"), ("chat", "copyedit"), 2),
    "auto+b4, chat+copyedit, 4 a round, output_rate": MeasuredPlan(
        ("auto", "ngram-b4"), ("chat", "copyedit"), 4),
    "auto+b4/b8, copyedit, 3 a round, decode_rate": MeasuredPlan(
        ("auto", "ngram-b4", "ngram-b8"), ("copyedit",), 3, quantity="decode_rate"),
    "auto+b4/b8, copyedit, 4 a round, decode_rate": MeasuredPlan(
        ("auto", "ngram-b4", "ngram-b8"), ("copyedit",), 4, quantity="decode_rate"),
    "auto+b4/b8, copyedit, 6 a round, decode_rate": MeasuredPlan(
        ("auto", "ngram-b4", "ngram-b8"), ("copyedit",), 6, quantity="decode_rate"),
    "auto+b8, copyedit, 3 a round, decode_rate": MeasuredPlan(
        ("auto", "ngram-b8"), ("copyedit",), 3, quantity="decode_rate"),
}


def measured_inputs(quantity: str, tokens: int) -> dict[str, Any]:
    """From the data file: effects by workload and config (``quantity`` and decode_rate, the
    wall clock's; from the pooled runs, else from any run that has the workload), the
    heterogeneity and the per-request noise of the pooled runs."""
    data = json.loads(HETEROGENEITY.read_text())
    key = DATA_KEYS.get(quantity, quantity)
    effects: dict[str, dict[str, dict[str, list[float]]]] = {}
    pooled_runs = set(data["pooled_runs"])
    rows = [r for r in data["runs"] if not r["aa"] and r["panel"].split("/")[2] == str(tokens)
            and r["panel"].split("/")[3] == "1" and r["stats"][key]["n"] >= MIN_PROMPTS]
    in_pool = {r["panel"].split("/")[0] for r in rows if r["run"] in pooled_runs}
    for row in rows:
        workload = row["panel"].split("/")[0]
        if workload in in_pool and row["run"] not in pooled_runs:
            continue  # a workload the pooled runs have: their effects only
        for q in {key, "decode_rate"}:
            effects.setdefault(q, {}).setdefault(workload, {}).setdefault(
                row["config"], []).append(row["stats"][q]["mean"])
    pooled = data["pooled"][key]
    noise = 0.0 if key == "tokens_per_step" else float(pooled["pair_noise_median"]) / math.sqrt(2)
    return {"effects": {q if q != key else quantity: {
                w: {c: statistics.fmean(v) for c, v in cs.items()} for w, cs in ws.items()}
                for q, ws in effects.items()},
            "heterogeneity": pooled["heterogeneity_median"], "noise": noise,
            "effect_corr": pooled.get("effect_corr") or 0.9}


def clocked(wall: dict[str, float]) -> type[Panel]:
    """A panel whose wall clock is the measured one: each config's cell cost and request."""

    class Clocked(Panel):
        def measure(self, number: int, configs: list[str], requests: int | None = None) -> None:
            before = self.seconds
            super().measure(number, configs, requests)
            self.seconds = before + self.predict(configs, requests or self.design.per_round)

        def predict(self, configs: list[str], requests: int) -> float:
            return sum(CELL_S["auto" if c.startswith("auto") else "ngram"] + requests * wall[c]
                       for c in configs)

    return Clocked


def panel_setup(plan: MeasuredPlan, workload: str, auto: float, inputs: dict[str, Any],
                rng: np.random.Generator) -> Panel:
    """One workload's simulated panel: its claim's quantity and its measured wall clock."""
    effects = inputs["effects"][plan.quantity][workload]
    decode = inputs["effects"]["decode_rate"][workload]
    request_s = 64 / auto
    prefill, decode_s = PREFILL_SHARE * request_s, (1 - PREFILL_SHARE) * request_s
    wall = {c: prefill + decode_s * (plan.tokens - 1) / 63 / math.exp(decode.get(c, 0.0))
            for c in plan.configs}
    rates = tuple((c, 10.0 * math.exp(effects.get(c, 0.0))) for c in plan.configs)
    design = Design(rates, plan.per_round, 2, noise_sd=inputs["noise"], tokens=plan.tokens,
                    effect_sd=inputs["heterogeneity"], effect_corr=inputs["effect_corr"],
                    start_s=0.0)
    return clocked(wall)(design, rng)


class Open:
    """A panel's contest state in a joint run: its configs in contention, error spent, end."""

    def __init__(self, panel: Panel) -> None:
        self.panel, self.members = panel, list(panel.design.names)
        self.spent, self.found, self.done_s = 0.0, None, None  # type: ignore[var-annotated]

    def active(self) -> list[str]:
        base = self.panel.design.names[0]
        return [c for c in self.panel.design.names if c in self.members or c == base]

    def look(self, number: int, rounds: int, last: bool, elapsed: float) -> None:
        alpha = look_alpha(number + 1, rounds, self.spent, last=last)
        if alpha < MIN_LOOK_ALPHA:
            return
        self.spent += alpha
        names = self.panel.design.names
        self.found = claim(self.panel.units(), names, names[0], alpha=alpha)
        self.members = list(self.found.members)
        if self.found.decision == "decided" or (self.found.decided and last):
            self.done_s = elapsed


def joint_run(plan: MeasuredPlan, auto: float, inputs: dict[str, Any],
              rng: np.random.Generator) -> list[Open]:
    """One simulated `make run` (the sweep's rounds across its panels, as
    :func:`specbench_lib.sweep.adaptive.budgeted_rounds` runs them): each round measures every
    open panel's configs in contention, a look per panel from the second round, a decided panel
    leaves the rounds (its time goes to the others); a round that does not fit whole is cut to
    fewer requests, and a look is the last when not even one request of two configs of every
    open panel would fit."""
    panels = [Open(panel_setup(plan, w, auto, inputs, rng)) for w in plan.workloads]
    rounds, number = 2, 0
    while number < rounds:
        open_ = [p for p in panels if p.done_s is None]
        elapsed = sum(p.panel.seconds for p in panels)
        cost = sum(p.panel.predict(p.active(), plan.per_round) for p in open_)
        requests = plan.per_round
        while number > 0 and requests > 0 and elapsed + sum(
                p.panel.predict(p.active(), requests) for p in open_) > BUDGET_S:
            requests -= 1
        if requests == 0:
            for p in open_:  # the look before becomes the last
                p.look(number - 1, rounds, True, elapsed)
            break
        for p in open_:
            p.panel.measure(number, p.active(), requests)
        if number == 0:
            rounds = min(plan.max_rounds, max(2, math.ceil(2 * BUDGET_S / cost)))
        elapsed = sum(p.panel.seconds for p in panels)
        smallest = sum(p.panel.predict(p.active()[:2], 1) for p in open_)
        last = requests < plan.per_round or number + 1 >= rounds or (
            elapsed + smallest > BUDGET_S)
        if number > 0 or last:
            for p in open_:
                p.look(number, rounds, last, elapsed)
        number += 1
        if all(p.done_s is not None for p in panels) or last:
            break
    return panels


def measured_plan(plan: MeasuredPlan, auto: float, inputs: dict[str, Any], sweeps: int,
                  rng: np.random.Generator) -> dict[str, Any]:
    """``sweeps`` joint runs of a plan: each panel's and every panel's decided-or-tie share."""
    runs = [joint_run(plan, auto, inputs, rng) for _ in range(sweeps)]
    panels = []
    for i, workload in enumerate(plan.workloads):
        ends = [r[i].done_s for r in runs]
        wrong = sum(r[i].done_s is not None and r[i].found is not None and
                    r[i].panel.design.rate(r[i].found.leader)
                    < (1 - r[i].found.epsilon) * r[i].panel.design.best for r in runs)
        decided = [t for t in ends if t is not None]
        panels.append({"workload": workload, "decided": len(decided) / sweeps, "wrong": wrong,
                       "median_s": statistics.median(decided) if decided else None,
                       "effects": {c: round(v, 3) for c, v in
                                   runs[0][i].panel.design.rates}})
    every = sum(all(p.done_s is not None for p in r) for r in runs) / sweeps
    return {"panels": panels, "every_panel": every}


def measured_main(sweeps: int, seed: int, autos: list[float], plans: list[str],
                  overrides: str = "") -> None:
    """Every measured plan at every auto tok/s (see the module); ``overrides``: effects set
    by hand, ``workload:config=ratio,...`` (a sensitivity check of the plan's quantity)."""
    rows = []
    for name in plans:
        plan = MEASURED_PLANS[name]
        inputs = measured_inputs(plan.quantity, plan.tokens)
        for item in filter(None, overrides.split(",")):
            where, _, ratio = item.partition("=")
            workload, _, config = where.partition(":")
            inputs["effects"][plan.quantity].setdefault(workload, {})[config] = math.log(
                float(ratio))
        print(f"{name}: noise {inputs['noise']:.3f}, heterogeneity "
              f"{inputs['heterogeneity']:.3f}", flush=True)
        for auto in autos:
            rng = np.random.default_rng([seed, round(auto), len(rows)])
            found = measured_plan(plan, auto, inputs, sweeps, rng)
            rows.append({"plan": name, "auto": auto, "overrides": overrides, **found, **inputs,
                         "quantity": plan.quantity})
            print(f"  auto {auto:4.0f} tok/s: " + ", ".join(
                f"{p['workload']} {100 * p['decided']:3.0f}% ({p['wrong']} wrong, median "
                f"{p['median_s'] or math.nan:3.0f} s)" for p in found["panels"])
                + f"; every panel {100 * found['every_panel']:3.0f}%", flush=True)
    write_results("adaptive_sweep_measured" + ("_set" if overrides else ""), {"rows": rows, "sweeps": sweeps,
                                              "load": load_note()})


