"""The workload sources, one object each in one table (vLLM's benchmarks keep one class per
dataset the same way): how a source reads its file or package, its categories and turns, and
what it refuses. A source's needs as params see them (its kind, what ``path`` names, fixed
categories, its meaning) are its :class:`~specbench_lib.model.sources.SourceSpec`, one entry of
``model.sources.SOURCES``, which this table equals (``tests/house/test_one_definition.py``).

``specbench_lib/__init__.py`` imports this table before any params are read, so each
conversation source lists a file's categories for ``categories: all`` through
:func:`~specbench_lib.model.sources.register_catalogue`.
"""

from __future__ import annotations

from ...core.errors import ParamsError
from ...model.sources import register_catalogue, spec_of
from . import (  # one line a source
    copyedit,
    grounded,
    humaneval,
    jsonl,
    mtbench,
    random_pool,
    sharegpt,
    spec_bench,
    speed_bench,
)
from .base import ConversationSource, PackageSource, Source
from .framed import FrameSource

TABLE: dict[str, Source] = {s.name: s for s in (
    humaneval.SOURCE, sharegpt.SOURCE, copyedit.SOURCE, grounded.SOURCE, jsonl.SOURCE,
    mtbench.SOURCE, spec_bench.SOURCE, random_pool.SOURCE, speed_bench.SOURCE)}
for _source in TABLE.values():
    if isinstance(_source, ConversationSource):
        register_catalogue(_source.name, _source.catalogue)


def source_of(name: str) -> Source:
    """The source ``name``; an unknown one is refused with the known ones (a
    :class:`~specbench_lib.core.errors.ParamsError`)."""
    spec_of(name)  # a name params do not know
    if name not in TABLE:
        raise ParamsError(f"workload source {name!r} has no object in prompts/sources/; the "
                          f"sources are {list(TABLE)}", key="workloads[].source", value=name)
    return TABLE[name]


def conversations(name: str) -> ConversationSource:
    """The conversation source ``name`` (its questions, turn by turn)."""
    found = source_of(name)
    if not isinstance(found, ConversationSource):
        raise _not_a(name, "conversation")
    return found


def frames(name: str) -> FrameSource:
    """The frame source ``name`` (its task frames)."""
    found = source_of(name)
    if not isinstance(found, FrameSource):
        raise _not_a(name, "frame")
    return found


def package(name: str) -> PackageSource:
    """The packaged corpus ``name`` (``humaneval``, ``sharegpt``)."""
    found = source_of(name)
    if not isinstance(found, PackageSource):
        raise _not_a(name, "corpus")
    return found


def _not_a(name: str, kind: str) -> ParamsError:
    return ParamsError(f"workload source {name!r} is no {kind} source", key="workloads[].source",
                       value=name)
