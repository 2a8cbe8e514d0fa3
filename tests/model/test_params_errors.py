"""Params errors at load, each naming the file, the key and the value: encoding, a context that
fits no cell, a misspelled key (with the close match), and a notebook parameter the notebook
does not declare (refused by the notebook itself under plain papermill)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import specbench_lib as sb
from specbench_lib.model.layering import load_params
from specbench_lib.model.nbparams import check_notebook_parameters
from specbench_lib.model.plan import load_plan

ROOT = Path(__file__).resolve().parents[2]
EMBEDDED = ROOT / "params" / "embedded.yaml"
TP1 = ROOT / "notebooks" / "tp1.ipynb"


def write(tmp_path: Path, text: str | bytes, name: str = "p.yaml") -> Path:
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


def test_a_latin1_params_file_names_the_line_key_and_bytes(tmp_path: Path) -> None:
    path = write(tmp_path, f"extends: {EMBEDDED}\nphase: x\ndescription: caf\xe9 au lait\n"
                 .encode("latin-1"))
    with pytest.raises(sb.ParamsError) as err:
        load_params(path)
    text = str(err.value)
    assert err.value.file == str(path) and err.value.key == "description"
    assert err.value.value == b"\xe9" and "line 3" in text and "e9" in text and "UTF-8" in text


def test_a_utf16_params_file_and_a_non_utf8_base_are_refused(tmp_path: Path) -> None:
    with pytest.raises(sb.ParamsError, match="not UTF-8") as err:
        load_params(write(tmp_path, "phase: x\n".encode("utf-16")))
    assert err.value.value == b"\xff"
    base = write(tmp_path, b"phase: b\xff\n", "base.yaml")
    with pytest.raises(sb.ParamsError, match="not UTF-8") as err:
        load_params(write(tmp_path, f"extends: {base.name}\n"))
    assert err.value.file == str(base) and err.value.key == "phase"


@pytest.mark.parametrize(("text", "key", "suggestion"), [
    ("ouput_tokens: 64", "ouput_tokens", "output_tokens"),
    ("engine: {prot: 1}", "engine.prot", "port"),
    ("timeouts: {first_tokens_s: 3}", "timeouts.first_tokens_s", "first_token_s"),
    ("configs: [{name: auto, method: auto}, {name: n, method: ngram, budgts: [4]}]",
     "configs.1.budgts", "budgets"),
    ("extend: base.yaml", "extend", "extends"),
])
def test_a_misspelled_key_suggests_the_close_match(tmp_path: Path, text: str, key: str,
                                                   suggestion: str) -> None:
    path = write(tmp_path, f"extends: {EMBEDDED}\n{text}\n")
    with pytest.raises(sb.ParamsError) as err:
        load_params(path)
    assert err.value.key == key and err.value.file == str(path)
    assert f"unknown key {key.split('.')[-1]!r}; did you mean {suggestion!r}?" in str(err.value)


def test_a_key_with_no_close_match_lists_the_known_keys(tmp_path: Path) -> None:
    with pytest.raises(sb.ParamsError) as err:
        load_params(write(tmp_path, f"extends: {EMBEDDED}\ntimeouts: {{zzz: 3}}\n"))
    assert "unknown key 'zzz'; remove it" in str(err.value) and "first_token_s" in str(err.value)


def context_params(tmp_path: Path, context: int, extra: str = "") -> Path:
    return write(tmp_path, f"extends: {EMBEDDED}\nphase: ctx\nengine: {{context: {context}}}\n"
                 f"contexts: [256, 512]\noutput_tokens: 128\n{extra}")


def test_an_engine_context_that_fits_no_cell_is_refused_at_load(tmp_path: Path) -> None:
    path = context_params(tmp_path, 384)  # the smallest cell needs 256 + 128 + 1 = 385
    with pytest.raises(sb.ParamsError) as err:
        load_plan(path)
    assert err.value.key == "engine.context" and err.value.value == 384
    assert err.value.file == str(path) and "385" in str(err.value)
    assert len(load_plan(context_params(tmp_path, 385)).cells) > 0  # one cell fits: accepted


def test_the_context_check_leaves_servers_it_does_not_size_alone(tmp_path: Path) -> None:
    attached = ("configs: [{name: auto, method: auto, attach: {url: 'http://127.0.0.1:30000'}}]\n")
    assert load_plan(context_params(tmp_path, 64, attached)).cells
    template = ("engine: {context: 64, kind: template, api: llamacpp, binary: /bin/true, "
                "model: m, argv_template: ['{binary}', '--port', '{port}']}\n")
    assert load_plan(context_params(tmp_path, 64, template)).cells
    with pytest.raises(sb.ParamsError, match="engine.context = 64 fits no cell"):
        load_plan(context_params(tmp_path, 64, template.replace("'{port}'", "'{port}', '-c', "
                                                                  "'{context}'")))


def prepared(tmp_path: Path, parameters: dict[str, object]) -> Path:
    """The executed notebook as papermill writes it before running a cell."""
    import papermill

    out = tmp_path / "out.ipynb"
    papermill.execute_notebook(str(TP1), str(out), parameters=parameters, prepare_only=True,
                               progress_bar=False)
    return out


def test_the_notebook_refuses_a_parameter_it_does_not_declare(tmp_path: Path) -> None:
    out = prepared(tmp_path, {"budgt": 16, "PAPERMILL_INPUT_PATH": str(TP1)})
    with pytest.raises(sb.ParamsError) as err:
        check_notebook_parameters(str(out))
    assert err.value.key == "budgt" and err.value.value == 16 and err.value.file == str(out)
    assert "unknown notebook parameter 'budgt' (did you mean 'budget'?)" in str(err.value)
    assert "params_file, budget, run_id" in str(err.value)
    with pytest.raises(sb.ParamsError, match="budgt"):
        load_plan(EMBEDDED, notebook=str(out))

    fine = prepared(tmp_path, {"budget": 16, "PAPERMILL_INPUT_PATH": str(TP1),
                               "PAPERMILL_OUTPUT_PATH": "x.ipynb"})
    check_notebook_parameters(str(fine))
    assert load_plan(EMBEDDED, budget=16, notebook=str(fine)).budget == 16
    for nothing in (None, "", "-", "s3://bucket/out.ipynb", str(tmp_path / "absent.ipynb")):
        check_notebook_parameters(nothing)


def test_plain_papermill_with_an_undeclared_parameter_fails_at_the_plan(tmp_path: Path) -> None:
    params = write(tmp_path, f"extends: {EMBEDDED}\nengine: {{binary: {tmp_path / 'nope'}}}\n")
    out = tmp_path / "out.ipynb"
    done = subprocess.run(
        [str(Path(sys.executable).parent / "papermill"), "--inject-paths", str(TP1), str(out),
         "-p", "params_file", str(params), "-p", "budgt", "16", "--cwd", str(ROOT)],
        capture_output=True, text=True, timeout=300,
        env={**os.environ, "SPECBENCH_OUTPUTS": str(tmp_path / "outputs")})
    assert done.returncode != 0
    errors = [o for c in json.loads(out.read_text())["cells"] for o in c.get("outputs", [])
              if o["output_type"] == "error"]
    assert [e["ename"] for e in errors] == ["ParamsError"], done.stderr[-2000:]
    assert "unknown notebook parameter 'budgt' (did you mean 'budget'?)" in errors[0]["evalue"]
    assert not (tmp_path / "outputs" / "runs").exists()  # refused before any preflight or run
