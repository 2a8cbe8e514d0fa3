"""The per-prompt spread of real runs, kept as data: what the main job's plan is sized to.

    python benchmarks/heterogeneity.py RUN_DIR [RUN_DIR ...] [--out benchmarks/data/heterogeneity.json]
        [--keep]    # also keep the runs already in --out that are not given again

For every run, panel (workload/context/concurrency) and config against the panel's ``auto``,
paired by prompt (request i of round r carries the same prompt in every config), at
concurrency 1, the per-prompt log ratios of

- ``output_rate``: output tokens / (last token − send), the claim's end-to-end quantity;
- ``decode_rate``: (tokens − 1) / (last token − first token), what a drafter acts on;
- ``ttft``: log(config's TTFT / auto's), lower is better: the same prefill work in every config
  without a draft model, so its paired spread is the machine's per-request noise on a ~1.6 s
  interval (a yardstick);
- ``tokens_per_step``: tokens / verify steps (auto: 1), acceptance: no timing in it;

each as raw values with their block (round or repeat) and the request's index, their mean, sd
over prompts, the sd of the block means against the sd / √(prompts a block) that independent
prompts would give (a block-level term: the machine's speed between two configs' stretches),
and the split of the spread into the machine's noise and the prompts' heterogeneity:

- where the run has an **A/A pair** (two configs of method auto: the same binary and flags),
  the pair's paired sd is the noise of two requests (``noise_source`` "aa"), and a config's
  heterogeneity is √(sd² − sd_AA²) per quantity;
- otherwise TTFT's paired sd stands in for the noise (``noise_source`` "ttft"), scaled per
  quantity by the ratio an A/A pair showed (its quantity's paired sd over its TTFT's, median
  over the A/A rows given: ``noise_source`` "ttft x aa"): the run's own noise level, the
  quantities' proportions from the pair; the split is then an estimate.

Writes ``benchmarks/data/heterogeneity.json`` (``runs``: the rows; ``pooled``: the medians over
the rows by quantity that :mod:`adaptive_sweep` and :mod:`claim_coverage` draw from).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from specbench_lib.analysis.claim import panel_of_cell  # noqa: E402
from specbench_lib.runs.rundir import RunDir  # noqa: E402

OUT = Path(__file__).resolve().parent / "data" / "heterogeneity.json"
QUANTITIES = ("output_rate", "decode_rate", "ttft", "tokens_per_step")
Key = tuple[int, int]  # (block, request index)


def request_values(cell: Any) -> dict[Key, dict[str, float]]:
    """Each ok request's four quantities in one c1 cell, by (block, index)."""
    found: dict[Key, dict[str, float]] = {}
    skip = set(cell.verdict.failed)
    for r in cell.measured:
        if r.index in skip or not r.final or len(r.token_times or ()) < 2:
            continue
        tokens = float(r.final.completion_tokens or 0)
        total, decode = r.token_times[-1] - r.start, r.token_times[-1] - r.token_times[0]
        if tokens < 2 or total <= 0 or decode <= 0:
            continue
        steps = r.final.verify_steps
        found[cell.spec.repeat, r.index] = {
            "output_rate": tokens / total, "decode_rate": (tokens - 1) / decode,
            "ttft": r.token_times[0] - r.start,
            "tokens_per_step": tokens / steps if steps else 1.0}
    return found


def contention(cell: Any) -> float:
    """Other processes' CPU cores (and stolen) while the cell's requests ran (0: not sampled)."""
    return float(cell.host.contention_cores) if cell.host is not None else 0.0


def read_run(path: Path, max_other: float | None = None
             ) -> dict[str, dict[str, dict[Key, dict[str, float]]]]:
    """panel label → config → (block, index) → quantities, from a run's ok c1 cells (with
    ``max_other``: those whose other processes used at most that many cores)."""
    cells, _ = RunDir(path).read_cells()
    by: dict[str, dict[str, dict[Key, dict[str, float]]]] = {}
    for cell in cells:
        if not cell.verdict.ok or int(cell.spec.concurrency) != 1 or (
                max_other is not None and contention(cell) > max_other):
            continue
        panel = "/".join(str(v) for v in panel_of_cell(cell))
        by.setdefault(panel, {}).setdefault(cell.spec.config, {}).update(request_values(cell))
    return by


