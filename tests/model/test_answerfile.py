"""``answer.json`` typed (issue 50): one writer and one reader (``model/answerfile.py``), the
file name spelled once, the answers earlier runs wrote still read, a damaged one named with its
key, and what a run's answer states unchanged by the typing (a real run's file is written back
byte for byte)."""

from __future__ import annotations

import ast
import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

import specbench_lib
from specbench_lib.analysis.answer import answer_lines
from specbench_lib.core.errors import StoreError
from specbench_lib.model.answerfile import (
    ANSWER_FILE,
    AnswerDoc,
    PanelKey,
    read_answer,
    write_answer,
)

ANSWERS = Path(__file__).parents[1] / "data" / "answers"
MAKE_RUN = ANSWERS / "make_run_20261206.json"
FIRST = ANSWERS / "first_shape_20261203.json"
PACKAGE = Path(specbench_lib.__file__).parent


def run_with(tmp_path: Path, source: Path) -> Path:
    (tmp_path / "run").mkdir()
    shutil.copy(source, tmp_path / "run" / ANSWER_FILE)
    return tmp_path / "run"


def test_a_real_runs_answer_reads_typed_and_writes_back_byte_for_byte(tmp_path: Path) -> None:
    run = run_with(tmp_path, MAKE_RUN)
    answer = read_answer(run)
    assert answer is not None and answer.stopped == "decided" and answer.budget_s == 450.0
    (panel,) = answer.panels
    assert panel.panel == PanelKey(workload="copyedit", context=256, output_tokens=64,
                                   concurrency=1)
    assert panel.confidence_set == ("ngram-b8", "ngram-b4") and panel.eliminated == {"auto": 12}
    assert answer.partial is not None and answer.partial.configs == ("ngram-b8", "ngram-b4", "auto")
    assert answer.overrun is not None and answer.overrun.allowed_s == 45.0
    again = tmp_path / "again"
    again.mkdir()
    write_answer(again, answer)
    assert (again / ANSWER_FILE).read_text() == MAKE_RUN.read_text()


def test_the_first_shape_of_answer_json_still_reads(tmp_path: Path) -> None:
    """No quantity, drift, ε, blocks or panel temperature then: each reads as its default, and
    the answer's words are those of an end-to-end claim."""
    answer = read_answer(run_with(tmp_path, FIRST))
    assert answer is not None and answer.quantity is None and answer.drift is None
    (panel,) = answer.panels
    assert (panel.panel.temperature, panel.panel.turn, panel.epsilon, panel.crashed) == (
        0.0, 1, None, {})
    head, line = answer_lines(answer)
    assert head.startswith("answer: 1/1 panels decided in 7 m 13 s of a 7 m 30 s budget")
    assert "claims are on" not in head  # an answer before quantities: end to end
    assert line.startswith("copyedit/ctx256/c1: ngram-b8 ")


def test_what_the_writer_leaves_out_follows_the_answer() -> None:
    """A fixed plan's answer holds no budget keys, one written at a look no cut; a panel with
    no leader no notes on a speedup: the files written before the typing had none either."""
    answer = AnswerDoc.from_dict(json.loads(MAKE_RUN.read_text()))
    assert {"cut", "more_time", "overrun"} <= set(answer.to_dict())
    assert not {"cut", "more_time"} & set(replace(answer, stopped="running").to_dict())
    fixed = replace(answer, budget_s=None, stopped="complete").to_dict()
    assert not {"partial", "measured", "overrun", "time_model", "cut", "more_time"} & set(fixed)
    (panel,) = replace(answer, panels=(replace(answer.panels[0], best=None),)).to_dict()["panels"]
    assert not {"pairing", "split", "spread"} & set(panel) and "crashed" in panel


@pytest.mark.parametrize(("damage", "named"), [
    (lambda d: d["panels"][0].update(decided="yes"), "panels[0].decided"),
    (lambda d: d["panels"][0]["panel"].pop("context"), "panels[0].panel has no 'context'"),
    (lambda d: d.update(overrun={"largest_s": "far"}), "overrun.largest_s"),
    (lambda d: d.update(cut={"round": 2, "measured": "auto"}), "cut.measured"),
    (lambda d: d.pop("stopped"), "has no 'stopped'"),
])
def test_a_damaged_answer_names_its_file_and_key(tmp_path: Path, damage, named: str) -> None:  # noqa: ANN001
    data = json.loads(MAKE_RUN.read_text())
    damage(data)
    run = tmp_path / "run"
    run.mkdir()
    (run / ANSWER_FILE).write_text(json.dumps(data))
    with pytest.raises(StoreError) as caught:
        read_answer(run)
    said = str(caught.value)
    assert named in said and str(run / ANSWER_FILE) in said and "--resume" in said


def test_no_answer_yet_reads_as_none(tmp_path: Path) -> None:
    assert read_answer(tmp_path) is None


def _literals(path: Path) -> list[str]:
    """The string constants of a module, its docstrings left out."""
    tree = ast.parse(path.read_text())
    docs = {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
            and n.body and isinstance(n.body[0], ast.Expr)
            and isinstance(n.body[0].value, ast.Constant)}
    return [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant)
            and isinstance(n.value, str) and id(n) not in docs]


def test_the_file_name_is_spelled_once_and_only_its_module_writes_or_reads_it() -> None:
    spelled = [p.relative_to(PACKAGE).as_posix() for p in sorted(PACKAGE.rglob("*.py"))
               if any("answer.json" in s for s in _literals(p))]
    assert spelled == ["model/answerfile.py"]
    # the file's shape (ANSWER) is read there only
    shaped = [p.relative_to(PACKAGE).as_posix() for p in sorted(PACKAGE.rglob("*.py"))
              if any(isinstance(n, ast.Name) and n.id == "ANSWER"
                     or isinstance(n, ast.alias) and n.name == "ANSWER"
                     for n in ast.walk(ast.parse(p.read_text())))]
    assert shaped == ["model/answerfile.py"]
