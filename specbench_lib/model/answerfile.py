"""``answer.json``: a run's answer as typed values, with its one writer and its one reader.

:mod:`~specbench_lib.analysis.answer` builds an :class:`AnswerDoc` (a fixed plan's at its end;
a budgeted sweep's after every look and at its end, :mod:`~specbench_lib.sweep.adaptive`, with
what the budget cut, :mod:`~specbench_lib.sweep.budget`); :func:`write_answer` writes it and
:func:`read_answer` reads it back for every reader (the answer's words and pages, the CLI, a
contenders stage, :class:`~specbench_lib.runs.results.RunResult`'s errors per panel). Its shape
is its dataclasses' (:func:`~specbench_lib.core.readback.doc_of`, as the manifest's): a key
without a default must be there, a key an earlier run did not write reads as its default, and
a file of another shape is one :class:`~specbench_lib.core.errors.StoreError` naming the file,
the first wrong key and what to do. The file name is spelled here only (:data:`ANSWER_FILE`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.errors import StoreError
from ..core.readback import doc_of, from_doc, problem, to_doc
from ..core.store import read_json, write_json_atomic
from .tablekeys import PANEL, PANEL_DEFAULTS

ANSWER_FILE = "answer.json"


@dataclass(frozen=True, kw_only=True)
class PanelKey:
    """The panel a claim is made in (:data:`~.tablekeys.PANEL`); a key an earlier answer did not
    write is what it stood for then (:data:`~.tablekeys.PANEL_DEFAULTS`)."""

    workload: str
    context: int
    output_tokens: int
    concurrency: int
    load: str = PANEL_DEFAULTS["load"]  # an open-loop load point; "" a closed loop
    temperature: float = PANEL_DEFAULTS["temperature"]
    turn: int = PANEL_DEFAULTS["turn"]

    def values(self) -> tuple[Any, ...]:
        """The panel as the results table's tuple of its :data:`~.tablekeys.PANEL` values."""
        return tuple(getattr(self, k) for k in PANEL)


@dataclass(frozen=True, kw_only=True)
class PanelAnswer:
    """One panel's claim as its last look made it (:mod:`~specbench_lib.analysis.claim`), the
    configs that left it and why, and its notes (the speedup's pairing, split and spread, a
    panel with a leader only)."""

    panel: PanelKey
    decided: bool
    decision: str
    best: str | None
    confidence_set: tuple[str, ...]
    epsilon: float | None = None
    alpha: float | None = None  # the error of the look it was made at
    alpha_spent: float | None = None
    speedup: float | None
    speedup_lo: float | None
    speedup_hi: float | None
    baseline: str | None
    requests: dict[str, int] = field(default_factory=dict)  # per config, its ok requests
    eliminated: dict[str, int]  # config → the round it left in
    out: dict[str, str] = field(default_factory=dict)  # config → why it is out (no ok cell)
    decided_s: float | None = None
    decided_round: int | None = None
    more_requests: int | None = None  # an undecided panel: about how many would decide it
    closest_call: str | None = None
    blocks: int | None = None
    reason: str | None = None  # why it is undecided whatever its data
    drift: str | None = None
    drift_prefill: float | None = None
    pairing: str | None = None
    split: dict[str, Any] | None = None  # :func:`~specbench_lib.analysis.stepcost.panel_split_doc`
    spread: dict[str, Any] | None = None  # :class:`~specbench_lib.analysis.promptspread.Spread`
    crashed: dict[str, str] = field(default_factory=dict)  # config → its late crash line

    def unwritten(self) -> frozenset[str]:
        """A panel without a leader has no notes on a speedup (no such keys in the file)."""
        return frozenset({"pairing", "split", "spread"}) if self.best is None else frozenset()


@dataclass(frozen=True, kw_only=True)
class PartialRound:
    """A partial last round: ``requests`` a cell of the plan's ``of``, for ``configs``."""

    round: int
    requests: int
    of: int
    configs: tuple[str, ...]


@dataclass(frozen=True, kw_only=True)
class RunDrift:
    """The machine's drift over the run (:func:`~specbench_lib.analysis.drift.run_drift`)."""

    cells: int = 0
    slowest: float | None = None
    fastest: float | None = None
    trend: float | None = None
    words: str | None = None


@dataclass(frozen=True, kw_only=True)
class Measured:
    """What a budgeted run measured over all its attempts (:func:`~specbench_lib.sweep.looks.measured`)."""

    rounds: int = 0
    cells: int = 0
    seconds: float = 0.0
    earlier_attempts_s: float = 0.0
    attempts: int = 0


