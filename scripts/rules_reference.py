"""Print docs/rules.md's table of verdict reasons, generated from the catalogue.

    .venv/bin/python scripts/rules_reference.py [--write]   # --write refreshes the page in place

One row per entry of the catalogue (``specbench_lib/model/catalogue.py``, with every cell rule
object of ``specbench_lib/analysis/rules/`` its registry added): its code, level, what it
protects against, and each threshold's params key with its default, grouped by level, with
whether a host-side rule is measured again and whether a skip is by design.
"""

from __future__ import annotations

import sys
from pathlib import Path

import generated  # scripts/generated.py, beside this one

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from specbench_lib.analysis import ruleset  # noqa: E402,F401  (the rules join the catalogue)
from specbench_lib.model import catalogue  # noqa: E402

DOC = ROOT / "docs" / "rules.md"
START, END = "<!-- rules:start -->", "<!-- rules:end -->"


def _default(value: float | str | None) -> str:
    return "none (off)" if value is None else f"`{value}`"


def _thresholds(code: catalogue.Code) -> str:
    return "; ".join(f"`{t.key}` = {_default(t.default)}" if t.in_params
                     else f"{t.key.strip('()')} = {_default(t.default)}"
                     for t in code.thresholds)


def _notes(code: catalogue.Code) -> str:
    notes = []
    if code.host_side:
        notes.append("host-side: measured again, up to `retries`")
    if code.name in catalogue.BY_DESIGN:
        notes.append("skipped by design")
    return "; ".join(notes)


def rows() -> list[str]:
    out = ["| code | level | protects against | thresholds (params key = default) | notes |",
           "| --- | --- | --- | --- | --- |"]
    for code in catalogue.entries():
        protects = " ".join(code.protects.split()).replace("|", "\\|")
        out.append(f"| `{code.name}` | {code.level} | {protects} | {_thresholds(code)} | "
                   f"{_notes(code)} |")
    return out


def main() -> None:
    table = "\n".join(rows())
    generated.main(DOC, START, END, table + "\n")


if __name__ == "__main__":
    main()
