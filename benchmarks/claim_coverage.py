"""Coverage and conditional error of a panel's claim (specbench_lib/claim.py), in simulation.

    python benchmarks/claim_coverage.py [--sweeps 400] [--seed 1] [--quick | --points 2/1/3,2/2/1]
        [--drifts 0,0.2,0.4,0.4step] [--before]

Simulated panels with a known truth (``tests/support/claimsim.py``): the issue's effect sizes (auto 31.8,
ngram-b4 34.2, b8 33.4, b16 32.1, b32 29.5, draft-b4 15.9, then b2 33.0 and b64 28.0 tok/s: near
ties), k = 2-8 configs, a per-prompt speed factor shared by the configs (log-normal σ 0.25),
per-request noise (σ 0.10), 1-12 requests a round, 1-10 rounds, the ratio-of-sums estimator,
and a machine whose speed drifts over the run, the same for every config (``--drifts``: linear
changes of 0-40 % from the run's first stretch to its last, ``0.4step``: a step of 40 % at the
half): the true speedups stay the rates' ratios, so drift that reaches a claim is an error.
Each round is a block, its configs in an order drawn afresh (the sweep's design);
``--before`` also runs the design before blocks (every round in the plan's order, the baseline
first, and the prompts as the sample) for contrast.

Per design point, two ways of collecting the data:

- **fixed**: every config every round, one claim at α = 0.05 (a fixed plan);
- **budgeted**: the budgeted sweep's contest (a look after each round from the second, α spent
  by the O'Brien-Fleming-type function over the rounds seen, the configs out of the set no longer
  measured, a stop once decided).

Prints per point: the coverage of the leader's speedup interval (of the sweeps that have one),
of the confidence set (the true best in it), how often the claim is decided (``decided`` or
``tie``) and its conditional error: of the decided sweeps, the share whose leader is more than
the claimed ε behind the true best (wanted ≤ 5 %), and of all sweeps the share decided and
wrong (what the claim's α bounds: P(wrong | decided) ≤ α / P(decided)), with binomial
Monte-Carlo errors (± 2 SE).
Writes ``benchmarks/results/claim_coverage.json``.

**Prompt heterogeneity** (``--hets 0.1,0.15,0.2,0.25``, issue 39): each prompt has a true effect
of its own in every config but auto (log-normal around the config's, sd ``effect_sd``,
correlated 0.9 across the configs of a prompt), on top of the per-request noise and the drift;
the estimand is the mean over the prompt population (a block's mean carries the heterogeneity /
√(requests a round)). Three quantities (``--quantities``): ``output_rate`` (end to end; the
issue's rates, the per-request noise measured by an A/A pair, benchmarks/data/heterogeneity.json),
``decode_rate`` (rates shaped like a measured chat panel's decoding, its own measured noise) and
``acceptance`` (tokens per step: no timing in it, so no noise and no drift, only the prompts).
Writes ``benchmarks/results/claim_coverage_het.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "support"))

from _common import load_note, write_results  # noqa: E402
from claimsim import ISSUE_RATES, Design, fixed, issue_design, sequential  # noqa: E402

from specbench_lib.analysis import units as units_module  # noqa: E402
from specbench_lib.analysis.claim import Claim  # noqa: E402

DRIFTS = "0,0.2,0.4,0.4step"

GRID = [(k, m, r) for k in (2, 4, 6, 8) for m in (1, 2, 4, 12) for r in (1, 3, 10)]
QUICK = [(2, 1, 3), (6, 2, 3), (6, 2, 7), (5, 4, 5), (8, 12, 3)]
HET_GRID = [(2, 2, 3), (2, 2, 10), (2, 4, 10), (4, 2, 3), (4, 2, 10), (4, 4, 10), (6, 2, 10),
            (6, 4, 3)]
HETS = "0.1,0.15,0.2,0.25"
HETEROGENEITY = ROOT / "benchmarks" / "data" / "heterogeneity.json"
# decoding tok/s shaped like run 20261204T192320Z's chat panel (auto 63.9; b4 1.06x, b8 1.09x,
# b16 1.01x), then lower budgets and the drafter; tokens per step like its exp(mean log)
DECODE_RATES = {"auto": 63.9, "ngram-b4": 67.6, "ngram-b8": 69.6, "ngram-b16": 64.7,
                "ngram-b32": 62.0, "draft-b4": 32.4, "ngram-b2": 66.0, "ngram-b64": 60.0}
ACCEPTANCE = {"auto": 1.0, "ngram-b4": 1.30, "ngram-b8": 1.355, "ngram-b16": 1.39,
              "ngram-b32": 1.41, "draft-b4": 1.20, "ngram-b2": 1.22, "ngram-b64": 1.42}
QUANTITY_RATES = {"output_rate": ISSUE_RATES, "decode_rate": DECODE_RATES,
                  "acceptance": ACCEPTANCE}
FALLBACK_NOISE = {"output_rate": 0.09, "decode_rate": 0.12, "acceptance": 0.0}


def measured_noise(quantity: str) -> float:
    """One request's noise for ``quantity``: the pooled runs' median two-request noise / √2 in
    benchmarks/data/heterogeneity.json (acceptance: 0, it has no timing in it)."""
    if quantity == "acceptance":
        return 0.0
    if HETEROGENEITY.exists():
        import json

        pair = json.loads(HETEROGENEITY.read_text())["pooled"][quantity]["pair_noise_median"]
        if pair:
            return float(pair) / math.sqrt(2)
    return FALLBACK_NOISE[quantity]


def het_design(quantity: str, k: int, m: int, r: int, effect_sd: float, drift: str = "0",
               noise: float | None = None) -> Design:
    """A heterogeneity design point: the quantity's rates, its noise, prompts' own effects."""
    size, shape = drift_of(drift)
    rates = tuple(list(QUANTITY_RATES[quantity].items())[:k])
    timed = quantity != "acceptance"
    return Design(rates, m, r, noise_sd=measured_noise(quantity) if noise is None else noise,
                  effect_sd=effect_sd, drift=size if timed else 0.0, shape=shape)


def score(design: Design, found: Claim) -> dict[str, Any]:
    """What one sweep's claim got right: its speedup interval, its set, its decision."""
    best = max(design.names, key=design.rate)
    row = found.rows.get(found.leader) if found.leader else None
    truth = design.rate(found.leader) / design.rate(design.names[0]) if row else math.nan
    has = row is not None and found.leader != design.names[0] and row.speedup_lo == row.speedup_lo
    return {"interval": has, "covered": has and row.speedup_lo <= truth <= row.speedup_hi,
            "in_set": best in found.members, "decided": found.decided,
            "wrong": found.decided and design.rate(found.leader) < (1 - found.epsilon)
            * design.best - 1e-12,
            "wrong_margin": found.decided and design.rate(found.leader)
            < (1 - found.equivalence) * design.best}


