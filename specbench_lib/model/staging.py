"""One stage of a phase's design as params (:mod:`.stages` says what a stage is): the phase's
params with the stage's axes, configs (its contenders, read from an earlier stage's answer),
requests and time budget over them, validated again so a bad stage names its key.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..core.errors import ParamsError
from .layering import translate
from .params import SweepParams
from .stages import (
    Stage,
    StageParams,
    contenders_answer,
    contenders_of,
    find_answer,
    spread_requests,
    stage_budget,
    stage_named,
)

_AXES = ("contexts", "concurrency", "output_tokens", "temperature", "max_rounds")


def apply_stage(params: SweepParams, name: str | None, *, source: Path,
                contenders_run: str | None = None,
                root: Path | None = None) -> tuple[SweepParams, Stage]:
    """The params of stage ``name`` (None: the first) of ``params`` and its :class:`Stage`.
    A contenders stage whose earlier stage has no answer yet is priced at ``max_contenders``
    configs (``Stage.missing``: the sweep refuses to run it, a dry run shows it)."""
    number, chosen = stage_named(params.stages, name)
    data = params.model_dump()
    seconds = stage_budget(params.stages, chosen, params.time_budget_s)
    data.update(phase=stage_phase(params, chosen.name), stages=(), time_budget_s=seconds,
                description=f"{params.phase}, stage {chosen.name}: {chosen.question}")
    data.update({key: getattr(chosen, key) for key in _AXES if getattr(chosen, key) is not None})
    # a cap at a context the stage leaves out caps nothing there (model/axes.py)
    data["concurrency_cap"] = {c: n for c, n in params.concurrency_cap.items()
                               if c in data["contexts"]}
    if chosen.workloads:
        data["workloads"] = [w for w in data["workloads"] if w["name"] in chosen.workloads]
    if chosen.request_rate is not None:
        data["request_rate"] = (None if chosen.request_rate == "closed"
                                else chosen.request_rate.model_dump())
    if isinstance(chosen.requests_per_cell, int):
        data["requests_per_cell"] = chosen.requests_per_cell
    scaled = (f"its {chosen.time_budget_s:g} s scaled to {seconds:.6g} s, the phase's "
              f"{params.time_budget_s:g} s shared in proportion"
              if seconds < chosen.time_budget_s else "")
    stage = Stage(chosen.name, chosen.question, number + 1, len(params.stages), params.phase,
                  note=scaled)
    if chosen.contenders is not None:
        stage = _carry(data, params, chosen, stage, contenders_run, root)
    try:
        return SweepParams.model_validate(data), stage
    except ValidationError as exc:
        found = translate(exc, source, data)
        said = str(found).removeprefix(f"{source}: ")
        raise ParamsError(f"stage {chosen.name}: {said}", file=source,
                          key=f"stages.{chosen.name}.{found.key}", value=found.value) from None


def _carry(data: dict[str, Any], params: SweepParams, chosen: StageParams, stage: Stage,
           run: str | None, root: Path | None) -> Stage:
    """Keep ``auto`` and the contenders of the earlier stage's answer in ``data``'s configs
    (requests sized from its spread where asked); the :class:`Stage` says what was carried."""
    assert chosen.contenders is not None
    baselines = [c.name for c in params.configs if c.method == "auto"]
    labels = [f"{c.name}-b{b}" for c in params.configs for b in c.budgets]
    path = find_answer(params.phase, chosen.contenders, run, root)
    rounds = chosen.max_rounds or params.max_rounds
    notes: list[str] = []
    if path is None:
        carried, missing = labels[:chosen.max_contenders], True
        source = (f"no run of {params.phase}-{chosen.contenders} has an answer yet: priced at "
                  f"{len(carried)} contenders; run stage {chosen.contenders} first")
        notes.append(source)
        if chosen.requests_per_cell == "spread":
            data["requests_per_cell"] = chosen.requests_max
    else:
        answer = contenders_answer(path)
        found, total = contenders_of(answer, baselines, chosen.max_contenders)
        carried = [c for c in found if c in labels]
        missing, source = False, str(path.parent.name)
        notes.append(f"contenders from {source}: {', '.join(carried) or 'none (auto alone)'}"
                     + (f", the first {len(found)} of {total}" if total > len(found) else ""))
        if chosen.requests_per_cell == "spread":
            data["requests_per_cell"], said = spread_requests(
                answer, equivalence=params.equivalence, rounds=rounds, most=chosen.requests_max)
            notes.append(said)
    data["configs"] = [_keep(c, carried) for c in data["configs"]]
    data["configs"] = [c for c in data["configs"] if c is not None]
    return Stage(stage.name, stage.question, stage.number, stage.of, stage.phase,
                 tuple(carried), source, missing, "; ".join([*notes, *filter(None, [stage.note])]))


def _keep(config: dict[str, Any], carried: list[str]) -> dict[str, Any] | None:
    """A config with only its carried budgets (the baseline whole), None when none is left."""
    if config["method"] == "auto":
        return config
    budgets = [b for b in config["budgets"] if f"{config['name']}-b{b}" in carried]
    return {**config, "budgets": budgets} if budgets else None


def stage_phase(params: SweepParams, name: str | None) -> str:
    """The phase a run of stage ``name`` (None: the first) records, ``<phase>-<stage>``, which
    its run id is minted from; the phase itself for a file without stages."""
    if not params.stages:
        return params.phase
    return f"{params.phase}-{stage_named(params.stages, name)[1].name}"


__all__ = ["apply_stage", "stage_phase"]
