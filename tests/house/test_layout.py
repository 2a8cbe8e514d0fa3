"""The tests are laid out like the package (issue 40): each test file in ``tests/<folder>/``, a
folder named after the ``specbench_lib`` subpackage it mainly tests or one of a few
cross-cutting folders; the shared helpers (stand-in servers, params builders, the free-port
helper) in ``tests/support/``, imported by bare name (pytest's ``pythonpath``)."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"
PACKAGE = ROOT / "specbench_lib"
# the folders that are no subpackage: real engines end to end, the notebooks, the house's own
# checks; and what holds no test (helpers, data, the SGLang stubs)
CROSS_CUTTING = {"engines_real", "notebooks", "house"}
NO_TESTS = {"support", "data", "sglang_cpu", "__pycache__"}


def test_no_test_file_sits_at_the_top_of_tests() -> None:
    top = sorted(p.name for p in TESTS.glob("*.py"))
    assert top == ["conftest.py"], f"move these into tests/<folder>/ or tests/support/: {top}"


def test_every_test_folder_is_a_subpackage_or_a_cross_cutting_one() -> None:
    subpackages = {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
    folders = {p.name for p in TESTS.iterdir() if p.is_dir()}
    assert folders - NO_TESTS <= subpackages | CROSS_CUTTING, sorted(folders - NO_TESTS)
    for folder in folders - NO_TESTS:
        assert list((TESTS / folder).glob("test_*.py")), f"tests/{folder}/ holds no test file"
    assert not list((TESTS / "support").glob("test_*.py")), "tests/support/ holds helpers only"


def test_the_helpers_are_on_pytests_path_and_no_module_name_is_used_twice() -> None:
    options = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    assert options["pythonpath"] == ["tests/support"]
    # the folders are no packages: a module's name is its file's name, so it must be unique
    names = [p.stem for p in TESTS.glob("*/*.py") if p.parent.name not in {"data", "sglang_cpu"}]
    assert sorted({n for n in names if names.count(n) > 1}) == []


def _fixed_ports(text: str) -> list[range]:
    """The fixed ports a test file takes: ``…PORT = 8236`` (that port), ``…PORTS = range(a,
    b)``, and the run a comment says its servers take (``placed servers take 8241-8259``)."""
    import re

    found = [range(int(p), int(p) + 1) for p in re.findall(r"^\w*PORT\w* = (\d{4,5})\b", text, re.M)]
    found += [range(int(a), int(b)) for a, b in
              re.findall(r"^\w*PORTS\w* = range\((\d{4,5}), (\d{4,5})\)", text, re.M)]
    found += [range(int(a), int(b) + 1) for a, b in re.findall(r"take (\d{4,5})-(\d{4,5})", text)]
    return found


def test_no_fixed_port_lies_inside_another_test_files_ports() -> None:
    """A fixed port of one test file inside another's range collides when both run at once (a
    sweep's server on test_reaper.py's 8236 took one of test_jupyterlab.py's 8230-8239)."""
    taken = {p.relative_to(TESTS).as_posix(): _fixed_ports(p.read_text())
             for p in TESTS.rglob("test_*.py") if p != Path(__file__)}
    assert any(len(r) > 1 for ranges in taken.values() for r in ranges)  # the ranges are read
    clashes = [f"{a} {ra.start}-{ra.stop - 1} and {b} {rb.start}-{rb.stop - 1}"
               for a, ranges in taken.items() for b, others in taken.items() if a < b
               for ra in ranges for rb in others if set(ra) & set(rb)]
    assert clashes == [], "take the kernel's pick (tests/support/ports.py free_port) instead"
