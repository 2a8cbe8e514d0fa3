"""NVIDIA's SPEED-Bench as its harness's preparation script writes it (``source: speed_bench``;
read in Model-Optimizer a2fbac7, ``examples/specdec_bench``: docs/workloads.md cites the lines).

``python3 prepare_data.py --dataset speed --config all`` in Model-Optimizer's
``examples/specdec_bench`` writes ``data/speed/<config>/test.parquet`` for each config
(``SPEEDBench.prepare_data``: the Hugging Face dataset ``nvidia/SPEED-Bench`` with every
external reference resolved, ``to_parquet``), and its harness reads a config's folder back
with every ``*.parquet`` under it (``SPEEDBench._load_dataset``): rows of ``question_id``,
``category``, ``sub_category``, ``turns`` (a list of strings), ``source``, ``src_id``,
``difficulty``, ``multiturn``. A turn still holding the placeholder the preparation resolves
is refused, as the harness refuses it.

The configs: ``qualitative`` (880 prompts, 11 categories: coding, humanities, math,
multilingual, qa, rag, reasoning, roleplay, stem, summarization, writing) and
``throughput_1k`` … ``throughput_32k`` (1,536 prompts each of about that many ``o200k_base``
tokens, whose ``category`` is the entropy tier: low_entropy, mixed, high_entropy). ``path`` is
a config's folder (its categories are the workload's), a parquet file, or the folder of
configs (``data/speed``: its categories are ``<config>/<category>``); a throughput tier is always
named with its bucket (``throughput_1k/mixed``), so each input-length bucket × tier is a workload
of its own whose name gives its ``o200k_base`` size. A folder with no row, and a question_id
repeated within a category (one would replace the other), are refused as the Spec-Bench reader
refuses them.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from ...core.errors import PreflightError
from ...core.paths import resolve_project_path
from ...model.sources import bucket_tokens
from ...model.workloadparams import WorkloadParams
from .base import ConversationSource, Question

CONFIGS = ("qualitative", "throughput_1k", "throughput_2k", "throughput_8k", "throughput_16k",
           "throughput_32k")
PLACEHOLDER = "FULL BENCHMARK DATA SHOULD BE FETCHED FROM THE SOURCE USING SPECDEC_BENCH"


class SpeedBench(ConversationSource):
    def rows(self, workload: WorkloadParams) -> tuple[Question, ...]:
        return speed_rows(str(workload.path))

    def read(self, path: str) -> tuple[Question, ...]:
        return speed_rows(path)


def configs_at(path: str) -> dict[str, Path]:
    """The configs under ``path`` (see the module) and the folder or file of each."""
    where = resolve_project_path(path)
    if where.is_file():
        return {where.parent.name: where}
    if not where.is_dir():
        raise PreflightError(f"SPEED-Bench data {where} not found: prepare it with "
                             f"Model-Optimizer's examples/specdec_bench/prepare_data.py "
                             f"(docs/workloads.md)", what="workload", path=where)
    if any(where.glob("*.parquet")):
        return {where.name: where}
    found = {c: where / c for c in CONFIGS if (where / c).is_dir()}
    if not found:
        raise PreflightError(f"{where} holds no SPEED-Bench config folder ({list(CONFIGS)}) and "
                             f"no parquet file", what="workload", path=where)
    return found


@lru_cache(maxsize=8)
def speed_rows(path: str) -> tuple[Question, ...]:
    """Every row under ``path``: its id (``<category>:<question_id>``), category (prefixed by
    its config when ``path`` holds several, and always for a throughput bucket's tier:
    ``throughput_1k/mixed``) and turns."""
    configs = configs_at(path)
    rows: list[Question] = []
    seen: dict[str, Path] = {}  # <category>:<question_id> → its file
    for config, where in configs.items():
        # a tier is named with its bucket (a tier of no bucket says nothing), a category alone
        prefix = f"{config}/" if len(configs) > 1 or bucket_tokens(config) else ""
        for file, qid, category, turns in _read(where):
            label = prefix + category
            key = f"{label}:{qid}"
            if key in seen:  # one would replace the other: a row silently lost
                raise PreflightError(f"{file}: question_id {qid!r} repeats one of {seen[key]} "
                                     f"in category {label!r}; prepare the data again (each "
                                     f"question of a category has its own id)", what="workload",
                                     path=file)
            seen[key] = file
            rows.append((key, label, turns))
    if not rows:
        raise PreflightError(f"SPEED-Bench data {resolve_project_path(path)} holds no question "
                             f"row (its parquet files are empty): prepare it again with "
                             f"Model-Optimizer's examples/specdec_bench/prepare_data.py "
                             f"(docs/workloads.md)", what="workload", path=path)
    return tuple(rows)


def speed_categories(path: str) -> tuple[str, ...]:
    """The categories under ``path`` in their first order."""
    return tuple(dict.fromkeys(category for _, category, _ in speed_rows(path)))


def _read(where: Path) -> list[tuple[Path, str, str, tuple[str, ...]]]:
    """Each row's file, question id, category and turns."""
    import pyarrow.parquet as pq

    files = [where] if where.is_file() else sorted(where.rglob("*.parquet"))
    rows: list[tuple[Path, str, str, tuple[str, ...]]] = []
    for file in files:
        try:
            table = pq.read_table(file, columns=["question_id", "category", "turns"])
        except (OSError, ValueError, KeyError) as exc:
            raise PreflightError(f"{file}: not a SPEED-Bench parquet file with question_id, "
                                 f"category and turns ({exc})", what="workload",
                                 path=file) from None
        for n, row in enumerate(table.to_pylist(), 1):
            turns = row.get("turns")
            if (not isinstance(turns, list) or not turns or not isinstance(row["category"], str)
                    or not all(isinstance(t, str) and t.strip() for t in turns)):
                raise PreflightError(f"{file}: row {n} needs a category and turns (a list of "
                                     f"non-empty strings)", what="workload", path=file)
            if turns[0].startswith(PLACEHOLDER):
                raise PreflightError(f"{file}: row {n} (question {row['question_id']}) is not "
                                     f"resolved: run prepare_data.py, which fetches the data",
                                     what="workload", path=file)
            rows.append((file, str(row["question_id"]), row["category"], tuple(turns)))
    return rows


SOURCE = SpeedBench("speed_bench")
