"""Phase notebooks are committed clean and stay thin: parameters and library calls only."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("*.ipynb"))


def test_there_are_phase_notebooks() -> None:
    assert "tp1.ipynb" in [p.name for p in NOTEBOOKS]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_stripped_and_thin(path: Path) -> None:
    nb = json.loads(path.read_text())
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert all(c["outputs"] == [] and c["execution_count"] is None for c in code)
    assert 6 <= len(nb["cells"]) <= 10
    tagged = [c for c in code if "parameters" in c["metadata"].get("tags", [])]
    assert len(tagged) == 1
    for line in "".join(tagged[0]["source"]).splitlines():
        assert re.match(r"^\w+: [\w\[\], ]+ = .+  # \S", line), f"untyped or uncommented: {line}"
    for cell in code:
        source = "".join(cell["source"])
        assert not re.search(r"^\s*(def|class|for|while) ", source, re.M), source
        assert "Path(" not in source and "os.path" not in source


@pytest.mark.parametrize("name", ["tp1", "tp4", "tp8", "report"])
def test_help_notebook_documents_every_parameter(name: str) -> None:
    import subprocess
    import sys

    papermill = Path(sys.executable).parent / "papermill"
    path = Path(__file__).resolve().parent.parent / "notebooks" / f"{name}.ipynb"
    done = subprocess.run([str(papermill), "--help-notebook", str(path)], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    source = next(c for c in json.loads(path.read_text())["cells"]
                  if "parameters" in c["metadata"].get("tags", []))
    for line in "".join(source["source"]).splitlines():
        name_, help_text = line.split(":")[0], line.split("#", 1)[1].strip()
        assert f"  {name_}:" in done.stdout and help_text.split()[0] in done.stdout


def test_committed_notebooks_are_what_the_generator_writes() -> None:
    """A notebook edited by hand is overwritten by the next scripts/make_notebooks.py: change the
    generator instead (the report notebook once lost its `merge` parameter that way)."""
    import importlib.util

    import nbformat

    script = NOTEBOOKS[0].parent.parent / "scripts" / "make_notebooks.py"
    spec = importlib.util.spec_from_file_location("make_notebooks", script)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    built = module.notebooks()
    assert sorted(built) == sorted(p.stem for p in NOTEBOOKS)
    for path in NOTEBOOKS:
        assert json.loads(path.read_text()) == json.loads(nbformat.writes(built[path.stem])), (
            f"{path.name} differs from scripts/make_notebooks.py: run it and commit both")
