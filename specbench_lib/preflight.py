"""Checks before a sweep (and ``specbench doctor``): binary, model, datasets, port, GPUs, disk.

Each problem is one clear line with its fix; nothing is measured until all pass.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import EngineError, PreflightError, SpecbenchError
from .params import EngineParams, Plan
from .paths import default_llama_server, default_model, outputs_dir

if TYPE_CHECKING:
    from .engines import Adapter

_SETUP_HINT = "run 'make setup' (scripts/setup_engine.sh builds llama-server and fetches the model)"
_MIN_FREE_BYTES = 200 * 2**20


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str

    def __str__(self) -> str:
        return f"{'ok     ' if self.ok else 'PROBLEM'}  {self.name}: {self.detail}"


def engine_files(engine: EngineParams, *, restage: bool = True) -> tuple[Path, Path]:
    """The server binary and model a sweep will use, checked to exist (the model restaged from
    ``engine.model_cache`` when it is missing and ``restage`` is on)."""
    return engine_binary(engine), engine_model(engine, restage=restage)


def engine_binary(engine: EngineParams) -> Path:
    binary = Path(engine.binary).expanduser() if engine.binary else default_llama_server()
    if not (binary.is_file() and os.access(binary, os.X_OK)):
        fix = "install the engine there or fix engine.binary" if engine.binary else _SETUP_HINT
        raise PreflightError(f"server binary not found or not executable: {binary}; {fix}",
                             what="binary", path=binary)
    return binary


def engine_model(engine: EngineParams, *, restage: bool = True) -> Path:
    model = Path(engine.model).expanduser() if engine.model else default_model()
    if _present(model):
        return model
    cache = Path(engine.model_cache).expanduser() if engine.model_cache else None
    if cache is None or not _present(cache):
        fix = ("restage it from a persistent copy, or set engine.model_cache to one"
               if cache is None else f"the cache {cache} is missing too")
        hint = "" if engine.model else f"; {_SETUP_HINT}"
        raise PreflightError(f"model missing or empty: {model} (a reboot wipes tmpfs such as "
                             f"/dev/shm); {fix}{hint}", what="model", path=model)
    if not restage:
        raise PreflightError(f"model missing: {model}; the sweep will restage it from {cache}",
                             what="model", path=model)
    restage_model(cache, model)
    return model


def restage_model(source: Path, target: Path) -> None:
    """Copy a model file or folder from ``source`` to ``target`` with progress, then verify sizes."""
    from tqdm.auto import tqdm

    files = sorted(p for p in source.rglob("*") if p.is_file()) if source.is_dir() else [source]
    total = sum(f.stat().st_size for f in files)
    tmp = target.with_name(f".{target.name}.restaging")
    if tmp.is_dir():
        shutil.rmtree(tmp)
    tmp.unlink(missing_ok=True)
    with tqdm(total=total, unit="B", unit_scale=True, desc=f"restaging {target.name}") as bar:
        for file in files:
            dest = tmp / file.relative_to(source) if source.is_dir() else tmp
            dest.parent.mkdir(parents=True, exist_ok=True)
            with open(file, "rb") as src, open(dest, "wb") as out:
                for block in iter(lambda src=src: src.read(1 << 24), b""):
                    out.write(block)
                    bar.update(len(block))
    copied = sorted(p for p in tmp.rglob("*") if p.is_file()) if tmp.is_dir() else [tmp]
    if sum(f.stat().st_size for f in copied) != total:
        raise PreflightError(f"restaging {source} → {target} copied the wrong number of bytes; "
                             f"check free space on {target.parent}", what="model", path=target)
    os.replace(tmp, target)


def check_draft_models(plan: Plan) -> None:
    """Every draft model the engine or a config names exists."""
    engine_draft = getattr(plan.params.engine, "draft_model", None)
    if engine_draft and not _present(Path(engine_draft).expanduser()):
        raise PreflightError(f"draft model missing or empty: {engine_draft}; restage it or fix "
                             f"engine.draft_model", what="draft_model", path=engine_draft)
    for config in plan.params.configs:
        if config.draft_model and not _present(Path(config.draft_model).expanduser()):
            raise PreflightError(f"config {config.name!r}: draft model missing or empty: "
                                 f"{config.draft_model}; restage it or fix configs.draft_model",
                                 what="draft_model", path=config.draft_model)


def model_matches_last_run(model: Path) -> str:
    """Compare the model's size and fingerprint with the newest run that used the same path."""
    from .store import file_identity

    now = file_identity(model)
    for manifest_path in sorted((outputs_dir() / "runs").glob("*/manifest.json"), reverse=True):
        try:
            before = json.loads(manifest_path.read_text()).get("model") or {}
        except (OSError, json.JSONDecodeError):
            continue
        if before.get("path") != str(model):
            continue
        run = manifest_path.parent.name
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


