"""Configs placed on Ray: a local Ray head on 127.0.0.1 with 4 logical GPUs, fake servers that
pace their tokens and log their CUDA_VISIBLE_DEVICES (tests/support/fake_server.py), and one small real
llama-server sweep. Ports 8240-8259."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import ray
from fakeparams import FAKE, LENIENT_HOST, fake_argv, fake_engine

import specbench_lib as sb
from specbench_lib.core.errors import ParamsError, PreflightError
from specbench_lib.model.hostfacts import CoTenant, Placement
from specbench_lib.model.records import CellFacts

ROOT = Path(__file__).resolve().parents[2]
PORT = 8240  # the driver leases it; placed servers take 8241-8259


@pytest.fixture(scope="module")
def ray_head() -> Iterator[None]:
    """A private Ray head on this machine declaring 4 logical GPUs, torn down after the tests.
    (Ray 2.60 turns 127.0.0.1 into this machine's own address: its services bind there, and
    nothing here talks beyond this machine.)"""
    ray.init(address="local", num_gpus=4, num_cpus=4, include_dashboard=False,
             _node_ip_address="127.0.0.1", log_to_driver=False, logging_level="WARNING")
    def warm() -> None:  # defined here: Ray ships it by value (tests/ is not on its path)
        import specbench_lib.sweep.driver  # noqa: F401
        import specbench_lib.sweep.placement  # noqa: F401

        time.sleep(1.0)  # held, so the four run on four workers

    try:
        # four workers started and specbench imported in each before any test times them (on
        # 2 cores, cold workers start seconds apart)
        ray.get([ray.remote(warm).options(num_gpus=1).remote() for _ in range(4)])
        yield
    finally:
        ray.shutdown()


def write_params(tmp_path: Path, *, placement: str, interval: float = 0.03,
                 budgets: str = "[4, 8, 16]", contexts: str = "[16]",
                 slow: float | None = None, name: str = "placed.yaml") -> Path:
    """Fake servers with fixed timing: each token ``interval`` s (the ngram-b8 config ``slow``
    s, when given), 4 requests x 16 tokens a cell."""
    ngram = fake_argv(interval=interval, budget=True)
    configs = f"  - {{name: ngram, method: ngram, budgets: {budgets}, argv: {ngram}}}"
    if slow is not None:
        slowly = fake_argv(interval=slow, budget=True)
        configs = f"  - {{name: slow, method: ngram, budgets: [8], argv: {slowly}}}"
    path = tmp_path / name
    path.write_text(f"""phase: placed
{fake_engine(PORT, fake_argv(interval=interval))}configs:
  - {{name: auto, method: auto}}
{configs}
workloads:
  - {{name: code, source: humaneval}}
contexts: {contexts}
concurrency: [1]
output_tokens: 16
requests_per_cell: 4
warmup_requests: 1
{LENIENT_HOST}placement: {placement}
""")
    return path


def cells(result: sb.SweepResult) -> dict[str, dict[str, Any]]:
    return {p.stem: json.loads(p.read_text()) for p in (result.run_dir / "cells").glob("*.json")}


def window(cell: dict[str, Any]) -> tuple[dt.datetime, dt.datetime]:
    prov = cell["provenance"]
    return dt.datetime.fromisoformat(prov["started"]), dt.datetime.fromisoformat(prov["ended"])


def overlap(a: dict[str, Any], b: dict[str, Any]) -> bool:
    (s1, e1), (s2, e2) = window(a), window(b)
    return s1 < e2 and s2 < e1


def logged_gpus(result: sb.SweepResult, key: str) -> str:
    log = (result.run_dir / "logs" / f"{key}.log").read_text()
    return next(line.split("=", 1)[1] for line in log.splitlines()
                if line.startswith("CUDA_VISIBLE_DEVICES="))


def content(cell: dict[str, Any]) -> tuple[Any, ...]:
    """What a cell measured, without where or when: spec, fingerprint, verdict, outputs."""
    return (cell["spec"], cell["fingerprint"], cell["verdict"]["status"],
            sorted(r["code"] for r in cell["verdict"]["reasons"]),
            [(r["warmup"], r["output_ids"], r["status"], (r["final"] or {}).get("completion_tokens"))
             for r in cell["requests"]])


def fake_servers(marker: str) -> dict[int, int]:
    """{pid: parent pid} of the live fake servers whose command line holds ``marker``."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
            stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if str(FAKE).encode() in cmdline and marker.encode() in cmdline and stat[0] != "Z":
            found[int(entry.name)] = int(stat[1])
    return found


