"""How long each server of a plan remembers, planned before any server starts, so that the
prompt book (:mod:`~specbench_lib.prompts.promptbook`) can feed the plan from its corpora.

Fresh prompts are needed only within one server's memory. A config whose engine state learns
from text (an n-gram pool) already forgets before every cell (isolation ``restart`` or
``flush``); one with ``none`` keeps one server for all its cells, and then every prompt of the
run must be fresh. When the corpus cannot feed that and ``engine.isolation`` is ``auto``,
those configs forget before every cell too (the engine's reset where it has one, else a
restart) and each cell's prompts need fresh documents only among themselves. A plan that
still needs more text than its corpus holds is refused here, in the dry run and in
``specbench doctor``, with the numbers and the fixes. Before a server runs, documents are
measured at :data:`BYTES_PER_TOKEN` bytes a token (the sweep builds the prompts again with
its server's tokenizer); a server kept for the whole run must be fed with half the corpus so
measured (:data:`WHOLE_LIFE_MARGIN`), so a tokenizer coarser than the estimate cannot run it
dry after the server started: else its config forgets before every cell.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from ..core.errors import PreflightError, SpecbenchError
from ..model.plan import Plan
from ..prompts.promptbook import Lifetimes, PromptBook
from ..servers.engines import Adapter, server_launch
from ..servers.engines.base import Isolation
from ..servers.engines.llamacpp import default_llama_server, default_model
from .isolation import isolation_of

BYTES_PER_TOKEN = 4
# A whole run's fresh prompts must fit the corpus measured at twice the bytes a token: code is
# 3-4 bytes a BPE token, but a word-level tokenizer (the stand-ins') gives HumanEval 6.9
WHOLE_LIFE_MARGIN = 2


def estimate_tokenize(text: str, bytes_per_token: int = BYTES_PER_TOKEN) -> list[int]:
    """A document's tokens, estimated from its length (every id 0: only the count matters)."""
    return [0] * max(1, len(text.encode()) // bytes_per_token)


def launch_argvs(plan: Plan, adapter: Adapter, *, lenient: bool = False) -> dict[str, list[str]]:
    """Each config's argv as a dry run shows it (the engine's paths, or the defaults; empty for
    an attached server), without starting or checking anything; ``lenient`` (the doctor, whose
    other checks name a bad config): a config whose argv cannot be built gets an empty one."""
    params, engine = plan.params, plan.params.engine
    binary = Path(engine.binary) if engine.binary else default_llama_server()
    model = Path(engine.model) if engine.model else default_model()
    found: dict[str, list[str]] = {}
    for s in plan.servers:
        try:
            found[s.label] = server_launch(adapter, s, engine, parallel=max(params.concurrency),
                                           model=model, binary=binary,
                                           local=params.placement.engine == "local").argv
        except SpecbenchError:
            if not lenient:
                raise
            found[s.label] = []
    return found


def plan_lifetimes(plan: Plan, adapter: Adapter, argvs: Mapping[str, Sequence[str]]) -> Lifetimes:
    """Each config's isolation and the prompt book's scheme for ``plan``, checked to be fed by
    its corpora (estimated sizes); a :class:`PreflightError` naming the numbers if not."""
    params = plan.params
    isolations = {s.label: isolation_of(adapter, s, argvs[s.label]) for s in plan.servers}
    learns = next((i.learns for i in isolations.values() if i.learns), None)
    if params.prompt_reuse:
        return Lifetimes(False, learns, isolations, "prompt_reuse: true: cells share prompts")
    keep = [label for label, i in isolations.items() if i.mode == "none"]
    if not keep:
        return _fed(plan, Lifetimes(True, learns, isolations, "every config's server forgets "
                                    "before each cell: prompts fresh within a cell"))
    whole = Lifetimes(False, learns, isolations, f"{', '.join(keep)} keep one server for all "
                      "their cells: every prompt of the run fresh")
    try:
        return _fed(plan, whole, BYTES_PER_TOKEN * WHOLE_LIFE_MARGIN)
    except PreflightError as exc:
        short = str(exc)
        mode = adapter.reset_mode()
        attached = {s.label for s in plan.servers if s.attach is not None}
        if params.engine.isolation != "auto" or (mode == "restart" and attached & set(keep)):
            raise PreflightError(f"{short}; config{'s' if len(keep) > 1 else ''} "
                                 f"{', '.join(keep)} keep one server for all their cells "
                                 f"(engine.isolation: {params.engine.isolation}"
                                 f"{'; attached servers cannot be restarted' if attached else ''})",
                                 what=exc.what) from None
    why = (f"the corpus cannot feed fresh prompts for a whole server's life "
           f"({short.split(';')[0]}), so {', '.join(keep)} {mode} before every cell too")
    forget = {label: (Isolation(mode, f"{i.why}; but {why}", i.learns) if i.mode == "none" else i)
              for label, i in isolations.items()}
    return _fed(plan, Lifetimes(True, learns, forget, f"{why}: prompts fresh within a cell"))


def _fed(plan: Plan, lifetimes: Lifetimes, bytes_per_token: int = BYTES_PER_TOKEN) -> Lifetimes:
    """``lifetimes`` once the prompt book has been built for it with estimated sizes."""
    try:
        PromptBook(plan.params, plan.cells, lifetimes).build(
            lambda text: estimate_tokenize(text, bytes_per_token))
    except PreflightError as exc:
        raise PreflightError(f"{exc} (documents measured at {bytes_per_token} bytes a token "
                             f"before a server runs)", what=exc.what) from None
    return lifetimes


def describe(lifetimes: Lifetimes) -> str:
    """One line for the dry run and the doctor: how fresh the prompts are and why."""
    modes = sorted({i.mode for i in lifetimes.isolations.values()})
    return (f"{'per cell' if lifetimes.per_cell else 'per run'} ({lifetimes.why}; isolation "
            f"{'/'.join(modes) or 'none'})")
