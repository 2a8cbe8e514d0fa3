"""One definition per concept (issue 40): the engines in one table, the workload sources in one
table, a frame's tag spelt once; each table held equal to what depends on it."""

from __future__ import annotations

import typing

import pytest

from specbench_lib.analysis.rules.seen_prompt import judge_history
from specbench_lib.model import sources
from specbench_lib.model.kinds import APIS
from specbench_lib.model.served import PromptRecord
from specbench_lib.model.verdict import Verdict
from specbench_lib.model.workloadparams import WorkloadParams
from specbench_lib.prompts import sources as readers
from specbench_lib.prompts.history import History
from specbench_lib.prompts.sources.base import ConversationSource, PackageSource
from specbench_lib.prompts.sources.framed import FrameSource
from specbench_lib.servers import engines
from specbench_lib.servers.engines.adapter import BaseAdapter


def test_every_engine_protocol_has_its_adapter_in_the_one_table() -> None:
    assert set(engines.ADAPTERS) == set(APIS)
    for kind in APIS:
        adapter = engines.get_adapter(kind)
        assert isinstance(adapter, BaseAdapter) and type(adapter).__name__ in engines.ADAPTERS[kind]


def test_an_engine_the_table_lacks_is_refused_by_name() -> None:
    from specbench_lib.core.errors import ParamsError

    with pytest.raises(ParamsError, match="unknown engine kind 'tgi'"):
        engines.get_adapter("tgi")


KIND_CLASS = {"corpus": PackageSource, "frame": FrameSource, "conversation": ConversationSource}


def test_the_sources_table_names_every_source_params_accept() -> None:
    accepted = typing.get_args(WorkloadParams.model_fields["source"].annotation)
    assert list(accepted) == list(sources.SOURCES) == list(readers.TABLE)
    for name, spec in sources.SOURCES.items():
        reader = readers.TABLE[name]
        assert reader.spec is spec and reader.name == name
        # an object of its kind's class, and only a conversation source lists categories
        assert isinstance(reader, KIND_CLASS.get(spec.kind, readers.Source)), name
        assert (spec.kind == "conversation") == isinstance(reader, ConversationSource), name
        assert spec.categories is None or spec.kind == "conversation", name


def test_an_unknown_source_is_refused_by_name_on_either_side() -> None:
    from specbench_lib.core.errors import ParamsError

    for lookup in (sources.spec_of, readers.source_of):
        with pytest.raises(ParamsError, match="unknown workload source 'wikitext'.*'humaneval'"):
            lookup("wikitext")
    with pytest.raises(ParamsError, match="'humaneval' is no conversation source"):
        readers.conversations("humaneval")


def test_no_module_but_the_tables_compares_a_source_by_name() -> None:
    """A source's name is spelt in its table entry and its own module, nowhere else in the
    package: everything else asks the table (issue 50)."""
    import re
    from pathlib import Path

    package = Path(sources.__file__).resolve().parents[1]
    names = "|".join(sources.SOURCES)
    spelt = re.compile(rf"""["']({names})["']""")
    found = []
    for path in package.rglob("*.py"):
        relative = path.relative_to(package).as_posix()
        if relative == "model/sources.py" or relative.startswith("prompts/sources/"):
            continue
        found += [f"{relative}:{n}" for n, line in enumerate(path.read_text().splitlines(), 1)
                  if spelt.search(line)]
    assert found == []


@pytest.mark.parametrize("frame", sources.FRAME_SOURCES)
def test_a_frames_tag_is_no_document_on_either_side(frame: str) -> None:
    tag = sources.frame_tag(frame, "code")
    history = History()
    history.add("earlier", [PromptRecord("a", 8, (tag, "HumanEval/1"))])
    served = history.before()
    assert served.documents == ("HumanEval/1",)  # the measuring side leaves the tag out
    # the reading side: a prompt of the same frame but other material shares no document
    fresh = [PromptRecord("b", 8, (tag, "HumanEval/2"))]
    assert judge_history(Verdict("ok"), served, fresh, allowed=False).ok
    reused = [PromptRecord("c", 8, (tag, "HumanEval/1"))]
    assert not judge_history(Verdict("ok"), served, reused, allowed=False).ok
