"""Print docs/params.md's reference: every params key with its type, default, bounds and meaning.

    .venv/bin/python scripts/params_reference.py [--write]   # --write refreshes the page in place

The keys come from the params model (``specbench_lib/model/params.py``'s :class:`SweepParams` and
the sections of ``specbench_lib/model/sections.py`` and ``model/workloadparams.py``), walked from
the top level down; a key's meaning is its ``Field(description=...)``, else the comment on its
line or the comments right above it in the model's source, so the page says what the code says.
"""

from __future__ import annotations

import ast
import html
import inspect
import io
import re
import sys
import tokenize
import types
import typing
from pathlib import Path
from typing import Any

import generated  # scripts/generated.py, beside this one
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from specbench_lib.model.params import SweepParams  # noqa: E402

DOC = ROOT / "docs" / "params.md"
START, END = "<!-- params:start -->", "<!-- params:end -->"
BOUNDS = (("ge", "≥"), ("gt", ">"), ("le", "≤"), ("lt", "<"), ("min_length", "at least"),
          ("max_length", "at most"), ("pattern", "matches"))


def _comments(source: str) -> dict[int, str]:
    """Each comment of ``source`` by its line number (1-based), without the ``#``."""
    found = {}
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            found[tok.start[0]] = tok.string.lstrip("#").strip()
    return found


def _field_notes(model: type[BaseModel]) -> dict[str, tuple[str, str]]:
    """Per field of ``model``: its annotation as written and the comments that explain it."""
    source = inspect.getsource(model)
    lines = source.splitlines()
    comments = _comments(source)
    notes = {}
    for node in ast.parse(source).body[0].body:
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        above, line = [], node.lineno - 1
        while line >= 1 and lines[line - 1].strip().startswith("#"):
            above.insert(0, comments[line])
            line -= 1
        trailing = comments.get(node.end_lineno or node.lineno, "")
        text = " ".join(part for part in (*above, trailing) if part)
        notes[node.target.id] = (ast.get_source_segment(source, node.annotation) or "", text)
    return notes


def _nested(annotation: Any) -> type[BaseModel] | None:
    """The params model inside ``annotation`` (``X``, ``X | None``, ``tuple[X, ...]``), if any."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if typing.get_origin(annotation) in (typing.Union, types.UnionType, tuple):
        for arg in typing.get_args(annotation):
            found = _nested(arg)
            if found is not None:
                return found
    return None


def _default(info: FieldInfo) -> str:
    if info.default is PydanticUndefined and info.default_factory is None:
        return "required"
    value = info.default_factory() if info.default_factory is not None else info.default
    if isinstance(value, BaseModel):
        return "(the section's defaults)"
    if isinstance(value, tuple):
        value = list(value)
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    return "`null`" if value is None else _code(repr(value).replace("'", '"'))


def _bounds(info: FieldInfo) -> str:
    found = []
    for meta in info.metadata:
        for attr, word in BOUNDS:
            value = getattr(meta, attr, None)
            if value is not None:
                found.append(f"{word} {_code(str(value))}")
    return ", ".join(found)


def _type_text(model: type[BaseModel], text: str) -> str:
    """An annotation as written, a ``Literal`` alias (``Method``) spelt out."""
    alias = getattr(sys.modules[model.__module__], text, None) if text.isidentifier() else None
    if typing.get_origin(alias) is typing.Literal:
        return "Literal[" + ", ".join(f'"{a}"' for a in typing.get_args(alias)) + "]"
    return text


def _alias_note(model: type[BaseModel], text: str) -> str:
    """The comments right above a ``Literal`` alias's definition (``Method``, in
    ``model/sections.py``): what each of its choices means, said once where it is written."""
    alias = getattr(sys.modules[model.__module__], text, None) if text.isidentifier() else None
    if typing.get_origin(alias) is not typing.Literal:
        return ""
    modules = [m for name, m in sorted(sys.modules.items()) if name.startswith("specbench_lib.model.")]
    for module in modules:
        source = inspect.getsource(module)
        lines, comments = source.splitlines(), _comments(source)
        if f"{text} = Literal[" not in source:
            continue
        at = next(n for n, line in enumerate(lines, 1) if line.startswith(f"{text} = Literal["))
        above = []
        while at > 1 and lines[at - 2].startswith("#"):
            above.insert(0, comments[at - 1])
            at -= 1
        return " ".join(above)
    return ""


def _code(text: str) -> str:
    """``text`` as inline code in a table cell: a ``|`` as an entity, which every renderer keeps
    (a code span's ``\\|`` shows its backslash in MkDocs, a bare ``|`` splits the cell on GitHub)."""
    text = " ".join(text.split())
    if "|" not in text:
        return f"`{text}`"
    return f"<code>{html.escape(text, quote=False).replace('|', '&#124;')}</code>"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _markdown(text: str) -> str:
    """Docstring markup as Markdown: ``x`` and :mod:`~a.b` become `x` and `a.b`."""
    text = re.sub(r":\w+:`~?\.?([\w.]+)`", r"`\1`", text)
    return text.replace("``", "`")


def _doc(model: type[BaseModel]) -> str:
    doc = inspect.getdoc(model) or ""
    if model.__doc__ is None or doc == inspect.getdoc(BaseModel) or "unknown keys are refused" in doc:
        return ""
    return _markdown(" ".join(doc.split()))


def _section(model: type[BaseModel], prefix: str, out: list[str]) -> None:
    """Append ``model``'s table under ``prefix`` (``engine.``), then its nested sections'."""
    notes = _field_notes(model)
    title = prefix.rstrip(".") or "top level"
    out += [f"### `{title}` ({model.__name__})", ""]
    if _doc(model):
        out += [_doc(model), ""]
    out += ["| key | type | default | what (bounds) |", "| --- | --- | --- | --- |"]
    nested = []
    for name, info in model.model_fields.items():
        annotation, comment = notes.get(name, ("", ""))
        what = info.description or comment or ("see above" if _doc(model) else "")
        note = _alias_note(model, annotation)
        what = f"{what}; {note}" if what and note else what or note
        bounds = _bounds(info)
        what = f"{what} ({bounds})" if what and bounds else what or bounds
        out.append(f"| `{prefix}{name}` | {_code(_type_text(model, annotation))} | "
                   f"{_default(info)} | {_cell(what)} |")
        inner = _nested(info.annotation)
        if inner is not None:
            listed = typing.get_origin(info.annotation) is tuple
            nested.append((inner, f"{prefix}{name}{'[]' if listed else ''}."))
    out.append("")
    for inner, inner_prefix in nested:
        _section(inner, inner_prefix, out)


def reference() -> str:
    """The generated part of docs/params.md."""
    out: list[str] = []
    _section(SweepParams, "", out)
    return "\n".join(out).rstrip() + "\n"


def main() -> None:
    text = reference()
    generated.main(DOC, START, END, text)


if __name__ == "__main__":
    main()
