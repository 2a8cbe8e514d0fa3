"""The preflight checks one by one (:mod:`.preflight` runs them in order): each an action that
says what it found, or raises with the fix; the outcome of one is a :class:`Check`.

Binary and version, model (and whether it changed since the last run that used its path), the
model's fit and seed pairing, configs refused as launched, prompts, the time estimate, the Ray
cluster, the bind address, attached servers, disk, GPUs and the host's load.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from ..core.errors import EngineError, PreflightError, SpecbenchError, StoreError
from ..core.paths import folder_problem, outputs_dir
from ..host.load import sample_host
from ..model.plan import Plan
from ..model.sections import EngineParams
from ..servers.files import engine_binary, engine_model

if TYPE_CHECKING:
    from ..servers.engines import Adapter

_MIN_FREE_BYTES = 200 * 2**20
HOST_SAMPLE_S = 0.6  # the host load check watches the host this long (a warning; above the
# shortest window judged, hostfacts.MIN_JUDGED_WINDOW_S), sampled every 0.15 s


@dataclass(frozen=True)
class Check:
    """One preflight check: its outcome, a detail (or the problem with its fix), and what the
    sweep needs from it afterwards (``value``)."""

    name: str
    ok: bool
    detail: str
    what: str = ""  # the failed error's kind (PreflightError.what): binary, model, port, gpus…
    path: str | None = None
    warning: str = ""  # passed, with something the sweep prints and records
    value: Any = field(default=None, compare=False, repr=False)

    def __str__(self) -> str:
        status = "PROBLEM" if not self.ok else "WARNING" if self.warning else "ok     "
        return f"{status}  {self.name}: {self.detail}" + (f" ({self.warning})" if self.warning else "")


class Passed(NamedTuple):
    """A check that passed: what it says, what the sweep keeps of it, and a warning."""

    detail: str
    value: Any = None
    warning: str = ""


def model_matches_last_run(model: Path, *, root: Path | None = None) -> str:
    """Compare the model's size and fingerprint with the newest run that used the same path."""
    from ..runs.provenance import file_identity
    from ..runs.run import iter_runs

    now = file_identity(model)
    for run_dir in reversed(list(iter_runs(root))):
        try:
            before = run_dir.read_manifest().model
        except StoreError:
            continue
        if before.get("path") != str(model):
            continue
        run = run_dir.run_id
        changed = before.get("fingerprint") != now["fingerprint"]
        if before.get("size") != now["size"] or (before.get("method") == now["method"] and changed):
            raise PreflightError(f"{model} differs from run {run}: size {before.get('size')} → "
                                 f"{now['size']}, fingerprint {before.get('fingerprint')} → "
                                 f"{now['fingerprint']}; an incomplete copy? restage it",
                                 what="model", path=model)
        return f"{now['size']} bytes, fingerprint {now['fingerprint']}, same as run {run}"
    return f"{now['size']} bytes, fingerprint {now['fingerprint']} (no earlier run to compare)"


def bind_warnings(engine: EngineParams) -> list[str]:
    """A warning when servers would listen beyond this machine (loopback is the default)."""
    host = engine.host
    if host in ("localhost", "::1") or host.startswith("127."):
        return []
    return [f"engine.host is {host}: the servers listen on a non-loopback address and anyone who "
            f"can reach this machine can send them requests; use 127.0.0.1 unless you need it"]


def check_attached(plan: Plan, adapter: Adapter) -> dict[str, dict[str, Any]]:
    """Read each attached server's effective settings now; it must answer (and its token be set).

    Returns ``{server label: {"url", "unit", "version", "settings"}}`` (the version as the server
    reports it), secrets redacted: what the cells of an attached config are fingerprinted with in
    place of an argv.
    """
    import httpx

    from ..core.store import redact
    from ..servers.health import auth_headers

    found: dict[str, dict[str, Any]] = {}
    for server in plan.servers:
        attach = server.attach
        if attach is None:
            continue
        headers = auth_headers(attach, config=server.name)
        try:
            with httpx.Client(base_url=attach.url, headers=headers, timeout=10.0) as client:
                info = adapter.server_info(client)
        except (httpx.HTTPError, EngineError, ValueError) as exc:
            raise PreflightError(f"config {server.name!r}: the attached server at {attach.url} does "
                                 f"not answer its server info ({exc}); start it, or fix "
                                 f"configs.{server.name}.attach", what="attach") from None
        found[server.label] = {"url": attach.url, "unit": attach.unit, "version": info.version,
                               "settings": redact(info.settings, extra=plan.params.redact)}
    return found


