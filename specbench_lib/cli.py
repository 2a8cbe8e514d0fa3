"""``specbench run PHASE [-p key value]…``: papermill underneath, output kept in the run dir."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

import yaml

from .errors import SpecbenchError
from .notebook_link import NOTEBOOK_ENV
from .paths import outputs_dir, project_root
from .store import new_run_id


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="specbench", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="execute a phase notebook with papermill into a run dir")
    run.add_argument("phase", help="a notebook name in notebooks/ (tp1) or a path to one")
    run.add_argument("--params", help="params file (sets the notebook's params_file)")
    run.add_argument("-p", "--parameter", nargs=2, action="append", default=[],
                     metavar=("NAME", "VALUE"), help="a notebook parameter (YAML value)")
    args = parser.parse_args(argv)
    try:
        return _run(args.phase, args.params, args.parameter)
    except SpecbenchError as exc:
        print(f"specbench: {exc}", file=sys.stderr)
        return 2


def _run(phase: str, params_file: str | None, pairs: list[list[str]]) -> int:
    import papermill

    root = project_root()
    notebook = Path(phase) if phase.endswith(".ipynb") else root / "notebooks" / f"{phase}.ipynb"
    if not notebook.is_file():
        print(f"specbench: notebook {notebook} not found; phases: "
              f"{sorted(p.stem for p in (root / 'notebooks').glob('*.ipynb'))}", file=sys.stderr)
        return 2
    parameters: dict[str, Any] = {name: yaml.safe_load(value) for name, value in pairs}
    if params_file:
        parameters["params_file"] = str(Path(params_file).resolve())
    run_id = parameters.setdefault("run_id", new_run_id(notebook.stem))
    run_dir = outputs_dir() / "runs" / str(run_id)
    run_dir.mkdir(parents=True, exist_ok=False)
    output = run_dir / notebook.name
    print(f"specbench: running {notebook.name} into {run_dir}", flush=True)
    os.environ[NOTEBOOK_ENV] = str(output)
    try:
        papermill.execute_notebook(str(notebook), str(output), parameters=parameters,
                                   cwd=str(root), progress_bar=False, log_output=True)
    except papermill.PapermillExecutionError as exc:
        print(f"specbench: the notebook failed at cell {exc.exec_count}: {exc.ename}: "
              f"{exc.evalue}\nexecuted notebook: {output}\nrun directory: {run_dir}",
              file=sys.stderr)
        return 1
    print(f"specbench: run directory: {run_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
