"""The one typed reader of the files the workbench reads back: ``answer.json`` and the manifest
(a cell goes through :meth:`~specbench_lib.model.records.CellRecord.from_dict`, whose shapes :mod:`.shapes`
checks; ``params.yaml`` and ``cells/history/`` are written for people, never read back).

A file is read as JSON (or YAML) and checked against its :class:`Doc`: each key a type hint (as
:mod:`.shapes` reads them) or a nested :class:`Doc` / :class:`Each`, with the keys every reader
indexes marked required. A file of another shape is one :class:`~.errors.StoreError` naming
the file, the first wrong key and what to do; never a ``TypeError`` far from its file.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string"}.get(type(value),
                                                                    type(value).__name__)


def read_doc(path: Path, doc: Doc, *, name: str, fix: str) -> dict[str, Any]:
    """The JSON object in ``path`` when it has ``doc``'s shape; else a :class:`StoreError`
    naming the file (``name``: what it is), the first wrong key and ``fix``."""
    data = read_json(path)
    found = problem(data, doc)
    if found is not None:
        raise StoreError(f"{name} is not of its shape ({found}); {fix}", path=path)
    return data


# answer.json (answer.py writes it): the keys its readers index
PANEL_KEY = Doc({"workload": str, "context": int, "output_tokens": int, "concurrency": int,
                 "load": str | None, "temperature": float, "turn": int},
                frozenset({"workload", "context", "output_tokens", "concurrency"}))
PANEL_ANSWER = Doc(
    {"panel": PANEL_KEY, "decided": bool, "decision": str, "best": str | None,
     "confidence_set": list[str], "speedup": float | None, "speedup_lo": float | None,
     "speedup_hi": float | None, "baseline": str | None, "requests": dict[str, int],
     "eliminated": dict[str, int], "out": dict[str, str], "decided_s": float | None,
     "decided_round": int | None, "more_requests": int | None},
    frozenset({"panel", "decided", "decision", "best", "confidence_set", "speedup",
               "speedup_lo", "speedup_hi", "baseline", "eliminated"}))
PARTIAL_ROUND = Doc({"round": int, "requests": int, "of": int, "configs": list[str]},
                    frozenset({"round", "requests", "of", "configs"}))
ANSWER = Doc({"seconds": float, "budget_s": float | None, "rounds": int, "stopped": str,
              "alpha": float, "looks": int, "panels": Each(PANEL_ANSWER),
              "measured": dict[str, Any], "partial": PARTIAL_ROUND},
             frozenset({"seconds", "budget_s", "rounds", "stopped", "panels"}))
ANSWER_FIX = ("a damaged answer: run 'specbench run <phase> --resume <run>' to measure what is "
              "missing and write it again, or delete it to read the run by its cells")

# manifest.json (runs.py writes it): the sections and the values its read model converts
PLACEMENT = Doc({"engine": str, "mode": str, "node": str | None, "node_ip": str | None,
                 "gpus": list[Any] | None, "port": int | None})
SERVER_ENTRY = Doc({"controlled": bool | None, "argv": list[str] | None, "url": str | None,
                    "log": str | None, "pid": int | None, "starts": int | None,
                    "error": str | None, "placement": PLACEMENT,
                    "late_crash": Doc({"line": str | None}),
                    "reported_version": str | None})
ATTEMPT = Doc({"n": int, "started": str | None, "ended": str | None, "status": str | None,
               "pid": int | None, "params_file": str | None, "budget": int | None,
               "notebook": str | None, "notebook_source": str | None,
               "kept_cells": list[str] | None, "reused_from": dict[str, str] | None,
               "environment": dict[str, Any] | None})
MANIFEST = Doc(
    {"run_id": str | None, "phase": str | None, "status": str | None, "started": str | None,
     "ended": str | None, "budget": int | None, "elapsed_s": float | None,
     "params_file": str | None, "notebook": str | None, "notebook_source": str | None,
     "params": dict[str, Any] | None, "plan_fingerprints": dict[str, str] | None,
     "environment": dict[str, Any] | None, "engine": dict[str, Any] | None,
     "model": dict[str, Any] | None, "fingerprint_components": dict[str, Any] | None,
     "verdict_counts": dict[str, int] | None, "attempts": Each(ATTEMPT),
     "servers": Doc({}, values=SERVER_ENTRY)})
MANIFEST_FIX = ("a damaged manifest: restore it from a copy, or move the run directory away; "
                "the other runs read as before")
