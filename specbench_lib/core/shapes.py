"""Whether a record read back from a file has the shape its dataclass says: every field of the
type its annotation names, nested through unions, literals, tuples, lists, dicts and dataclasses.

A record built from JSON of another shape (``"facts": "broken"``, a string where a list of
times belongs) would fail far from its file, in the analysis; :func:`shape_problem` names the
first wrong field while the file is still known.
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from typing import Any

_PRIMITIVE: dict[type, tuple[type, ...]] = {float: (float, int), int: (int,), str: (str,)}


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def shape_problem(value: Any, hint: Any = None, where: str = "") -> str | None:
    """The first place where ``value`` does not have the type ``hint`` (by default its own
    dataclass's annotations), as ``"<where>: <what> is not <type>"``; None when it has."""
    if hint is None:
        hint = type(value)
    origin = typing.get_origin(hint)
    if hint is Any:
        return None
    if origin in (typing.Union, types.UnionType):
        problems = [shape_problem(value, arm, where) for arm in typing.get_args(hint)]
        return None if None in problems else _wrong(value, hint, where)
    if origin is typing.Literal:
        return None if value in typing.get_args(hint) else _wrong(value, hint, where)
    if origin in (tuple, list):
        return _items(value, hint, origin, where)
    if origin is dict:
        if not isinstance(value, dict):
            return _wrong(value, hint, where)
        key_type, value_type = typing.get_args(hint)
        return next((p for k, v in value.items() for p in (
            shape_problem(k, key_type, f"{where}[key]"), shape_problem(v, value_type, f"{where}.{k}"))
            if p), None)
    if hint is type(None):
        return None if value is None else _wrong(value, hint, where)
    if hint in _PRIMITIVE or hint is bool:
        return None if _is(value, hint) else _wrong(value, hint, where)
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        if not isinstance(value, hint):
            return _wrong(value, hint, where)
        hints = _hints(hint)
        return next((p for f in dataclasses.fields(hint) for p in (
            shape_problem(getattr(value, f.name), hints[f.name], _join(where, f.name)),) if p), None)
    return None if isinstance(value, origin or hint) else _wrong(value, hint, where)


def _items(value: Any, hint: Any, origin: type[Any], where: str) -> str | None:
    if not isinstance(value, origin):
        return _wrong(value, hint, where)
    args = typing.get_args(hint)
    if origin is tuple and args and args[-1] is not Ellipsis:  # a fixed-length tuple
        if len(value) != len(args):
            return _wrong(value, hint, where)
        return next((p for i, (v, a) in enumerate(zip(value, args, strict=True))
                     if (p := shape_problem(v, a, f"{where}[{i}]"))), None)
    item = args[0] if args else Any
    if item in _PRIMITIVE or item is bool:  # long lists of times and ids: the quick test
        bad = next((i for i, v in enumerate(value) if not _is(v, item)), None)
        return None if bad is None else _wrong(value[bad], item, f"{where}[{bad}]")
    return next((p for i, v in enumerate(value) if (p := shape_problem(v, item, f"{where}[{i}]"))),
                None)


def _is(value: Any, kind: type) -> bool:
    """``value`` as JSON gives ``kind``: a float field takes an int, no number takes a bool."""
    if kind is bool:
        return isinstance(value, bool)
    return isinstance(value, _PRIMITIVE[kind]) and not isinstance(value, bool)


def _join(where: str, name: str) -> str:
    return f"{where}.{name}" if where else name


def _wrong(value: Any, hint: Any, where: str) -> str:
    name = getattr(hint, "__name__", None) or str(hint).replace("typing.", "")
    shown = repr(value)
    return f"{where or 'the record'}: {shown[:60]}{'…' if len(shown) > 60 else ''} is not {name}"


def known_fields(cls: type, data: dict[str, Any]) -> dict[str, Any]:
    """The entries of ``data`` that are fields of the dataclass ``cls`` (derived keys dropped)."""
    names = {f.name for f in dataclasses.fields(cls)}
    return {k: v for k, v in data.items() if k in names}
