"""specbench: benchmark speculative decoding on real inference servers, honestly.

A notebook calls, in order::

    import specbench_lib as sb
    plan = sb.load_plan("params/embedded.yaml", budget=16)
    result = sb.run_sweep(plan)
    result.require_valid()
    fig = sb.plots.throughput_vs_budget(result)
"""

from . import plots, report
from .errors import (
                     EngineError,
                     ParamsError,
                     PreflightError,
                     ServerError,
                     SpecbenchError,
                     StoreError,
                     ValidationFailed,
)
from .params import Plan, build_plan, load_params, load_plan
from .results import SweepResult
from .sweep import run_sweep

__version__ = "0.1.0"

__all__ = [
    "EngineError", "ParamsError", "Plan", "PreflightError", "ServerError", "SpecbenchError",
    "StoreError", "SweepResult", "ValidationFailed", "build_plan", "load_params", "load_plan",
    "plots", "report", "run_sweep",
]
