"""The parameters papermill injected into a notebook, checked against those its ``parameters``
cell declares: an undeclared one (a misspelt ``-p budgt 16``) is refused, not silently unused.
"""

from __future__ import annotations

import difflib
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
        import nbformat
        import papermill

        nb = nbformat.read(path, as_version=4)
        passed = dict(nb.metadata.get("papermill", {}).get("parameters") or {})
        declared = list(papermill.inspect_notebook(str(path))) if passed else []
    except Exception:  # an unreadable notebook is no reason to refuse a sweep
        return
    for name, value in passed.items():
        if name not in declared and name not in PAPERMILL_PATHS:
            raise unknown_parameter(name, value, declared, notebook=path)