def engine_version(adapter: Adapter, binary: Path) -> tuple[Any, str]:
    """The adapter's identity of ``binary`` (None before adapters have one) and its version."""
    identify = getattr(adapter, "identity", None)
    if identify is not None:
        identity = identify(binary)
        return identity, str(identity.version)
    return None, adapter.version(binary)


def said(action: Callable[[], Any], detail: str | Callable[[Any], str]) -> Callable[[], str]:
    """A check that runs ``action`` (it raises with the fix), then says ``detail`` (of its result)."""
    def check() -> str:
        found = action()
        return detail(found) if callable(detail) else detail

    return check


def run_check(name: str, action: Callable[[], str | Passed]) -> Check:
    """Run one check: its action returns a detail (or a :class:`Passed`), or raises with the fix."""
    try:
        done = action()
    except SpecbenchError as exc:
        what = getattr(exc, "what", None) or name
        return Check(name, False, str(exc), what=what, path=getattr(exc, "path", None))
    if isinstance(done, Passed):
        return Check(name, True, done.detail, what=name, value=done.value, warning=done.warning)
    return Check(name, True, str(done), what=name)


def binary_check(adapter: Adapter, engine: EngineParams) -> Passed:
    path = engine_binary(engine)
    try:
        identity, version = engine_version(adapter, path)
    except (SpecbenchError, OSError, subprocess.SubprocessError) as exc:
        identity, version = None, f"unknown ({exc})"
    label = version if version.lower().startswith("version") else f"version {version}"
    return Passed(f"{path} ({label})", (path, identity, version))


def model_check(engine: EngineParams, *, restage: bool, outputs: Path | None) -> Passed:
    model = engine_model(engine, restage=restage)
    try:
        return Passed(model_matches_last_run(model, root=outputs), model)
    except PreflightError as exc:
        if not restage:
            raise
        return Passed(f"{model}: present", model, str(exc))


def fit_check(plan: Plan, adapter: Adapter) -> Passed:
    """The plan's context and drafters' blocks against the models' configs (:mod:`.modelfit`)."""
    from .lifetimes import launch_argvs
    from .modelfit import model_fit

    detail, warning = model_fit(plan, adapter, launch_argvs(plan, adapter, lenient=True))
    return Passed(detail, None, warning)


def seeds_check(plan: Plan, adapter: Adapter) -> Passed:
    """Whether sampled cells pair their draws across configs (:func:`.modelfit.seed_pairing`)."""
    from .lifetimes import launch_argvs
    from .modelfit import seed_pairing

    detail, warning = seed_pairing(plan, adapter, launch_argvs(plan, adapter, lenient=True))
    return Passed(detail, None, warning)


def refusals_check(plan: Plan, adapter: Adapter) -> str:
    """Configs the engine would run unfairly as launched (:func:`.modelfit.config_refusals`)."""
    from .lifetimes import launch_argvs
    from .modelfit import config_refusals

    return config_refusals(plan, adapter, launch_argvs(plan, adapter, lenient=True))


def host_load_check(limit: float | None) -> Check:
    """Other processes' CPU (and GPU) use over :data:`HOST_SAMPLE_S`: a warning when the host is
    busy (its cells would be ``invalid``, ``busy_host``), never a refusal."""
    if limit is None:
        return Check("host load", True, "not checked (host.max_other_cpu_cores is null)",
                     what="host load")
    load = sample_host(HOST_SAMPLE_S, interval_s=0.15)
    why = load.unjudged()
    if why is not None:
        return Check("host load", True, f"not checked: {why}", what="host load")
    detail = (f"other processes use {load.other_cpu_cores:.2f} CPU cores of {load.cpus} "
              f"(threshold {limit:g}), load average {load.loadavg_1m_max}")
    warnings = []
    if load.busy(limit):
        warnings.append(f"the host is busy: {load.top_text()}; cells measured while other "
                        f"processes use more than host.max_other_cpu_cores {limit:g} CPU cores "
                        f"are invalid (busy_host): stop them before the sweep")
    gpu_others = (load.gpu or {}).get("other_processes") or []
    if gpu_others:
        names = ", ".join(f"{p['name']} (pid {p['pid']}) {p['used_mib']:g} MiB" for p in gpu_others)
        warnings.append(f"other processes compute on the GPUs: {names}")
    return Check("host load", True, detail, what="host load", warning="; ".join(warnings))