def check_port_free(host: str, port: int) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            raise PreflightError(f"port {port} on {host} is in use: another server is running "
                                 f"there; stop it or set engine.port in the params file",
                                 what="port") from None


def launches_servers(plan: Plan) -> bool:
    """Whether the plan starts any server (attached configs use one already running)."""
    return any(s.attach is None for s in plan.servers)


def check_attached(plan: Plan, adapter: Adapter) -> dict[str, dict[str, Any]]:
    """Read each attached server's effective settings now; it must answer (and its token be set).

    Returns ``{server label: {"url", "unit", "settings"}}``, secrets redacted: what the cells of
    an attached config are fingerprinted with in place of an argv.
    """
    import httpx

    from .server import auth_headers
    from .store import redact

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
        found[server.label] = {"url": attach.url, "unit": attach.unit,
                               "settings": redact(info.settings)}
    return found


def doctor(plan: Plan) -> list[Check]:
    """Every preflight check of a plan, without starting anything (``specbench doctor``)."""
    from .engines import get_adapter
    from .workload import documents

    params = plan.params
    checks: list[Check] = []

    def run(name: str, action: Callable[[], object]) -> None:
        try:
            checks.append(Check(name, True, str(action())))
        except SpecbenchError as exc:
            checks.append(Check(name, False, str(exc)))

    def binary() -> str:
        path = engine_binary(params.engine)
        return f"{path} (version {get_adapter(params.engine).version(path)})"

    run("engine", binary)
    run("model", lambda: model_matches_last_run(engine_model(params.engine, restage=False)))
    run("draft models", lambda: check_draft_models(plan) or "present (or none named)")
    for workload in params.workloads:
        run(f"workload {workload.name}", lambda w=workload: f"{len(documents(w))} documents")
    if launches_servers(plan):
        run("port", lambda: check_port_free(params.engine.host, params.engine.port)
            or f"{params.engine.host}:{params.engine.port} is free")
    if any(s.attach for s in plan.servers):
        adapter = get_adapter(params.engine)
        run("attached servers", lambda: "answering: " + ", ".join(
            f"{label} at {a['url']}" for label, a in check_attached(plan, adapter).items()))
    run("disk", _disk)
    if get_adapter(params.engine).needs_gpu:
        run("gpus", _gpus)
    return checks


def _present(path: Path) -> bool:
    if path.is_dir():
        return any(p.is_file() for p in path.iterdir())
    return path.is_file() and path.stat().st_size > 0


def _disk() -> str:
    out = outputs_dir()
    probe = out if out.exists() else out.parent
    free = shutil.disk_usage(probe).free
    if free < _MIN_FREE_BYTES:
        raise PreflightError(f"only {free / 2**20:.0f} MiB free under {probe}; free some space",
                             what="disk", path=probe)
    return f"{free / 2**30:.1f} GiB free under {probe}"


def _gpus() -> str:
    try:
        done = subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired):
        raise PreflightError("nvidia-smi not found: this engine needs visible NVIDIA GPUs",
                             what="gpu") from None
    names = [line.strip() for line in done.stdout.splitlines() if line.strip()]
    if done.returncode != 0 or not names:
        raise PreflightError("no GPU visible (nvidia-smi lists none); check the driver and "
                             "CUDA_VISIBLE_DEVICES", what="gpu")
    return "; ".join(names)
