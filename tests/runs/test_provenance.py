"""The git dirty flag: a notebook that differs from the commit only in what running and saving
it writes (outputs, execution counts, metadata) is clean; a changed cell, a changed tag or any
other changed file is dirty."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from specbench_lib.runs.provenance import git_state

NOTEBOOK = {"nbformat": 4, "nbformat_minor": 5, "metadata": {},
            "cells": [{"cell_type": "markdown", "id": "a", "metadata": {}, "source": ["# TP1"]},
                      {"cell_type": "code", "id": "b", "metadata": {"tags": ["parameters"]},
                       "execution_count": None, "outputs": [], "source": ["budget = None"]},
                      {"cell_type": "code", "id": "c", "metadata": {}, "execution_count": None,
                       "outputs": [], "source": ["plan = sb.load_plan(params_file)\n", "plan"]}]}


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), "-c", "user.email=t@t", "-c", "user.name=t", *args],
                   check=True, capture_output=True, timeout=30)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    git(tmp_path, "init", "-q")
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "notebooks" / "tp1.ipynb").write_text(json.dumps(NOTEBOOK, indent=1))
    (tmp_path / "README.md").write_text("readme\n")
    git(tmp_path, "add", ".")
    git(tmp_path, "commit", "-q", "-m", "first")
    return tmp_path


def save(repo: Path, change) -> None:
    notebook = json.loads(json.dumps(NOTEBOOK))
    change(notebook)
    (repo / "notebooks" / "tp1.ipynb").write_text(json.dumps(notebook, indent=2))


def ran(notebook: dict) -> None:
    """What JupyterLab's Save writes after Run All: outputs, counts, metadata."""
    notebook["metadata"] = {"kernelspec": {"name": "python3"}, "language_info": {"name": "python"}}
    for n, cell in enumerate(c for c in notebook["cells"] if c["cell_type"] == "code"):
        cell["execution_count"] = n + 1
        cell["outputs"] = [{"output_type": "stream", "name": "stdout", "text": ["run r1\n"]}]
        cell["metadata"]["execution"] = {"iopub.status.idle": "2026-01-01T00:00:00Z"}
    notebook["cells"][2]["source"] = "plan = sb.load_plan(params_file)\nplan"  # one string


def test_a_clean_checkout_and_a_saved_run_are_not_dirty(repo: Path) -> None:
    assert git_state(repo)["dirty"] is False
    save(repo, ran)
    assert git_state(repo)["dirty"] is False
    git(repo, "add", "notebooks/tp1.ipynb")  # staged too
    assert git_state(repo)["dirty"] is False
    assert len(git_state(repo)["commit"]) == 40


@pytest.mark.parametrize("change", [
    lambda nb: nb["cells"][2].update(source=["plan = sb.load_plan(other)"]),  # a code cell
    lambda nb: nb["cells"][0].update(source=["# TP4"]),  # a markdown cell
    lambda nb: nb["cells"][1]["metadata"].update(tags=[]),  # papermill's parameters tag
    lambda nb: nb["cells"].pop(),  # a cell removed
])
def test_a_changed_cell_is_dirty(repo: Path, change) -> None:
    save(repo, lambda nb: (ran(nb), change(nb)))
    assert git_state(repo)["dirty"] is True


def test_another_file_or_a_broken_notebook_is_dirty(repo: Path) -> None:
    (repo / "README.md").write_text("changed\n")
    assert git_state(repo)["dirty"] is True
    git(repo, "checkout", "README.md")
    (repo / "notebooks" / "tp1.ipynb").write_text("{not json")
    assert git_state(repo)["dirty"] is True


def test_outside_a_checkout_dirty_is_unknown(tmp_path: Path) -> None:
    assert git_state(tmp_path) == {"commit": None, "dirty": None}
