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

from .analysis import ruleset as _ruleset  # noqa: F401  (the cell rules join the catalogue first)
from .core.errors import (
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
from .model.layering import load_params
from .model.plan import Plan, build_plan, load_plan
from .model.records import CellRecord, RequestRecord
from .model.verdict import Reason, Verdict
from .prompts import sources as _sources  # noqa: F401  (the sources list their files' categories)

if TYPE_CHECKING:
    from . import report
    from .analysis.answer import answer_of
    from .notebook import appendix, keep_notebook, run_sweep
    from .report import plots
    from .report.outcome import Outcome, SweepResult

__version__ = "0.1.0"

_LAZY = {"plots": (".report.plots", None), "report": (".report", None),
         "Outcome": (".report.outcome", "Outcome"), "SweepResult": (".report.outcome", "SweepResult"),
         "run_sweep": (".notebook", "run_sweep"), "keep_notebook": (".notebook", "keep_notebook"),
         "answer_of": (".analysis.answer", "answer_of"), "appendix": (".notebook", "appendix")}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'specbench_lib' has no attribute {name!r}")
    module, attribute = _LAZY[name]
    found = import_module(module, __name__)
    value = found if attribute is None else getattr(found, attribute)
    globals()[name] = value
    return value


__all__ = [
    "CellRecord", "EngineError", "Outcome", "ParamsError", "Plan", "PreflightError", "Reason",
    "RequestRecord", "SchemaError", "ServerError", "SpecbenchError", "StoreError", "SweepResult",
    "TransportError", "ValidationFailed", "Verdict", "answer_of", "appendix", "build_plan",
    "keep_notebook",
    "load_params", "load_plan", "plots", "report", "run_sweep",
]