def prompts_check(plan: Plan, adapter: Adapter) -> str:
    """Whether the corpora feed the plan, given how long its servers remember (:mod:`.lifetimes`)."""
    from .lifetimes import describe, launch_argvs, plan_lifetimes

    argvs = launch_argvs(plan, adapter, lenient=True)
    return "fresh " + describe(plan_lifetimes(plan, adapter, argvs))


def time_check(plan: Plan, outputs: Path | None) -> str:
    """The plan's time estimate, its servers' restarts as planned (:mod:`.lifetimes`); a
    :class:`PreflightError` when the plan cannot answer in its budget (:mod:`.estimate`)."""
    from ..servers.engines import get_adapter
    from .estimate import estimate, restarts_of
    from .lifetimes import launch_argvs, plan_lifetimes

    adapter = get_adapter(plan.params.engine)
    lifetimes = plan_lifetimes(plan, adapter, launch_argvs(plan, adapter, lenient=True))
    found = estimate(plan, restarts_of(lifetimes), root=outputs)
    if found.problem is not None:  # the plan cannot answer in its budget: a PROBLEM
        raise PreflightError(found.text(), what="time")
    return found.text()


def cluster_check(plan: Plan) -> str:
    """The Ray cluster of ``placement.address`` and the GPUs it offers (:mod:`~.raycluster`)."""
    from .raycluster import ray_check

    return ray_check(plan)


def host_check(engine: EngineParams) -> Check:
    warnings = bind_warnings(engine)
    detail = f"servers listen on {engine.host}" + (" (beyond this machine)" if warnings else "")
    return Check("host", True, detail, what="host", warning="; ".join(warnings))


def attached_check(plan: Plan, adapter: Adapter) -> Passed:
    found = check_attached(plan, adapter)
    return Passed("answering: " + ", ".join(f"{label} at {a['url']}" for label, a in found.items()),
                   found)


def disk_check(outputs: Path | None) -> str:
    out = outputs or outputs_dir()
    problem = folder_problem(out)
    if problem:
        raise PreflightError(f"the outputs folder {out} cannot be written ({problem}); set "
                             f"SPECBENCH_OUTPUTS (or outputs=) to a folder you can write",
                             what="disk", path=out)
    probe = out
    while not probe.exists():
        probe = probe.parent
    free = shutil.disk_usage(probe).free
    if free < _MIN_FREE_BYTES:
        raise PreflightError(f"only {free / 2**20:.0f} MiB free under {probe}; free some space",
                             what="disk", path=probe)
    return f"{free / 2**30:.1f} GiB free under {probe}"


def gpus_check(tp: int) -> str:
    """At least ``tp`` GPUs visible: nvidia-smi's list, narrowed by CUDA_VISIBLE_DEVICES when set."""
    need = f"engine.tp is {tp}, so each server needs {tp} visible NVIDIA GPU{'s' if tp > 1 else ''}"
    try:
        done = subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired):
        raise PreflightError(f"nvidia-smi not found or not answering: {need}; install the NVIDIA "
                             f"driver, or check CUDA_VISIBLE_DEVICES", what="gpus") from None
    names = [line.strip() for line in done.stdout.splitlines() if line.strip()]
    if done.returncode != 0 or not names:
        raise PreflightError(f"no GPU visible (nvidia-smi lists none): {need}; check the driver "
                             f"and CUDA_VISIBLE_DEVICES", what="gpus")
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    count, source = len(names), "nvidia-smi"
    if visible is not None:
        count = min(count, len([d for d in visible.split(",") if d.strip()]))
        source = f"{len(names)} listed by nvidia-smi, CUDA_VISIBLE_DEVICES={visible!r}"
    if count < tp:
        raise PreflightError(f"{need} but {count} {'is' if count == 1 else 'are'} visible ({source}); "
                             f"lower engine.tp to {max(count, 1)}, or make {tp} GPUs visible with "
                             f"CUDA_VISIBLE_DEVICES", what="gpus")
    return f"{count} visible ({source}), engine.tp {tp}: " + "; ".join(names)
