"""Print docs/metrics.md's table of every metric, generated from its declarations.

    .venv/bin/python scripts/metrics_reference.py [--write]   # --write refreshes the page in place

One row per metric declared in a family of ``specbench_lib/analysis/metricfamilies/`` (found by
``analysis/metricset.py``): its name, unit, what computes it, whether it is a ``results.csv``
column, and its meaning.
"""

from __future__ import annotations

import sys
from pathlib import Path

import generated  # scripts/generated.py, beside this one

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from specbench_lib.analysis import metricset  # noqa: E402

DOC = ROOT / "docs" / "metrics.md"
START, END = "<!-- metrics:start -->", "<!-- metrics:end -->"


def rows() -> list[str]:
    out = ["| metric | unit | computed for | in results.csv | meaning |",
           "| --- | --- | --- | --- | --- |"]
    for m in metricset.METRICS:
        meaning = " ".join(m.meaning.split()).replace("|", "\\|")
        where = "yes" if m.column else "no (cell file only)"
        out.append(f"| `{m.name}` | {m.unit} | {m.kind.replace('_', ' ')} | {where} | {meaning} |")
    return out


def main() -> None:
    generated.main(DOC, START, END, "\n".join(rows()) + "\n")


if __name__ == "__main__":
    main()
