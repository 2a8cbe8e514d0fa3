"""Params files for tests: a base plan and the keys a test changes, written once.

A test that needs a plan one or two keys away from a known one says only those keys:
``write_params(tmp_path, slo={"e2e_s": 4})`` extends ``tests/data/tiny.yaml``;
``write_params(tmp_path, "minimal", host={...})`` writes :data:`MINIMAL` with the keys changed.
The overrides are YAML values (dicts, lists, numbers, strings, None for ``null``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

DATA = Path(__file__).resolve().parents[1] / "data"
TINY = DATA / "tiny.yaml"
# the smallest plan that loads: one config, one workload, one cell (no engine block: defaults)
MINIMAL: dict[str, Any] = {"phase": "t", "configs": [{"name": "auto", "method": "auto"}],
                           "workloads": [{"name": "code", "source": "humaneval"}],
                           "contexts": [16], "concurrency": [1]}
BASES = {"tiny": TINY}


def params_text(base: str | Path | None = "tiny", *, text: str = "", **overrides: Any) -> str:
    """The YAML of a params file: ``extends:`` a base file (``"tiny"`` or a path) with the
    ``overrides`` (whole top-level keys), or :data:`MINIMAL` with them (``"minimal"``), or the
    overrides alone (None); ``text``: raw YAML lines appended (a key the test spells itself)."""
    if base == "minimal":
        body = yaml.safe_dump({**MINIMAL, **overrides}, sort_keys=False)
    else:
        head = "" if base is None else f"extends: {BASES.get(str(base), base)}\n"
        body = head + (yaml.safe_dump(overrides, sort_keys=False) if overrides else "")
    return body + text


def write_params(tmp_path: Path, base: str | Path | None = "tiny", *, name: str = "p.yaml",
                 text: str = "", **overrides: Any) -> Path:
    """:func:`params_text` written to ``tmp_path / name``; returns the path."""
    path = tmp_path / name
    path.write_text(params_text(base, text=text, **overrides))
    return path
