"""The values a plan is made of: a server start (:class:`ServerConfig`: a config at one budget)
and a measurement (:class:`CellSpec`: a server config × workload × context × load point), built
from the params by :mod:`~.plan`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from .sections import AttachParams, Method


@dataclass(frozen=True)
class ServerConfig:
    """One server start: a config at one budget (``budget`` is None for the baseline)."""

    name: str
    method: Method
    budget: int | None
    options: dict[str, int | float | str]
    draft_model: str | None
    extra_args: tuple[str, ...]
    spec_args: tuple[str, ...] = ()
    argv: tuple[str, ...] = ()
    attach: AttachParams | None = None  # a running server: nothing is launched for it

    @property
    def label(self) -> str:
        return self.name if self.budget is None else f"{self.name}-b{self.budget}"


@dataclass(frozen=True)
class CellSpec:
    """One measurement: a server config × workload × context × concurrency. ``config`` is the
    server's label (``ngram-b16``); ``series`` the config's name (``ngram``), a plot's line."""

    config: str
    series: str
    method: Method
    budget: int | None
    workload: str
    context: int
    concurrency: int
    repeat: int = 0
    repeats: int = 1
    output_tokens: int = 0  # 0: a cell written before output length was in the spec
    outputs: int = 1  # output lengths in the plan: with several, the id names the cell's
    rate: float | None = None  # open loop at a fixed rate (requests a second); None: closed
    profile_point: int | None = None  # open loop at point k of a rate profile (decided when run)
    profile_points: int = 0
    temperature: float = 0.0  # the sampling temperature (0: greedy; a cell written before: 0)
    temperatures: int = 1  # temperatures in the plan: with several, the id names the cell's
    turn: int = 1  # a conversation's timed turn (2: the id, table and figures say so)

    @property
    def closed_loop(self) -> bool:
        """Whether its load is its concurrency: requests in flight, each sent when one ends (not
        an open loop's rate or a rate profile's point)."""
        return self.rate is None and self.profile_point is None

    @property
    def load(self) -> str:
        """The open-loop load point ("2.5/s", "p2/3" of a profile); "" for a closed loop, whose
        load is its concurrency."""
        if self.rate is not None:
            return f"{self.rate:g}/s"
        if self.profile_point is not None:
            return f"p{self.profile_point}/{self.profile_points}"
        return ""

    @property
    def cell_id(self) -> str:
        base = f"{self.config}__{self.workload}__ctx{self.context}__c{self.concurrency}"
        if self.outputs > 1:
            base += f"__o{self.output_tokens}"
        if self.temperatures > 1:
            base += f"__t{self.temperature:g}"
        base += f"__turn{self.turn}" if self.turn != 1 else ""
        if self.rate is not None:
            base += f"__q{self.rate:g}"
        if self.profile_point is not None:
            base += f"__p{self.profile_point}of{self.profile_points}"
        return f"{base}__r{self.repeat}" if self.repeats > 1 else base

    def row(self) -> dict[str, Any]:
        """The spec as a table row's keys: its fields and its ``load``."""
        return {**asdict(self), "load": self.load}
