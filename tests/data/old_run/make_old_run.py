"""How tests/data/old_run was made: a real sweep on the fake server with specbench at commit
4651666 (schema 2, before the catalogue and stored stalls); the run directory was copied here
without results.parquet."""

import sys
from pathlib import Path

sys.path.insert(0, "tests")
from fakeparams import LENIENT_HOST, fake_argv, fake_engine

import specbench_lib as sb

out = Path("/tmp/oldrun")
p = out / "old.yaml"
p.write_text(f"""phase: old
{fake_engine(8231, fake_argv(interval=0.005), ready_timeout_s=10)}configs:
  - {{name: auto, method: auto}}
workloads:
  - {{name: code, source: humaneval}}
contexts: [16, 2046]
concurrency: [2]
output_tokens: 8
requests_per_cell: 3
requests_scale: fixed
warmup_requests: 1
request_rate: {{per_s: [30, 2000], arrival: fixed}}
{LENIENT_HOST}""")
plan = sb.load_plan(p)
print([c.cell_id for c in plan.cells])
r = sb.run_sweep(plan, outputs=out / "out", progress=False)
print(r.run_id, r.counts())
for c in r.cells:
    print(c.cell_id, c.status, [str(x) for x in c.verdict.reasons])
