"""engine.cpus: a CPU engine's server on its CPUs, the client's thread on the rest (cpuset.py)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from fakeparams import fake_argv
from paramsfiles import fake_plan, write_params
from ports import free_port

import specbench_lib as sb
from specbench_lib.core.errors import ParamsError
from specbench_lib.host.cpuset import host_cpus, pinned, split
from specbench_lib.host.sources import usable_cpus
from specbench_lib.model.sections import EngineParams

TWO = pytest.mark.skipif(len(host_cpus()) < 2, reason="needs two usable CPUs")


def test_auto_keeps_the_last_cpu_for_the_client_of_a_cpu_engine() -> None:
    cut = split("auto", cpu_engine=True, launched=True, local=True, host=(0, 1, 2, 3))
    assert (cut.server, cut.client) == ((0, 1, 2), (3,))
    assert cut.threads("auto") == 3 and cut.threads(2) == 2
    assert cut.to_dict()["server"] == [0, 1, 2]


@pytest.mark.parametrize(("kwargs", "host", "why"), [
    ({"cpu_engine": False, "launched": True, "local": True}, (0, 1), "GPU engine"),
    ({"cpu_engine": True, "launched": False, "local": True}, (0, 1), "not started here"),
    ({"cpu_engine": True, "launched": True, "local": False}, (0, 1), "not started here"),
    ({"cpu_engine": True, "launched": True, "local": True}, (5,), "one usable CPU"),
])
def test_auto_pins_nothing_where_there_is_no_cpu_engine_here(kwargs: dict[str, bool],
                                                              host: tuple[int, ...], why: str) -> None:
    cut = split("auto", host=host, **kwargs)
    assert cut.server is None and cut.client is None and why in cut.why


def test_a_list_pins_the_server_there_and_the_client_to_the_rest() -> None:
    cut = split((2, 0), cpu_engine=False, launched=True, local=True, host=(0, 1, 2, 3))
    assert (cut.server, cut.client) == ((0, 2), (1, 3))
    every = split((0, 1), cpu_engine=True, launched=True, local=True, host=(0, 1))
    assert every.server == (0, 1) and every.client is None and "shares" in every.why
    assert split(None, cpu_engine=True, launched=True, local=True, host=(0, 1)).server is None


def test_a_cpu_this_process_cannot_use_is_refused_naming_the_key() -> None:
    with pytest.raises(ParamsError) as err:
        split((0, 7), cpu_engine=True, launched=True, local=True, host=(0, 1))
    assert "engine.cpus" in str(err.value) and "[7]" in str(err.value)


@pytest.mark.parametrize("bad", [[], [-1], [0, 0], 0])
def test_params_refuse_a_list_that_is_not_distinct_cpus(bad: object) -> None:
    with pytest.raises(ValueError, match="cpus"):
        EngineParams(cpus=bad)


@TWO
def test_pinned_moves_the_thread_and_its_new_threads_then_restores() -> None:
    before = os.sched_getaffinity(0)
    last = host_cpus()[-1]
    seen: list[set[int]] = []
    with pinned((last,)):
        assert os.sched_getaffinity(0) == {last}
        assert usable_cpus() == len(before)  # the process's CPUs, not the pinned thread's
        worker = threading.Thread(target=lambda: seen.append(os.sched_getaffinity(0)))
        worker.start()
        worker.join()
    assert seen == [{last}] and os.sched_getaffinity(0) == before


@TWO
def test_a_sweep_pins_the_server_and_records_both_in_the_manifest(tmp_path: Path) -> None:
    """A fake llama.cpp-protocol server (a CPU engine by its adapter) under ``cpus: auto``: it
    logs the CPUs it may run on; the manifest names both sides."""
    cpus = host_cpus()
    path = write_params(tmp_path, fake_plan(
        free_port(), argv=fake_argv("--mode", "ok"), phase="pin", engine={"ready_timeout_s": 10},
        contexts=[32], output_tokens=4, warmup_requests=1), name="pin.yaml")
    run = sb.run_sweep(sb.load_plan(path), outputs=tmp_path / "out", progress=False)
    assert run.counts()["ok"] == 1
    entry = run.manifest["servers"]["auto"]["cpus"]
    assert entry["server"] == list(cpus[:-1]) and entry["client"] == [cpus[-1]]
    log = (run.dir.path / "logs" / "auto.log").read_text()
    assert f"cpus {list(cpus[:-1])}" in log
    assert os.sched_getaffinity(0) == set(cpus)  # the client's thread is back on all of them


def test_a_server_that_took_the_clients_core_is_named_as_such() -> None:
    from specbench_lib.model.hostfacts import HostLoad

    spinning = HostLoad(cpus=2, window_s=5, server_cpu_cores=1.93, own_cpu_cores=0.12)
    assert "ran on the client's core" in (spinning.client_core_taken() or "")
    assert HostLoad(cpus=2, window_s=5, server_cpu_cores=0.99, own_cpu_cores=0.3).client_core_taken() is None
    assert HostLoad(available=False, cpus=2, server_cpu_cores=2.0).client_core_taken() is None
