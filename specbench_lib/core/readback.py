"""The one typed reader of the files the workbench reads back: ``answer.json`` and the manifest
(a cell goes through :meth:`~specbench_lib.model.records.CellRecord.from_dict`, whose shapes :mod:`.shapes`
checks; ``params.yaml`` and ``cells/history/`` are written for people, never read back).

A file is read as JSON (or YAML) and checked against its :class:`Doc`: each key a type hint (as
:mod:`.shapes` reads them) or a nested :class:`Doc` / :class:`Each`, with the keys every reader
indexes marked required; a file read into dataclasses (the manifest,
:data:`~specbench_lib.runs.manifest.MANIFEST`; the answer,
:data:`~specbench_lib.model.answerfile.ANSWER`) has their shape, by :func:`doc_of`, and is
built by :func:`from_doc` (written back by :func:`to_doc`). A file of
another shape is one :class:`~.errors.StoreError` naming the file, the first wrong key and what
to do; never a ``TypeError`` far from its file.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar, cast

from .errors import StoreError
from .shapes import shape_problem
from .store import read_json


@dataclass(frozen=True)
class Doc:
    """A JSON object's keys: each a type hint, a :class:`Doc` or an :class:`Each` (either of
    which may be null); ``required`` the keys that must be there (the others may be absent, as
    in files older than them); ``values``: the shape of every value (an object of entries)."""

    keys: Mapping[str, Any]
    required: frozenset[str] = field(default_factory=frozenset)
    values: Any = None


@dataclass(frozen=True)
class Each:
    """A JSON list whose items are each ``doc``."""

    doc: Doc


JSON = "json"  # a dataclass field's metadata key: its shape in the file, where it differs
NOT_IN_FILE = {JSON: False}  # a field the reader makes (a key, the whole record), not read
T = TypeVar("T")


def doc_of(cls: type, *, required: bool = False) -> Doc:
    """The JSON shape of a dataclass that reads a file's object (``from_dict``), from its fields:
    each by its type (a tuple is a list, a nested dataclass its own :class:`Doc`, a tuple of
    them an :class:`Each`, a dict of them a :class:`Doc` of values), null allowed where the field
    has a default (a file older than the key); a field's metadata ``json`` is its shape in the
    file where that differs (:data:`NOT_IN_FILE`: none), so the shape is written once.
    ``required``: a field without a default is a key the file must hold (nested ones too)."""
    hints = typing.get_type_hints(cls)
    keys: dict[str, Any] = {}
    must: set[str] = set()
    for f in dataclasses.fields(cls):
        shape = f.metadata.get(JSON, dataclasses.MISSING)
        if shape is False:
            continue
        optional = _defaulted(f)
        if required and not optional:
            must.add(f.name)
        if shape is dataclasses.MISSING:
            shape = _json_shape(hints[f.name], optional, required)
        keys[f.name] = shape
    return Doc(keys, frozenset(must))


def _defaulted(f: dataclasses.Field[Any]) -> bool:
    return f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING


def _json_shape(hint: Any, optional: bool, required: bool = False) -> Any:
    """A field type's shape in JSON (see :func:`doc_of`)."""
    args = typing.get_args(hint)
    if typing.get_origin(hint) in (typing.Union, types.UnionType) and type(None) in args:
        inner = [a for a in args if a is not type(None)]
        return _json_shape(inner[0] if len(inner) == 1 else hint, True, required)
    origin = typing.get_origin(hint)
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return doc_of(hint, required=required)
    if origin is tuple and args and isinstance(args[0], type) and dataclasses.is_dataclass(args[0]):
        return Each(doc_of(args[0], required=required))
    if origin is dict and isinstance(args[1], type) and dataclasses.is_dataclass(args[1]):
        return Doc({}, values=doc_of(args[1], required=required))
    shape = types.GenericAlias(list, args[:1]) if origin is tuple else hint
    return shape | None if optional else shape


def from_doc(cls: type[T], data: Mapping[str, Any]) -> T:
    """The dataclass ``cls`` of a JSON object :func:`problem` found of ``doc_of(cls)``'s shape:
    each field from its key (a nested dataclass, a tuple of them, a list as a tuple); a key the
    object lacks, or holds as null where the field has a default, is the field's default."""
    hints = typing.get_type_hints(cls)
    values = {f.name: _typed(hints[f.name], data[f.name]) for f in dataclasses.fields(cast(Any, cls))
              if f.metadata.get(JSON) is not False and f.name in data
              and not (data[f.name] is None and _defaulted(f))}
    return cls(**values)


