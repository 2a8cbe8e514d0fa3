"""Issue 49: ports at their edges. Servers kept up across blocks past 65535 are refused by
``engine.port`` before anything starts (before, the doctor's bind raised ``OverflowError``); a
port another sweep leases is moved from, or refused, never called free (before, the lease was
looked for under another file name than the one the lease writes)."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from paramsfiles import write_params
from ports import free_port

import specbench_lib as sb
from specbench_lib.core.errors import ParamsError
from specbench_lib.model.layering import load_params
from specbench_lib.model.plan import Plan, build_plan
from specbench_lib.servers.ports import check_port_free, port_free
from specbench_lib.sweep.preflight import doctor
from specbench_lib.sweep.serverports import with_free_port

ROOT = Path(__file__).resolve().parents[2]


def plan_of(tmp_path: Path, **overrides: object) -> Plan:
    path = write_params(tmp_path, "minimal", **overrides)
    return build_plan(load_params(path), source=path)


def kept(tmp_path: Path, port: int) -> Plan:
    """Four CPU configs kept up across two blocks (repeats in rounds), from ``port``."""
    return plan_of(tmp_path, engine={"port": port}, repeats=2, repeat_order="rounds",
                   configs=[{"name": "auto", "method": "auto"},
                            {"name": "ng", "method": "ngram", "budgets": [2, 4, 8]}])


def test_kept_servers_past_65535_are_refused_by_engine_port(tmp_path: Path) -> None:
    plan = kept(tmp_path, 65534)
    (check,) = [c for c in doctor(plan) if c.name == "port"]
    assert not check.ok
    assert ("engine.port 65534: the 4 servers kept up across blocks listen on 65534 to 65537, "
            "past 65535; set engine.port at most 65532") in check.detail
    with pytest.raises(ParamsError, match="set engine.port at most 65532") as err:
        sb.run_sweep(plan, outputs=tmp_path / "outputs")  # before any server or run folder
    assert str(tmp_path / "p.yaml") in str(err.value) and "\n" not in str(err.value)
    assert not (tmp_path / "outputs").exists()
    with pytest.raises(sb.PreflightError, match="port 65536 is not a port"):
        check_port_free("127.0.0.1", 65536)  # the bind's OverflowError, named


@pytest.fixture
def leased() -> Iterator[int]:
    """A port whose lease another process (a second sweep) holds, named for its run."""
    port = free_port()
    script = textwrap.dedent(f"""
        import sys
        from specbench_lib.servers.process import port_lease
        with port_lease("127.0.0.1", {port}) as lease:
            lease.name("20261206T000000Z_tp1_other")
            print("held", flush=True)
            sys.stdin.read()
    """)
    child = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "held"
        yield port
    finally:
        child.communicate("", timeout=30)


def test_a_leased_default_port_is_moved_from_and_a_named_one_refused(
        tmp_path: Path, leased: int) -> None:
    assert not port_free("127.0.0.1", leased)
    default = plan_of(tmp_path)
    engine = default.params.engine.model_copy()
    engine.__dict__["port"] = leased  # the default port (the params did not set it), leased
    plan = dataclasses.replace(default, params=default.params.model_copy(update={"engine": engine}))
    assert with_free_port(plan).params.engine.port > leased
    (check,) = [c for c in doctor(plan) if c.name == "port"]
    assert check.ok and f"{leased} is taken; the sweep will use" in check.detail
    named = plan_of(tmp_path, engine={"port": leased})
    (check,) = [c for c in doctor(named) if c.name == "port"]
    assert not check.ok, check.detail
    assert (f"port {leased} on 127.0.0.1 is held by another specbench run "
            f"20261206T000000Z_tp1_other") in check.detail
