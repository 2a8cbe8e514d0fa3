"""The looks of a budgeted sweep as they were taken, replayed by a resume (:class:`Looks`), and
what a run measured over all its attempts (:func:`measured`)."""

from __future__ import annotations

from typing import Any

from ..analysis.rounds import Contention
from ..core.readback import CONTEST, problem
from ..model.answerfile import Measured
from ..report.outcome import SweepResult
from ..runs.run import Run
from .context import Partial, SweepContext


class Looks:
    """The looks of a budgeted sweep as they were taken (the manifest's ``contest``: each
    look's round, whether it was the last, the rounds planned then, its clock and a partial
    round's size; ``end``: the rounds and why it stopped), so that a resume replays them, not
    the clock: while an attempt measures nothing, its contest is the earlier one's, and it ends
    where the earlier one's last look ended it."""

    def __init__(self, prior: dict[str, Any]) -> None:
        self.prior: list[dict[str, Any]] = list(prior.get("looks") or [])
        self.end: dict[str, Any] = prior.get("end") or {}
        self.taken: list[dict[str, Any]] = []

    def observe(self, ctx: SweepContext, contest: Contention, number: int, elapsed_s: float, *,
                last: bool, partial: Partial | None = None) -> None:
        """``contest.observe`` on the run's cells, recorded in the manifest."""
        contest.observe(SweepResult(ctx.run.dir.path).cells, number, elapsed_s, last=last)
        self._record(ctx, {"round": number, "last": last, "rounds": contest.rounds,
                           "elapsed_s": round(elapsed_s, 3),
                           "partial": None if partial is None else partial.to_dict(number)})

    def replay(self, ctx: SweepContext, contest: Contention,
               number: int) -> tuple[bool, Partial | None]:
        """The earlier attempt's looks after round ``number``, on the same cells: whether the
        contest ended there, and its partial round."""
        cells, ended, partial = SweepResult(ctx.run.dir.path).cells, False, None
        while self.prior and self.prior[0]["round"] == number:
            look = self.prior.pop(0)
            contest.rounds = int(look["rounds"])
            contest.observe(cells, number, float(look["elapsed_s"]), last=bool(look["last"]))
            part = look.get("partial")
            partial = None if not part else Partial(int(part["requests"]), int(part["of"]),
                                                    tuple(part["configs"]))
            ended = ended or bool(look["last"])
            self._record(ctx, look)
        return ended or contest.done, partial

    def replays(self, number: int, unmeasured: bool) -> bool:
        """Whether round ``number``'s looks are the earlier attempt's: when it left nothing to
        measure, or when its look there was the last (its error was spent, so a resume that
        thinks time is left, its clock counted only to its last cell, measures no more)."""
        look = self.prior[0] if self.prior else None
        return bool(look and look["round"] == number and (not unmeasured or look["last"]))

    def stopped(self, number: int, contest: Contention, partial: Partial | None) -> str:
        """Why the replayed contest stopped: the earlier attempt's word, or as the loop says."""
        return str(self.end.get("stopped") or (
            "budget" if number < contest.rounds or partial is not None else "rounds"))

    def _record(self, ctx: SweepContext, look: dict[str, Any]) -> None:
        self.taken.append(look)
        ctx.run.dir.update_manifest(contest={"looks": self.taken, "end": None})


def prior_looks(ctx: SweepContext) -> dict[str, Any]:
    """The earlier attempts' looks (the manifest's ``contest``), none when it is not of its
    shape (then the contest is taken again, from the clock)."""
    found = ctx.run.dir.manifest().get("contest")
    return found if found is not None and problem(found, CONTEST) is None else {}


def measured(cells: list[Any], run: Run, seconds: float) -> Measured:
    """What the run measured, over all its attempts: the rounds with a measured cell, the cells,
    the wall seconds (the earlier attempts' included) and the attempts."""
    done = [c for c in cells if c.status != "skipped"]
    return Measured(rounds=len({c.spec.repeat for c in done}), cells=len(done),
                    seconds=round(seconds, 1), earlier_attempts_s=round(run.spent_s, 1),
                    attempts=run.number)
