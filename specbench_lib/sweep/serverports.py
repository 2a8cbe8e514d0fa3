"""The ports a sweep's servers listen on: ``engine.port`` for servers one after another, or one
each, one after another from it, for the servers kept up across blocks (:mod:`.blocks`); the
default port moved to the next free run when it is taken; and the doctor's check of them."""

from __future__ import annotations

import dataclasses

from ..core.errors import ParamsError, PreflightError
from ..model.plan import Plan
from ..model.sections import EngineParams
from ..servers.engines import Adapter, get_adapter
from ..servers.ports import MAX_PORT, SCAN, check_port_available, next_free_port, port_free
from .blocks import keeps_servers

__all__ = ["ports_check", "server_ports", "with_free_port"]


def server_ports(plan: Plan, keep: bool) -> dict[str, int]:
    """The port each launched config's server listens on: ``engine.port`` for all, one after
    another, or, with servers kept up at once (``keep``), ``engine.port`` + its place: a
    ParamsError naming ``engine.port`` and the highest it may be when the last passes 65535."""
    port = plan.params.engine.port
    launched = [s.label for s in plan.servers if s.attach is None]
    if keep and port + len(launched) - 1 > MAX_PORT:
        raise ParamsError(
            f"engine.port {port}: the {len(launched)} servers kept up across blocks listen on "
            f"{port} to {port + len(launched) - 1}, past {MAX_PORT}; set engine.port at most "
            f"{MAX_PORT + 1 - len(launched)}", file=plan.source, key="engine.port", value=port)
    return {label: port + (place if keep else 0) for place, label in enumerate(launched)}


def ports_check(plan: Plan, adapter: Adapter) -> str:
    """The doctor's and preflight's port check: the one port (or the next free one, for the
    default), or every kept server's port free; a PreflightError with the fix otherwise."""
    engine = plan.params.engine
    ports = sorted(set(server_ports(plan, keeps_servers(plan, adapter)).values()))
    if len(ports) == 1:
        return _port(engine)
    for port in ports:
        check_port_available(engine.host, port)
    return f"{engine.host}:{'/'.join(map(str, ports))} are free"


def _port(engine: EngineParams) -> str:
    """The port is free, or (the default port, which the params did not set) the sweep takes
    the next free one (:func:`with_free_port`); a port the params set is that port or nothing."""
    host, port = engine.host, engine.port
    if "port" in engine.model_fields_set or port_free(host, port):
        check_port_available(host, port)  # in use, or held by another sweep: its error and fix
        return f"{host}:{port} is free"
    found = next_free_port(host, port)
    if found is None:
        check_port_available(host, port)
        raise PreflightError(f"port {port} on {host} and the {SCAN} after it are taken; set "
                             f"engine.port", what="port")
    return f"{host}:{port} is taken; the sweep will use {found}, the next free port"


def with_free_port(plan: Plan) -> Plan:
    """``plan`` with ``engine.port`` the next free port when the default port (the params did
    not set one) is taken (in use, or held by another sweep), said on a line; unchanged when it
    is free, none is, or the params set the port (that port or a clear refusal). Servers kept up
    across blocks need their ports one after another (:mod:`.blocks`): all of them free."""
    engine = plan.params.engine
    if "port" in engine.model_fields_set:
        return plan
    count = len(set(server_ports(plan, keeps_servers(plan, get_adapter(engine))).values()))
    found = next_free_port(engine.host, engine.port, max(1, count))
    if found is None or found == engine.port:
        return plan
    print(f"port {engine.port} on {engine.host} is taken: the servers use {found}", flush=True)
    params = plan.params.model_copy(update={"engine": engine.model_copy(update={"port": found})})
    return dataclasses.replace(plan, params=params)
