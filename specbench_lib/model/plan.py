"""The Plan of a sweep: params expanded into server configs and cells (configs × workloads ×
contexts × output lengths × load points × repeats), refused before any server starts when it
is too large or none of its cells fits the engine's context.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..core.display import html_table, html_text
from ..core.durations import parse_duration
from ..core.errors import ParamsError
from ..core.paths import resolve_project_path
from .cellspec import CellSpec, ServerConfig
from .layering import load_params, translate
from .nbparams import check_notebook_parameters
from .params import SweepParams
from .stages import Stage
from .staging import apply_stage

# sizes no real study reaches: past them a typo (10^12 requests) would hang or exhaust memory
MAX_PLAN_CELLS = 100_000


@dataclass(frozen=True)
class Plan:
    params: SweepParams
    source: Path
    servers: tuple[ServerConfig, ...]
    cells: tuple[CellSpec, ...]
    budget: int | None
    stage: Stage | None = None  # the stage of the phase's design it measures (model/stages.py)
    phase_params: SweepParams | None = None  # the phase's params, every stage (the dry run's)

    def cells_for(self, server: ServerConfig) -> list[CellSpec]:
        return [c for c in self.cells if c.config == server.label]

    def __repr__(self) -> str:
        p = self.params
        each = "per wave (x concurrency)" if p.requests_scale == "per_concurrency" else "each"
        lines = [f"Plan {p.phase} ({self.source.name}): {len(self.servers)} server configs x "
                 f"{len(p.workloads)} workloads x contexts {list(p.contexts)} x concurrency "
                 f"{list(p.concurrency)}"
                 + "".join(f" (at {ctx}: {list(p.concurrency_at(ctx))})" for ctx in p.concurrency_cap
                           if ctx in p.contexts)
                 + f" = {len(self.cells)} cells, {p.requests_per_cell} "
                 f"requests {each} "
                 f"({p.warmup_requests} warmup per server), "
                 f"{'/'.join(map(str, p.output_lengths))} output tokens"
                 + (f", temperature {'/'.join(f'{t:g}' for t in p.temperatures)}"
                    if p.temperatures != (0.0,) else "")
                 + (f"; in rounds (at most {p.max_rounds}) within a {p.time_budget_s:g} s time "
                    "budget" if p.time_budget_s is not None else "")]
        if self.stage is not None:
            lines.append(f"  {self.stage.line()}")
        lines += [f"  {s.label}: method {s.method}, budget {s.budget}"
                  + (f", attached to {s.attach.url}" if s.attach else "") for s in self.servers]
        return "\n".join(lines)

    def text(self) -> str:
        return repr(self)

    def html(self) -> str:
        rows = [[s.label, s.method, s.budget, s.attach.url if s.attach else "launched"]
                for s in self.servers]
        return (html_text(repr(self).splitlines()[0], bold=True)
                + (html_text(self.stage.line()) if self.stage is not None else "")
                + html_table(["config", "method", "budget", "server"], rows))

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        return {"text/plain": self.text(), "text/html": self.html()}


def build_plan(params: SweepParams, *, source: Path, budget: int | None = None) -> Plan:
    """Expand params into server configs and cells; ``budget`` keeps one budget plus baselines.
    With ``time_budget_s`` the cells are ``max_rounds`` rounds (repeats) of every cell, the most
    the sweep may measure (:mod:`~specbench_lib.analysis.rounds` decides how many it does)."""
    if params.time_budget_s is not None and params.repeats != params.max_rounds:
        params = params.model_copy(update={"repeats": params.max_rounds})
    available = sorted({b for c in params.configs for b in c.budgets})
    if budget is not None and budget not in available:
        raise ParamsError(f"budget {budget} is not in any config; available budgets: {available}",
                          file=source, key="budget", value=budget)
    servers: list[ServerConfig] = []
    for cfg in params.configs:
        budgets: tuple[int | None, ...] = cfg.budgets or (None,)
        for b in budgets:
            if budget is not None and b is not None and b != budget:
                continue
            servers.append(ServerConfig(cfg.name, cfg.method, b, dict(cfg.options),
                                        cfg.draft_model, cfg.extra_args, cfg.spec_args, cfg.argv,
                                        cfg.attach))
    count = _cell_count(params, len(servers))
    if count > MAX_PLAN_CELLS:
        raise ParamsError(f"the plan has {count} cells (configs × workloads × contexts × output "
                          f"lengths × temperatures × load points × repeats), more than "
                          f"{MAX_PLAN_CELLS}; shorten a list or lower repeats", file=source, value=count)
    cells = tuple(_cells(params, servers))
    _require_context_room(params, servers, source)
    return Plan(params, source, tuple(servers), cells, budget)


def _cells(params: SweepParams, servers: list[ServerConfig]) -> list[CellSpec]:
    """Servers × workloads × contexts × output lengths × temperatures × load points × repeats.
    A rate profile's cells come after the closed-loop cells of their server, which they are
    spread between."""
    outputs = params.output_lengths
    load = params.request_rate
    closed = load is None or load.profile is not None
    cells: list[CellSpec] = []
    temps = params.temperatures
    for s, w, ctx, out, temp in itertools.product(servers, params.workloads, params.contexts,
                                                  outputs, temps):
        if not params.runs(w, ctx):
            continue
        common: dict[str, Any] = dict(config=s.label, series=s.name, method=s.method, budget=s.budget,
                      workload=w.name, context=ctx, repeats=params.repeats, output_tokens=out,
                      outputs=len(outputs), temperature=temp, temperatures=len(temps), turn=w.turn)
        levels = params.concurrency_at(ctx)  # concurrency_cap: at most the pool's (axes.py)
        for conc, rep in itertools.product(levels, range(params.repeats)):
            if closed:
                cells.append(CellSpec(**common, concurrency=conc, repeat=rep))
            cells += [CellSpec(**common, concurrency=conc, repeat=rep, rate=rate)
                      for rate in (load.rates if load is not None else ())]
        if load is not None and load.profile is not None:
            cap = max(*levels, params.requests_per_cell)  # an open loop: uncapped but the pool
            cells += [CellSpec(**common, concurrency=cap, repeat=rep,
                               profile_point=k, profile_points=load.profile)
                      for rep in range(params.repeats) for k in range(1, load.profile + 1)]
    return cells


def _cell_count(params: SweepParams, servers: int) -> int:
    """How many cells :func:`_cells` makes, counted without making them."""
    load = params.request_rate
    per_level = (load is None or load.profile is not None) + len(load.rates if load else ())
    profile = load.profile if load is not None and load.profile is not None else 0
    pairs = sum(params.runs(w, ctx) * (len(params.concurrency_at(ctx)) * per_level + profile)
                for w in params.workloads for ctx in params.contexts)
    return (servers * pairs * len(params.output_lengths) * len(params.temperatures)
            * params.repeats)


def _require_context_room(params: SweepParams, servers: list[ServerConfig], source: Path) -> None:
    """Refuse a plan none of whose cells fits ``engine.context`` (the context of each request
    of a launched server), before any server starts; the context guard would refuse them all.
    Attached servers, and argv templates that do not pass ``{context}``, have their own."""
    bound = [s for s in servers if s.attach is None
             and (not (s.argv or params.engine.argv_template)
                  or any("{context" in a for a in (s.argv or params.engine.argv_template)))]
    if not bound:
        return
    smallest = min(params.contexts)
    need = smallest + min(params.output_lengths) + 1
    context = params.engine.context
    if need > context:
        raise ParamsError(
            f"engine.context = {context} fits no cell: the smallest needs prompt {smallest} + "
            f"output_tokens {min(params.output_lengths)} + 1 = {need} tokens (before any speculative "
            f"reserve); raise engine.context to at least {need}, or lower contexts or "
            f"output_tokens", file=source, key="engine.context", value=context)


def load_plan(path: str | Path, *, budget: int | None = None,
              notebook: str | Path | None = None, time_budget: Any = "params",
              stage: str | None = None, contenders_run: str | None = None) -> Plan:
    """Load a params file and build its plan in one step (what a notebook calls).

    ``time_budget``: seconds or a duration (``"10m"``) over the file's ``time_budget_s``, None
    for the fixed full plan, ``"params"`` (the default) for what the file says.
    ``notebook`` is papermill's ``PAPERMILL_OUTPUT_PATH`` (``papermill --inject-paths``, always
    set by ``specbench run``): a parameter papermill passed that the notebook does not declare
    (``-p budgt 16``) is refused (see :func:`check_notebook_parameters`).
    ``stage``: the stage of a params file with ``stages`` (None: its first;
    :mod:`~.stages`), ``contenders_run`` the run whose answer gives a contenders stage its configs.
    """
    check_notebook_parameters(notebook)
    phase = params = load_params(path)
    found = None
    if params.stages or stage is not None:
        params, found = apply_stage(params, stage, source=resolve_project_path(path),
                                    contenders_run=contenders_run)
    if time_budget != "params":  # a notebook's (or --time-budget's) budget over the file's
        seconds = parse_duration(time_budget, key="time_budget")
        try:
            params = SweepParams.model_validate({**params.model_dump(), "time_budget_s": seconds})
        except ValidationError as exc:
            raise translate(exc, resolve_project_path(path), params.model_dump()) from None
    plan = build_plan(params, source=resolve_project_path(path), budget=budget)
    return replace(plan, stage=found, phase_params=phase if found is not None else None)
