"""What shapes a cell's requests beyond its prompts: how its answers end (its workload's
``stop``), how they sample (:meth:`~specbench_lib.model.params.SweepParams.sampling`), and the
running server's tokenizer and chat template, handed to the prompt book as callables (the book
knows no engine)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

from ..model.cellspec import CellSpec
from ..model.params import SweepParams
from ..model.workloadparams import WorkloadParams
from ..servers.engines import Adapter


def workload_of(params: SweepParams, cell: CellSpec) -> WorkloadParams:
    """The cell's workload: how its answers end (``stop``), its template, its conversation turn."""
    return next(w for w in params.workloads if w.name == cell.workload)


@dataclass
class ServerText:
    """A running server's tokenizer, each text tokenized once per server (prompts of many
    requests reuse the same documents, and a server's tokens do not change while it runs), and
    its chat render (:data:`~specbench_lib.prompts.chat.Render`)."""

    adapter: Adapter
    client: httpx.Client
    tokens: dict[str, list[int]] = field(default_factory=dict)

    def tokenize(self, text: str) -> list[int]:
        if text not in self.tokens:
            self.tokens[text] = self.adapter.tokenize(self.client, text)
        return list(self.tokens[text])

    def render(self, messages: list[dict[str, str]],
               options: Mapping[str, Any] | None = None) -> list[int]:
        """The engine's render of ``messages``, ``options`` the template's variables (a
        workload's ``chat_template_kwargs``: :func:`~specbench_lib.prompts.chat.with_options`)."""
        return self.adapter.chat_render(self.client, messages, options)
