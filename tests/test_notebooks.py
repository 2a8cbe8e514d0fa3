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
