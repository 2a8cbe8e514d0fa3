"""``specbench run | runs | report | compare | lab | doctor``: papermill underneath, outputs kept in run
directories."""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from .analysis.answer import Answer
from .core.durations import parse_duration
from .core.errors import ParamsError, SpecbenchError, StoreError
from .core.paths import outputs_dir, project_root
from .core.store import load_yaml
from .kernelrun import execute, failed_in_a_cell, interruption, kernel_died, unsaved
from .lab import open_lab
from .model.answerfile import ANSWER_FILE, answer_or_error
from .model.layering import load_params
from .model.nbparams import notebook_parameters, unknown_parameter
from .model.plan import load_plan
from .model.staging import stage_phase
from .report.diff import RunDiff, write_diff
from .report.export import compare, write
from .report.pages import build_index, render_html, run_summaries
from .runs.attempts import keep_attempt
from .runs.manifest import Manifest
from .runs.results import RunResult
from .runs.run import RunDir, check_run_id, make_folder, new_run_id, resumable_manifest
from .sweep.preflight import doctor
from .sweep.preview import PlanPreview


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
    notebook = _notebook(args.phase)
    return 2 if notebook is None else open_lab(notebook, fresh=args.fresh, extra=args.jupyter)


def _none(_: argparse.ArgumentParser) -> None:
    return None