def summary(values: list[float], blocks: list[int]) -> dict[str, Any]:
    """Mean, sd over prompts, and the block means' sd against independent prompts'."""
    arr = np.array(values)
    means: dict[int, list[float]] = {}
    for v, b in zip(values, blocks, strict=True):
        means.setdefault(b, []).append(v)
    bm = np.array([np.mean(v) for v in means.values()])
    sd = float(np.std(arr, ddof=1)) if arr.size > 1 else math.nan
    per_block = arr.size / max(1, len(means))
    return {"mean": float(arr.mean()), "sd": sd, "n": int(arr.size), "blocks": len(means),
            "block_mean_sd": float(np.std(bm, ddof=1)) if bm.size > 1 else math.nan,
            "block_mean_sd_if_independent": sd / math.sqrt(per_block)}


def compare(mine: dict[Key, dict[str, float]], base: dict[Key, dict[str, float]]
            ) -> dict[str, Any]:
    """One config against the baseline, paired by (block, index)."""
    keys = sorted(k for k in mine if k in base)
    values = {q: [math.log(mine[k][q] / base[k][q]) for k in keys] for q in QUANTITIES}
    return {"blocks": [k[0] for k in keys], "index": [k[1] for k in keys],
            "log_ratios": {q: [round(v, 5) for v in vs] for q, vs in values.items()},
            "stats": {q: summary(vs, [k[0] for k in keys]) for q, vs in values.items()}}


def split(row: dict[str, Any], noise: dict[str, float], source: str) -> dict[str, Any]:
    """The spread split into noise (two requests') and heterogeneity, per quantity."""
    out: dict[str, Any] = {"noise_source": source}
    for q in QUANTITIES:
        sd = row["stats"][q]["sd"]
        pair = 0.0 if q == "tokens_per_step" else noise.get(q, math.nan)
        out[q] = {"pair_noise_sd": pair,
                  "heterogeneity_sd": math.sqrt(max(0.0, sd ** 2 - pair ** 2))
                  if pair == pair else math.nan}
    return out


def run_rows(path: Path, max_other: float | None = None) -> list[dict[str, Any]]:
    """Every panel's configs against auto in one run, with the noise split."""
    rows = []
    for panel, configs in sorted(read_run(path, max_other).items()):
        autos = [c for c in configs if c.startswith("auto")]
        if "auto" not in configs:
            continue
        base = configs["auto"]
        aa = [c for c in autos if c != "auto"]
        found = {c: compare(configs[c], base) for c in configs
                 if c != "auto" and sum(k in base for k in configs[c]) >= 3}  # a spread at all
        if not found:
            continue
        if aa:
            noise = {q: found[aa[0]]["stats"][q]["sd"] for q in QUANTITIES}
            source = "aa"
        else:
            ttft = statistics.median(r["stats"]["ttft"]["sd"] for c, r in found.items()
                                     if not c.startswith("draft"))
            noise, source = {q: ttft for q in QUANTITIES}, "ttft"
        for config, row in found.items():
            rows.append({"run": path.name, "panel": panel, "config": config, "baseline": "auto",
                         "aa": config in aa, "max_other_cores": max_other, **row,
                         "split": split(row, noise, source)})
    return rows


def aa_ratios(rows: list[dict[str, Any]]) -> dict[str, float]:
    """Per quantity, the A/A pairs' paired sd over their TTFT's (median over the A/A rows):
    how much noisier a quantity is than the TTFT yardstick on the same machine and load."""
    aa = [r for r in rows if r["aa"]]
    return {q: statistics.median(r["stats"][q]["sd"] / r["stats"]["ttft"]["sd"] for r in aa)
            for q in QUANTITIES} if aa else {}


def rescale(rows: list[dict[str, Any]], ratios: dict[str, float]) -> None:
    """The rows split by TTFT's yardstick alone: their noise scaled by the A/A ratios (a run
    without its own A/A pair, at its own load, from a pair measured at another)."""
    if not ratios:
        return
    for r in rows:
        if r["split"]["noise_source"] in ("ttft", "ttft x aa"):
            ttft = r["split"]["ttft"]["pair_noise_sd"]
            r["split"] = split(r, {q: ttft * ratios[q] for q in QUANTITIES}, "ttft x aa")
            r["split"]["aa_ratios"] = ratios


def keyed(row: dict[str, Any], quantity: str) -> dict[Key, float]:
    """A row's log ratios of ``quantity`` by (block, index)."""
    keys = zip(row["blocks"], row["index"], strict=True)
    return dict(zip(keys, row["log_ratios"][quantity], strict=True))


