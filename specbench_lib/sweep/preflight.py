"""Checks before a sweep (and ``specbench doctor``): binary, model, KV pool, datasets, port,
GPUs, disk, host load.

One list, :func:`checks`, backs both: :func:`doctor` reports it and starts or copies nothing;
:func:`require` (the sweep) restages a missing model and raises one :class:`PreflightError`
naming every failed check with its fix. Nothing is measured until all pass. Each check is
:mod:`.preflightchecks`'s.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from ..analysis.ruleset import thresholds_of
from ..core.errors import PreflightError
from ..host.sources import usable_cpus
from ..model.plan import Plan
from ..servers.files import check_draft_models
from .kvpool import kv_check
from .preflightchecks import (
    Check,
    attached_check,
    binary_check,
    cluster_check,
    disk_check,
    fit_check,
    gpus_check,
    host_check,
    host_load_check,
    model_check,
    prompts_check,
    refusals_check,
    run_check,
    said,
    seeds_check,
    time_check,
)
from .serverports import ports_check


@dataclass(frozen=True)
class Preflight:
    """What a sweep uses after :func:`require` passed."""

    binary: Path
    model: Path  # present (restaged when it was missing)
    attached: dict[str, dict[str, Any]]  # check_attached's result: {server label: url, unit, settings}
    warnings: list[str]  # to print and record in the manifest (bind address, model changed)
    version: str  # the engine's version string
    identity: Any = None  # the adapter's identity(binary) where adapters have one
    checks: tuple[Check, ...] = ()


def launches_servers(plan: Plan) -> bool:
    """Whether the plan starts any server (attached configs use one already running)."""
    return any(s.attach is None for s in plan.servers)


def checks(plan: Plan, *, restage: bool, outputs: Path | None = None) -> list[Check]:
    """Every check a sweep of ``plan`` needs, in order; ``specbench doctor`` and the sweep share it.

    Args:
        plan: from :func:`specbench_lib.load_plan`.
        restage: copy a missing model from ``engine.model_cache`` (the sweep); off, a missing
            model is reported with that fix and a model that differs from the last run that used
            its path is a problem (``doctor``); on, that difference is a warning.
        outputs: the outputs folder whose disk must have room (default:
            :func:`~specbench_lib.core.paths.outputs_dir`).
    """
    from ..prompts.workload import documents
    from ..servers.engines import get_adapter

    params = plan.params
    engine = params.engine
    adapter = get_adapter(engine)
    launches = launches_servers(plan)
    found = [
        run_check("binary", lambda: binary_check(adapter, engine)),
        run_check("model", lambda: model_check(engine, restage=restage, outputs=outputs)),
        run_check("draft models", said(lambda: check_draft_models(plan), "present (or none named)")),
        run_check("model fit", lambda: fit_check(plan, adapter)),
        run_check("kv pool", partial(kv_check, plan)),  # every panel's tokens in flight (kvpool.py)
        run_check("seeds", lambda: seeds_check(plan, adapter)),
        run_check("configs", lambda: refusals_check(plan, adapter)),
        *(run_check(f"workload {w.name}", said(partial(documents, w),
                                                lambda docs: f"{len(docs)} documents"))
          for w in params.workloads),
        run_check("prompts", lambda: prompts_check(plan, adapter)),
        run_check("thresholds", lambda: f"{len(thresholds_of(params))} rule thresholds read"),
        *([run_check("chat template", adapter.chat_template_source)]
          if any(w.template == "chat" for w in params.workloads) else []),
    ]
    if launches:
        found.append(run_check("port", lambda: ports_check(plan, adapter)))
        found.append(host_check(engine))
    if any(s.attach for s in plan.servers):
        found.append(run_check("attached servers", lambda: attached_check(plan, adapter)))
    found.append(run_check("disk", lambda: disk_check(outputs)))
    if params.placement.engine == "ray":  # the GPUs are the cluster's, not this machine's
        found.append(run_check("ray", lambda: cluster_check(plan)))
    elif launches and adapter.needs_gpu:
        found.append(run_check("gpus", lambda: gpus_check(engine.tp)))
    found.append(host_load_check(params.host.cpu_limit(usable_cpus())))
    return found


def doctor(plan: Plan, *, outputs: Path | None = None) -> list[Check]:
    """Every preflight check of a plan, without starting or copying anything (``specbench
    doctor``), then the plan's time estimate (:mod:`.estimate`)."""
    return [*checks(plan, restage=False, outputs=outputs),
            run_check("time", lambda: time_check(plan, outputs))]


def require(plan: Plan, *, outputs: Path | None = None) -> Preflight:
    """Run every check before a sweep (restaging a missing model); all must pass.

    Raises:
        PreflightError: one error listing every failed check with its fix; its ``what`` is the
            first failed check's (``binary``, ``model``, ``draft_model``, ``port``, ``gpus``…).
    """
    found = checks(plan, restage=True, outputs=outputs)
    failed = [c for c in found if not c.ok]
    if failed:
        lines = "\n".join(f"  {c.name}: {c.detail}" for c in failed)
        raise PreflightError(f"preflight: {len(failed)} of {len(found)} checks failed, nothing was "
                             f"started:\n{lines}", what=failed[0].what, path=failed[0].path)
    values = {c.name: c.value for c in found}
    binary, identity, version = values["binary"]
    return Preflight(binary=binary, model=values["model"], attached=values.get("attached servers") or {},
                     warnings=[c.warning for c in found if c.warning], version=version,
                     identity=identity, checks=tuple(found))
