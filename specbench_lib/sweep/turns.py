"""A conversation's second turn measured: each conversation's turn 1 sent first on the same
server (untimed, recorded as such), turn 2 built from the model's own answer and timed.

A ``turn: 2`` workload's prompt book holds first turns (``conversations.first_turn``).
Before the cell's counters and timed window, :func:`second_turns`
sends them at the cell's concurrency and output cap, its records kept with the cell as warmup
requests of ``turn`` 1 (excluded from every statistic; one that fails makes the cell invalid,
as a failed warmup does) with their answers' text; each turn-2 prompt is the first question,
that answer and the second question (docs/workloads.md says what the server has cached then).
"""

from __future__ import annotations

import time

from ..client.dispatch import dispatch_cell
from ..core.errors import EngineError
from ..model.cellspec import CellSpec
from ..model.params import SweepParams
from ..model.records import RequestRecord
from ..model.workloadparams import WorkloadParams
from ..prompts.chat import with_options
from ..prompts.conversations import Render, second_turn
from ..prompts.workload import Prompt
from ..servers.engines import Adapter


def second_turns(adapter: Adapter, base_url: str, headers: dict[str, str] | None,
                 params: SweepParams, cell: CellSpec, workload: WorkloadParams,
                 prompts: list[Prompt], render: Render) -> tuple[tuple[RequestRecord, ...],
                                                                 list[Prompt] | None, float]:
    """Send ``prompts`` (first turns) and build the second turns from their answers: the
    turn-1 records (warmup, ``turn`` 1, ``output_text``), the turn-2 prompts and the seconds
    it took. A failed turn 1 leaves an empty answer in its conversation (the record says why,
    and the cell is invalid for it); when the server cannot build the second turns after a
    failed turn 1 (it died: its tokenizer or template refused), the prompts are None and the
    turn-1 records are the cell's evidence."""
    began = time.perf_counter()
    sent = dispatch_cell(adapter, base_url, [p.tokens for p in prompts], warmup=len(prompts),
                         concurrency=cell.concurrency, max_tokens=cell.output_tokens,
                         timeouts=params.request_timeouts(), headers=headers,
                         stop=workload.stop, keep_text=True, turn=1)
    render = with_options(render, workload.chat_template_kwargs)  # none on a raw workload
    try:
        turn2 = [second_turn(workload, p, r.output_text or "", cell.context, render)
                 for p, r in zip(prompts, sent.records, strict=True)]
    except EngineError:
        if not any(r.error_kind for r in sent.records):
            raise
        return tuple(sent.records), None, time.perf_counter() - began
    return tuple(sent.records), turn2, time.perf_counter() - began
