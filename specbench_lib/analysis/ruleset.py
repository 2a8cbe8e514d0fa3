"""The cell rules' registry: every rule object of ``analysis/rules/``, found by its folder.

A module of ``rules/`` holds one :class:`~.rule.Rule` subclass (AIPerf's metrics are the model:
one class a metric, a registry that discovers their folder). :data:`RULES` is them in their
``order``; each one's entry joins :mod:`~specbench_lib.model.catalogue` (so a ``Reason`` with
its code is known, and the rules page documents it), and :func:`thresholds_of` fills a cell's
judge inputs from params by each threshold's key. Nothing else names a rule: a new rule with a
threshold is its file and its test.
"""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType
from typing import Any

from ..core.errors import ParamsError
from ..model.catalogue import register
from ..model.params import SweepParams
from . import rules as _folder
from .rule import Rule

__all__ = ["RULES", "discover", "thresholds_of"]


def discover(package: ModuleType) -> tuple[Rule, ...]:
    """The rules of ``package``'s modules (one :class:`Rule` subclass each, by ``order``), their
    entries registered in the catalogue."""
    found: list[Rule] = []
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda i: i.name):
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        found += [kind() for kind in vars(module).values()
                  if isinstance(kind, type) and issubclass(kind, Rule) and kind is not Rule
                  and kind.__module__ == module.__name__]
    found.sort(key=lambda r: (r.order, r.code))
    for rule in found:
        if rule.declares:
            register(rule.entry())
    return tuple(found)


RULES: tuple[Rule, ...] = discover(_folder)


def thresholds_of(params: SweepParams, rules: tuple[Rule, ...] | None = None) -> dict[str, Any]:
    """Every rule's thresholds as ``params`` sets them, by key (a cell's ``JudgeInputs``);
    :class:`ParamsError` for a ``thresholds`` key no rule reads."""
    rules = RULES if rules is None else rules
    values = {k: v for rule in rules for k, v in rule.inputs(params).items()}
    unknown = sorted(f"thresholds.{k}" for k in params.thresholds if f"thresholds.{k}" not in values)
    if unknown:
        known = sorted(k for k in values if k.startswith("thresholds."))
        raise ParamsError(f"params key {', '.join(unknown)} is no rule's threshold (the rules' "
                          f"own thresholds: {', '.join(known) or 'none'}); fix or remove it",
                          key=unknown[0], value=params.thresholds[unknown[0].split(".", 1)[1]])
    return values
