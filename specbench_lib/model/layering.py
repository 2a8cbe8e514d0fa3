"""Params files → a validated model: YAML layered by ``extends:``, errors that name the key.

A params file is YAML. It may name a base file with ``extends:`` (relative to itself, as a
workload's ``path`` is: :func:`_paths_from`); the phase
file's keys override the base's, mappings merged key by key. Unknown keys and bad values are
refused with a :class:`ParamsError` that names the file, the key and the value.
"""

from __future__ import annotations

import difflib
import re
import typing
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from ..core.errors import ParamsError
from ..core.paths import resolve_project_path
from ..core.store import MAX_YAML_BYTES, load_yaml
from .params import SweepParams


def load_params(path: str | Path) -> SweepParams:
    """Read and validate a params file (and the base it ``extends``)."""
    file = resolve_project_path(path)
    if not file.is_file():
        raise ParamsError("params file not found; pass an existing file as params_file",
                          file=path, key="params_file", value=str(path))
    raw = _read_layered(file, seen=())
    try:
        return SweepParams.model_validate(raw)
    except ValidationError as exc:
        raise translate(exc, file, raw) from None


def _read_layered(file: Path, seen: tuple[Path, ...]) -> dict[str, Any]:
    if file in seen:
        raise ParamsError("'extends' forms a cycle", file=file, key="extends", value=str(file))
    try:
        data = load_yaml(_read_text(file)) or {}
    except yaml.YAMLError as exc:
        raise ParamsError(f"not valid YAML: {exc}", file=file) from None
    if not isinstance(data, dict):
        raise ParamsError("the top level must be a mapping of keys", file=file,
                          value=type(data).__name__)
    _paths_from(file, data)
    base_name = data.pop("extends", None)
    if base_name is None:
        return data
    base_file = (file.parent / str(base_name)).resolve()
    if not base_file.is_file():
        raise ParamsError("base file named by 'extends' not found", file=file, key="extends",
                          value=base_name)
    return _merge(_read_layered(base_file, (*seen, file)), data)


def _paths_from(file: Path, data: dict[str, Any]) -> None:
    """A workload's relative ``path`` is read from its params file's folder, as ``extends`` is
    (where nothing is there, from the working directory, then the project root, as before);
    a path that names the same file either way is kept as written."""
    for workload in data.get("workloads") or ():
        given = workload.get("path") if isinstance(workload, dict) else None
        if not isinstance(given, str) or not given or Path(given).expanduser().is_absolute():
            continue
        here = (file.parent / given).resolve()
        if here.exists() and here != resolve_project_path(given):
            workload["path"] = str(here)


def _read_text(file: Path) -> str:
    """The file's text; a :class:`ParamsError` naming the line, its key and the bytes when it is
    not UTF-8 (a file saved in Latin-1 or UTF-16 by an editor), or when it cannot be read."""
    try:
        with open(file, "rb") as fh:
            raw = fh.read(MAX_YAML_BYTES + 1)
    except OSError as exc:
        raise ParamsError(f"cannot read the params file ({exc.strerror or exc})", file=file,
                          key="params_file", value=str(file)) from None
    if len(raw) > MAX_YAML_BYTES:
        raise ParamsError(f"the file is over {MAX_YAML_BYTES} bytes, far more than any params "
                          f"file (a page of YAML); is it the right file?", file=file,
                          key="params_file", value=str(file))
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line_no = raw.count(b"\n", 0, exc.start) + 1
        line = raw.split(b"\n")[line_no - 1].decode("utf-8", errors="replace")
        key = re.match(r"^[\s-]*([^\s:#][^:#]*?)\s*:", line)
        bad = raw[exc.start:exc.end]
        raise ParamsError(
            f"not UTF-8 text: byte{'s' if len(bad) > 1 else ''} {bad.hex(' ')} at line {line_no}"
            f"{f' (key {key.group(1)!r})' if key else ''}: {line.strip()!r}; save the file as "
            f"UTF-8", file=file, key=key.group(1) if key else None, value=bad) from None


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def translate(exc: ValidationError, file: Path, raw: dict[str, Any]) -> ParamsError:
    lines = []
    first_key, first_value = None, None
    for err in exc.errors():
        key = ".".join(str(p) for p in err["loc"]) or "(top level)"
        value = err.get("input")
        if err["type"] == "extra_forbidden":
            msg = _unknown_key(err["loc"])
        else:
            msg = err["msg"]
        shown = "" if isinstance(value, dict) else f" = {value!r}"
        lines.append(f"  {key}{shown}: {msg}")
        if first_key is None:
            first_key, first_value = key, value
    text = "invalid params:\n" + "\n".join(lines)
    return ParamsError(text, file=file, key=first_key, value=first_value)


def _unknown_key(loc: tuple[int | str, ...]) -> str:
    """The message for a key the model does not have, with the closest known key."""
    known = _known_keys(loc[:-1])
    close = difflib.get_close_matches(str(loc[-1]), known, n=1)
    if close:
        return f"unknown key {str(loc[-1])!r}; did you mean {close[0]!r}?"
    listed = f" (known here: {', '.join(known)})" if known else ""
    return f"unknown key {str(loc[-1])!r}; remove it or check its spelling{listed}"


def _known_keys(loc: tuple[int | str, ...]) -> list[str]:
    """The keys the params model accepts at ``loc`` (a validation error's location)."""
    model: type[BaseModel] | None = SweepParams
    for part in loc:
        if isinstance(part, int):
            continue
        field = model.model_fields.get(str(part)) if model else None
        if field is None:
            return []
        model = _model_in(field.annotation)
    if model is None:
        return []
    return [*model.model_fields, *(["extends"] if model is SweepParams else [])]


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The params model inside a field's annotation (``tuple[ConfigParams, ...]``,
    ``AttachParams | None``), if any."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = _model_in(arg)
        if found is not None:
            return found
    return None
