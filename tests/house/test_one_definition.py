"""One definition per concept (issue 40): the engines in one table, the workload sources in one
table, a frame's tag spelt once; each table held equal to what depends on it."""

from __future__ import annotations

import typing

import pytest

from specbench_lib.analysis.rules.seen_prompt import judge_history
from specbench_lib.model import sources
from specbench_lib.model.kinds import APIS
from specbench_lib.model.records import Verdict
from specbench_lib.model.sections import WorkloadParams
from specbench_lib.model.served import PromptRecord
from specbench_lib.prompts import workload
from specbench_lib.prompts.history import History
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


def test_the_sources_table_names_every_source_params_accept() -> None:
    accepted = typing.get_args(WorkloadParams.model_fields["source"].annotation)
    assert set(accepted) == set(sources.SOURCES)
    assert set(workload.FRAMES) == set(sources.FRAME_SOURCES)
    assert set(workload._CORPORA) == {s for s, k in sources.SOURCES.items() if k == "corpus"}
    assert set(sources.NEEDS_PATH) <= set(sources.SOURCES)


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
