"""docs/architecture.md stays true: every module of the library is in its module map."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_every_module_is_in_the_architecture_module_map() -> None:
    doc = (ROOT / "docs" / "architecture.md").read_text()
    modules = sorted(p.relative_to(ROOT / "specbench_lib").as_posix()
                     for p in (ROOT / "specbench_lib").rglob("*.py"))
    missing = [m for m in modules if f"| `{m}` |" not in doc]
    assert missing == [], f"add them with: python scripts/module_map.py --write ({missing})"
    assert "docs/architecture.md" in (ROOT / "README.md").read_text()
