"""Params files for tests: a base plan and the keys a test changes, written once.

One helper, one rule: a params file is a **base plus overrides**, merged key by key
(:func:`compose`: a mapping merges into the base's mapping, so ``engine={"port": p}`` changes the
port and keeps the rest of the engine; anything else, a list included, replaces; :data:`DROP`
removes a key). The bases:

- ``"tiny"`` (the default): ``extends: tests/data/tiny.yaml`` with whole top-level keys;
- ``"minimal"``: :data:`MINIMAL`, the smallest plan that loads;
- a mapping: any plan, e.g. :func:`fake_plan` (a sweep on ``tests/support/fake_server.py``) or
  another call's result, so bases compose: ``compose(fake_plan(port), time_budget_s=60)``;
- a path, or None (the overrides alone).

``write_params(tmp_path, fake_plan(port, argv=fake_argv(interval=0.01)), phase="x",
configs=[...])`` is a whole sweep's params in one call; ``text`` appends raw YAML lines (a key a
test spells itself, a malformed file).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from fakeparams import FAKE, fake_argv

DATA = Path(__file__).resolve().parents[1] / "data"
TINY = DATA / "tiny.yaml"
# the smallest plan that loads: one config, one workload, one cell (no engine block: defaults)
MINIMAL: dict[str, Any] = {"phase": "t", "configs": [{"name": "auto", "method": "auto"}],
                           "workloads": [{"name": "code", "source": "humaneval"}],
                           "contexts": [16], "concurrency": [1]}
# the two rules that judge the client host left unjudged (fakeparams.LENIENT_HOST as keys)
LENIENT: dict[str, Any] = {"max_coalesced_fraction": 0.5, "max_coalesced_first_fraction": 0.5,
                           "host": {"max_other_cpu_cores": None}}
BASES = {"tiny": TINY}
DROP = object()  # an override that removes the key from the base


def compose(base: Mapping[str, Any], /, **overrides: Any) -> dict[str, Any]:
    """``base`` with ``overrides`` merged in (see the module); neither is changed."""
    merged: dict[str, Any] = dict(base)
    for key, value in overrides.items():
        if value is DROP:
            merged.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = compose(merged[key], **value)
        else:
            merged[key] = value
    return merged


def argv_of(*extra: str, interval: float | None = None, budget: bool = False) -> list[str]:
    """A fake server's argv template as a list (:func:`fakeparams.fake_argv`'s, for a plan's
    config)."""
    return list(json.loads(fake_argv(*extra, interval=interval, budget=budget)))


def fake_plan(port: int, *, argv: str | list[str] | None = None, interval: float | None = 0.002,
              **overrides: Any) -> dict[str, Any]:
    """A sweep on fake servers (the argv-template engine, :mod:`fakeparams`): ``auto`` on one
    code panel (context 16, concurrency 1), two 8-token requests a cell, no warmup, the client
    host unjudged; ``argv`` the servers' (a :func:`fakeparams.fake_argv`; by default one token
    every ``interval`` s; a JSON text or a list), ``overrides`` merged in."""
    import sys

    argv = argv or fake_argv(interval=interval)
    template = json.loads(argv) if isinstance(argv, str) else list(argv)
    engine = {"kind": "template", "api": "llamacpp", "binary": sys.executable, "model": str(FAKE),
              "port": port, "context": 2048, "ready_timeout_s": 20,
              "argv_template": template}
    base = {"phase": "fake", "engine": engine, "configs": [{"name": "auto", "method": "auto"}],
            "workloads": [{"name": "code", "source": "humaneval"}], "contexts": [16],
            "concurrency": [1], "output_tokens": 8, "requests_per_cell": 2, "warmup_requests": 0,
            **LENIENT}
    return compose(base, **overrides)


def params_text(base: str | Path | Mapping[str, Any] | None = "tiny", *, text: str = "",
                **overrides: Any) -> str:
    """The YAML of a params file: ``base`` (see the module) with ``overrides``; ``text``: raw
    YAML lines appended."""
    if isinstance(base, Mapping) or base == "minimal":
        plan = compose(MINIMAL if base == "minimal" else base, **overrides)  # type: ignore[arg-type]
        body = yaml.safe_dump(plan, sort_keys=False)
    else:
        head = "" if base is None else f"extends: {BASES.get(str(base), base)}\n"
        body = head + (yaml.safe_dump(compose({}, **overrides), sort_keys=False)
                       if overrides else "")
    return body + text


def write_params(tmp_path: Path, base: str | Path | Mapping[str, Any] | None = "tiny", *,
                 name: str = "p.yaml", text: str = "", **overrides: Any) -> Path:
    """:func:`params_text` written to ``tmp_path / name``; returns the path."""
    path = tmp_path / name
    path.write_text(params_text(base, text=text, **overrides))
    return path
