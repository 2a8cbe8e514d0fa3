"""Phase notebooks are committed clean and stay thin: parameters and library calls only."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[2] / "notebooks").glob("*.ipynb"))


def test_there_are_phase_notebooks() -> None:
    assert "tp1.ipynb" in [p.name for p in NOTEBOOKS]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_stripped_and_thin(path: Path) -> None:
    nb = json.loads(path.read_text())
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert all(c["outputs"] == [] and c["execution_count"] is None for c in code)
    assert 6 <= len(nb["cells"]) <= 11
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
    path = Path(__file__).resolve().parents[2] / "notebooks" / f"{name}.ipynb"
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


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_the_parameters_read_without_papermill_are_papermills(path: Path) -> None:
    """specbench reads a notebook's parameters from its JSON (importing papermill costs
    seconds); papermill's own inspection is the truth it must match, names, order, defaults."""
    import papermill

    from specbench_lib.model.nbparams import notebook_parameters

    truth = papermill.inspect_notebook(str(path))
    assert notebook_parameters(path) == {name: p["default"] for name, p in truth.items()}


def test_parameters_are_read_from_the_tagged_cell_in_any_form() -> None:
    from specbench_lib.model.nbparams import parameter_defaults

    cell = {"cell_type": "code", "metadata": {"tags": ["parameters"]},
            "source": ["a = 1\n", "b: int = 2  # two\n", "c = d = 'x'\n", "print(a)\n", "e: str\n"]}
    other = {"cell_type": "code", "metadata": {}, "source": "z = 9\n"}
    assert parameter_defaults({"cells": [other, cell]}) == {
        "a": "1", "b": "2", "c": "'x'", "d": "'x'", "e": ""}
    assert parameter_defaults({"cells": [other]}) == {}


def test_a_notebook_that_is_not_json_is_named(tmp_path: Path) -> None:
    from specbench_lib.core.errors import ParamsError
    from specbench_lib.model.nbparams import notebook_parameters

    broken = tmp_path / "tp1.ipynb"
    broken.write_text('{"cells": [')
    with pytest.raises(ParamsError, match="tp1.ipynb|notebook") as err:
        notebook_parameters(broken)
    assert "JSONDecodeError" in str(err.value) and str(broken) in str(err.value)
