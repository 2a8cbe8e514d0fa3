"""``specbench run | runs | doctor``: papermill underneath, outputs kept in run directories."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import yaml

from .errors import SpecbenchError
from .paths import outputs_dir, project_root
from .runs import RunDir, list_runs, new_run_id


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="specbench", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="execute a phase notebook with papermill into a run dir")
    run.add_argument("phase", help="a notebook name in notebooks/ (tp1) or a path to one")
    run.add_argument("--params", "-f", help="params file (sets the notebook's params_file)")
    run.add_argument("--resume", metavar="RUN_ID", help="continue an interrupted run")
    run.add_argument("--dry-run", action="store_true",
                     help="print the plan, argv per config and context-guard outcome; start nothing")
    run.add_argument("-p", "--parameter", nargs=2, action="append", default=[],
                     metavar=("NAME", "VALUE"), help="a notebook parameter (YAML value)")
    sub.add_parser("runs", help="list the runs under outputs/runs")
    report = sub.add_parser("report", help="compare runs: LaTeX table, comparison.json, index.html")
    report.add_argument("runs", nargs="*", help="run ids (default: the latest complete run per phase)")
    doctor = sub.add_parser("doctor", help="check what a sweep of PARAMS needs, start nothing")
    doctor.add_argument("params", help="params file")
    args = parser.parse_args(argv)
    try:
        if args.command == "runs":
            return _runs()
        if args.command == "doctor":
            return _doctor(args.params)
        if args.command == "report":
            return _report(args.runs)
        if args.dry_run:
            return _dry_run(args.phase, args.params, args.parameter)
        return _run(args.phase, args.params, args.resume, args.parameter)
    except SpecbenchError as exc:
        print(f"specbench: {exc}", file=sys.stderr)
        return 2


def _notebook(phase: str) -> Path | None:
    root = project_root()
    notebook = Path(phase) if phase.endswith(".ipynb") else root / "notebooks" / f"{phase}.ipynb"
    if notebook.is_file():
        return notebook
    print(f"specbench: notebook {notebook} not found; phases: "
          f"{sorted(p.stem for p in (root / 'notebooks').glob('*.ipynb'))}", file=sys.stderr)
    return None


def _params_file(notebook: Path, params_file: str | None, given: dict[str, Any]) -> str | None:
    """The params file the notebook will run: ``-f``, else ``-p params_file``, else its default."""
    import papermill

    if params_file:
        return params_file
    if given.get("params_file"):
        return str(given["params_file"])
    default = papermill.inspect_notebook(str(notebook)).get("params_file")
    return yaml.safe_load(default["default"]) if default else None


def _dry_run(phase: str, params_file: str | None, pairs: list[list[str]]) -> int:
    from .params import load_plan
    from .preview import PlanPreview

    notebook = _notebook(phase)
    if notebook is None:
        return 2
    given = {name: yaml.safe_load(value) for name, value in pairs}
    params = _params_file(notebook, params_file, given)
    if params is None:
        print(f"specbench: {notebook.name} has no params_file parameter; nothing to plan",
              file=sys.stderr)
        return 2
    print(PlanPreview(load_plan(params, budget=given.get("budget"))).text())
    return 0


def _run(phase: str, params_file: str | None, resume: str | None, pairs: list[list[str]]) -> int:
    import papermill

    from .params import load_params

    root = project_root()
    notebook = _notebook(phase)
    if notebook is None:
        return 2
    parameters: dict[str, Any] = {name: yaml.safe_load(value) for name, value in pairs}
    if params_file:
        parameters["params_file"] = str(Path(params_file).resolve())
    if resume:
        parameters["resume"] = resume
        run = RunDir.at(resume)
        if not run.manifest_path.is_file():
            print(f"specbench: no run {resume} under {run.path.parent}; see 'specbench runs'",
                  file=sys.stderr)
            return 2
        output = run.next_notebook(notebook.stem)
    else:
        source = _params_file(notebook, params_file, parameters)
        run_phase = load_params(source).phase if source else notebook.stem
        run_id = parameters.setdefault("run_id", new_run_id(run_phase))
        run = RunDir.at(str(run_id))
        run.path.mkdir(parents=True, exist_ok=False)
        output = run.path / notebook.name
    parameters["PAPERMILL_OUTPUT_PATH"] = str(output)  # what papermill --inject-output-path sets
    run_dir = run.path
    print(f"specbench: running {notebook.name} into {run_dir}", flush=True)
    failed = None
    try:
        papermill.execute_notebook(str(notebook), str(output), parameters=parameters,
                                   cwd=str(root), progress_bar=False, log_output=True)
    except papermill.PapermillExecutionError as exc:
        failed = exc
    finally:
        _share(output)
    if failed is not None:
        print(f"specbench: the notebook failed at cell {failed.exec_count}: {failed.ename}: "
              f"{failed.evalue}\nexecuted notebook: {output}\nrun directory: {run_dir}",
              file=sys.stderr)
        return 1
    print(f"specbench: run directory: {run_dir}")
    return 0


def _share(notebook: Path) -> None:
    """Render the executed notebook to HTML and refresh outputs/index.html."""
    from .report import build_index, render_html

    if notebook.is_file():
        print(f"specbench: rendered {render_html(notebook)}")
    print(f"specbench: index {build_index()}")


def _report(runs: list[str]) -> int:
    from .report import compare, write

    for path in write(compare(",".join(runs) or None)):
        print(f"specbench: wrote {path}")
    return 0


def _runs() -> int:
    runs = list_runs()
    if not runs:
        print(f"no runs under {outputs_dir() / 'runs'}")
        return 0
    print(f"{'run':<40} {'phase':<10} {'status':<12} {'ok':>4} {'inv':>4} {'crash':>5} {'skip':>4}  commit")
    for r in runs:
        counts = r["counts"] or {}
        commit = f"{r['commit']}{'+dirty' if r['dirty'] else ''}"
        print(f"{r['run_id']:<40} {str(r['phase']):<10} {str(r['status']):<12} "
              f"{counts.get('ok', '-'):>4} {counts.get('invalid', '-'):>4} {counts.get('crashed', '-'):>5} "
              f"{counts.get('skipped', '-'):>4}  {commit}")
    return 0


def _doctor(params_file: str) -> int:
    from .params import load_plan
    from .preflight import doctor

    checks = doctor(load_plan(params_file))
    for check in checks:
        print(check)
    return 0 if all(c.ok for c in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
