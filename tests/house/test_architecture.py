"""The house's shape (issue 21), checked: the layering in ``.importlinter`` (import-linter over
grimp's graph, function-level imports included) holds and is the one docs/architecture.md
draws; a forbidden import breaks it; no import circles; modules of one concern (≤ 400 lines),
functions ≤ 60 lines; the page's module table (with its line counts) is the code's."""

from __future__ import annotations

import ast
import configparser
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT / "specbench_lib"
CONFIG = ROOT / ".importlinter"
DOC = ROOT / "docs" / "architecture.md"
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60

sys.path.insert(0, str(ROOT / "scripts"))
import import_cycles  # noqa: E402
import module_map  # noqa: E402


def lint(root: Path) -> subprocess.CompletedProcess[str]:
    """``lint-imports`` on the package under ``root`` (its own copy of the config)."""
    program = Path(sys.executable).parent / "lint-imports"
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run([str(program), "--no-cache", "--config", str(root / ".importlinter")],
                          cwd=root, env=env, capture_output=True, text=True, timeout=120, check=False)


def layers() -> list[str]:
    parser = configparser.ConfigParser()
    parser.read(CONFIG)
    return [line.strip() for line in parser["importlinter:contract:layers"]["layers"].splitlines()
            if line.strip()]


def test_the_layering_contracts_hold() -> None:
    done = lint(ROOT)
    assert done.returncode == 0, done.stdout[-3000:]
    assert "Contracts: 4 kept, 0 broken." in done.stdout


def _broken_by(tmp_path: Path, module: str, line: str) -> str:
    """lint-imports' output on a copy of the package where ``module`` gained a late import."""
    shutil.copytree(PKG, tmp_path / "specbench_lib", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(CONFIG, tmp_path / ".importlinter")
    assert lint(tmp_path).returncode == 0
    path = tmp_path / "specbench_lib" / module
    path.write_text(path.read_text() + f"\n\ndef _late() -> None:\n    {line}  # noqa\n")
    done = lint(tmp_path)
    assert done.returncode == 1
    return done.stdout


def test_an_import_from_a_lower_layer_to_a_higher_one_breaks_the_contract(tmp_path: Path) -> None:
    out = _broken_by(tmp_path, "model/records.py", "from ..sweep import driver")
    assert "specbench_lib.model is not allowed to import specbench_lib.sweep" in out


def test_the_reading_side_importing_the_measuring_side_breaks_a_contract(tmp_path: Path) -> None:
    out = _broken_by(tmp_path, "analysis/metrics.py", "from ..client import dispatch")
    assert "specbench_lib.analysis is not allowed to import specbench_lib.client" in out
    assert "The reading side (analysis, runs, report) never imports the measuring side BROKEN" in out


def test_the_measuring_side_importing_the_reading_side_breaks_a_contract(tmp_path: Path) -> None:
    out = _broken_by(tmp_path, "servers/health.py", "from ..runs import results")
    assert "The measuring side (client, prompts, servers) never imports the reading side BROKEN" in out


def test_a_module_no_layer_names_breaks_the_contract(tmp_path: Path) -> None:
    shutil.copytree(PKG, tmp_path / "specbench_lib", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(CONFIG, tmp_path / ".importlinter")
    (tmp_path / "specbench_lib" / "newcomer.py").write_text('"""Unplaced."""\n')
    done = lint(tmp_path)
    assert done.returncode == 1 and "specbench_lib.newcomer" in done.stdout


def test_the_page_draws_the_layers_the_contract_checks() -> None:
    text = DOC.read_text()
    section = text.split("## The layers", 1)[1].split("\n## ", 1)[0]
    for layer in layers():
        assert layer in section, f"docs/architecture.md's layers lack: {layer}"


def test_no_import_circles() -> None:
    assert import_cycles.circles(import_cycles._graph()) == []


def sources() -> list[Path]:
    return sorted(PKG.rglob("*.py"))


@pytest.mark.parametrize("path", sources(), ids=lambda p: p.relative_to(PKG).as_posix())
def test_one_concern_a_module_and_short_functions(path: Path) -> None:
    check_length(path)


def check_length(path: Path) -> None:
    """A module of at most :data:`MAX_MODULE_LINES` lines, each function of at most
    :data:`MAX_FUNCTION_LINES` (``tests/house/test_change_table.py`` checks its copies too)."""
    text = path.read_text()
    assert len(text.splitlines()) <= MAX_MODULE_LINES, f"{path.name}: split it by concern"
    long = [f"{node.name} ({node.end_lineno - node.lineno + 1} lines)"
            for node in ast.walk(ast.parse(text))
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES]
    assert long == []


def test_the_module_table_is_the_codes_with_its_line_counts() -> None:
    table = DOC.read_text().split(module_map.START, 1)[1].split(module_map.END, 1)[0]
    assert table.strip().splitlines() == module_map.rows(), (
        "run: .venv/bin/python scripts/module_map.py --write")
