"""A cell's verdict: its status (``ok``, ``invalid``, ``crashed``, ``skipped``), every reason
that applied (a :mod:`~specbench_lib.model.catalogue` code and a detail, counted over requests)
and the measured requests that failed; read back from a cell file's ``verdict``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from ..core.display import Rendered, html_table, html_text
from .catalogue import BY_DESIGN, check

Status = Literal["ok", "invalid", "crashed", "skipped"]
STATUSES: tuple[Status, ...] = ("ok", "invalid", "crashed", "skipped")


class Reason(str):
    """One reason of a verdict: a rule's ``code`` and a ``detail``, counted over requests.

    It reads as text (``"http_400: {...} (x3)"``, with a ``tolerated: `` prefix when a tolerant
    verdict let it through), so a reason can be shown and searched as it is, and its parts are
    fields, never parsed back out of the text. ``code`` is an entry of :mod:`~specbench_lib.model.catalogue`
    (another is :class:`~specbench_lib.core.errors.UnknownReason`)."""

    code: str
    detail: str
    count: int  # type: ignore[assignment]  # the field shadows str.count, as it always has
    tolerated: bool

    def __new__(cls, code: str, detail: str = "", *, count: int = 1,
                tolerated: bool = False) -> Reason:
        text = f"{check(code)}: {detail}" if detail else check(code)
        if count > 1:
            text += f" (x{count})"
        self = super().__new__(cls, f"tolerated: {text}" if tolerated else text)
        self.code, self.detail, self.count, self.tolerated = code, detail, count, tolerated
        return self

    def __reduce__(self) -> Any:
        return (_reason, (self.code, self.detail, self.count, self.tolerated))

    def counted(self, count: int) -> Reason:
        return Reason(self.code, self.detail, count=count, tolerated=self.tolerated)

    def as_tolerated(self) -> Reason:
        return Reason(self.code, self.detail, count=self.count, tolerated=True)

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"code": self.code, "detail": self.detail}
        if self.count > 1:
            data["count"] = self.count
        if self.tolerated:
            data["tolerated"] = True
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Reason:
        return cls(str(data["code"]), str(data.get("detail", "")), count=int(data.get("count", 1)),
                   tolerated=bool(data.get("tolerated", False)))


def _reason(code: str, detail: str, count: int, tolerated: bool) -> Reason:
    return Reason(code, detail, count=count, tolerated=tolerated)


@dataclass(frozen=True)
class Verdict(Rendered):
    """A cell's status, every reason that applied, and the measured requests that failed.

    An ``ok`` cell may carry reasons only when ``max_failed_fraction`` tolerated some failed
    requests: those reasons are ``tolerated`` and ``failed`` lists the requests' indices, which
    metrics leave out (and count).
    """

    status: Status
    reasons: tuple[Reason, ...] = ()
    failed: tuple[int, ...] = ()

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def by_design(self) -> bool:
        """Skipped because the plan said so (adaptive repeats that were not needed): not a
        failure, never marked on a figure or listed with the failed cells."""
        return self.status == "skipped" and bool(self.reasons) and all(
            r.code in BY_DESIGN for r in self.reasons)

    @property
    def codes(self) -> set[str]:
        return {r.code for r in self.reasons}

    def text(self) -> str:
        return "\n".join([self.status, *(f"  {r}" for r in self.reasons)])

    def html(self) -> str:
        rows = [[r.code, r.detail, r.count, "yes" if r.tolerated else ""] for r in self.reasons]
        table = html_table(["rule", "detail", "requests", "tolerated"], rows) if rows else ""
        return html_text(self.status, bold=True) + table

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status, "reasons": [r.to_dict() for r in self.reasons],
                "failed": list(self.failed)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Verdict:
        status = data["status"]
        if status not in STATUSES:
            raise ValueError(f"unknown verdict status {status!r}")
        return cls(status, tuple(map(Reason.from_dict, data.get("reasons", ()))),
                   tuple(map(int, data.get("failed", ()))))
