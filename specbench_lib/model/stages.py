"""A phase's design in stages: each stage one question, its own axes, configs and time budget.

A params file may list ``stages`` (:class:`StageParams`). A run measures one stage (the
notebook's ``stage`` parameter, ``-p stage grid``; the first one when none is named): the
phase's params with the stage's axes over them
(:func:`~specbench_lib.model.staging.apply_stage`), its run's phase ``<phase>-<stage>`` (so
its runs are found by name), its own time budget, rounds and looks. Every
guarantee of a budgeted sweep holds within the stage, which is a sweep like any other: blocks
against drift, α spent over its looks, one claim per panel (:mod:`~specbench_lib.analysis.rounds`).

**Contenders.** A stage with ``contenders: <an earlier stage>`` measures ``auto`` and the
configs that stage's answer could not exclude: the union of its panels' confidence sets for the
best (``answer.json``'s ``confidence_set``), each panel's leader first, at most
``max_contenders`` of them (:func:`contenders_of`). The answer is the newest run of
``<phase>-<that stage>`` under ``outputs/runs`` with an ``answer.json``, or a run named with
``contenders_run``. A config left out of every set was shown slower than the best of every
screened panel at the stage's error; the next stage's claims are conditional on that screen
(docs/stages.md says where it may fail: a best that moves between panels the screen did not see).

**Time.** Each stage has its own time budget, its share of the phase's: where the stages'
budgets add up to more than the phase's ``time_budget_s`` (a compressed run), each is scaled
down in proportion (:func:`stage_budget`), so the phase's budget is kept.

**Requests sized from the spread.** ``requests_per_cell: spread`` sizes a stage's requests a
cell a round from the spread its contenders' stage measured (:func:`spread_requests`): the
waves that would bring the widest leader's interval to ``equivalence`` over the stage's
``max_rounds``, at least 1, at most ``requests_max`` (what the dry run prices).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator

from ..core.durations import parse_duration
from ..core.errors import ParamsError, StoreError
from ..core.paths import outputs_dir
from .answerfile import ANSWER_FILE, AnswerDoc, read_answer
from .sections import LoadParams, Strict


class StageParams(Strict):
    """One stage of a phase's design (see the module); a key left out is the phase's."""

    name: str = Field(pattern=r"^[A-Za-z0-9_]+$")  # the run's phase is <phase>-<name>
    question: str = Field(min_length=1)  # what the stage answers, in the researcher's words
    # this stage's wall time ("2h"); where the stages add up to more than the phase's
    # time_budget_s (a compressed run: `time_budget_s: 10m`), each is scaled down in proportion
    time_budget_s: float
    # an earlier stage whose answer's confidence sets give this stage's configs (plus auto)
    contenders: str | None = None
    # at most this many contenders carried (each screened panel's leader first); the dry run
    # prices a stage with contenders at this many
    max_contenders: int = Field(3, ge=1, le=64)
    workloads: tuple[str, ...] = ()  # names of the phase's workloads; empty: all of them
    contexts: tuple[int, ...] | None = None  # the stage's contexts (None: the phase's)
    concurrency: tuple[int, ...] | None = None  # the stage's concurrency (None: the phase's)
    output_tokens: int | tuple[int, ...] | None = None  # the stage's (None: the phase's)
    temperature: float | tuple[float, ...] | None = None  # the stage's (None: the phase's)
    # open-loop load points for this stage; "closed": none (the phase's otherwise)
    request_rate: LoadParams | Literal["closed"] | None = None
    # requests a cell a round; "spread": sized from the contenders stage's measured spread
    requests_per_cell: int | Literal["spread"] | None = None
    requests_max: int = Field(8, ge=1, le=10_000)  # the most "spread" may size, and is priced at
    max_rounds: int | None = Field(None, ge=2, le=1000)  # this stage's rounds at most

    @field_validator("time_budget_s", mode="before")
    @classmethod
    def _seconds(cls, value: Any) -> float:
        try:
            seconds = parse_duration(value, key="time_budget_s")
        except ParamsError as exc:
            raise ValueError(str(exc)) from None
        if seconds is None or seconds <= 0:
            raise ValueError(f"a stage needs a positive time budget, got {value!r}")
        return seconds


def check_stages(stages: Sequence[StageParams], *, workloads: Sequence[str]) -> None:
    """Refuse stages that cannot run (a ValueError, which the params loader names with the
    file): a repeated name, contenders from a stage that is not an earlier one, a workload
    the phase lacks, ``spread`` requests without contenders."""
    seen: list[str] = []
    for stage in stages:
        if stage.name in seen:
            raise ValueError(f"stages: the name {stage.name!r} is used twice; give each stage "
                             "its own name")
        if stage.contenders is not None and stage.contenders not in seen:
            raise ValueError(f"stages.{stage.name}.contenders = {stage.contenders!r}: name an "
                             f"earlier stage ({', '.join(seen) or 'none before it'})")
        if stage.requests_per_cell == "spread" and stage.contenders is None:
            raise ValueError(f"stages.{stage.name}.requests_per_cell = 'spread' sizes from the "
                             "contenders stage's spread: give contenders, or a number")
        unknown = [w for w in stage.workloads if w not in workloads]
        if unknown:
            raise ValueError(f"stages.{stage.name}.workloads names {unknown}, not workloads of "
                             f"the phase ({', '.join(workloads)})")
        seen.append(stage.name)


@dataclass(frozen=True)
class Stage:
    """The stage a plan measures: its place in the design and where its configs came from."""

    name: str
    question: str
    number: int  # from 1
    of: int
    phase: str  # the phase's own name (the run's is <phase>-<name>)
    contenders: tuple[str, ...] = ()  # the carried configs' labels (a contenders stage)
    source: str | None = None  # the run whose answer gave them, or why none did
    missing: bool = False  # no answer to read yet: priced at max_contenders, cannot run
    note: str = ""  # what was carried and why (a cap, the requests sized)

    def line(self) -> str:
        """"stage 2 of 3, grid: <question>" and where its configs came from."""
        head = f"stage {self.number} of {self.of}, {self.name}: {self.question}"
        return head + (f" [{self.note}]" if self.note else "")


def stage_budget(stages: Sequence[StageParams], stage: StageParams,
                 phase_budget: float | None) -> float:
    """``stage``'s seconds: its own, scaled down in proportion where the stages add up to more
    than the phase's ``phase_budget`` (None: no bound of the phase's)."""
    total = sum(s.time_budget_s for s in stages)
    if phase_budget is None or total <= phase_budget:
        return stage.time_budget_s
    return stage.time_budget_s * phase_budget / total


def stage_named(stages: Sequence[StageParams], name: str | None) -> tuple[int, StageParams]:
    """The stage called ``name`` (None: the first) and its place; a clear error otherwise."""
    if not stages:
        raise ParamsError(f"stage {name!r} given, but the params file has no stages",
                          key="stage", value=name)
    if name is None:
        return 0, stages[0]
    for number, stage in enumerate(stages):
        if stage.name == name:
            return number, stage
    raise ParamsError(f"no stage {name!r}; the stages are {', '.join(s.name for s in stages)}",
                      key="stage", value=name)


def find_answer(phase: str, stage: str, run: str | None = None,
                root: Path | None = None) -> Path | None:
    """The answer a contenders stage reads: run ``run``'s (an id under ``outputs/runs`` or a
    run directory's path), else the newest run of ``<phase>-<stage>`` with one (None: none)."""
    runs = (root or outputs_dir()) / "runs"
    if run is not None:
        given = Path(run).expanduser()
        folder = given if given.is_dir() else runs / run
        if not (folder / ANSWER_FILE).is_file():
            raise ParamsError(f"contenders_run {run!r} has no {ANSWER_FILE} (looked in {folder});"
                              f" name a finished run of stage {stage}", key="contenders_run",
                              value=run)
        return folder / ANSWER_FILE
    found = sorted(runs.glob(f"*_{phase}-{stage}_*/{ANSWER_FILE}"))
    return found[-1] if found else None


