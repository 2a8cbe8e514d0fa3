"""The parameters papermill injected into a notebook, checked against those its ``parameters``
cell declares: an undeclared one (a misspelt ``-p budgt 16``) is refused, not silently unused.
"""

from __future__ import annotations

import ast
import difflib
import json
from pathlib import Path
from typing import Any

from ..core.errors import ParamsError

# papermill's own parameters (--inject-paths), which a notebook need not declare
PAPERMILL_PATHS = ("PAPERMILL_INPUT_PATH", "PAPERMILL_OUTPUT_PATH")


def unknown_parameter(name: str, value: Any, declared: list[str], *,
                      notebook: str | Path) -> ParamsError:
    """The error for a notebook parameter the notebook does not declare, with the close match."""
    close = difflib.get_close_matches(name, declared, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return ParamsError(f"unknown notebook parameter {name!r}{hint}; the notebook takes: "
                       f"{', '.join(declared)}", file=notebook, key=name, value=value)


def parameter_defaults(nb: dict[str, Any]) -> dict[str, str]:
    """The names the notebook's ``parameters``-tagged cell assigns, in order, each with the
    source text of its default (what papermill's ``inspect_notebook`` lists for a Python
    notebook). The notebook is read as JSON and the cell parsed with :mod:`ast`, not with
    nbformat and papermill: importing those takes seconds (jsonschema compiles its format
    grammars), paid in every kernel that runs a sweep and every ``specbench`` command."""
    for cell in nb.get("cells", []):
        if cell.get("cell_type") == "code" and "parameters" in cell.get("metadata", {}).get("tags", []):
            source = cell.get("source", "")
            source = source if isinstance(source, str) else "".join(source)
            found: dict[str, str] = {}
            for stmt in ast.parse(source).body:
                targets = (stmt.targets if isinstance(stmt, ast.Assign)
                           else [stmt.target] if isinstance(stmt, ast.AnnAssign) else [])
                value = getattr(stmt, "value", None)
                text = "" if value is None else ast.get_source_segment(source, value) or ""
                for target in targets:
                    if isinstance(target, ast.Name):
                        found.setdefault(target.id, text)
            return found
    return {}


def notebook_parameters(path: Path) -> dict[str, str]:
    """:func:`parameter_defaults` of the notebook file ``path``; one that cannot be read is a
    :class:`ParamsError` naming it."""
    try:
        return parameter_defaults(json.loads(path.read_text()))
    except (OSError, UnicodeDecodeError, ValueError, SyntaxError, AttributeError) as exc:
        raise ParamsError(f"cannot read the notebook's parameters ({type(exc).__name__}: {exc}); "
                          f"restore the notebook or save it again from JupyterLab",
                          file=path) from None


def check_notebook_parameters(notebook: str | Path | None) -> None:
    """Refuse the parameters papermill injected into ``notebook`` that its ``parameters`` cell
    does not declare (papermill itself only warns, and the value would be silently unused).

    ``notebook`` is the executed notebook papermill is writing (``PAPERMILL_OUTPUT_PATH``): it
    holds the ``parameters`` cell and, in its ``papermill.parameters`` metadata, what was
    passed. Nothing is checked without it (an interactive session, papermill without
    ``--inject-paths``, output to stdout or a URL) or when it cannot be read.
    """
    if not notebook or str(notebook) == "-" or "://" in str(notebook):
        return
    path = Path(notebook).expanduser()
    try:
        nb = json.loads(path.read_text())
        passed = dict(nb["metadata"].get("papermill", {}).get("parameters") or {})
        declared = list(parameter_defaults(nb)) if passed else []
    except Exception:  # an unreadable notebook is no reason to refuse a sweep
        return
    for name, value in passed.items():
        if name not in declared and name not in PAPERMILL_PATHS:
            raise unknown_parameter(name, value, declared, notebook=path)
