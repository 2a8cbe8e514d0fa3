"""The prompts a run sends, pinned (issue 40's one prompt builder): every prompt of a plan
(warmup, cells, one retry each) through :class:`~specbench_lib.prompts.promptbook.PromptBook`,
hashed, for the run's fresh-documents walk, servers that forget before each cell, and
``prompt_reuse``. The hashes are those of the code before the builders shared their assembly
(commit d2a7a29), so a change to what a run sends fails here. A word tokenizer and a fake chat
render stand in for a server's (the builders, not the tokenizer, are what is pinned)."""

from __future__ import annotations

import hashlib
import zlib
from pathlib import Path
from typing import Any

import pytest
from paramsfiles import TINY, write_params

from specbench_lib.model.plan import load_plan
from specbench_lib.prompts.promptbook import Lifetimes, PromptBook

EMBEDDED = Path(__file__).resolve().parents[2] / "params" / "embedded.yaml"
# copy/edit and grounded frames, chat templates around documents and frames, natural lengths,
# vLLM's random source: every way a prompt is assembled
MIX = {"phase": "mix2", "configs": [{"name": "auto", "method": "auto"}],
       "workloads": [{"name": "ce", "source": "copyedit"}, {"name": "gr", "source": "grounded"},
                     {"name": "cechat", "source": "copyedit", "template": "chat"},
                     {"name": "codechat", "source": "humaneval", "template": "chat"},
                     {"name": "chatnat", "source": "sharegpt", "length": "natural"},
                     {"name": "grnat", "source": "grounded", "length": "natural",
                      "template": "chat"},
                     {"name": "rnd", "source": "random", "vocab_size": 1000}],
       "contexts": [128, 512], "concurrency": [1, 2], "requests_per_cell": 2}
MODES = {"fresh": (None, False), "per_cell": (Lifetimes(per_cell=True, learns=None), False),
         "reuse": (None, True)}


def words(text: str) -> list[int]:
    return [zlib.crc32(w.encode()) % 50000 for w in text.replace("\n", " \n ").split(" ") if w]


def render(messages: list[dict[str, Any]], options: Any = None) -> list[int]:
    ids = [1]
    for m in messages:
        ids += [2] + words(m["role"]) + words(m["content"]) + [3]
    return ids + [2] + words("assistant")


def prompts_hash(path: Path, mode: str) -> str:
    plan = load_plan(path)
    lifetimes, reuse = MODES[mode]
    params = plan.params.model_copy(update={"prompt_reuse": True}) if reuse else plan.params
    book = PromptBook(params, plan.cells, lifetimes)
    digest = hashlib.sha256()
    for p in book.warmup(words, render):
        digest.update(repr((p.tokens, p.sources)).encode())
    for cell in plan.cells[:40]:
        try:
            sent = book.for_cell(cell, words, render)
        except KeyError:  # refused by the context guard in every config: no prompts
            digest.update(b"refused")
            continue
        for p in sent:
            digest.update(repr((p.tokens, p.sources)).encode())
        again = book.retry(cell, 1, words, render)
        digest.update(repr(None if again is None else [(p.tokens, p.sources) for p in again])
                      .encode())
    return digest.hexdigest()[:16]


@pytest.mark.parametrize(("plan", "mode", "pinned"), [
    ("tiny", "fresh", "a81c3623c853d6af"), ("tiny", "per_cell", "a81c3623c853d6af"),
    ("tiny", "reuse", "1c35c578526c8dad"),
    ("mix", "fresh", "16929bf2c4fdd239"), ("mix", "per_cell", "371f3da4fe68a093"),
    ("mix", "reuse", "0601176e913f9fd4"),
])
def test_the_prompts_a_run_sends_are_the_pinned_ones(tmp_path: Path, plan: str, mode: str,
                                                      pinned: str) -> None:
    path = TINY if plan == "tiny" else write_params(tmp_path, EMBEDDED, **MIX)
    assert prompts_hash(path, mode) == pinned
