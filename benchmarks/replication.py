"""Claims that replicate (issue 20): do two runs of one plan, with another seed or another order,
contradict each other?

    python benchmarks/replication.py RUN_A RUN_B [RUN_C ...]

Each run's claims are read from its cells as analysed now (``SweepResult``):

- per panel (workload × context × output length × load point), the best-config decision:
  ``decided`` (one config), ``tie`` (a set within the equivalence margin) or ``undecided``;
- per speculative config and panel, a speedup whose 95 % interval excludes 1: ``beats`` or
  ``loses`` auto.

A claim of run A is **contradicted** by run B when B says the opposite with its own interval: a
config A decided as best that B's confidence set excludes; a tie of A of which B excludes a
member; ``beats`` where B says ``loses`` (or the reverse). A claim B cannot confirm (no interval,
or undecided) is counted as unconfirmed, not as a contradiction. For every cell both runs have
ok, it also prints how far tokens per step and speedup moved (the order test: a cell must give
the same figures whatever ran before it). Writes ``benchmarks/results/replication.json``.
"""

from __future__ import annotations

import itertools
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from specbench_lib.core.paths import outputs_dir  # noqa: E402
from specbench_lib.report.outcome import SweepResult  # noqa: E402

PANEL = ["workload", "context", "output_tokens", "concurrency", "load"]


def claims(result: SweepResult) -> dict[tuple[Any, ...], tuple[str, frozenset[str]]]:
    """Every claim of a run: key → (what, the configs it names)."""
    found: dict[tuple[Any, ...], tuple[str, frozenset[str]]] = {}
    for _, row in result.best().iterrows():
        panel = tuple(row[k] for k in PANEL)
        members = frozenset(s for s in str(row["confidence_set"]).split(", ") if s)
        if row["decision"] in ("decided", "tie"):
            found[("best", *panel)] = (str(row["decision"]), members)
    for _, row in result.table().iterrows():
        if row["method"] == "auto":
            continue
        key = ("speedup", row["config"], *(row[k] for k in PANEL))
        if row["speedup_lo"] > 1:
            found[key] = ("beats", frozenset({row["config"]}))
        elif row["speedup_hi"] < 1:
            found[key] = ("loses", frozenset({row["config"]}))
    return found


def sets(result: SweepResult) -> dict[tuple[Any, ...], frozenset[str]]:
    return {tuple(row[k] for k in PANEL): frozenset(str(row["confidence_set"]).split(", "))
            for _, row in result.best().iterrows()}


def contradicted(key: tuple[Any, ...], claim: tuple[str, frozenset[str]],
                 other: dict[tuple[Any, ...], tuple[str, frozenset[str]]],
                 other_sets: dict[tuple[Any, ...], frozenset[str]]) -> bool | None:
    """True: the other run says the opposite; False: it confirms; None: it cannot say."""
    what, names = claim
    if key[0] == "best":
        members = other_sets.get(key[1:])
        if members is None:
            return None
        if not names & members if what == "decided" else not names <= members:
            return True
        theirs = other.get(key)
        return False if theirs is not None and theirs[1] == names else None
    theirs = other.get(key)
    if theirs is None:
        return None
    return theirs[0] != what


def moved(a: SweepResult, b: SweepResult) -> list[dict[str, Any]]:
    """Per cell ok in both runs: tokens per step and speedup, and how far they moved."""
    ta = a.table().set_index(["config", *PANEL])
    tb = b.table().set_index(["config", *PANEL])
    rows = []
    for key in ta.index.intersection(tb.index):
        ra, rb = ta.loc[key], tb.loc[key]
        row: dict[str, Any] = {"cell": "/".join(map(str, key))}
        for col in ("tokens_per_step", "speedup"):
            x, y = float(ra[col]), float(rb[col])
            row[col] = (x, y, abs(y - x) / x if x == x and x else float("nan"))
        rows.append(row)
    return rows


def main(paths: list[str]) -> int:
    runs = [SweepResult(p if Path(p).is_dir() else outputs_dir() / "runs" / p) for p in paths]
    report: dict[str, Any] = {"runs": [r.run_id for r in runs], "pairs": []}
    for a, b in itertools.permutations(runs, 2):
        mine, theirs, their_sets = claims(a), claims(b), sets(b)
        verdicts = {k: contradicted(k, c, theirs, their_sets) for k, c in mine.items()}
        bad = [k for k, v in verdicts.items() if v]
        pair = {"a": a.run_id, "b": b.run_id, "claims": len(mine),
                "confirmed": sum(v is False for v in verdicts.values()),
                "unconfirmed": sum(v is None for v in verdicts.values()),
                "contradicted": [f"{'/'.join(map(str, k))}: {mine[k][0]} {sorted(mine[k][1])}"
                                 for k in bad]}
        report["pairs"].append(pair)
        print(f"{a.run_id} -> {b.run_id}: {pair['claims']} claims, {pair['confirmed']} confirmed, "
              f"{pair['unconfirmed']} unconfirmed, {len(bad)} contradicted")
        for line in pair["contradicted"]:
            print(f"  CONTRADICTED: {line}")
    for a, b in itertools.combinations(runs, 2):
        rows = moved(a, b)
        worst = {col: max((r[col][2] for r in rows if r[col][2] == r[col][2]), default=float("nan"))
                 for col in ("tokens_per_step", "speedup")}
        within = {col: sum(r[col][2] <= 0.15 for r in rows if r[col][2] == r[col][2])
                  for col in ("tokens_per_step", "speedup")}
        print(f"{a.run_id} vs {b.run_id}: {len(rows)} cells ok in both; within 15 %: "
              f"tokens/step {within['tokens_per_step']}, speedup {within['speedup']}; largest "
              f"move: tokens/step {100 * worst['tokens_per_step']:.1f} %, speedup "
              f"{100 * worst['speedup']:.1f} %")
        report.setdefault("cells", []).append({"a": a.run_id, "b": b.run_id, "rows": rows,
                                               "worst": worst, "within_15pct": within})
    out = Path(__file__).resolve().parent / "results" / "replication.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(report, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