def rate(hits: int, n: int) -> str:
    if n == 0:
        return "   -          "
    p = hits / n
    return f"{100 * p:5.1f} ± {200 * math.sqrt(max(p * (1 - p), 1e-9) / n):4.1f}"


@contextlib.contextmanager
def _prompts_as_sample(before: bool) -> Iterator[None]:
    """With ``before``: the claim's pairing as it was before blocks (every unit in one block,
    so the prompts are the sample)."""
    if not before:
        yield
        return
    original = units_module.log_ratios

    def flat(a: Any, b: Any) -> Any:
        logs, blocks = original(a, b)
        return logs, [0] * len(blocks)

    units_module.log_ratios = flat
    try:
        yield
    finally:
        units_module.log_ratios = original


def drift_of(text: str) -> tuple[float, str]:
    """``0.4`` → a linear drift of 40 %; ``0.4step`` → a step of 40 % at the half."""
    return (float(text[:-4]), "step") if text.endswith("step") else (float(text), "linear")


def point(k: int, m: int, r: int, sweeps: int, seed: int, mode: str, drift: str = "0",
          before: bool = False) -> dict[str, Any]:
    size, shape = drift_of(drift)
    design = issue_design(k, m, r, drift=size, shape=shape,
                          order="fixed" if before else "shuffled")
    rng = np.random.default_rng([seed, k, m, r, mode == "budgeted", round(100 * size),
                                 shape == "step", before])
    with _prompts_as_sample(before):
        counts = evaluate(design, rng, mode, sweeps)
    return {"k": k, "per_round": m, "rounds": r, "mode": mode, "sweeps": sweeps,
            "drift": drift, "design": "before" if before else "blocks", **counts}


def evaluate(design: Design, rng: np.random.Generator, mode: str, sweeps: int
             ) -> dict[str, int]:
    """``sweeps`` simulated claims of ``design`` (``mode`` fixed or budgeted), scored."""
    scores = [score(design, fixed(design, rng) if mode == "fixed"
                    else sequential(design, rng).claim) for _ in range(sweeps)]
    return {"with_interval": sum(s["interval"] for s in scores),
            "speedup_covered": sum(s["covered"] for s in scores),
            "set_covered": sum(s["in_set"] for s in scores),
            "decided": sum(s["decided"] for s in scores),
            "wrong": sum(s["wrong"] for s in scores),
            "wrong_margin": sum(s["wrong_margin"] for s in scores)}


