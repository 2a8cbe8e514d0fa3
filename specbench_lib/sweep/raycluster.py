"""The Ray cluster a placed sweep uses: connect to ``placement.address``, and ``specbench
doctor``'s check that it answers and offers the GPUs the plan needs. Ray is imported only here
and in :mod:`~.placement` / :mod:`~.placed`, when ``placement.engine`` is ``ray``."""

from __future__ import annotations

import logging
import socket

from ..core.errors import PreflightError
from ..model.plan import Plan

PROBE_TIMEOUT_S = 3.0  # a Ray address that does not accept a connection by then is not there


def _probe(address: str) -> None:
    """A :class:`PreflightError` at once when nothing listens at a ``host:port`` or
    ``ray://host:port`` address (Ray itself waits minutes for a cluster that is not there)."""
    if address in ("auto", "local"):
        return
    host, _, port = address.removeprefix("ray://").rpartition(":")
    try:
        socket.create_connection((host, int(port)), timeout=PROBE_TIMEOUT_S).close()
    except (OSError, ValueError) as exc:
        raise PreflightError(f"no Ray cluster answers at placement.address {address!r} ({exc}); "
                             f"start one (ray start --head, or inside a Slurm allocation as the "
                             f"manual's placement page in docs/ shows) or set placement.address",
                             what="ray") from None


def connect(address: str) -> None:
    """Connect this process to the Ray at ``address`` (``local``: start one here)."""
    import ray

    _probe(address)
    try:
        ray.init(address=address, include_dashboard=False, log_to_driver=False,
                 logging_level=logging.WARNING)
    except Exception as exc:  # noqa: BLE001  (Ray raises many kinds; all mean: not there)
        auth = ("" if address in ("auto", "local") else "; a cluster started with token "
                "authentication (Ray's default) also needs RAY_AUTH_MODE=token here and its "
                "token (~/.ray/auth_token or RAY_AUTH_TOKEN) when named by address")
        raise PreflightError(f"no Ray cluster answers at placement.address {address!r} "
                             f"({type(exc).__name__}: {exc}); start one (ray start --head, or "
                             f"inside a Slurm allocation as the manual's placement page in docs/ "
                             f"shows) or set placement.address{auth}", what="ray") from None


def ray_check(plan: Plan) -> str:
    """``specbench doctor``'s check: Ray answers at ``placement.address`` and offers the GPUs the
    plan needs per server; returns what it offers, or raises :class:`PreflightError` with the fix."""
    options = plan.params.placement
    gpus = options.gpus(plan.params.engine)
    try:
        import ray
    except ImportError:
        raise PreflightError("placement.engine is ray but Ray is not installed: pip install "
                             "'specbench[ray]' (or pip install ray)", what="ray") from None
    if options.address == "local" and not ray.is_initialized():
        return (f"a local Ray instance will be started on this machine; each server asks for "
                f"{gpus} GPUs and {options.cpus_per_server:g} CPUs ({options.mode})")
    owned = not ray.is_initialized()
    if owned:
        connect(options.address)
    try:
        nodes = [n for n in ray.nodes() if n.get("Alive")]
    finally:
        if owned:
            ray.shutdown()
    slots = [min(int(n["Resources"].get("GPU", 0) // gpus) if gpus else len(plan.servers),
                 int(n["Resources"].get("CPU", 0) // options.cpus_per_server)
                 if options.cpus_per_server else len(plan.servers)) for n in nodes]
    offered = "; ".join(f"{n.get('NodeManagerAddress')}: {n['Resources'].get('GPU', 0):g} GPUs, "
                        f"{n['Resources'].get('CPU', 0):g} CPUs" for n in nodes)
    if not any(slots):
        raise PreflightError(f"the Ray cluster at {options.address!r} has no node with {gpus} "
                             f"GPUs and {options.cpus_per_server:g} CPUs for one server (nodes: "
                             f"{offered or 'none'}); lower placement.gpus_per_server or add GPUs",
                             what="ray")
    at_once = sum(1 for s in slots if s) if options.mode == "exclusive" else sum(slots)
    return (f"{len(nodes)} node(s): {offered}; {at_once} of {len(plan.servers)} servers at once "
            f"({gpus} GPUs each, {options.mode})")
