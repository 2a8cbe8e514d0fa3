"""The files a sweep's servers need: the server binary, the model (restaged from
``engine.model_cache`` when a reboot wiped it) and any draft model, each checked to exist."""

from __future__ import annotations

import os
import shutil
from functools import partial
from pathlib import Path

from ..core.errors import PreflightError
from ..model.plan import Plan
from ..model.sections import EngineParams
from .engines.llamacpp import default_llama_server, default_model

_SETUP_HINT = "run 'make setup' (scripts/setup_engine.sh builds llama-server and fetches the model)"


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
                for block in iter(partial(src.read, 1 << 24), b""):
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


def _present(path: Path) -> bool:
    if path.is_dir():
        return any(p.is_file() for p in path.iterdir())
    return path.is_file() and path.stat().st_size > 0
