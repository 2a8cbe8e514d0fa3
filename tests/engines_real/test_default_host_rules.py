"""The client-host rules at their defaults on the real engine (issue 24): with the server and the
client on separate CPUs (engine.cpus auto) and retries, no cell of a small real sweep is lost to
the client's own stalls on the CI machine. Each cell's verdict, attempts, client stall and the
server's and the sweep's CPU are printed (pytest -s shows them; the closing note cites them).

What holds at any load (issue 42: at a load of 4 on 2 cores it failed, a cell ``invalid`` for
``busy_host`` and ``coalesced_reads`` together, while only ``busy_host`` was allowed): a cell
whose host was busy (``busy_host`` in any of its attempts: other processes took the CPUs) may
also have stalled the client, so it may end on the host-side rules, after every retry; a cell
whose host was quiet throughout must end ok, or the client's own stall lost it (the claim this
test makes). The test cannot quiet the host; it says which cells it judged which way."""

from __future__ import annotations

from pathlib import Path

from paramsfiles import write_params
from ports import free_port

import specbench_lib as sb
from specbench_lib.model.catalogue import DEFAULT_MAX_COALESCED_FIRST_FRACTION, C, host_side

ROOT = Path(__file__).resolve().parents[2]

def test_the_default_host_rules_lose_no_cell_to_the_client(engine, tmp_path: Path) -> None:
    # the defaults of every client-host rule: nothing here loosens them; a free port (other
    # checkouts run it too)
    path = write_params(tmp_path, ROOT / "params" / "embedded_small.yaml", name="defaults.yaml",
                        phase="defaults", engine={"port": free_port()})
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
    quiet = []
    for cell in run.cells:  # a busy host is the host's truth; the client's own stall is not
        attempts = [cell.verdict.reasons, *(a.reasons for a in cell.facts.remeasured)]
        if not any(str(r).startswith(C.busy_host) for found in attempts for r in found):
            quiet.append(cell)
            continue
        assert cell.status == "ok" or (cell.verdict.codes <= host_side() and len(
            cell.facts.remeasured) == plan.params.retries), (cell.cell_id, cell.verdict.reasons)
    print(f"{len(quiet)} of {len(run.cells)} cells on a quiet host")
    lost = [(c.cell_id, c.verdict.reasons) for c in quiet if c.status != "ok"]
    assert len(lost) <= (1 if len(quiet) == len(run.cells) else 0), lost
