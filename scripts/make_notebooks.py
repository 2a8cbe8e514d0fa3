"""Write the phase notebooks (run after changing their shape; they are committed without outputs).

    .venv/bin/python scripts/make_notebooks.py
"""

from __future__ import annotations

from pathlib import Path

import nbformat as nbf

ROOT = Path(__file__).resolve().parent.parent
PHASES = {
    "tp1": ("params/embedded.yaml", "one GPU (TP1); by default the embedded CPU engine, so it runs "
            "anywhere — the SGLang research setup is `-p params_file params/tp1.yaml`"),
    "tp4": ("params/tp4.yaml", "four GPUs (TP4) on SGLang; `-p dry_run True` shows the plan on any "
            "machine"),
    "tp8": ("params/tp8.yaml", "eight GPUs (TP8) on SGLang; `-p dry_run True` shows the plan on any "
            "machine"),
}
STATEMENT = """# Phase {title} — throughput vs speculative budget

Phase {title}: {what}. The answer comes first, then the figures and the table; the progress log,
every cell's verdict and how to run this notebook are collapsed at the end."""
# one HTML block (no blank line), so every renderer keeps it whole and collapsed
HOW_TO_RUN = ("<details><summary>How to run this notebook</summary><p>"
              "One server per config (autoregressive <code>auto</code>, then each speculative "
              "config at each budget); every cell is judged <code>ok</code> / "
              "<code>invalid</code> / <code>crashed</code> / <code>skipped</code> with its "
              "reasons, and only <code>ok</code> cells reach the table and the plots. Run it with "
              "<code>specbench run {name}</code> or <code>papermill --inject-paths "
              "notebooks/{name}.ipynb out.ipynb -p budget 16</code> (<code>--inject-paths</code> "
              "tells the notebook where papermill writes it, so its run directory keeps a copy "
              "and a parameter the notebook does not take, such as <code>-p budgt 16</code>, is "
              "refused). From JupyterLab (<code>specbench lab {name}</code>), <i>Run All</i>: "
              "the run records this notebook's path and copies it into its run directory as last "
              "saved; save it (Ctrl-S) after the run, or let autosave, and the copy follows with "
              "the outputs.</p></details>")
PARAMETERS = '''params_file: str = "{params}"  # params YAML of the phase (from the project root or cwd)
budget: Optional[int] = None  # one budget (plus the auto baseline), or None for every budget
run_id: Optional[str] = None  # name of the run directory under outputs/runs; None makes a new one
resume: Optional[str] = None  # id of an interrupted run to continue (keeps its ok cells)
dry_run: bool = False  # show the plan, argv per config and context-guard outcome; start nothing
retry_known_bad: bool = False  # run the configs listed under known_bad instead of skipping them
reuse: bool = False  # copy ok cells with matching fingerprints from earlier runs instead of measuring
time_budget: Optional[str] = "params"  # "8m": stop once each best is decided; None: fixed plan
stage: Optional[str] = None  # the stage of a staged design (params stages); None: its first
contenders_run: Optional[str] = None  # the run whose answer gives a contenders stage its configs
PAPERMILL_OUTPUT_PATH: Optional[str] = None  # set by papermill --inject-paths (and specbench run)'''
CALLS = [
    "plan = sb.load_plan(params_file, budget=budget, time_budget=time_budget, stage=stage,\n"
    "                    contenders_run=contenders_run, notebook=PAPERMILL_OUTPUT_PATH)\nplan",
    "result = sb.run_sweep(plan, run_id=run_id, resume=resume, dry_run=dry_run,\n"
    "                      retry_known_bad=retry_known_bad, reuse=reuse)\n"
    "sb.keep_notebook(result, PAPERMILL_OUTPUT_PATH)\nsb.answer_of(result)",
    "result.require_valid()\nfigures = result.figures()\nresult.save_figures(figures)",
    "result.summary()",
    "result.categories()  # by category: the claim per category and group, a few answers each",
    "result.prompt_spread()  # per prompt: which prompts gain and which lose, by category and length",
    "sb.appendix(result)",
]


SETUP = "from typing import Optional\n\nimport specbench_lib as sb"
REPORT_STATEMENT = """# Report — phases compared

Reads a set of runs (by default the latest complete full-plan run of each phase; a one-budget run is
left out unless named, and two runs of one phase are refused unless `merge`) and compares them: the
best config per phase × workload × context × concurrency with its interval, speedups, TP1 → TP4 → TP8
scaling, acceptance length by budget, and every crashed, skipped or invalid cell with its reasons.
Writes a LaTeX table (`outputs/report/results.tex`), its figures (PNG + SVG) and
`outputs/report/results.html`, and refreshes `outputs/index.html`."""
REPORT_PARAMETERS = (
    'runs: Optional[str] = None  # comma-separated run ids; None for the latest complete full-plan '
    'run of each phase\n'
    'merge: bool = False  # average two runs of one phase instead of refusing them\n'
    'PAPERMILL_OUTPUT_PATH: Optional[str] = None  # set by papermill --inject-paths (and specbench run)')
REPORT_CALLS = ["report = sb.report.compare(runs, notebook=PAPERMILL_OUTPUT_PATH, merge=merge)\n"
                "report",
                "report.speedups()",
                "report.scaling()", "report.acceptance()", "report.failures()",
                "sb.report.write(report)"]


def report_notebook() -> nbf.NotebookNode:
    nb = nbf.v4.new_notebook()
    nb.cells = [
        nbf.v4.new_markdown_cell(REPORT_STATEMENT),
        nbf.v4.new_code_cell(SETUP, metadata={"tags": ["hide-input"]}),
        nbf.v4.new_code_cell(REPORT_PARAMETERS, metadata={"tags": ["parameters"]}),
        *(nbf.v4.new_code_cell(source) for source in REPORT_CALLS),
    ]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    return nb


def notebook(name: str, params: str, what: str) -> nbf.NotebookNode:
    nb = nbf.v4.new_notebook()
    nb.cells = [
        nbf.v4.new_markdown_cell(STATEMENT.format(title=name.upper(), name=name, what=what)),
        nbf.v4.new_code_cell(SETUP, metadata={"tags": ["hide-input"]}),
        nbf.v4.new_code_cell(PARAMETERS.format(params=params), metadata={"tags": ["parameters"]}),
        *(nbf.v4.new_code_cell(source) for source in CALLS),
        nbf.v4.new_markdown_cell(HOW_TO_RUN.format(name=name)),
    ]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    return nb


def notebooks() -> dict[str, nbf.NotebookNode]:
    """Every generated notebook by name, with stable cell ids (regenerating changes only what
    changed); tests/notebooks/test_notebooks.py checks that the committed files are exactly these."""
    built = {name: notebook(name, params, what) for name, (params, what) in PHASES.items()}
    built["report"] = report_notebook()
    for name, nb in built.items():
        for i, cell in enumerate(nb.cells):
            cell.id = f"{name}-{i}"
    return built


def main() -> None:
    for name, nb in notebooks().items():
        nbf.write(nb, ROOT / "notebooks" / f"{name}.ipynb")


if __name__ == "__main__":
    main()
