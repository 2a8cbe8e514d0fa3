"""``specbench run | runs | report | compare | lab | doctor``: papermill underneath, outputs kept in run
directories."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass

from .analysis.answer import Answer
from .core.errors import SpecbenchError, StoreError
from .core.paths import outputs_dir
from .lab import open_lab
from .model.answerfile import ANSWER_FILE, answer_or_error
from .model.plan import load_plan
from .report.diff import RunDiff, write_diff
from .report.export import compare, write
from .report.pages import run_summaries
from .runcommand import INTERRUPTED, find_notebook, run_command
from .runs.results import RunResult
from .runs.run import RunDir
from .sweep.preflight import doctor


@dataclass(frozen=True)
class Command:
    """One subcommand: its help line, how it adds its arguments, what it runs (an exit status)."""

    help: str
    arguments: Callable[[argparse.ArgumentParser], object]
    runs: Callable[[argparse.Namespace], int]


def _run_arguments(run: argparse.ArgumentParser) -> None:
    run.add_argument("phase", help="a notebook name in notebooks/ (tp1) or a path to one")
    run.add_argument("--params", "-f", help="params file (sets the notebook's params_file)")
    run.add_argument("--resume", metavar="RUN_ID", help="continue an interrupted run")
    run.add_argument("--dry-run", action="store_true",
                     help="print the plan, argv per config and context-guard outcome; start nothing")
    run.add_argument("--time-budget", metavar="DURATION",
                     help="measure in rounds until the best config of every panel is decided or "
                     "this wall time is spent (10m, 90s, 480; none: the fixed full plan)")
    run.add_argument("-p", "--parameter", nargs=2, action="append", default=[],
                     metavar=("NAME", "VALUE"), help="a notebook parameter (YAML value)")


def _report_arguments(report: argparse.ArgumentParser) -> None:
    report.add_argument("runs", nargs="*", help="run ids (default: the latest complete full-plan "
                        "run per phase)")
    report.add_argument("--merge", action="store_true", help="average two runs of one phase")


def _compare_arguments(pair: argparse.ArgumentParser) -> None:
    pair.add_argument("run_a", help="the reference run id")
    pair.add_argument("run_b", help="the run compared with it")


def _lab_arguments(lab: argparse.ArgumentParser) -> None:
    lab.add_argument("phase", nargs="?", default="tp1", help="a notebook name in notebooks/ "
                     "(default tp1) or a path to one")
    lab.add_argument("--fresh", action="store_true", help="a new copy (the old one is kept "
                     "beside it as <phase>.<n>.ipynb)")
    lab.add_argument("--jupyter", action="append", default=[], metavar="OPTION",
                     help="an option for JupyterLab, repeatable: --jupyter=--no-browser")


def _lab(args: argparse.Namespace) -> int:
    notebook = find_notebook(args.phase)
    return 2 if notebook is None else open_lab(notebook, fresh=args.fresh, extra=args.jupyter)


def _none(_: argparse.ArgumentParser) -> None:
    return None


COMMANDS: dict[str, Command] = {
    "run": Command("execute a phase notebook with papermill into a run dir", _run_arguments,
                   lambda a: run_command(a.phase, a.params, a.resume, a.parameter,
                                         dry_run=a.dry_run, time_budget=a.time_budget)),
    "runs": Command("list the runs under outputs/runs", _none, lambda a: _runs()),
    "report": Command("compare runs: LaTeX table, comparison.json, figures, results.html, "
                      "index.html", _report_arguments, lambda a: _report(a.runs, merge=a.merge)),
    "compare": Command("two runs side by side: metrics, verdict changes, setup",
                       _compare_arguments, lambda a: _compare(a.run_a, a.run_b)),
    "lab": Command("copy a phase notebook into outputs/lab/ and open the copy in JupyterLab "
                   "(the committed notebooks stay clean)", _lab_arguments, _lab),
    "answer": Command("a budgeted run's answer, or its answer so far while it runs",
                      lambda d: d.add_argument("run", help="run id"), lambda a: _answer(a.run)),
    "doctor": Command("check what a sweep of PARAMS needs, start nothing",
                      lambda d: d.add_argument("params", help="params file"),
                      lambda a: _doctor(a.params)),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="specbench", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    for name, command in COMMANDS.items():
        command.arguments(sub.add_parser(name, help=command.help))
    args = parser.parse_args(argv)
    try:
        return COMMANDS[args.command].runs(args)
    except SpecbenchError as exc:
        print(f"specbench: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("specbench: interrupted", file=sys.stderr)
        return INTERRUPTED


def _report(runs: list[str], *, merge: bool = False) -> int:

    comparison = compare(",".join(runs) or None, merge=merge, merge_hint="--merge")
    for path in write(comparison):  # unreadable runs: warned, skipped
        print(f"specbench: wrote {path}")
    return 0


def _compare(run_a: str, run_b: str) -> int:
    found = [RunDir.at(run_id) for run_id in (run_a, run_b)]
    missing = [run.run_id for run in found if not run.manifest_path.is_file()]
    if missing:
        raise StoreError(f"no such runs: {', '.join(missing)}; see 'specbench runs'",
                         path=outputs_dir() / "runs")
    comparison = RunDiff(*(RunResult(run.path) for run in found))
    print(comparison.text())
    print(f"specbench: wrote {write_diff(comparison, outputs_dir() / 'compare')}")
    return 0


def _runs() -> int:

    runs = run_summaries()
    if not runs:
        print(f"no runs under {outputs_dir() / 'runs'}")
        return 0
    rows = [("run", "phase", "status", "plan", "took", "ok", "inv", "crash", "skip", "commit")]
    for r in runs:
        if r["error"]:
            print(f"specbench: warning: skipping run {r['run_id']}: {r['error']}", file=sys.stderr)
            continue
        counts = r["counts"] if isinstance(r["counts"], dict) else {}
        rows.append((r["run_id"], str(r["phase"]), str(r["status"]), str(r["plan"]),
                     str(r["elapsed"]), *(str(counts.get(k, "-")) for k in
                                          ("ok", "invalid", "crashed", "skipped")),
                     f"{r['commit']}{'+dirty' if r['dirty'] else ''}"))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:  # every column as wide as its longest value: long phase names stay aligned
        print("  ".join(v.rjust(w) if 4 <= i <= 8 else v.ljust(w)
                        for i, (v, w) in enumerate(zip(row, widths, strict=True))).rstrip())
    if any(r["status"] == "unrecorded" for r in runs):
        print("unrecorded: its process was killed before the sweep wrote a manifest; nothing to "
              "resume: remove the folder")
    died = [r["run_id"] for r in runs if r["status"] == "died"]
    if died:
        print(f"died: the process writing the run was killed; continue with 'specbench run <phase> "
              f"--resume {died[-1]}'")
    return 0


def _answer(run_id: str) -> int:
    """Print the run's ``answer.json`` in words: written after every look while the sweep runs
    (the answer so far), and at its end."""
    path = RunDir.at(run_id).path
    if not path.is_dir():
        print(f"specbench: no run {run_id} under {path.parent}; see 'specbench runs'",
              file=sys.stderr)
        return 2
    found, damaged = answer_or_error(path)
    if found is None and damaged is None:
        print(f"no answer yet: run {run_id} has no {ANSWER_FILE} (a fixed plan's is written at its "
              f"end; a budgeted run's after its first look)")
        return 1
    print(Answer(found, damaged=damaged).text())
    return 0 if damaged is None else 1


def _doctor(params_file: str) -> int:
    checks = doctor(load_plan(params_file))
    for check in checks:
        print(check)
    return 0 if all(c.ok for c in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