COMMANDS: dict[str, Command] = {
    "run": Command("execute a phase notebook with papermill into a run dir", _run_arguments,
                   lambda a: _run(a.phase, a.params, a.resume, a.parameter, dry_run=a.dry_run,
                                  time_budget=a.time_budget)),
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


INTERRUPTED = 130  # the exit status of a process ended by Ctrl-C (128 + SIGINT)


def _notebook(phase: str) -> Path | None:
    root = project_root()
    notebook = Path(phase) if phase.endswith(".ipynb") else root / "notebooks" / f"{phase}.ipynb"
    if notebook.is_file():
        return notebook
    print(f"specbench: notebook {notebook} not found; phases: "
          f"{sorted(p.stem for p in (root / 'notebooks').glob('*.ipynb'))}", file=sys.stderr)
    return None


def _parameters(notebook: Path, pairs: list[list[str]]) -> tuple[list[str], dict[str, Any]]:
    """The parameters the notebook declares, and the ``-p`` values given (YAML), each checked:
    a name the notebook does not declare is refused with its closest match."""

    declared = list(notebook_parameters(notebook))
    given: dict[str, Any] = {}
    for name, value in pairs:
        if name not in declared:
            raise unknown_parameter(name, value, declared, notebook=notebook)
        try:
            given[name] = load_yaml(value)
        except yaml.YAMLError as exc:
            raise ParamsError(f"-p {name} {value!r} is not a YAML value ({exc})", file=notebook,
                              key=name, value=value) from None
    return declared, given


def _require_declared(name: str, flag: str, declared: Collection[str], notebook: Path) -> None:
    if name not in declared:
        raise ParamsError(f"{flag} sets the notebook parameter {name!r}, which {notebook.name} does "
                          f"not take; it takes: {', '.join(declared)}", file=notebook, key=name)


def _params_file(notebook: Path, params_file: str | None, given: dict[str, Any]) -> str | None:
    """The params file the notebook will run: ``-f``, else ``-p params_file``, else its default."""
    if params_file:
        return params_file
    if given.get("params_file"):
        return str(given["params_file"])
    default = notebook_parameters(notebook).get("params_file")
    return load_yaml(default) if default else None


def _dry_run(notebook: Path, params_file: str | None, given: dict[str, Any]) -> int:
    params = _params_file(notebook, params_file, given)
    if params is None:
        print(f"specbench: {notebook.name} has no params_file parameter; nothing to plan",
              file=sys.stderr)
        return 2
    print(PlanPreview(load_plan(params, budget=given.get("budget"),
                                time_budget=given.get("time_budget", "params"),
                                stage=given.get("stage"),
                                contenders_run=given.get("contenders_run"))).text())
    return 0


def _destination(notebook: Path, declared: Collection[str], parameters: dict[str, Any],
                 params_file: str | None, resume: str | None) -> tuple[RunDir | None, Path] | int:
    """The run directory (None for the report notebook) and the executed notebook's path; an
    exit status when the run cannot go there. Sets ``resume``/``run_id``/``params_file``."""

    if resume:
        _require_declared("resume", "--resume", declared, notebook)
        run = RunDir.at(check_run_id(resume, key="--resume"))
        if not run.manifest_path.is_file():
            print(f"specbench: no run {resume} under {run.path.parent}; see 'specbench runs'",
                  file=sys.stderr)
            return 2
        previous = Manifest.from_dict(resumable_manifest(run))  # damaged: a StoreError naming it
        parameters["resume"] = resume
        if "params_file" in declared and "params_file" not in parameters and previous.params_file:
            parameters["params_file"] = previous.params_file  # the run's own params
        return run, run.next_notebook(notebook.stem)
    if "run_id" in declared:
        if parameters.get("run_id"):
            check_run_id(parameters["run_id"], key="-p run_id")
        source = _params_file(notebook, params_file, parameters)
        run_phase = (stage_phase(load_params(source), parameters.get("stage")) if source
                     else notebook.stem)
        run_id = parameters.setdefault("run_id", new_run_id(run_phase))
        run = RunDir.at(str(run_id))
        if run.path.exists():
            print(f"specbench: run directory {run.path} exists; choose another run_id, or resume "
                  f"it with --resume {run_id}", file=sys.stderr)
            return 2
        make_folder(run.path)
        return run, run.path / notebook.name
    output = outputs_dir() / notebook.stem / notebook.name  # the report: beside what it writes
    make_folder(output.parent)
    return None, output


def _run(phase: str, params_file: str | None, resume: str | None, pairs: list[list[str]], *,
         dry_run: bool = False, time_budget: str | None = None) -> int:
    root = project_root()
    notebook = _notebook(phase)
    if notebook is None:
        return 2
    declared, parameters = _parameters(notebook, pairs)
    if time_budget is not None:  # seconds, or None for the fixed plan; a bad value names the flag
        _require_declared("time_budget", "--time-budget", declared, notebook)
        parameters["time_budget"] = parse_duration(time_budget, key="--time-budget")
    if dry_run or parameters.get("dry_run"):
        return _dry_run(notebook, params_file, parameters)
    if params_file:
        _require_declared("params_file", "--params", declared, notebook)
        parameters["params_file"] = str(Path(params_file).resolve())
    where = _destination(notebook, declared, parameters, params_file, resume)
    if isinstance(where, int):
        return where
    run, output = where
    if "PAPERMILL_OUTPUT_PATH" in declared:
        parameters["PAPERMILL_OUTPUT_PATH"] = str(output)  # what papermill --inject-paths sets
    print(f"specbench: running {notebook.name} into {output.parent}", flush=True)
    before = len(run.read_manifest().attempts) \
        if run is not None and run.manifest_path.is_file() else 0
    failed = execute(notebook, output, parameters, root)
    interrupted, failed = interruption(failed, run)
    died = kernel_died(failed)
    if isinstance(failed, OSError) and not interrupted:  # papermill could not save it
        return unsaved(run, output, failed)
    if failed is not None and not interrupted and not died and not failed_in_a_cell(failed):
        raise failed
    recorded = run is None or run.manifest_path.is_file()
    if run is not None and not recorded:  # stopped before the sweep began (preflight, params)
        output = _set_aside_unrecorded(run, output)
    elif run is not None:  # the complete attempt's notebook becomes the run's <phase>.ipynb
        output = keep_attempt(run, output, attempts_before=before)
    _share(output, quiet=interrupted or died)
    if interrupted or died:
        _say_interrupted(phase, params_file, pairs, run, recorded, notebook, output, time_budget,
                         died=died)
        return 1 if died else INTERRUPTED
    if failed_in_a_cell(failed):
        kept = f"run directory: {run.path}" if run is not None and recorded else \
            "no run was recorded (the notebook stopped before the sweep began)"
        print(f"specbench: the notebook failed at cell {failed.exec_count}: {failed.ename}: "
              f"{failed.evalue}\nexecuted notebook: {output}\n{kept}", file=sys.stderr)
        return 1
    if run is None:
        print(f"specbench: executed notebook: {output}")
    elif recorded:
        print(f"specbench: run directory: {run.path}")
    else:
        print(f"specbench: no run was recorded; executed notebook: {output}")
    return 0


def _say_interrupted(phase: str, params_file: str | None, pairs: list[list[str]],
                     run: RunDir | None, recorded: bool, notebook: Path, output: Path,
                     time_budget: str | None, *, died: bool = False) -> None:
    """How to resume an interrupted run (or one whose kernel died: killed, as the out-of-memory
    killer does), or that it recorded nothing to resume; one line."""
    how = "interrupted"
    if died:  # nbclient's DeadKernelError: the kernel was killed, as the OOM killer does
        how = ("stopped: its notebook's kernel died (killed: out of memory?); the cells it "
               "wrote are safe" if recorded else "stopped: its notebook's kernel died")
    if recorded and run is not None:
        command = shlex.join(["specbench", "run", phase, "--resume", run.run_id, *(
            ["--params", params_file] if params_file else []), *(
                ["--time-budget", time_budget] if time_budget else []), *(
                a for name, value in pairs if name not in ("run_id", "resume")
                for a in ("-p", name, value))])
        print(f"specbench: run {run.run_id} {how}; resume with: {command}",
              file=sys.stderr, flush=True)
    else:
        where = f"run {run.run_id}" if run is not None else notebook.name
        print(f"specbench: {where} {how} before it recorded anything (nothing to "
              f"resume); executed notebook: {output}", file=sys.stderr, flush=True)


def _set_aside_unrecorded(run: RunDir, notebook: Path) -> Path:
    """A run that wrote no manifest (it stopped at preflight or params) is no run: its executed
    notebook moves to ``outputs/failed/<run id>.ipynb`` and the folder is removed if nothing else
    is in it. Returns where the notebook is."""
    target = notebook
    if notebook.is_file():
        target = outputs_dir() / "failed" / f"{run.run_id}{notebook.suffix}"
        make_folder(target.parent)
        os.replace(notebook, target)
    run.discard_if_empty()
    return target


def _share(notebook: Path, *, quiet: bool = False) -> None:
    """Render the executed notebook to HTML and refresh outputs/index.html."""

    if notebook.is_file():
        html = render_html(notebook)
        if not quiet:
            print(f"specbench: rendered {html}")
    index = build_index()
    if not quiet:
        print(f"specbench: index {index}")


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
