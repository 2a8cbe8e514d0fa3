"""``source: jsonl``: a JSONL file of one's own, each row's ``field`` a document (its id the
file's name and the line)."""

from __future__ import annotations

from ...core.errors import PreflightError
from ...core.paths import resolve_project_path
from ...model.workloadparams import WorkloadParams
from .base import Document, Source, jsonl_rows


class JsonlFile(Source):
    def documents(self, workload: WorkloadParams) -> list[Document]:
        file = resolve_project_path(str(workload.path))
        docs = []
        for where, row in jsonl_rows(file):
            if workload.field not in row:
                raise PreflightError(f"{where}: no field {workload.field!r}; set the workload's "
                                     f"'field'", what="workload", path=file)
            docs.append((f"{file.name}:{where.rsplit(':', 1)[-1]}", str(row[workload.field])))
        return docs

    def corpus(self, workload: WorkloadParams, index: int) -> str:
        return f"jsonl:{workload.path}:{workload.field}"


SOURCE = JsonlFile("jsonl")
