"""Issue 46's known truth, as a table: fixed plans of 1, 2 and 4 blocks on a drifting machine.

    python benchmarks/drift_blocks.py [--seeds 4] [--blocks 1,2,4] [--sims 400]

Real sweeps (``tests/support/driftparams.py``): auto, ngram-b4 and ngram-b8 on
``tests/support/fake_server.py`` stand-ins that are equally fast (true speedup 1.00), whose speed
grows by 10 % a second of wall time, the same for every config; a fixed plan of ``repeats`` 1, 2
or 4 (its blocks), 3 requests a cell, seeds 1..``--seeds``. Per block count: how often the claim
said "decided" (one config shown the best), a tie, or undecided; how often the leader's speedup
interval holds 1.00, and of every drafting config's interval; the answer's head words (answer.json
and the best row must agree).

Then the same question in simulation at the level of the claim's units
(``tests/support/claimsim.py``, ``--sims`` plans per block count: three equal configs, 6 prompts a
block, the machine 40 % faster by the end), for many more seeds than the real sweeps afford.
Writes ``benchmarks/results/drift_blocks.json``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "support"))

from _common import load_note, write_results  # noqa: E402
from driftparams import drift_params  # noqa: E402

import specbench_lib as sb  # noqa: E402
from specbench_lib.model.answerfile import read_answer  # noqa: E402


def sweep_row(folder: Path, seed: int, repeats: int) -> dict[str, Any]:
    """One fixed plan on the drifting stand-ins, scored."""
    began = time.monotonic()
    result = sb.run_sweep(sb.load_plan(drift_params(folder, seed=seed, budget=None,
                                                    repeats=repeats)),
                          outputs=folder / "out", progress=False)
    (row,) = result.best().to_dict("records")
    answer = read_answer(result.run_dir)
    decision = answer.panels[0].decision if answer is not None and answer.panels else None
    table = result.table()
    spec = table[table["method"] != "auto"].to_dict("records")
    holds = [r["speedup_lo"] <= 1 <= r["speedup_hi"] for r in spec if r["speedup_lo"] == r["speedup_lo"]]
    return {"seed": seed, "blocks": repeats, "decision": row["decision"],
            "answer_decision": decision, "best": row["best"],
            "set": row["confidence_set"], "reason": bool(row.get("reason")),
            "speedup": row["speedup"], "interval": [row["speedup_lo"], row["speedup_hi"]],
            "leader_holds": row["best"] == "auto" or bool(
                row["speedup_lo"] <= 1 <= row["speedup_hi"]),
            "intervals_holding": sum(holds), "intervals": len(holds),
            "wall_s": round(time.monotonic() - began, 1)}


def sim_rows(blocks: list[int], sims: int) -> list[dict[str, Any]]:
    """The simulated plans (see the module), one row per block count."""
    import numpy as np
    from claimsim import Design, fixed

    rows = []
    for count in blocks:
        design = Design((("auto", 30.0), ("b4", 30.0), ("b8", 30.0)), per_round=6,
                        rounds=count, drift=0.4)
        rng = np.random.default_rng([46, count])
        found = [fixed(design, rng) for _ in range(sims)]
        with_interval = [f for f in found if f.speedup_lo == f.speedup_lo]
        rows.append({"blocks": count, "plans": sims,
                     "decided": sum(f.decision == "decided" for f in found),
                     "tie": sum(f.decision == "tie" for f in found),
                     "undecided": sum(f.decision == "undecided" for f in found),
                     "leader_holds": sum(f.leader == "auto" or f.speedup_lo <= 1 <= f.speedup_hi
                                         for f in with_interval),
                     "with_interval": len(with_interval)})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=4)
    parser.add_argument("--blocks", default="1,2,4")
    parser.add_argument("--sims", type=int, default=400)
    args = parser.parse_args()
    blocks = [int(b) for b in args.blocks.split(",")]
    print(load_note())
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for seed in range(1, args.seeds + 1):
            for count in blocks:
                found = sweep_row(Path(tmp), seed, count)
                rows.append(found)
                print(f"seed {seed} blocks {count}: {found['decision']} (answer.json "
                      f"{found['answer_decision']}), {found['best']} {found['speedup']:.2f}x "
                      f"[{found['interval'][0]:.2f}, {found['interval'][1]:.2f}], set "
                      f"{found['set']}, {found['wall_s']} s", flush=True)
    print("\nfixed plans on drifting stand-ins (true speedup 1.00), per block count:")
    print("blocks  plans  decided  tie  undecided  leader's interval holds 1.00  "
          "every drafting interval holds 1.00")
    for count in blocks:
        mine = [r for r in rows if r["blocks"] == count]
        print(f"{count:>6} {len(mine):>6} {sum(r['decision'] == 'decided' for r in mine):>8} "
              f"{sum(r['decision'] == 'tie' for r in mine):>4} "
              f"{sum(r['decision'] == 'undecided' for r in mine):>10} "
              f"{sum(r['leader_holds'] for r in mine):>10} of {len(mine)}"
              f"{sum(r['intervals_holding'] for r in mine):>24} of "
              f"{sum(r['intervals'] for r in mine)}")
    sims = sim_rows(blocks, args.sims)
    print("\nsimulated (claimsim: 3 equal configs, 6 prompts a block, drift 40 % over the run):")
    print("blocks  plans  decided  tie  undecided  leader's interval holds 1.00")
    for s in sims:
        print(f"{s['blocks']:>6} {s['plans']:>6} {s['decided']:>8} {s['tie']:>4} "
              f"{s['undecided']:>10} {s['leader_holds']:>10} of {s['with_interval']}")
    write_results("drift_blocks", {"sweeps": rows, "simulated": sims, "load": load_note()})


if __name__ == "__main__":
    main()
