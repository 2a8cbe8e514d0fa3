"""A budgeted sweep's contest and answer with configs that cannot win (issue 42), on fake
llama.cpp servers with known speeds (tests/support/budgetparams.py):

- ``crashy-b4`` serves well and crashes at every shutdown (``shutdown_crash``): ``answer.json``
  and the answer line name the crash, and it is never "best" without the word;
- ``noendpoint-b4``'s ``/tokenize`` answers 404 (``missing_endpoint``, a config-level reason):
  it leaves the contest after round 1 with its reason, its server started once;
- ``liar-b4`` streams half the tokens it claims (``countlie``): no ok request, so it leaves the
  contest after round 1 with its reason and is never in the confidence set.

Before, the crash was not in the answer, and the other two were started again in every round
and ``liar-b4`` (0 requests) stayed in the set, so the panel could never be decided.
"""

from __future__ import annotations

import json

import pytest
from budgetparams import budget_params
from fakeparams import fake_argv

import specbench_lib as sb
from specbench_lib.analysis.answer import panel_line, panel_words
from specbench_lib.core.readback import from_doc
from specbench_lib.model.answerfile import PanelAnswer

SPEED = "4:1.8,8:1.8"  # crashy-b4 and ngram-b8 equally fast: no round decides between them


def _config(name: str, mode: str) -> str:
    argv = fake_argv("--mode", mode, "--speedups", SPEED, interval=0.004, budget=True)
    return f"  - {{name: {name}, method: ngram, budgets: [4], argv: {argv}}}\n"


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> sb.SweepResult:
    root = tmp_path_factory.mktemp("contest")
    extra = (_config("crashy", "shutdown_crash") + _config("noendpoint", "no_tokenize")
             + _config("liar", "countlie"))
    params = budget_params(root, seed=4, budget="600s", speedups={8: 1.8}, extra=extra,
                           max_rounds=3, jitter=0.2, equivalence=0.001)
    result = sb.run_sweep(sb.load_plan(params), outputs=root / "out", progress=False)
    assert isinstance(result, sb.SweepResult)
    return result


def _panel(result: sb.SweepResult) -> dict:
    answer = json.loads((result.run_dir / "answer.json").read_text())
    assert answer["rounds"] >= 2, answer  # later rounds ran: the contest was still open
    (panel,) = answer["panels"]
    return panel


def test_a_config_that_crashes_at_shutdown_is_named_in_the_answer(run: sb.SweepResult) -> None:
    panel = _panel(run)
    assert "GGML_ASSERT" in panel["crashed"]["crashy-b4"] and set(panel["crashed"]) == {"crashy-b4"}
    words = panel_words(from_doc(PanelAnswer, panel), equivalence=0.001)
    line = words.line()
    assert "crashed after its cells: crashy-b4 (GGML_ASSERT" in "; ".join([line, *words.rest()])
    if panel["best"] == "crashy-b4":
        assert line.split(": ", 1)[1].startswith("crashy-b4 CRASHED its server after its cells; ")
    assert "crashy-b4 (GGML_ASSERT" in sb.answer_of(run).text()


def test_a_config_level_fault_leaves_the_contest_after_its_round(run: sb.SweepResult) -> None:
    panel = _panel(run)
    assert panel["out"]["noendpoint-b4"].startswith("missing_endpoint: ")
    started = [k for k in run.manifest["servers"] if k.startswith("noendpoint-b4")]
    assert started == ["noendpoint-b4"]  # round 1's server only (before: one a round)
    later = [c for c in run.cells if c.spec.config == "noendpoint-b4" and c.spec.repeat > 0]
    assert later and all(c.verdict.codes == {"config_out"} for c in later)


def test_a_config_with_no_ok_request_leaves_the_confidence_set(run: sb.SweepResult) -> None:
    panel = _panel(run)
    assert panel["out"]["liar-b4"].startswith("no ok request: token_count_mismatch: ")
    assert "liar-b4" not in panel["confidence_set"] and panel["requests"]["liar-b4"] == 0
    assert [k for k in run.manifest["servers"] if k.startswith("liar-b4")] == ["liar-b4"]
    # every reader states the same set: the one the answer gives
    assert run.best().iloc[0]["confidence_set"].split(", ") == panel["confidence_set"]


def test_the_best_that_crashed_is_never_best_without_the_word() -> None:
    entry = {"panel": {"workload": "chat", "context": 32, "output_tokens": 32, "concurrency": 1},
             "decided": True, "decision": "decided", "best": "fault-b4",
             "confidence_set": ["fault-b4"], "epsilon": 0.0, "speedup": 1.94,
             "speedup_lo": 1.4, "speedup_hi": 2.69, "baseline": "auto", "eliminated": {},
             "out": {}, "decided_s": 3.0, "crashed": {"fault-b4": "CUDA error: illegal"}}
    line = panel_line(from_doc(PanelAnswer, entry))
    assert "fault-b4 CRASHED its server after its cells; fault-b4 best" in line
    assert line.endswith("crashed after its cells: fault-b4 (CUDA error: illegal)")