def in_background(action: Callable[[], None]) -> threading.Thread:
    thread = threading.Thread(target=action, daemon=True)
    thread.start()
    return thread


def test_placed_configs_run_at_once_on_distinct_gpus_as_a_sequential_run_would(
        tmp_path: Path, ray_head: None) -> None:
    placed = sb.run_sweep(sb.load_plan(write_params(
        tmp_path, placement="{engine: ray, gpus_per_server: 1, port_span: 19}")),
        outputs=tmp_path / "out", progress=False)
    local = sb.run_sweep(sb.load_plan(write_params(tmp_path, placement="{engine: local}",
                                                   name="local.yaml")),
                         outputs=tmp_path / "out", progress=False)
    assert placed.counts()["ok"] == local.counts()["ok"] == 4
    ours, theirs = cells(placed), cells(local)
    # the same cells, fingerprints (placement is not measured), verdicts and outputs
    assert sorted(ours) == sorted(theirs)
    assert {k: content(c) for k, c in ours.items()} == {k: content(c) for k, c in theirs.items()}
    assert all("placement" not in c["facts"] for c in theirs.values())
    # placed: every pair of cells ran at the same time; sequential: none did
    keys = sorted(ours)
    pairs = [(a, b) for i, a in enumerate(keys) for b in keys[i + 1:]]
    assert all(overlap(ours[a], ours[b]) for a, b in pairs)
    assert not any(overlap(theirs[a], theirs[b]) for a, b in pairs)  # (the wall times: benchmarks/)
    # each on its own GPU and port, as Ray gave it, and as the server saw it
    where = {c["server"]["label"]: c["facts"]["placement"] for c in ours.values()}
    gpus = {label: p["gpus"] for label, p in where.items()}
    assert sorted(g for gs in gpus.values() for g in gs) == ["0", "1", "2", "3"]
    assert all(logged_gpus(placed, label) == ",".join(g) for label, g in gpus.items())
    ports = {p["port"] for p in where.values()}
    assert len(ports) == 4 and ports <= set(range(PORT + 1, PORT + 20))
    # co-tenancy: each cell names the three other configs and their GPUs
    for label, p in where.items():
        assert p["mode"] == "packed" and p["node_ip"] == ray.nodes()[0]["NodeManagerAddress"]
        assert {t["config"]: t["gpus"] for t in p["co_tenants"]} == {
            k: v for k, v in gpus.items() if k != label}
    servers = placed.manifest["servers"]
    assert sorted(servers) == sorted(gpus)
    assert all(s["placement"]["gpus"] == gpus[k] for k, s in servers.items())
    assert placed.manifest["params"]["placement"]["engine"] == "ray"
    # the placed run reads like any run: its table has every config; the report says where
    assert set(placed.table()["config"]) == set(gpus)
    from specbench_lib.report.export import Comparison

    names = Comparison([placed]).names()
    assert names.endswith(f"{placed.run_id} (placed on ray, packed)"), names


def test_exclusive_runs_one_server_per_node_with_no_co_tenants(tmp_path: Path,
                                                               ray_head: None) -> None:
    result = sb.run_sweep(sb.load_plan(write_params(
        tmp_path, interval=0.005, budgets="[4]",
        placement="{engine: ray, gpus_per_server: 1, mode: exclusive, port_span: 19}")),
        outputs=tmp_path / "out", progress=False)
    placed = cells(result)
    assert result.counts()["ok"] == 2
    a, b = placed.values()
    assert not overlap(a, b)
    assert all(c["facts"]["placement"]["co_tenants"] == [] for c in placed.values())
    assert all(c["facts"]["placement"]["mode"] == "exclusive" for c in placed.values())


