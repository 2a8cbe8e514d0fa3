"""Chat-templated prompts of an exact token count, from any engine's chat render.

A workload with ``template: chat`` sends each document as the user's turn of the model's own
chat template, the generation prompt added, so the answer is the assistant's turn. The engine
renders the template (:class:`Render`: messages → the ids of the templated prompt; each engine
adapter's ``chat_render``); this module knows no engine. The template is rendered once around
a sentinel: the ids before the sentinel's are the frame's prefix, those after it its suffix.
A prompt is then prefix + the document's ids + suffix, the document cut so the whole is exactly
the planned count: the template's tokens count in the prompt's length (and so in the context
guard), and the document's ids are the ones a raw prompt of the same text would carry.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..core.errors import PreflightError

Tokenize = Callable[[str], list[int]]
# messages ({"role": ..., "content": ...} each) → the ids of the templated prompt, the
# generation prompt added (the assistant's turn opened)
Render = Callable[[list[dict[str, str]]], list[int]]
SENTINEL = "Specbench sentinel 7f3a"


def with_options(render: Render, options: Mapping[str, Any]) -> Render:
    """``render`` with the chat template's options (a workload's ``chat_template_kwargs``,
    e.g. ``enable_thinking``), passed to the engine's render as its second argument (each
    adapter's ``chat_render(messages, options)``); ``render`` itself when there are none."""
    if not options:
        return render
    given = dict(options)
    engine_render: Callable[..., list[int]] = render

    def bound(messages: list[dict[str, str]]) -> list[int]:
        return engine_render(messages, given)
    return bound


@dataclass(frozen=True)
class ChatFrame:
    """The ids a chat template puts before and after a user turn's content."""

    prefix: tuple[int, ...]
    suffix: tuple[int, ...]

    @property
    def size(self) -> int:
        return len(self.prefix) + len(self.suffix)

    def wrap(self, content: list[int], tokens: int, *, exact: bool = True) -> list[int]:
        """A prompt of exactly ``tokens`` ids: the frame around ``content`` cut to fit (not
        ``exact``: a natural-length document, ``tokens`` only its cap)."""
        room = tokens - self.size
        if room < 1:
            raise PreflightError(f"the chat template takes {self.size} tokens, a {tokens}-token "
                                 f"prompt leaves no room for its content: raise the context",
                                 what="workload")
        if exact and len(content) < room:
            raise PreflightError(f"{len(content)} tokens of content cannot fill a {tokens}-token "
                                 f"chat prompt ({room} after the template's {self.size})",
                                 what="workload")
        return [*self.prefix, *content[:room], *self.suffix]


def user_turn(content: str) -> list[dict[str, str]]:
    """One user message."""
    return [{"role": "user", "content": content}]


def chat_frame(render: Render, tokenize: Tokenize) -> ChatFrame:
    """The template's frame around one user turn: rendered around :data:`SENTINEL`, split where
    the sentinel's own ids are found; a :class:`PreflightError` when they are not found (a
    template that changes its content, or a tokenizer that merges it with the template's
    tokens)."""
    rendered = render(user_turn(SENTINEL))
    inner = tokenize(SENTINEL)
    for at in range(len(rendered) - len(inner) + 1):
        if rendered[at:at + len(inner)] == inner:
            return ChatFrame(tuple(rendered[:at]), tuple(rendered[at + len(inner):]))
    raise PreflightError("the chat template's rendering does not contain the user's content as "
                         "its own tokens (the template changes it, or the tokenizer merges it "
                         "with the template's text): prompts cannot be cut to an exact length "
                         "around it; use template: raw", what="template")
