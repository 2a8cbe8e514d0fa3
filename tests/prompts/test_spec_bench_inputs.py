"""Bad Spec-Bench and category inputs (issue 42): each is one line naming the file, the line
and what to do, before any server starts, in the plan, the dry run and the doctor; never an
``IndexError`` or a silently dropped row."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from fakeparams import fake_argv
from paramsfiles import fake_plan, write_params
from ports import free_port

import specbench_lib as sb
from specbench_lib.cli import main

ROW = '{{"question_id": {n}, "category": "writing", "turns": ["Write a poem about {n} seas."]}}\n'


def _params(tmp: Path, workload: str) -> Path:
    return write_params(tmp, fake_plan(free_port(), argv=fake_argv(), phase="sbinputs",
                                       contexts=[64], workloads=[yaml.safe_load(workload)]))


def _files(tmp: Path) -> dict[str, Path]:
    files = {"empty": tmp / "empty.jsonl", "bad5": tmp / "bad5.jsonl",
             "dupe": tmp / "dupe.jsonl", "folder": tmp / "questions"}
    files["empty"].write_text("\n")
    files["bad5"].write_text("".join(ROW.format(n=n) for n in range(1, 5))
                             + '{"question_id": 5, "category": "writing", "turns": ["x"]\n')
    files["dupe"].write_text(ROW.format(n=1) + ROW.format(n=2) + ROW.format(n=1))
    files["folder"].mkdir()
    return files


# case → (the workload's YAML with {file}, the words the one line says)
CASES = {
    "all_of_an_empty_file": ("{{name: s, source: spec_bench, path: {empty}, categories: all}}",
                             "has no question rows, so no category"),
    "no_category_listed": ("{{name: s, source: spec_bench, path: {bad5}, categories: []}}",
                           "categories [] names no category"),
    "mtbench_none_listed": ("{{name: s, source: mtbench, categories: []}}",
                            "categories [] names no category"),
    "a_malformed_line_5": ("{{name: s, source: spec_bench, path: {bad5}, categories: all}}",
                           "bad5.jsonl:5: not a JSON object"),
    "a_directory_for_all": ("{{name: s, source: spec_bench, path: {folder}, categories: all}}",
                            "a directory, not a file"),
    "a_directory": ("{{name: s, source: spec_bench, path: {folder}}}", "is a directory, not a file"),
    "a_repeated_question_id": ("{{name: s, source: spec_bench, path: {dupe}}}",
                               "dupe.jsonl:3: question_id 1 repeats"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_bad_question_input_is_one_line_before_any_server(
        case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPECBENCH_OUTPUTS", str(tmp_path / "out"))
    workload, words = CASES[case]
    params = _params(tmp_path, workload.format(**_files(tmp_path)))
    for argv in (["doctor", str(params)], ["run", "tp1", "--params", str(params), "--dry-run"]):
        code = main(argv)
        said = capsys.readouterr()
        text = said.out + said.err
        assert code != 0, (argv, text)
        assert words in text and "Traceback" not in text and "IndexError" not in text, text
        # one line says it (a params error under the file's "invalid params:"; the doctor
        # lists it as a PROBLEM among its checks, each check that reads the file)
        said_it = [line for line in text.splitlines() if words in line]
        assert len(said_it) == 1 or all(line.startswith("PROBLEM") for line in said_it), text
    assert not (tmp_path / "out" / "runs").exists() or not any((tmp_path / "out" / "runs").iterdir())
    if case.startswith(("a_malformed", "all_of", "no_category", "mtbench", "a_directory_for")):
        with pytest.raises(sb.ParamsError, match=words.replace("[", r"\[").replace("]", r"\]")):
            sb.load_plan(params)
