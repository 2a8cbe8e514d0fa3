import nbformat as nbf
nb = nbf.v4.new_notebook()
md = """# Phase TP1 — throughput vs speculative budget

One server per config (autoregressive `auto`, then each speculative config at each budget), every
cell judged `ok` / `invalid` / `crashed` / `skipped` with its reasons. Only `ok` cells reach the
table and the plot. Run with `specbench run tp1` or
`papermill notebooks/tp1.ipynb out.ipynb -p budget 16`."""
params = '''params_file: str = "params/embedded.yaml"  # params YAML of the phase (relative to the project root or cwd)
budget: Optional[int] = None  # one budget (plus the auto baseline), or None for every budget
run_id: Optional[str] = None  # name of the run directory under outputs/runs; None makes a new one
resume: Optional[str] = None  # id of an interrupted run to continue (keeps its ok cells)
retry_known_bad: bool = False  # run the configs listed under known_bad instead of skipping them
reuse: bool = False  # copy ok cells with matching fingerprints from earlier runs instead of measuring'''
cells = [
    nbf.v4.new_markdown_cell(md),
    nbf.v4.new_code_cell("from typing import Optional\n\nimport specbench_lib as sb"),
    nbf.v4.new_code_cell(params, metadata={"tags": ["parameters"]}),
    nbf.v4.new_code_cell("plan = sb.load_plan(params_file, budget=budget)\nplan"),
    nbf.v4.new_code_cell("result = sb.run_sweep(plan, run_id=run_id, resume=resume, retry_known_bad=retry_known_bad,\n                      reuse=reuse)\nresult"),
    nbf.v4.new_code_cell("result.require_valid()"),
    nbf.v4.new_code_cell('fig = sb.plots.throughput_vs_budget(result)\nresult.save_figure(fig, "throughput_vs_budget")'),
    nbf.v4.new_code_cell("result.summary()"),
]
nb.cells = cells
nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
nb.metadata["language_info"] = {"name": "python"}
nbf.write(nb, "notebooks/tp1.ipynb")
