"""``source: spec_bench``: a Spec-Bench ``question.jsonl`` (``question_id``, ``category``,
``turns``: a list of one or more questions), each row checked, a bad one refused with its file
and line, and a question_id repeated within a category refused (one would replace the other)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from ...core.errors import PreflightError
from ...core.paths import resolve_project_path
from ...model.workloadparams import WorkloadParams
from .base import ConversationSource, Question, jsonl_rows


class SpecBench(ConversationSource):
    def rows(self, workload: WorkloadParams) -> tuple[Question, ...]:
        return question_rows(str(resolve_project_path(str(workload.path))))

    def read(self, path: str) -> tuple[Question, ...]:
        file = resolve_project_path(path)
        if file.is_dir():
            raise PreflightError(f"categories 'all' reads {file}: a directory, not a file; give "
                                 f"the path of the question.jsonl in it", what="workload",
                                 path=file)
        if file.is_file() and not file.read_bytes().strip():
            raise PreflightError(f"categories 'all' reads {file}: it has no question rows, so "
                                 f"no category; give a Spec-Bench question.jsonl with rows",
                                 what="workload", path=file)
        return question_rows(str(file))


@lru_cache(maxsize=8)
def question_rows(path: str) -> tuple[Question, ...]:
    """The rows of a ``question.jsonl`` (see the module)."""
    file = Path(path)
    rows = []
    seen: dict[str, str] = {}  # category:question_id → its line
    for where, row in jsonl_rows(file):
        turns = row.get("turns")
        if (not isinstance(turns, list) or not turns
                or not all(isinstance(t, str) and t.strip() for t in turns)
                or not isinstance(row.get("category"), str) or "question_id" not in row):
            raise PreflightError(f"{where}: a question row needs 'question_id', 'category' (a "
                                 f"string) and 'turns' (a list of non-empty strings)",
                                 what="workload", path=file)
        qid = f"{row['category']}:{row['question_id']}"
        if qid in seen:  # one would replace the other: a row silently lost
            raise PreflightError(f"{where}: question_id {row['question_id']!r} repeats "
                                 f"{seen[qid]} in category {row['category']!r}; give each "
                                 f"question of a category its own id", what="workload", path=file)
        seen[qid] = where
        rows.append((qid, row["category"], tuple(turns)))
    return tuple(rows)


SOURCE = SpecBench("spec_bench")
