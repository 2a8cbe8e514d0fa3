"""The client-host rules at their defaults on the real engine (issue 24): with the server and the
client on separate CPUs (engine.cpus auto) and retries, no cell of a small real sweep is lost to
the client's own stalls on the CI machine. Each cell's verdict, attempts, client stall and the
server's and the sweep's CPU are printed (pytest -s shows them; the closing note cites them)."""

from __future__ import annotations

from pathlib import Path

import specbench_lib as sb
from specbench_lib.model.catalogue import DEFAULT_MAX_COALESCED_FIRST_FRACTION, C

ROOT = Path(__file__).resolve().parents[1]

PARAMS = f"""# the defaults of every client-host rule: nothing here loosens them
extends: {ROOT / "params" / "embedded_small.yaml"}
phase: defaults
engine: {{port: 8193}}
"""


def test_the_default_host_rules_lose_no_cell_to_the_client(engine, tmp_path: Path) -> None:
    path = tmp_path / "defaults.yaml"
    path.write_text(PARAMS)
    plan = sb.load_plan(path)
    assert plan.params.max_coalesced_first_fraction == DEFAULT_MAX_COALESCED_FIRST_FRACTION
    run = sb.run_sweep(plan, outputs=tmp_path / "out", progress=False)
    for cell in run.cells:
        host = cell.facts.host
        print(f"{cell.cell_id}: {cell.status} {list(cell.verdict.reasons)} attempts "
              f"{1 + len(cell.facts.remeasured)}, client stall {cell.timing.get('client_stall_s')} s, "
              f"server {host.server_cpu_cores if host else '-'} cores, sweep "
              f"{host.own_cpu_cores if host else '-'}, other {host.other_cpu_cores if host else '-'}")
    servers = run.manifest["servers"]
    assert all(s["cpus"]["server"] and s["cpus"]["client"] for s in servers.values()), servers
    for cell in run.cells:  # a busy host is the host's truth; the client's own stall is not
        assert cell.status == "ok" or all(r.code == C.busy_host for r in cell.verdict.reasons), (
            cell.cell_id, cell.verdict.reasons)
    assert run.counts()["ok"] >= len(run.cells) - 1, run.counts()
