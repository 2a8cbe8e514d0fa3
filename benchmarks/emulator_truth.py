"""The GPU emulator's truth maps (issue 47 item 2): for each truth profile, the best config of
every panel of a phase's grid (workload × context × concurrency) by the expected decode rate,
its speedup over ``auto``, the runner-up and how close it is; then the shape checks against the
published figures (tests/support/gpu_checks.py).

The configs are tp1's (auto, DFlash block 16, DDTree budgets 8-64 on the fork's template, so
the drafter's block is budget + 1, as params/tp1.yaml runs them; ``--block 16``: PR #29907's
template, the block kept). ``--simulate`` also runs the emulator's own schedule in emulated
time (no server: tests/support/gpu_sched.simulated_rate) and prints where its best differs from
the closed form's. Writes ``benchmarks/results/emulator_truth.json``.

    python benchmarks/emulator_truth.py [--gpu H100] [--tp 1] [--contexts 3072 25600]
        [--output 1024] [--truth published ...] [--simulate]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "support"))

from _common import load_note, table, write_results  # noqa: E402
from gpu_checks import checks  # noqa: E402
from gpu_model import Hardware, hardware  # noqa: E402
from gpu_profiles import PROFILE_NAMES, truth  # noqa: E402
from gpu_sched import simulated_rate  # noqa: E402
from gpu_truth import Config, Panel, Truth, best  # noqa: E402

BUDGETS = (8, 12, 15, 16, 32, 64)


def tp1_configs(block: int | None) -> list[Config]:
    """tp1's configs: the tree's block budget + 1 (the fork) or ``block`` (PR #29907)."""
    trees = [Config(f"ddtree-b{n}", "tree", n, block or n + 1) for n in BUDGETS]
    return [Config("auto", "auto"), Config("dflash-b16", "linear", 16, 16), *trees]


def truth_map(tr: Truth, hw: Hardware, configs: list[Config],
              args: argparse.Namespace) -> list[dict[str, Any]]:
    rows = []
    for task in args.tasks:
        for ctx in args.contexts:
            for c in args.concurrency:
                panel = Panel(task, ctx, c, args.output, eos=not args.no_eos)
                name, rates = best(configs, panel, tr, hw)
                auto = rates["auto"].decode_rate
                second = sorted((r.decode_rate for n, r in rates.items() if n != name), reverse=True)[0]
                row = {"panel": f"{task}/ctx{ctx}/c{c}", "best": name,
                       "speedup": rates[name].decode_rate / auto,
                       "runner_up_gap_pct": 100 * (1 - second / rates[name].decode_rate),
                       "auto_tok_s": auto, "in_flight": rates[name].in_flight,
                       "tau": rates[name].tau,
                       "rates": {n: round(r.decode_rate, 2) for n, r in rates.items()}}
                if args.simulate:
                    sims = {cfg.name: simulated_rate(cfg, tr, hw, task=task, prompt=ctx,
                                                     max_new=args.output, eos=not args.no_eos,
                                                     concurrency=c, requests=args.requests)
                            for cfg in configs}
                    row["sim_best"] = max(sims, key=lambda n: sims[n])
                    row["sim_vs_closed_pct"] = 100 * (sims[name] / rates[name].decode_rate - 1)
                rows.append(row)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gpu", default="H100")
    parser.add_argument("--model", default="Qwen3-8B")
    parser.add_argument("--tp", type=int, default=1)
    parser.add_argument("--tasks", nargs="+", default=["code", "chat"])
    parser.add_argument("--contexts", nargs="+", type=int, default=[3072, 25600])
    parser.add_argument("--concurrency", nargs="+", type=int, default=[1, 4, 16])
    parser.add_argument("--output", type=int, default=1024)
    parser.add_argument("--no-eos", action="store_true", help="answers run to the cap (ignore_eos)")
    parser.add_argument("--block", type=int, default=None, help="the trees' drafter block (PR #29907)")
    parser.add_argument("--truth", nargs="+", default=list(PROFILE_NAMES))
    parser.add_argument("--simulate", action="store_true")
    parser.add_argument("--requests", type=int, default=40, help="a simulated panel's requests")
    args = parser.parse_args()
    hw, configs = hardware(args.gpu, args.model, args.tp), tp1_configs(args.block)
    out: dict[str, Any] = {"load": load_note(), "gpu": args.gpu, "model": args.model, "tp": args.tp,
                           "output_tokens": args.output, "eos": not args.no_eos, "maps": {}}
    columns = [("panel", "panel", 0), ("best", "best", 0), ("speedup", "vs auto", 2),
               ("runner_up_gap_pct", "gap %", 1), ("auto_tok_s", "auto tok/s", 1),
               ("tau", "tau", 2), ("in_flight", "in flight", 0)]
    if args.simulate:
        columns += [("sim_best", "sim best", 0), ("sim_vs_closed_pct", "sim/closed %", 1)]
    for name in args.truth:
        rows = truth_map(truth(name), hw, configs, args)
        out["maps"][name] = rows
        print(f"\n== truth {name}: {args.gpu} x{args.tp} {args.model}, {args.output} tokens out")
        print(table(rows, columns))
    found = checks()
    out["checks"] = [vars(c) for c in found]
    print("\n== shape checks (H100, Qwen3-8B, published)")
    print(table([vars(c) for c in found], [("name", "check", 0), ("model", "model", 3),
                                            ("published", "published", 3), ("source", "source", 0)]))
    write_results("emulator_truth", out)


if __name__ == "__main__":
    main()
