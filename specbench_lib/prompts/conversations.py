"""Conversations as prompts: MT-Bench and Spec-Bench questions, turn by turn, as chat messages
rendered into the server's token ids.

A conversation source (``mtbench``, ``spec_bench``) yields messages (``role``, ``content``),
never joined text: a :data:`Render` turns them into the ids of the model's templated prompt,
the generation prompt added: the engine's chat render with ``template: chat``, else
:func:`plain_render` (the contents joined and tokenized). Questions are sent at their own length; the
cell's context is their cap, and a prompt longer than it is cut in its user content (the last
message's first), never in the template (:func:`fit`). Turn 2 is built from the model's own
answer to turn 1 (:func:`second_turn`), which the sweep sends first (``sweep/turns.py``).
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Callable

from ..core.errors import PreflightError
from ..model.workloadparams import WorkloadParams
from .chat import Render, with_options
from .workload import Prompt, build_prompts, questions

Message = dict[str, str]
Tokenize = Callable[[str], list[int]]


def plain_render(tokenize: Tokenize) -> Render:
    """The render without a chat template: the messages' contents joined by blank lines,
    ending in one (where the answer starts), tokenized by the server."""
    def render(messages: list[Message]) -> list[int]:
        return tokenize("".join(m["content"] + "\n\n" for m in messages))
    return render


def fit(messages: list[Message], render: Render, cap: int) -> tuple[list[int], bool]:
    """``messages`` rendered in at most ``cap`` tokens, and whether they were cut: the longest
    prefix of one message's content that fits, found by bisection; the earlier answers are cut
    first (from the last), then the earlier questions, the question asked last only when the
    rest is gone. The template is never cut; a cap it alone exceeds is a
    :class:`PreflightError`."""
    ids = render(messages)
    if len(ids) <= cap:
        return ids, False
    work = [dict(m) for m in messages]
    earlier = list(reversed(range(len(work) - 1)))
    order = ([i for i in earlier if work[i]["role"] == "assistant"]
             + [i for i in earlier if work[i]["role"] != "assistant"] + [len(work) - 1])
    for i in order:
        text = work[i]["content"]
        work[i]["content"] = ""
        if len(render(work)) > cap:
            continue  # too long even without this message's content: cut the next
        lo, hi = 0, len(text)  # render(text[:lo]) fits, text[:hi + 1] does not
        while lo < hi:
            mid = (lo + hi + 1) // 2
            work[i]["content"] = text[:mid]
            if len(render(work)) <= cap:
                lo = mid
            else:
                hi = mid - 1
        work[i]["content"] = text[:lo]
        return render(work), True
    raise PreflightError(f"a conversation's template alone is over the context of {cap} "
                         f"tokens: raise the context", what="workload")


def first_turn(workload: WorkloadParams, qid: str, cap: int, render: Render) -> Prompt:
    """Question ``qid``'s first turn, rendered at its own length (at most ``cap`` tokens)."""
    turns = questions(workload)[qid]
    ids, cut = fit([{"role": "user", "content": turns[0]}], render, cap)
    return Prompt(ids, (f"{workload.source}:{qid}:turn1" + (":cut" if cut else ""),))


def second_turn(workload: WorkloadParams, prompt: Prompt, answer: str, cap: int,
                render: Render) -> Prompt:
    """The turn-2 prompt of the conversation ``prompt`` (a :func:`first_turn`) began: the
    first question, the model's own ``answer`` to it and the second question."""
    qid = prompt.sources[0].split(":", 1)[1].rsplit(":turn1", 1)[0]
    turns = questions(workload)[qid]
    messages = [{"role": "user", "content": turns[0]}, {"role": "assistant", "content": answer},
                {"role": "user", "content": turns[1]}]
    ids, cut = fit(messages, render, cap)
    return Prompt(ids, (f"{workload.source}:{qid}:turn2" + (":cut" if cut else ""),))


def reused_prompts(workload: WorkloadParams, *, n: int, tokens: int, seed: int,
                   tokenize: Tokenize, salt: str = "",
                   render: Render | None = None) -> list[Prompt]:
    """``prompt_reuse``'s prompts (:func:`~.workload.build_prompts`); a conversation
    workload's: ``n`` first turns of a seeded shuffle of its questions, round and round."""
    if not workload.conversational:
        return build_prompts(workload, n=n, tokens=tokens, seed=seed, tokenize=tokenize,
                             salt=salt, render=render)
    ids = sorted(questions(workload))
    random.Random(zlib.crc32(f"{seed}:{workload.name}:{tokens}:{salt}".encode())).shuffle(ids)
    chat = (with_options(render, workload.chat_template_kwargs)
            if workload.template == "chat" and render is not None else None)
    render = chat or plain_render(tokenize)
    return [first_turn(workload, ids[i % len(ids)], tokens, render) for i in range(n)]