def test_a_killed_worker_leaves_its_unfinished_cells_worker_lost_and_no_server(
        tmp_path: Path, ray_head: None) -> None:
    marker = "0.0503"  # the slow config's interval: only its server has it on its command line
    params = write_params(tmp_path, contexts="[16, 32]", interval=0.01, slow=float(marker),
                          placement="{engine: ray, gpus_per_server: 1, port_span: 19}")
    out = tmp_path / "out"
    killed: dict[str, int] = {}

    def kill_after_first_cell() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if list(out.glob("runs/*/cells/slow-b8__code__ctx16__c1.json")):
                servers = fake_servers(marker)
                if servers:
                    (pid, worker), = servers.items()
                    killed.update(server=pid, worker=worker)
                    os.kill(worker, signal.SIGKILL)  # the Ray worker, mid-cell ctx32
                    return
            time.sleep(0.05)

    killer = in_background(kill_after_first_cell)
    result = sb.run_sweep(sb.load_plan(params), outputs=out, progress=False)
    killer.join(5)
    assert killed, "the slow config's server was never seen"
    found = cells(result)
    status = {k: (c["verdict"]["status"], [r["code"] for r in c["verdict"]["reasons"]])
              for k, c in found.items()}
    assert status == {
        "auto__code__ctx16__c1": ("ok", []), "auto__code__ctx32__c1": ("ok", []),
        "slow-b8__code__ctx16__c1": ("ok", []),
        "slow-b8__code__ctx32__c1": ("crashed", ["worker_lost"])}
    lost = found["slow-b8__code__ctx32__c1"]["facts"]
    assert lost["placement"]["gpus"] and lost["server_alive"] is False
    time.sleep(0.5)
    assert fake_servers(marker) == {}  # no orphan server
    assert not Path(f"/proc/{killed['server']}").exists() or killed["server"] not in fake_servers(
        marker)
    log = (result.run_dir / "logs" / "slow-b8.log").read_text()  # what came back before the loss
    assert "CUDA_VISIBLE_DEVICES=" in log and "--interval 0.0503" in log
    assert result.manifest["status"] == "complete"
    # a placed run resumes like any run: only the lost cell is measured again
    again = sb.run_sweep(sb.load_plan(params), resume=result.run_dir.name, outputs=out,
                         progress=False)
    assert again.counts()["ok"] == 4
    attempt = again.manifest["attempts"][-1]
    assert sorted(attempt["kept_cells"]) == sorted(k for k in status if k != "slow-b8__code__ctx32__c1")
    history = list((again.run_dir / "cells" / "history").glob("slow-b8__code__ctx32__c1.*.json"))
    assert len(history) == 1  # the worker_lost file, kept


def test_ctrl_c_stops_every_placed_server(tmp_path: Path, ray_head: None) -> None:
    marker = "0.0501"
    params = write_params(tmp_path, contexts="[16, 32]", interval=float(marker),
                          budgets="[4, 8]",
                          placement="{engine: ray, gpus_per_server: 1, port_span: 19}")
    seen: dict[int, int] = {}

    def interrupt_when_all_up() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            servers = fake_servers(marker)
            if len(servers) == 3:
                seen.update(servers)
                time.sleep(0.3)
                os.kill(os.getpid(), signal.SIGINT)
                return
            time.sleep(0.05)

    in_background(interrupt_when_all_up)
    # Ctrl-C's KeyboardInterrupt even where this suite runs with SIGINT ignored (a background
    # job; CI), which a plain kill would then do nothing against
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            sb.run_sweep(sb.load_plan(params), outputs=tmp_path / "out", progress=False)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert len(seen) == 3
    deadline = time.monotonic() + 5
    while fake_servers(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert fake_servers(marker) == {}
    manifest = json.loads(next((tmp_path / "out").glob("runs/*/manifest.json")).read_text())
    assert manifest["status"] == "interrupted"


def test_doctor_checks_the_ray_cluster_against_the_plan(tmp_path: Path, ray_head: None) -> None:
    from specbench_lib.sweep.preflight import doctor

    plan = sb.load_plan(write_params(tmp_path, placement="{engine: ray, gpus_per_server: 1}"))
    check = next(c for c in doctor(plan, outputs=tmp_path / "out") if c.name == "ray")
    assert check.ok and "4 GPUs" in check.detail and "4 of 4 servers at once" in check.detail
    too_big = sb.load_plan(write_params(tmp_path, placement="{engine: ray, gpus_per_server: 8}",
                                        name="big.yaml"))
    check = next(c for c in doctor(too_big, outputs=tmp_path / "out") if c.name == "ray")
    assert not check.ok and "8 GPUs" in check.detail and check.what == "ray"
    with pytest.raises(PreflightError, match="8 GPUs"):  # the sweep refuses before starting
        sb.run_sweep(too_big, outputs=tmp_path / "out", progress=False)
    assert not list((tmp_path / "out").glob("runs/*/cells/*.json"))


def test_an_address_where_no_ray_answers_is_named_at_once() -> None:
    from specbench_lib.sweep.raycluster import connect

    began = time.monotonic()
    with pytest.raises(PreflightError, match="no Ray cluster answers at placement.address "
                       "'127.0.0.1:8259'"):
        connect("127.0.0.1:8259")  # nothing listens there (Ray alone would wait minutes)
    assert time.monotonic() - began < 5


@pytest.mark.parametrize(("placement", "key"), [
    ("{engine: slurm}", "placement.engine"), ("{mode: shared}", "placement.mode"),
    ("{address: 'ray:/x'}", "placement.address"), ("{gpus_per_server: -1}",
                                                    "placement.gpus_per_server"),
    ("{engines: ray}", "placement.engines")])
def test_bad_placement_names_the_file_key_and_value(tmp_path: Path, placement: str,
                                                    key: str) -> None:
    path = write_params(tmp_path, placement=placement)
    with pytest.raises(ParamsError) as caught:
        sb.load_plan(path)
    assert caught.value.key == key and str(path) in str(caught.value)


def test_placement_facts_round_trip_and_old_files_still_load() -> None:
    facts = CellFacts(placement=Placement(node="n1", node_ip="10.0.0.2", gpus=("1",), port=8241,
                                          co_tenants=(CoTenant("auto", ("0",), "t0", None),)))
    assert CellFacts.from_dict(json.loads(json.dumps(facts.to_dict()))) == facts
    old = CellFacts().to_dict()
    assert "placement" not in old and CellFacts.from_dict(old).placement is None


def test_the_sequential_path_does_not_import_ray() -> None:
    code = ("import sys, specbench_lib, specbench_lib.sweep.driver, specbench_lib.cli, "
            "specbench_lib.sweep.preflight; assert 'ray' not in sys.modules, 'ray imported'")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, timeout=60)