def between(rows: list[dict[str, Any]], quantity: str) -> list[float]:
    """The paired sd of ``quantity`` between every two configs (neither auto nor a drafter) of
    one run's panel, over the prompts both have: how much the prompts' own effects differ from
    one config to another (with two requests' noise)."""
    by: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in rows:
        if not r["aa"] and r["config"].startswith("ngram"):
            by.setdefault((r["run"], r["panel"]), []).append(r)
    found = []
    for group in by.values():
        for x, a in enumerate(group):
            for b in group[x + 1:]:
                va, vb = keyed(a, quantity), keyed(b, quantity)
                diff = [va[k] - vb[k] for k in va if k in vb]
                if len(diff) > 2:
                    found.append(float(np.std(diff, ddof=1)))
    return found


def effect_corr(het: float | None, between_sd: float | None, noise: float | None) -> float | None:
    """The correlation of a prompt's own effect across configs that makes their paired sd
    √(2 h² (1 − ρ) + noise²) what was measured (clipped to [0, 1])."""
    if not het or between_sd is None or noise is None:
        return None
    return min(1.0, max(0.0, 1 - max(0.0, between_sd ** 2 - noise ** 2) / (2 * het ** 2)))


def pooled(rows: list[dict[str, Any]], runs: set[str] | None = None) -> dict[str, Any]:
    """Medians over the rows (no draft model, no A/A; with ``runs``: those runs only) by
    quantity: the simulations' inputs."""
    spec = [r for r in rows if not r["aa"] and not r["config"].startswith("draft")
            and (runs is None or r["run"] in runs)]
    aa = [r for r in rows if r["aa"]]
    out: dict[str, Any] = {}
    for q in QUANTITIES:
        sds = [r["stats"][q]["sd"] for r in spec]
        het = [r["split"][q]["heterogeneity_sd"] for r in spec
               if r["split"][q]["heterogeneity_sd"] == r["split"][q]["heterogeneity_sd"]]
        noise = [r["split"][q]["pair_noise_sd"] for r in spec
                 if r["split"][q]["pair_noise_sd"] == r["split"][q]["pair_noise_sd"]]
        apart = between(spec, q)
        out[q] = {"sd_median": statistics.median(sds) if sds else None,
                  "sd_range": [min(sds), max(sds)] if sds else None,
                  "aa_sd": [r["stats"][q]["sd"] for r in aa],
                  "heterogeneity_median": statistics.median(het) if het else None,
                  # two requests' noise (the split's), median over the rows: / √2 a request
                  "pair_noise_median": statistics.median(noise) if noise else None,
                  "between_sd_median": statistics.median(apart) if apart else None,
                  "effect_corr": effect_corr(statistics.median(het) if het else None,
                                             statistics.median(apart) if apart else None,
                                             statistics.median(noise) if noise else None),
                  "effects": {f"{r['panel']}:{r['config']}": r["stats"][q]["mean"] for r in spec}}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--keep", action="store_true", help="keep the runs already in --out")
    parser.add_argument("--max-other", type=float, default=None, help="keep only the cells "
                        "whose other processes used at most this many CPU cores")
    parser.add_argument("--pool", default="", help="the runs (names or parts, comma separated) "
                        "whose rows the pooled medians are of (default: all)")
    parser.add_argument("--note", default="", help="a note per run: NAME=TEXT (load, machine)")
    args = parser.parse_args()
    rows: list[dict[str, Any]] = []
    notes: dict[str, str] = {}
    if args.keep and args.out.exists():
        old = json.loads(args.out.read_text())
        names = {p.name for p in args.runs}
        rows = [r for r in old["runs"] if r["run"] not in names]
        notes = {k: v for k, v in old.get("notes", {}).items() if k not in names}
    for item in filter(None, args.note.split(";")):
        name, _, text = item.partition("=")
        notes[name.strip()] = text.strip()
    for path in args.runs:
        rows += run_rows(path, args.max_other)
    rescale(rows, aa_ratios(rows))
    for r in rows:
        s, h = r["stats"], r["split"]
        print(f"{r['run'][:24]:<24} {r['panel']:<16} {r['config']:<10} " + " ".join(
            f"{q[:6]} {math.exp(s[q]['mean']):.3f} sd {s[q]['sd']:.3f} "
            f"het {h[q]['heterogeneity_sd']:.3f} |" for q in QUANTITIES) + f" {h['noise_source']}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    pool = {r["run"] for r in rows if not args.pool or any(
        p in r["run"] for p in args.pool.split(","))}
    args.out.write_text(json.dumps({"runs": rows, "pooled": pooled(rows, pool),
                                    "pooled_runs": sorted(pool), "notes": notes}, indent=1))
    print(f"→ {args.out}")


if __name__ == "__main__":
    main()