def _typed(hint: Any, value: Any) -> Any:
    """A JSON value as the field type ``hint`` holds it (see :func:`from_doc`)."""
    args = typing.get_args(hint)
    if value is None:
        return None
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        return _typed(inner[0], value) if len(inner) == 1 else value
    origin = typing.get_origin(hint)
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return from_doc(hint, value)
    if origin is tuple:
        return tuple(_typed(args[0], v) for v in value)
    if origin is dict:
        return {k: _typed(args[1], v) for k, v in value.items()}
    return value


def to_doc(value: Any) -> Any:
    """A dataclass (and what it holds) as the JSON it is written as: its fields in order, but
    those its ``unwritten()`` names (a key the file holds only sometimes) and
    :data:`NOT_IN_FILE`; a tuple as a list; a NaN as null (NaN is not JSON, and NaN != NaN
    would make a file read back unequal to itself)."""
    if isinstance(value, float) and value != value:
        return None
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        skip = value.unwritten() if hasattr(value, "unwritten") else frozenset()
        return {f.name: to_doc(getattr(value, f.name)) for f in dataclasses.fields(value)
                if f.metadata.get(JSON) is not False and f.name not in skip}
    if isinstance(value, dict):
        return {k: to_doc(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_doc(v) for v in value]
    return value


def problem(value: Any, doc: Doc | Each | Any, where: str = "") -> str | None:
    """The first place where ``value`` is not of ``doc``'s shape, in words; None when it is."""
    if isinstance(doc, Each):
        if not isinstance(value, list):
            return f"{where or 'the file'} is {_kind(value)}, not a list"
        return next((p for i, item in enumerate(value)
                     if (p := problem(item, doc.doc, f"{where}[{i}]"))), None)
    if not isinstance(doc, Doc):
        return shape_problem(value, doc, where or "the file")
    if not isinstance(value, dict):
        return f"{where or 'the file'} is {_kind(value)}, not a JSON object"
    missing = sorted(doc.required - set(value))
    if missing:
        return f"{where or 'the file'} has no {missing[0]!r}"
    for key, hint in doc.keys.items():
        nullable = key not in doc.required and isinstance(hint, Doc | Each)
        if key in value and not (value[key] is None and nullable):
            found = problem(value[key], hint, f"{where}.{key}" if where else key)
            if found:
                return found
    if doc.values is not None:
        return next((p for k, v in value.items()
                     if (p := problem(v, doc.values, f"{where}.{k}" if where else str(k)))), None)
    return None


_KINDS: dict[type, str] = {dict: "an object", list: "a list", str: "a string"}


def _kind(value: Any) -> str:
    return _KINDS.get(type(value), type(value).__name__)


def read_doc(path: Path, doc: Doc, *, name: str, fix: str) -> dict[str, Any]:
    """The JSON object in ``path`` when it has ``doc``'s shape; else a :class:`StoreError`
    naming the file (``name``: what it is), the first wrong key and ``fix``."""
    data = read_json(path)
    found = problem(data, doc)
    if found is not None:
        raise StoreError(f"{name} is not of its shape ({found}); {fix}", path=path)
    return cast(dict[str, Any], data)  # an object: problem() found none


# answer.json: its shape is its dataclasses' (model/answerfile.py, :func:`doc_of`)
# a partial round, as the manifest's looks hold it (answer.json's is model/answerfile.py's)
PARTIAL_ROUND = Doc({"round": int, "requests": int, "of": int, "configs": list[str]},
                    frozenset({"round", "requests", "of", "configs"}))

# the manifest's ``contest`` (sweep/adaptive.py's Looks): a budgeted sweep's looks as taken
LOOK = Doc({"round": int, "last": bool, "rounds": int, "elapsed_s": float,
            "partial": PARTIAL_ROUND}, frozenset({"round", "last", "rounds", "elapsed_s"}))
CONTEST = Doc({"looks": Each(LOOK), "end": Doc({"rounds": int, "stopped": str})},
              frozenset({"looks"}))

# manifest.json: its shape is its read model's (runs/manifest.py, :func:`doc_of`)