@pytest.mark.engine
def test_a_real_llama_server_sweep_placed_through_ray(tmp_path: Path, engine: tuple[Path, Path],
                                                      ray_head: None) -> None:
    path = tmp_path / "tiny_placed.yaml"
    path.write_text(f"""extends: {ROOT / 'tests' / 'data' / 'tiny.yaml'}
phase: tinyplaced
# one thread each: two llama-servers of 2 threads on 2 cores spin-wait on each other (a cell of
# 3 requests took 59 s instead of 2)
engine: {{port: 8250, threads: 1}}
configs:
  - {{name: auto, method: auto}}
  - {{name: ngram, method: ngram, budgets: [8], options: {{n_match: 8, n_min: 8}}}}
contexts: [128]
max_coalesced_first_fraction: 0.5
max_coalesced_fraction: 0.5
host: {{max_other_cpu_cores: null}}
placement: {{engine: ray, gpus_per_server: 1, port_span: 9}}
""")
    result = sb.run_sweep(sb.load_plan(path), outputs=tmp_path / "out", progress=False)
    found = cells(result)
    assert result.counts()["ok"] == 2, {k: c["verdict"] for k, c in found.items()}
    gpus = {c["server"]["label"]: tuple(c["facts"]["placement"]["gpus"]) for c in found.values()}
    assert len(set(gpus.values())) == 2
    assert all("llama-server" in c["server"]["argv"][0] for c in found.values())
    row = result.table().set_index("config")
    assert row.loc["auto", "output_tok_s"] > 0 and row.loc["ngram-b8", "output_tok_s"] > 0


def test_reap_kills_the_marked_server_groups_and_nothing_else() -> None:
    from specbench_lib.sweep.placed import _MARK, reap_marked

    sleep = [sys.executable, "-c", "import subprocess, sys, time; subprocess.Popen([sys.executable,"
             " '-c', 'import time; time.sleep(60)']); time.sleep(60)"]
    marked = subprocess.Popen(sleep, env={**os.environ, _MARK: "run1/cfg"}, start_new_session=True)
    other = subprocess.Popen(sleep, env={**os.environ, _MARK: "run1/other"},
                             start_new_session=True)
    try:
        time.sleep(0.5)  # both groups hold a leader and a child
        assert reap_marked("run1/cfg") == 1
        assert marked.wait(5) == -signal.SIGKILL
        time.sleep(0.2)
        assert other.poll() is None  # another config's server is left alone
        deadline = time.monotonic() + 5
        while _group_members(marked.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _group_members(marked.pid) == []  # the leader and its child
        assert len(_group_members(other.pid)) == 2
    finally:
        for proc in (marked, other):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)


def _group_members(group: int) -> list[int]:
    """The live (not zombie) processes of process group ``group``."""
    members = []
    for entry in Path("/proc").iterdir():
        try:
            stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(stat[3]) == group and stat[0] != "Z":
            members.append(int(entry.name))
    return members
