"""What interleaving configs in blocks costs in sweep time (issue 37), on the embedded engine.

    .venv/bin/python benchmarks/interleave_cost.py [params file]

Runs one plan (default ``benchmarks/params/interleave.yaml``: auto, ngram-b8, draft-b4, 4
repeats) twice: ``repeat_order: rounds`` (each repeat a block, its configs in a drawn order,
the servers that can stay up kept up: sweep/blocks.py) and ``repeat_order: back_to_back`` (one
server a config, its repeats one after another: the cheapest order, but one block, so the
claim cannot separate a config from its time). Prints each one's sweep seconds and server
starts, and the ratio. Time it on a quiet machine only.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace
from pathlib import Path

from _common import load_note, write_results

import specbench_lib as sb

HERE = Path(__file__).resolve().parent


def arrangement(params: Path, order: str) -> dict[str, float]:
    plan = sb.load_plan(params)
    plan = replace(plan, params=plan.params.model_copy(update={"repeat_order": order}))
    began = time.monotonic()
    result = sb.run_sweep(plan, progress=False)
    wall = time.monotonic() - began
    servers = result.manifest["servers"].values()
    return {"wall_s": round(wall, 1), "starts": sum(int(s.get("starts") or 0) for s in servers),
            "servers": len(result.manifest["servers"]), "cells_ok": result.counts()["ok"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("params", nargs="?", default=str(HERE / "params" / "interleave.yaml"))
    args = parser.parse_args()
    print(load_note())
    found = {order: arrangement(Path(args.params), order) for order in ("rounds", "back_to_back")}
    for order, row in found.items():
        print(f"{order:>12}: {row}")
    ratio = found["rounds"]["wall_s"] / found["back_to_back"]["wall_s"]
    print(f"blocks / back to back: {ratio:.3f} of the sweep's wall time")
    print(load_note())
    write_results("interleave_cost", {**found, "ratio": round(ratio, 3)})


if __name__ == "__main__":
    main()
