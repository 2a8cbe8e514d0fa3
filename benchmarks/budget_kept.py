"""The budget kept to the cell (issue 46) on tp1's own plan: the engine swapped for a test server
that streams a token every 4 ms (``tests/support/fake_server.py``), every other key of
``params/tp1.yaml`` left but its 25,600-token context and its code workload (the test server,
a word a token, cannot be fed them), at a few budgets.

    python benchmarks/budget_kept.py [--budgets 60 120 300] [--interval 0.004]

For each budget it prints the sweep's time, the largest overrun past the budget (a cell's end or
the sweep's), what the answer says was cut, the cells measured and the time model's words, and
writes ``benchmarks/results/budget_kept.json``. Before issue 46 the first round always ran whole:
at 120 s the first cell ended 58 s over the budget and the sweep was still in round 1 at 6 m 40 s.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "support"))

from _common import load_note, write_results  # noqa: E402
from ports import free_port  # noqa: E402

import specbench_lib as sb  # noqa: E402
from specbench_lib.core.readback import to_doc  # noqa: E402
from specbench_lib.model.answerfile import read_answer  # noqa: E402

FAKE = ROOT / "tests" / "support" / "fake_server.py"


def tp1_on_a_test_server(folder: Path, budget: float, interval: float) -> Path:
    """tp1.yaml with its engine swapped for the test server (each config's budget on its argv),
    at its short context and its chat workload only: the test server counts a word a token, so
    the corpora cannot feed it a 25,600-token chat prompt ("1088 tokens of content cannot fill a
    25600-token chat prompt") nor 3,072-token code prompts ("one 3065-token prompt needs more
    text than the 28 documents of humaneval hold"), refused at the first server's start."""
    argv = json.dumps(["{binary}", str(FAKE), "--port", "{port}", "--interval", str(interval),
                       "--nodelay", "--n-ctx", "32768", "{spec_args}"])
    path = folder / f"tp1-test-server-{budget:g}.yaml"
    path.write_text(f"""extends: {ROOT / 'params' / 'tp1.yaml'}
engine:
  kind: template
  api: llamacpp
  binary: {sys.executable}
  model: {FAKE}
  model_cache: null
  draft_model: null
  launcher: null
  mem_fraction: null
  port: {free_port()}
  argv_template: {argv}
  spec_templates: {{linear: ["--budget", "{{budget}}"], tree: ["--budget", "{{budget}}"]}}
host: {{max_other_cpu_cores: null}}
max_coalesced_fraction: 0.5
max_coalesced_first_fraction: 0.5
contexts: [3072]
workloads:
  - {{name: chat, source: sharegpt, template: chat, stop: eos,
     chat_template_kwargs: {{enable_thinking: false}}}}
time_budget_s: {budget:g}
stages: []  # tp1's axes as one plan, as before its design's stages (docs/stages.md)
""")
    return path


def one(folder: Path, budget: float, interval: float) -> dict[str, object]:
    plan = sb.load_plan(tp1_on_a_test_server(folder, budget, interval))
    began = time.monotonic()
    result = sb.run_sweep(plan, outputs=folder / "out", progress=False)
    wall = time.monotonic() - began
    answer = read_answer(result.run_dir)
    assert answer is not None, "a budgeted sweep writes its answer"
    measured = sum(1 for c in result.cells if not c.verdict.by_design)
    spoiled = [c for c in result.cells if not (c.verdict.ok or c.verdict.by_design)]
    return {"budget_s": budget, "sweep_s": answer.seconds, "wall_s": round(wall, 1),
            "overrun": to_doc(answer.overrun), "cut": answer.cut.words if answer.cut else None,
            "cells_measured": measured, "cells_planned": len(result.cells),
            "stopped": answer.stopped, "rounds": answer.rounds,
            "more_time": answer.more_time.words if answer.more_time else None,
            "time_model": answer.time_model,
            "first_not_ok": (f"{spoiled[0].cell_id}: {spoiled[0].status}, "
                             f"{'; '.join(spoiled[0].verdict.reasons[:2])}" if spoiled else None)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--budgets", type=float, nargs="+", default=[60.0, 120.0, 300.0])
    parser.add_argument("--interval", type=float, default=0.004)
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for budget in args.budgets:
            before = load_note()
            row = {**one(Path(tmp), budget, args.interval), "load_before": before["loadavg"],
                   "load_after": load_note()["loadavg"]}
            rows.append(row)
            over = row["overrun"]
            print(f"budget {budget:g} s: sweep {row['sweep_s']} s (wall {row['wall_s']} s), "
                  f"largest overrun {over['largest_s']} s (allowed {over['allowed_s']} s), "
                  f"{row['cells_measured']} of {row['cells_planned']} cells measured, "
                  f"{row['rounds']} rounds ({row['stopped']}); load {row['load_before']} → "
                  f"{row['load_after']}\n  cut: {row['cut']}\n  {row['more_time']}\n"
                  f"  time model: {row['time_model']}\n  first cell not ok: "
                  f"{row['first_not_ok']}", flush=True)
    write_results("budget_kept", {"interval": args.interval, "runs": rows, "load": load_note()})


if __name__ == "__main__":
    main()
