"""Configs placed over a real multi-node Ray cluster on this machine (tests/support/raynodes.py): a head
without GPUs and three worker raylets of 2 logical GPUs each, every one its own Ray node, so the
driver, the scheduler, node affinity, node loss and the reaper take the paths they take on a
cluster of machines. Fake servers with fixed timing (tests/support/fake_server.py); few, short cells
(2 cores); a stand-in nvidia-smi on the nodes' PATH (tests/support/nvsmi.py). Ports 8300-8339. The
wall times: benchmarks/placement_overhead.py --nodes 3."""

from __future__ import annotations

import datetime as dt
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from budgetparams import budget_params
from fakeparams import LENIENT_HOST, fake_argv, fake_engine
from nvsmi import StandIn, gpu
from raynodes import ray_nodes, warm
from test_placement import cells, fake_servers, in_background, overlap

import specbench_lib as sb

PORT = 8300  # the driver leases it; placed servers take 8301-8339
NODES, GPUS = 3, 2
ONE_S = dt.timedelta(seconds=1)  # a cell file's times are whole seconds


POWER = {0: 200.0, 1: 120.0}  # the stand-in nvidia-smi's GPUs, as every node's workers see it


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, list[Any]]]:
    """The cluster, its raylets (and so their workers and servers) with a stand-in nvidia-smi
    first on their PATH: a node's GPUs 0 and 1 at known power."""
    smi = StandIn(tmp_path_factory.mktemp("smi"),
                  [gpu(i, power=p, util=80) for i, p in POWER.items()])
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PATH", f"{smi.folder}{os.pathsep}{os.environ['PATH']}")
        with ray_nodes(NODES, gpus=GPUS, cpus=2) as (ray_cluster, workers):
            warm(NODES * GPUS)
            yield ray_cluster, workers


def write_params(tmp_path: Path, *, placement: str, budgets: str, contexts: str = "[16]",
                 interval: float = 0.01, slow: float | None = None,
                 name: str = "placed.yaml") -> Path:
    """auto and ngram at ``budgets`` (and a ``slow`` config, when given, of that interval)."""
    ngram = fake_argv(interval=interval, budget=True)
    configs = f"  - {{name: ngram, method: ngram, budgets: {budgets}, argv: {ngram}}}\n"
    if slow is not None:
        configs += (f"  - {{name: slow, method: ngram, budgets: [64], argv: "
                    f"{fake_argv(interval=slow, budget=True)}}}\n")
    path = tmp_path / name
    path.write_text(f"""phase: cluster
{fake_engine(PORT, fake_argv(interval=interval))}configs:
  - {{name: auto, method: auto}}
{configs}workloads:
  - {{name: code, source: humaneval}}
contexts: {contexts}
concurrency: [1]
output_tokens: 16
requests_per_cell: 3
warmup_requests: 1
{LENIENT_HOST}placement: {placement}
""")
    return path


