"""Input-grounded workloads (issue 30): ``source: grounded`` puts HumanEval or ShareGPT material
in the prompt with a task drawn from it (summarise the code, answer from the conversations),
at an exact token count, the instruction and the answer's opening never cut; its frame's tag is
not a document, so two prompts of one frame never look like shared text."""

from __future__ import annotations

from specbench_lib.model.served import PromptRecord
from specbench_lib.model.workloadparams import WorkloadParams
from specbench_lib.prompts.corpora import Corpora, corpus_of
from specbench_lib.prompts.history import History
from specbench_lib.prompts.sources.grounded import GROUNDED
from specbench_lib.prompts.workload import build_prompts, corpus_documents


def char_tokens(text: str) -> list[int]:
    return [ord(c) for c in text]


def test_grounded_prompts_frame_whole_material_with_its_task_at_an_exact_size() -> None:
    workload = WorkloadParams(name="g", source="grounded")
    for prompts in (build_prompts(workload, n=4, tokens=2000, seed=0, tokenize=char_tokens),
                    [Corpora(0, char_tokens).prompt(workload, 2000, i, 4) for i in range(4)]):
        texts = ["".join(map(chr, p.tokens)) for p in prompts]
        assert all(len(p.tokens) == 2000 for p in prompts)
        assert [p.sources[0] for p in prompts] == ["grounded:code", "grounded:text"] * 2
        for i, text in enumerate(texts):
            kind, head, tail = GROUNDED[i % 2]
            assert text.startswith(head) and text.endswith(tail)  # the task is never cut
            docs = dict(corpus_documents("humaneval" if kind == "code" else "sharegpt"))
            first = docs[prompts[i].sources[1]]
            assert text[len(head):].startswith(first[:200])  # material from its first document
    assert [corpus_of(workload, i) for i in range(2)] == ["humaneval", "sharegpt"]


def test_a_frames_tag_is_not_a_document_of_the_servers_history() -> None:
    history = History()
    history.add("cell", (PromptRecord("a", 10, ("grounded:code", "HumanEval/1")),
                         PromptRecord("b", 10, ("copyedit:text", "sg1"))))
    assert history.before().documents == ("HumanEval/1", "sg1")