def het_point(quantity: str, k: int, m: int, r: int, effect_sd: float, sweeps: int, seed: int,
              mode: str, drift: str = "0", noise: float | None = None) -> dict[str, Any]:
    """A heterogeneity design point (see the module), scored over ``sweeps`` claims."""
    design = het_design(quantity, k, m, r, effect_sd, drift, noise)
    rng = np.random.default_rng([seed, k, m, r, mode == "budgeted", round(1000 * effect_sd),
                                 round(100 * design.drift), design.shape == "step",
                                 list(QUANTITY_RATES).index(quantity)])
    return {"quantity": quantity, "effect_sd": effect_sd, "noise_sd": design.noise_sd,
            "k": k, "per_round": m, "rounds": r, "mode": mode, "sweeps": sweeps,
            "drift": drift if design.drift or design.shape == "step" else "0",
            "design": "blocks", **evaluate(design, rng, mode, sweeps)}


def het_rows(points: list[tuple[int, ...]], hets: str, quantities: str, drifts: str,
             sweeps: int, seed: int) -> list[dict[str, Any]]:
    """Every heterogeneity point, printed as it comes."""
    rows = []
    for quantity in quantities.split(","):
        noise = measured_noise(quantity)  # read once: the file may change while this runs
        for effect_sd in (float(h) for h in hets.split(",")):
            for k, m, r in points:
                for drift in drifts.split(",") if quantity != "acceptance" else ("0",):
                    for mode in ("fixed", "budgeted"):
                        if mode == "budgeted" and r < 2:
                            continue
                        found = het_point(quantity, k, m, r, effect_sd, sweeps, seed, mode,
                                          drift, noise)
                        rows.append(found)
                        print(f"{quantity:<12} {effect_sd:4.2f} {found['noise_sd']:5.3f} "
                              + _line(found), flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sweeps", type=int, default=400)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help="a few design points only")
    parser.add_argument("--points", default="", help="design points k/requests/rounds, comma "
                        "separated (e.g. 2/1/3,2/2/1), instead of the grid")
    parser.add_argument("--drifts", default=DRIFTS, help="the machine's drift over a run, comma "
                        "separated: 0.2 (linear, 20 %%), 0.4step (a 40 %% step at the half)")
    parser.add_argument("--before", action="store_true", help="also the design before blocks")
    parser.add_argument("--hets", default="", help=f"prompt heterogeneity sds, comma separated "
                        f"(e.g. {HETS}): the heterogeneity model instead of the homogeneous one")
    parser.add_argument("--quantities", default=",".join(QUANTITY_RATES),
                        help="with --hets: the claim quantities simulated")
    args = parser.parse_args()
    points = ([tuple(int(x) for x in p.split("/")) for p in args.points.split(",")]
              if args.points else QUICK if args.quick else HET_GRID if args.hets else GRID)
    began = time.monotonic()
    print(load_note())
    print(f"{'quantity  het noise ' if args.hets else ''}{'k':>2} {'req/rd':>6} {'rounds':>6} "
          f"{'mode':>8} {'drift':>8} {'design':>7}  {'speedup cov %':>14} {'set cov %':>14} "
          f"{'decided %':>14} {'wrong | decided %':>18} {'wrong & decided %':>18}")
    if args.hets:
        rows = het_rows(points, args.hets, args.quantities, args.drifts, args.sweeps, args.seed)
    else:
        rows = []
        for k, m, r in points:
            for drift in args.drifts.split(","):
                for before in (False, True) if args.before else (False,):
                    for mode in ("fixed", "budgeted"):
                        if mode == "budgeted" and r < 2:
                            continue
                        found = point(k, m, r, args.sweeps, args.seed, mode, drift, before)
                        rows.append(found)
                        print(_line(found), flush=True)
    # one block cannot separate a config from its time (the claim says so): not in the totals
    totals = {key: sum(r[key] for r in rows if r["design"] == "blocks" and r["rounds"] >= 2)
              for key in ("with_interval", "speedup_covered", "sweeps", "set_covered", "decided",
                          "wrong")}
    covered = rate(totals["speedup_covered"], totals["with_interval"])
    print(f"all points (blocks, two or more): speedup {covered} %, set "
          f"{rate(totals['set_covered'], totals['sweeps'])} %, wrong when decided "
          f"{rate(totals['wrong'], totals['decided'])} % ({totals['decided']} decided) "
          f"in {time.monotonic() - began:.0f} s")
    write_results("claim_coverage_het" if args.hets else "claim_coverage",
                  {"rows": rows, "totals": totals, "seed": args.seed, "load": load_note()})


def _line(found: dict[str, Any]) -> str:
    return (f"{found['k']:>2} {found['per_round']:>6} {found['rounds']:>6} {found['mode']:>8} "
            f"{found['drift']:>8} {found['design']:>7}  "
            f"{rate(found['speedup_covered'], found['with_interval']):>14} "
            f"{rate(found['set_covered'], found['sweeps']):>14} "
            f"{rate(found['decided'], found['sweeps']):>14} "
            f"{rate(found['wrong'], found['decided']):>18} "
            f"{rate(found['wrong'], found['sweeps']):>18}")


if __name__ == "__main__":
    main()
