"""Print docs/architecture.md's module table: each module, its docstring's first sentence, lines.

    .venv/bin/python scripts/module_map.py [--write]   # --write refreshes the table in place
"""

from __future__ import annotations

import ast
from pathlib import Path

import generated  # scripts/generated.py, beside this one

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "architecture.md"
START, END = "<!-- modules:start -->", "<!-- modules:end -->"


def rows() -> list[str]:
    out = []
    for path in sorted((ROOT / "specbench_lib").rglob("*.py")):
        text = path.read_text()
        doc = ast.get_docstring(ast.parse(text)) or ""
        concern = " ".join(doc.split("\n\n")[0].split()).replace("|", "\\|")
        name = path.relative_to(ROOT / "specbench_lib").as_posix()
        out.append(f"| `{name}` | {concern} | {len(text.splitlines())} |")
    return out


def main() -> None:
    table = "\n".join(rows())
    generated.main(DOC, START, END, table + "\n")


if __name__ == "__main__":
    main()