def contenders_answer(path: Path) -> AnswerDoc:
    """The answer in ``path`` (:func:`find_answer`'s), as a params error naming it when it
    cannot be read."""
    try:
        found = read_answer(path.parent)
    except StoreError as exc:
        raise ParamsError(f"the contenders' answer cannot be read: {exc}", file=path,
                          key="contenders_run", value=str(path.parent.name)) from None
    if found is None:
        raise ParamsError(f"the contenders' answer is gone ({path})", file=path,
                          key="contenders_run", value=str(path.parent.name))
    return found


def contenders_of(answer: AnswerDoc, baselines: Sequence[str],
                  limit: int) -> tuple[list[str], int]:
    """The configs an answer could not exclude anywhere: each panel's leader first (in panel
    order), then the other members of the sets, fastest first; baselines left out (they are
    measured anyway). Returns at most ``limit`` of them and how many there were."""
    panels = answer.panels
    ranked: list[str] = []
    for entry in panels:
        best = entry.best
        if best and best not in baselines and best not in ranked:
            ranked.append(str(best))
    for place in range(max((len(e.confidence_set) for e in panels), default=0)):
        for entry in panels:
            members = entry.confidence_set
            if place < len(members) and members[place] not in baselines \
                    and members[place] not in ranked:
                ranked.append(str(members[place]))
    return ranked[:limit], len(ranked)


def spread_requests(answer: AnswerDoc, *, equivalence: float, rounds: int,
                    most: int) -> tuple[int, str]:
    """Requests a cell a round (waves, ×concurrency where the plan scales so) that would bring
    the widest measured interval of a panel's leader against the baseline to ±``equivalence``
    (log scale) by the end of ``rounds`` rounds, as the intervals narrow with √n; within 1 and
    ``most``. With no interval to read, ``most``."""
    target = -math.log(1 - equivalence) if 0 < equivalence < 1 else 0.05
    needed: list[float] = []
    for entry in answer.panels:
        low, high, best = entry.speedup_lo, entry.speedup_hi, entry.best
        if not (low and high and best) or best == entry.baseline or low <= 0:
            continue
        half = (math.log(high) - math.log(low)) / 2
        concurrency = int(entry.panel.concurrency or 1)
        waves = entry.requests.get(best, 0) / max(1, concurrency)
        if half > 0 and waves > 0 and math.isfinite(half):
            needed.append(waves * (half / target) ** 2)
    if not needed:
        return most, f"no interval measured to size from: {most} a cell a round"
    per_round = max(1, min(most, math.ceil(max(needed) / max(1, rounds))))
    return per_round, (f"{per_round} requests a cell a round, sized from the measured spread "
                       f"(the widest leader's interval needs about {max(needed):.0f} waves for "
                       f"±{100 * equivalence:g} %, over {rounds} rounds; at most {most})")


__all__ = ["Stage", "StageParams", "check_stages", "contenders_answer", "contenders_of",
           "find_answer", "spread_requests", "stage_budget", "stage_named"]
