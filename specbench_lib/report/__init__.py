"""What is shared: figures, result files, pages, the paper table, cross-run comparison.

``sb.report.write(sb.report.compare())`` is the report's front door: the names of
:mod:`.export` are reachable here, imported on first use (plots pull in matplotlib).
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_EXPORTED = ("HIDE_INPUT_TAG", "Comparison", "Written", "build_index", "compare", "latest_runs",
             "render_html", "write", "write_figures", "write_latex", "write_page", "write_summary")


def __getattr__(name: str) -> Any:
    if name not in _EXPORTED:
        raise AttributeError(f"module 'specbench_lib.report' has no attribute {name!r}")
    return getattr(import_module(".export", __name__), name)
