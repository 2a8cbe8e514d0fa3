"""specbench: benchmark speculative decoding on real inference servers, honestly.

A notebook calls, in order::

    import specbench_lib as sb
    plan = sb.load_plan("params/embedded.yaml", budget=16)
    result = sb.run_sweep(plan)
    result.require_valid()
    figures = result.figures()

The package imports its heavy parts (the sweep with its dispatcher and adapters, plots, report)
on first use, so importing the record model, the analysis or the metrics stays light.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from .errors import (
    EngineError,
    ParamsError,
    PreflightError,
    SchemaError,
    ServerError,
    SpecbenchError,
    StoreError,
    TransportError,
    ValidationFailed,
)
from .params import Plan, build_plan, load_params, load_plan
from .records import CellRecord, Reason, RequestRecord, Verdict

if TYPE_CHECKING:
    from . import plots, report
    from .results import Outcome, SweepResult
    from .sweep import run_sweep

__version__ = "0.1.0"

_LAZY = {"plots": (".plots", None), "report": (".report", None),
         "Outcome": (".results", "Outcome"), "SweepResult": (".results", "SweepResult"),
         "run_sweep": (".sweep", "run_sweep")}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'specbench_lib' has no attribute {name!r}")
    module, attribute = _LAZY[name]
    found = import_module(module, __name__)
    value = found if attribute is None else getattr(found, attribute)
    globals()[name] = value
    return value


def answer_of(result: Outcome) -> Any:
    """The answer of a time-budgeted run, one line per panel (:mod:`.answer`); a fixed-plan
    run (or a dry run) says it has none."""
    from .answer import answer_of as of

    return of(result)


def keep_notebook(result: Outcome, output_path: str | None) -> str | None:
    """Keep the executed notebook (papermill's ``PAPERMILL_OUTPUT_PATH``) in the run directory
    and name it in the manifest; returns its name there (None for a dry run or no path)."""
    from .notebook_link import keep
    from .results import SweepResult

    if not isinstance(result, SweepResult) or not output_path:
        return None
    name = keep(result.run_dir, output_path)
    if name is not None:
        result.dir.update_manifest(notebook=name)
        result.manifest["notebook"] = name
    return name


__all__ = [
    "CellRecord", "EngineError", "Outcome", "ParamsError", "Plan", "PreflightError", "Reason",
    "RequestRecord", "SchemaError", "ServerError", "SpecbenchError", "StoreError", "SweepResult",
    "TransportError", "ValidationFailed", "Verdict", "answer_of", "build_plan", "keep_notebook",
    "load_params", "load_plan", "plots", "report", "run_sweep",
]
