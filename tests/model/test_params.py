from __future__ import annotations

from pathlib import Path

import pytest

from specbench_lib import ParamsError, load_params, load_plan
from specbench_lib.model.plan import build_plan

ROOT = Path(__file__).resolve().parents[2]
EMBEDDED = ROOT / "params" / "embedded.yaml"


def write(tmp_path: Path, text: str, name: str = "p.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_embedded_params_plan_all_budgets() -> None:
    plan = load_plan(EMBEDDED)
    labels = [s.label for s in plan.servers]
    assert labels == ["auto", "ngram-b4", "ngram-b8", "ngram-b16", "ngram-b32", "draft-b4"]
    per_server = len(plan.params.workloads) * len(plan.params.contexts) * len(plan.params.concurrency)
    assert len(plan.cells) == len(labels) * per_server
    assert {w.source for w in plan.params.workloads} == {"humaneval", "sharegpt"}


def test_budget_keeps_that_budget_and_the_baseline() -> None:
    plan = load_plan(EMBEDDED, budget=16)
    assert [s.label for s in plan.servers] == ["auto", "ngram-b16"]
    assert {c.config for c in plan.cells} == {"auto", "ngram-b16"}


def test_budget_not_in_params_names_the_choices() -> None:
    with pytest.raises(ParamsError) as err:
        load_plan(EMBEDDED, budget=7)
    assert err.value.key == "budget" and err.value.value == 7
    assert "[4, 8, 16, 32]" in str(err.value)


def test_unknown_key_is_refused_with_file_and_key(tmp_path: Path) -> None:
    path = write(tmp_path, f"extends: {EMBEDDED}\nphase: x\nrequest_per_cell: 3\n")
    with pytest.raises(ParamsError) as err:
        load_params(path)
    assert err.value.file == str(path)
    assert err.value.key == "request_per_cell"
    assert "unknown key" in str(err.value) and str(path) in str(err.value)


def test_bad_value_names_key_and_value(tmp_path: Path) -> None:
    path = write(tmp_path, f"extends: {EMBEDDED}\nconfigs:\n  - {{name: auto, method: auto}}\n"
                           "  - {name: ng, method: ngram, budgets: [8, -2]}\n")
    with pytest.raises(ParamsError) as err:
        load_params(path)
    assert err.value.key == "configs.1.budgets"
    assert "-2" in str(err.value)


def test_unknown_method_and_nested_unknown_key(tmp_path: Path) -> None:
    path = write(tmp_path, f"extends: {EMBEDDED}\nengine: {{prot: 1}}\nconfigs:\n"
                           "  - {name: auto, method: auto}\n  - {name: x, method: medusa, budgets: [2]}\n")
    with pytest.raises(ParamsError) as err:
        load_params(path)
    text = str(err.value)
    assert "engine.prot" in text and "configs.1.method" in text and "'medusa'" in text


def test_baseline_required(tmp_path: Path) -> None:
    path = write(tmp_path, f"extends: {EMBEDDED}\nconfigs:\n  - {{name: ng, method: ngram, budgets: [8]}}\n")
    with pytest.raises(ParamsError, match="method 'auto'"):
        load_params(path)


def test_auto_with_budget_and_spec_without_budget_refused(tmp_path: Path) -> None:
    for configs in ("[{name: auto, method: auto, budgets: [4]}]",
                    "[{name: auto, method: auto}, {name: ng, method: ngram}]"):
        path = write(tmp_path, f"extends: {EMBEDDED}\nconfigs: {configs}\n")
        with pytest.raises(ParamsError, match="budget"):
            load_params(path)


def test_extends_merges_mappings(tmp_path: Path) -> None:
    path = write(tmp_path, f"extends: {EMBEDDED}\nphase: small\nengine: {{port: 9001}}\n")
    params = load_params(path)
    assert params.phase == "small"
    assert params.engine.port == 9001
    assert params.engine.context == load_params(EMBEDDED).engine.context


def test_missing_file_and_bad_yaml(tmp_path: Path) -> None:
    with pytest.raises(ParamsError, match="not found"):
        load_params(tmp_path / "nope.yaml")
    with pytest.raises(ParamsError, match="not valid YAML"):
        load_params(write(tmp_path, "phase: [unclosed\n"))
    with pytest.raises(ParamsError, match="mapping"):
        load_params(write(tmp_path, "- a\n- b\n"))


def test_cell_ids_are_unique() -> None:
    plan = build_plan(load_params(EMBEDDED), source=EMBEDDED)
    ids = [c.cell_id for c in plan.cells]
    assert len(ids) == len(set(ids))