@dataclass(frozen=True, kw_only=True)
class Overrun:
    """The largest overrun past the budget (a cell's end, or the sweep's), the sweep's own and
    the allowed (:meth:`~specbench_lib.sweep.budget.Budget.overrun_doc`)."""

    largest_s: float = 0.0
    cell: str | None = None
    end_s: float = 0.0
    allowed_s: float = 0.0


@dataclass(frozen=True, kw_only=True)
class Cut:
    """Where the budget cut its round and what that leaves (:func:`~specbench_lib.sweep.budget.cut_words`)."""

    round: int = 0
    config: str = ""
    cell: str = ""
    predicted_s: float = 0.0
    left_s: float = 0.0
    at_s: float | None = None
    server_start: bool = False
    measured: tuple[str, ...] = ()  # the configs its block holds
    missing: tuple[str, ...] = ()
    cells: int = 0
    words: str = ""


@dataclass(frozen=True, kw_only=True)
class MoreTime:
    """What another hour would buy (:func:`~specbench_lib.sweep.budget.more_time`)."""

    seconds: float = 0.0
    cells: int = 0
    wanted: int = 0
    whole_rounds: tuple[int, ...] = ()
    words: str = ""


@dataclass(frozen=True, kw_only=True)
class AnswerDoc:
    """A run's answer (see the module): the run's figures and one :class:`PanelAnswer` a panel.

    A fixed plan's (``budget_s`` None) ends at ``drift``; a budgeted one's adds what it
    measured, its partial round, overrun and time model, and at its end (``stopped`` not
    ``running``) what the budget cut and what more time would buy."""

    seconds: float
    budget_s: float | None
    rounds: int
    stopped: str  # decided, rounds, budget, complete (a fixed plan), or running (at a look)
    alpha: float | None = None
    looks: int | None = None
    spending: str | None = None
    equivalence: float | None = None
    quantity: str | None = None  # None: an answer before quantities (end to end)
    panels: tuple[PanelAnswer, ...]
    drift: RunDrift | None = None
    partial: PartialRound | None = None
    measured: Measured | None = None
    overrun: Overrun | None = None
    time_model: str | None = None
    cut: Cut | None = None
    more_time: MoreTime | None = None

    def unwritten(self) -> frozenset[str]:
        """The keys a fixed plan's answer, or one written at a look, does not hold."""
        if self.budget_s is None:
            return frozenset({"partial", "measured", "overrun", "time_model", "cut", "more_time"})
        return frozenset({"cut", "more_time"}) if self.stopped == "running" else frozenset()

    def to_dict(self) -> dict[str, Any]:
        """The answer as the file holds it (NaN as null)."""
        found: dict[str, Any] = to_doc(self)
        return found

    @classmethod
    def from_dict(cls, data: Any, *, path: Path | str = ANSWER_FILE) -> AnswerDoc:
        """The answer of a JSON value (:func:`read_answer`'s, or a test's); a
        :class:`StoreError` naming ``path``, the first wrong key and the fix when it is not of
        its shape."""
        found = problem(data, ANSWER)
        if found is not None:
            raise StoreError(f"answer is not of its shape ({found}); {ANSWER_FIX}", path=path)
        return from_doc(cls, data)


# the answer's shape, checked on read: its dataclasses', written once above
ANSWER = doc_of(AnswerDoc, required=True)
ANSWER_FIX = ("a damaged answer: run 'specbench run <phase> --resume <run>' to measure what is "
              "missing and write it again, or delete it to read the run by its cells")


def answer_path(run_dir: Path | str) -> Path:
    """Where a run's answer is (the file may not be there yet)."""
    return Path(run_dir) / ANSWER_FILE


def write_answer(run_dir: Path | str, answer: AnswerDoc) -> Path:
    """``answer.json`` in the run directory (atomic); a :class:`StoreError` when it cannot be
    written (the cells are intact)."""
    path = answer_path(run_dir)
    try:
        write_json_atomic(path, answer.to_dict())
    except OSError as exc:
        raise StoreError(f"cannot write the answer ({exc.strerror or exc}); the cells are "
                         f"intact: free disk space, then resume this run", path=path) from exc
    return path


def read_answer(run_dir: Path | str) -> AnswerDoc | None:
    """The run's answer, None where it has none yet (no ``answer.json``); a
    :class:`StoreError` naming the file, its first wrong key and the fix when it is not of its
    shape or not JSON."""
    path = answer_path(run_dir)
    return AnswerDoc.from_dict(read_json(path), path=path) if path.is_file() else None


def answer_or_error(run_dir: Path | str) -> tuple[AnswerDoc | None, str | None]:
    """:func:`read_answer`, its error as one line instead (the rest of a report goes on)."""
    try:
        return read_answer(run_dir), None
    except StoreError as exc:
        return None, str(exc)