def where(found: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each config's placement (its first cell's)."""
    return {c["server"]["label"]: c["facts"]["placement"] for c in found.values()}


def worker_ids(workers: list[Any]) -> set[str]:
    return {w.node_id for w in workers}


def test_packed_configs_fill_every_node_and_name_their_node_neighbours(
        tmp_path: Path, cluster: tuple[Any, list[Any]]) -> None:
    _, workers = cluster
    result = sb.run_sweep(sb.load_plan(write_params(
        tmp_path, budgets="[4, 8, 16, 32, 64]",
        placement="{engine: ray, gpus_per_server: 1, cpus_per_server: 0.5, port_span: 39}")),
        outputs=tmp_path / "out", progress=False)
    found = cells(result)
    assert result.counts()["ok"] == 6, {k: c["verdict"] for k, c in found.items()}
    placed = where(found)
    nodes = {label: p["node"] for label, p in placed.items()}
    # six servers of 1 GPU on three nodes of 2: every node holds two, the GPU-less head none
    assert set(nodes.values()) == worker_ids(workers)
    assert sorted(list(nodes.values()).count(n) for n in set(nodes.values())) == [2, 2, 2]
    for label, p in placed.items():
        assert p["mode"] == "packed" and p["node_ip"] == "127.0.0.1" and len(p["gpus"]) == 1
        neighbours = {t["config"] for t in p["co_tenants"]}
        # what shared it: only the other config on its own node, with that config's GPU
        assert neighbours <= {k for k, n in nodes.items() if n == p["node"] and k != label}
        assert all(t["gpus"] == placed[t["config"]]["gpus"] for t in p["co_tenants"])
        same = [k for k, n in nodes.items() if n == p["node"] and k != label]
        assert placed[same[0]]["gpus"] != p["gpus"]  # two servers of a node: distinct GPUs
    assert any(p["co_tenants"] for p in placed.values())
    manifest = result.manifest["servers"]
    assert {k: s["placement"]["node"] for k, s in manifest.items()} == nodes
    for cell in found.values():  # each placed cell sampled the GPU Ray gave its server, alone
        (index,) = cell["facts"]["placement"]["gpus"]
        assert cell["facts"]["host"]["gpu"]["visible"] == [index]
        assert cell["metrics"]["gpu_power_mean_w"] == pytest.approx(POWER[int(index)])


def test_exclusive_runs_one_server_per_node_at_a_time_on_every_node(
        tmp_path: Path, cluster: tuple[Any, list[Any]]) -> None:
    _, workers = cluster
    result = sb.run_sweep(sb.load_plan(write_params(
        tmp_path, budgets="[4, 8, 16]", interval=0.03, contexts="[16, 32]",
        placement="{engine: ray, gpus_per_server: 1, mode: exclusive, port_span: 39}")),
        outputs=tmp_path / "out", progress=False)
    found = cells(result)
    assert result.counts()["ok"] == 8
    placed = where(found)
    assert {p["node"] for p in placed.values()} == worker_ids(workers)  # 4 configs, 3 nodes
    assert all(p["co_tenants"] == [] and p["mode"] == "exclusive" for p in placed.values())
    by_node: dict[str, list[dict[str, Any]]] = {}
    for cell in found.values():
        by_node.setdefault(cell["facts"]["placement"]["node"], []).append(cell)
    assert any(overlap(a, b) for a in found.values() for b in found.values()
               if a["facts"]["placement"]["node"] != b["facts"]["placement"]["node"])
    for group in by_node.values():  # never two at once on one node
        assert not any(overlap(a, b) for i, a in enumerate(group) for b in group[i + 1:])


def test_a_time_budget_runs_each_round_at_once_across_nodes(
        tmp_path: Path, cluster: tuple[Any, list[Any]]) -> None:
    params = budget_params(tmp_path, seed=0, budget="40s", port=PORT, jitter=0.3)
    params.write_text(params.read_text() + "placement: {engine: ray, gpus_per_server: 1, "
                      "cpus_per_server: 0.5, port_span: 39}\n")
    began = time.monotonic()
    result = sb.run_sweep(sb.load_plan(params), outputs=tmp_path / "out", progress=False)
    wall = time.monotonic() - began
    answer = json.loads((result.run_dir / "answer.json").read_text())
    measured = [c for c in cells(result).values() if c["verdict"]["status"] == "ok"]
    rounds: dict[int, list[dict[str, Any]]] = {}
    for cell in measured:
        rounds.setdefault(int(cell["spec"].get("repeat") or 0), []).append(cell)
    assert len(rounds[0]) == 5  # every config in round 1, over more than one node
    assert len({c["facts"]["placement"]["node"] for c in rounds[0]}) > 1
    servers = result.manifest["servers"]
    for number, group in rounds.items():  # each round's servers all started before any of its
        # cells ended (at once), and after every cell of the round before had ended
        keys = {c["server"]["label"] + (f".r{number}" if number else "") for c in group}
        started = [_at(servers[k]["placement"]["started"]) for k in keys]
        submitted = [_at(servers[k]["placement"]["submitted"]) for k in keys]
        assert max(started) < min(_at(c["provenance"]["ended"]) for c in group) + ONE_S
        if number:
            before = max(_at(c["provenance"]["ended"]) for c in rounds[number - 1])
            assert min(submitted) >= before  # (cell files keep whole seconds)
    # the budget is the placed run's wall time: the configs' own times (start, warmup, cells)
    # add up to more than the clock the budget counted, which is never past the run's wall
    own = sum(_config_s(s) for s in result.manifest["servers"].values())
    assert answer["seconds"] <= min(40.0, wall) + 0.1 < own
    assert answer["stopped"] in ("decided", "budget", "rounds")
    assert len(rounds) == answer["rounds"] >= 1


def _at(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text)


def _config_s(server: dict[str, Any]) -> float:
    """A config's own time: its server's start, warmup and cells (the manifest's timing)."""
    timing = server.get("timing") or {}
    measured = sum(sum(v for k, v in c.items() if k.endswith("_s") and k not in (
        "window_s", "client_stall_s")) for c in (timing.get("cells") or {}).values())
    return float(timing.get("start_s", 0) + timing.get("warmup_s", 0) + measured)

def test_a_node_lost_mid_run_leaves_its_cells_worker_lost_and_resume_measures_them(
        tmp_path: Path, cluster: tuple[Any, list[Any]]) -> None:
    """Last in this file: it removes a node (two are left)."""
    ray_cluster, workers = cluster
    marker = "0.0507"  # the slow config's interval: only its server has it in its argv
    params = write_params(tmp_path, budgets="[8]", contexts="[16, 32]", slow=float(marker),
                          placement="{engine: ray, gpus_per_server: 2, port_span: 39}")
    out = tmp_path / "out"
    lost: dict[str, Any] = {}

    def remove_its_node_after_first_cell() -> None:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            done = list(out.glob("runs/*/cells/slow-b64__code__ctx16__c1.json"))
            if done and fake_servers(marker):
                node = json.loads(done[0].read_text())["facts"]["placement"]["node"]
                victim = next(w for w in workers if w.node_id == node)
                lost.update(node=node, servers=fake_servers(marker))
                ray_cluster.remove_node(victim, allow_graceful=False)  # mid-cell ctx32
                return
            time.sleep(0.05)

    remover = in_background(remove_its_node_after_first_cell)
    result = sb.run_sweep(sb.load_plan(params), outputs=out, progress=False)
    remover.join(10)
    assert lost, "the slow config's server was never seen"
    found = cells(result)
    status = {k: (c["verdict"]["status"], tuple(r["code"] for r in c["verdict"]["reasons"]))
              for k, c in found.items()}
    assert status.pop("slow-b64__code__ctx32__c1") == ("crashed", ("worker_lost",))
    assert set(status.values()) == {("ok", ())} and len(status) == 5  # the rest went on
    crashed = found["slow-b64__code__ctx32__c1"]["facts"]
    assert crashed["placement"]["node"] == lost["node"] and crashed["server_alive"] is False
    others = {c["facts"]["placement"]["node"] for k, c in found.items()
              if not k.startswith("slow")}
    assert lost["node"] not in others  # 2 GPUs a server: one config a node
    time.sleep(0.5)
    assert fake_servers(marker) == {}  # no server left behind on the lost node
    assert result.manifest["status"] == "complete"
    again = sb.run_sweep(sb.load_plan(params), resume=result.run_dir.name, outputs=out,
                         progress=False)
    assert again.counts()["ok"] == 6
    redone = cells(again)["slow-b64__code__ctx32__c1"]["facts"]["placement"]["node"]
    assert redone != lost["node"] and redone in worker_ids(workers)
    assert sorted(again.manifest["attempts"][-1]["kept_cells"]) == sorted(status)
