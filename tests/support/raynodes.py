"""A multi-node Ray cluster on this one machine, for the placement tests and benchmarks: a head
raylet with no GPUs (the driver's) and worker raylets, each its own Ray node with its own logical
GPUs (``ray.cluster_utils.Cluster``: every node is a separate raylet process that registers with
the head's GCS, the same code path as nodes on other machines). Its nodes all bind 127.0.0.1
(Ray otherwise turns 127.0.0.1 into the machine's own address, which its GCS does not answer
on here) and keep their files in a private temp folder, apart from any other Ray on the host."""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
from collections.abc import Iterator
from typing import Any

# the raylets (and their workers) inherit these; Ray's defaults time out on 2 loaded cores
_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",  # 127.0.0.1 stays 127.0.0.1
        "RAY_agent_register_timeout_ms": "120000"}  # a raylet waits that long for its agent
START_TRIES = 3  # a raylet that does not register within Ray's fixed 30 s is started again


def _add(cluster: Any, **args: Any) -> Any:
    last: Exception | None = None
    for _ in range(START_TRIES):
        try:
            return cluster.add_node(node_ip_address="127.0.0.1", **args)
        except Exception as exc:  # noqa: BLE001  (Ray's "node timed out during startup")
            last = exc
            time.sleep(1.0)
    raise RuntimeError(f"a Ray node did not start in {START_TRIES} tries: {last}")


@contextlib.contextmanager
def ray_nodes(nodes: int, *, gpus: int, cpus: float) -> Iterator[tuple[Any, list[Any]]]:
    """Start a head (1 CPU, no GPUs: servers never land there) and ``nodes`` worker nodes of
    ``gpus`` logical GPUs and ``cpus`` CPUs each, connect this process; yields the cluster and
    its worker nodes (``node.node_id`` is the Ray node id a placed cell names)."""
    import ray
    import ray._private.ray_constants as constants
    from ray.cluster_utils import Cluster

    saved = {k: os.environ.get(k) for k in _ENV}
    os.environ.update(_ENV)
    was, constants.ENABLE_RAY_CLUSTER = constants.ENABLE_RAY_CLUSTER, False
    temp = tempfile.mkdtemp(prefix="rc-")  # short: Ray's socket paths must fit 107 bytes
    cluster = Cluster(shutdown_at_exit=True)
    try:
        # its agent on a port of its own, not Ray's fixed 52365: another Ray on this host (a
        # test's ray.init) may hold that one, and the raylet then waits for an agent that failed
        _add(cluster, num_cpus=1, num_gpus=0, include_dashboard=False, temp_dir=temp,
             dashboard_agent_listen_port=None)
        workers = [_add(cluster, num_cpus=cpus, num_gpus=gpus) for _ in range(nodes)]
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, log_to_driver=False, logging_level="WARNING")
        yield cluster, workers
    finally:
        with contextlib.suppress(Exception):
            ray.shutdown()
        for node in list(cluster.worker_nodes):
            with contextlib.suppress(Exception):
                cluster.remove_node(node, allow_graceful=False)
        if cluster.head_node is not None:
            with contextlib.suppress(Exception):
                cluster.remove_node(cluster.head_node, allow_graceful=False)
        constants.ENABLE_RAY_CLUSTER = was
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def warm(workers: int) -> None:
    """Start ``workers`` Ray workers (one per GPU) and import specbench in each, so no test
    times a cold worker (on 2 cores they start seconds apart)."""
    import ray

    def hold() -> None:  # defined here: Ray ships it by value (tests/ is not on its path)
        import specbench_lib.sweep.driver  # noqa: F401
        import specbench_lib.sweep.placement  # noqa: F401

        time.sleep(1.0)

    ray.get([ray.remote(hold).options(num_gpus=1, num_cpus=0).remote() for _ in range(workers)])
