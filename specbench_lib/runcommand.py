"""``specbench run``: a phase notebook executed with papermill (:mod:`~.kernelrun`) into a run
directory, its run id minted from the params' phase; a dry run prints the plan instead. An
interrupted run says how to resume it; a run that recorded nothing is set aside; the executed
notebook is rendered and the index refreshed."""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Collection
from pathlib import Path
from typing import Any

import yaml

from .core.durations import parse_duration
from .core.errors import ParamsError
from .core.paths import outputs_dir, project_root
from .core.store import load_yaml
from .kernelrun import execute, failed_in_a_cell, interruption, kernel_died, unsaved
from .model.layering import load_params
from .model.nbparams import notebook_parameters, unknown_parameter
from .model.plan import load_plan
from .model.staging import stage_phase
from .report.pages import build_index, render_html
from .runs.attempts import keep_attempt
from .runs.manifest import Manifest
from .runs.run import RunDir, check_run_id, make_folder, new_run_id, resumable_manifest
from .sweep.preview import PlanPreview

INTERRUPTED = 130  # the exit status of a process ended by Ctrl-C (128 + SIGINT)


def find_notebook(phase: str) -> Path | None:
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


def run_command(phase: str, params_file: str | None, resume: str | None, pairs: list[list[str]], *,
               dry_run: bool = False, time_budget: str | None = None) -> int:
    root = project_root()
    notebook = find_notebook(phase)
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
